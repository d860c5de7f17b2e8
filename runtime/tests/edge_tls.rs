//! Built-in TLS: `edge serve --tls-cert --tls-key` with a self-signed certificate
//! made here (rcgen) answers `/health` over https to a client trusting it; a
//! client that stalls before its handshake blocks nobody; plain HTTP on the TLS
//! port gets no answer; half a TLS configuration is refused at startup.

#[path = "edge_support/procs.rs"]
mod procs;

use std::sync::Arc;

use procs::{DEADLINE, command, poll, spawn_logged};
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn https_get(port: u16, cert: &CertificateDer<'static>, path: &str) -> std::io::Result<String> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.clone()).unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config)).connect(ServerName::try_from("localhost").unwrap(), tcp).await?;
    tls.write_all(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes()).await?;
    let mut out = String::new();
    tls.read_to_string(&mut out).await.or_else(|e| if out.is_empty() { Err(e) } else { Ok(0) })?;
    Ok(out)
}

#[tokio::test]
async fn edge_serves_health_over_builtin_tls() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let cert_path = home.join("edge.crt");
    let key_path = home.join("edge.key");
    std::fs::write(&cert_path, certified.cert.pem()).unwrap();
    std::fs::write(&key_path, certified.signing_key.serialize_pem()).unwrap();
    let der: CertificateDer<'static> = certified.cert.der().clone();

    let edge_dir = home.join("edge");
    assert!(command(home).args(["edge", "init", "--edge-dir"]).arg(&edge_dir).status().unwrap().success());

    // Half a configuration is an argument error, before anything listens.
    let half = command(home)
        .args(["edge", "serve", "--issuer", "https://localhost", "--listen", "127.0.0.1:0", "--tls-cert"])
        .arg(&cert_path)
        .arg("--edge-dir")
        .arg(&edge_dir)
        .output()
        .unwrap();
    assert!(!half.status.success() && String::from_utf8_lossy(&half.stderr).contains("--tls-key"), "{}", String::from_utf8_lossy(&half.stderr));
    // A key that is not a key is refused with the file named.
    let bad = command(home)
        .args(["edge", "serve", "--issuer", "https://localhost", "--listen", "127.0.0.1:0", "--tls-cert"])
        .arg(&cert_path)
        .arg("--tls-key")
        .arg(&cert_path)
        .arg("--edge-dir")
        .arg(&edge_dir)
        .output()
        .unwrap();
    assert!(!bad.status.success() && String::from_utf8_lossy(&bad.stderr).contains("--tls-key"), "{}", String::from_utf8_lossy(&bad.stderr));

    let addr_file = home.join("edge.addr");
    let _edge = spawn_logged(
        command(home)
            .args(["edge", "serve", "--issuer", "https://localhost", "--listen", "127.0.0.1:0", "--tls-cert"])
            .arg(&cert_path)
            .arg("--tls-key")
            .arg(&key_path)
            .arg("--edge-dir")
            .arg(&edge_dir)
            .arg("--addr-file")
            .arg(&addr_file),
        &home.join("edge.log"),
    );
    let addr = poll("the edge to report its address", || std::fs::read_to_string(&addr_file).ok()).await;
    let port: u16 = addr.rsplit(':').next().unwrap().parse().unwrap();

    // A client that connects and never starts its handshake must not block others.
    let _stalled = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();

    let answer = tokio::time::timeout(DEADLINE, https_get(port, &der, "/health")).await.expect("https /health timed out").unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\"ok\":true"), "{answer}");
    let meta = tokio::time::timeout(DEADLINE, https_get(port, &der, "/.well-known/oauth-authorization-server")).await.unwrap().unwrap();
    assert!(meta.contains("\"issuer\":\"https://localhost\""), "{meta}");

    // Plain HTTP to the TLS port gets no HTTP answer.
    let mut plain = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    plain.write_all(b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n").await.unwrap();
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(DEADLINE, plain.read_to_end(&mut buf)).await.expect("the TLS port should close a plain HTTP client");
    assert!(!String::from_utf8_lossy(&buf).contains("HTTP/1.1 200"));
}
