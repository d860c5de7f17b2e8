//! The link over `wss://`: a real `herdr-mcp link` reaches the edge through a
//! TLS terminator (as a deployment behind a reverse proxy does) whose certificate
//! comes from a private CA. With `--ca-file` it links and serves calls; without
//! it the handshake fails certificate checks and the link keeps retrying.

mod edge_support;
#[path = "edge_support/procs.rs"]
mod procs;

use std::path::Path;
use std::sync::Arc;

use edge_support::*;
use procs::{Proc, command, poll, spawn_logged};
use serde_json::json;

/// (CA PEM, server config for "localhost" signed by that CA).
fn private_ca() -> (String, Arc<rustls::ServerConfig>) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["localhost".to_string()]).unwrap().signed_by(&leaf_key, &issuer).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![leaf.der().clone()], key)
        .unwrap();
    (ca_cert.pem(), Arc::new(config))
}

/// Terminates TLS on a loopback port and relays the bytes to `backend`.
async fn tls_terminator(config: Arc<rustls::ServerConfig>, backend: String) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, backend) = (acceptor.clone(), backend.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else { return };
                let Ok(mut up) = tokio::net::TcpStream::connect(&backend).await else { return };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut up).await;
            });
        }
    });
    port
}

fn link(home: &Path, edge: &str, secret_file: &Path, socket: &Path, ca: Option<&Path>, log: &str) -> Proc {
    let mut c = command(home);
    c.args(["link", "--edge", edge, "--workstation-id", "dev_tls", "--credential-file"]).arg(secret_file).arg("--socket").arg(socket);
    if let Some(ca) = ca {
        c.arg("--ca-file").arg(ca);
    }
    spawn_logged(&mut c, &home.join(log))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_over_tls_with_a_private_ca() {
    let devices = Arc::new(TestDevices::default());
    devices.add("dev_tls", "tls", "devsec_tls");
    let (edge, hub) = InProc::start_linked(devices).await;
    let (ca_pem, server) = private_ca();
    let port = tls_terminator(server, edge.issuer.trim_start_matches("http://").to_string()).await;

    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let ca_file = home.join("ca.pem");
    std::fs::write(&ca_file, ca_pem).unwrap();
    let secret = home.join("secret");
    std::fs::write(&secret, "devsec_tls").unwrap();
    std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let root = home.join("root");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("t.txt"), "over tls\n").unwrap();
    let socket = home.join("rt.sock");
    let _runtime = spawn_logged(
        command(home).args(["serve", "--socket"]).arg(&socket).arg("--root").arg(&root).arg("--state-dir").arg(home.join("state")),
        &home.join("serve.log"),
    );
    poll("the runtime socket", || std::os::unix::net::UnixStream::connect(&socket).ok()).await;
    let https = format!("https://localhost:{port}");

    // Without the CA the certificate is untrusted: no link, and the log says why.
    let untrusted = link(home, &https, &secret, &socket, None, "untrusted.log");
    poll("the certificate failure in the log", || {
        std::fs::read_to_string(home.join("untrusted.log")).ok().filter(|l| l.contains("TLS with localhost failed"))
    })
    .await;
    assert!(hub.link("dev_tls").is_none());
    drop(untrusted);

    let _trusted = link(home, &https, &secret, &socket, Some(&ca_file), "trusted.log");
    poll("the link over TLS", || hub.link("dev_tls")).await;
    let (_, tokens, _) = edge.tokens().await;
    let path = root.canonicalize().unwrap().join("t.txt");
    let r = edge.http.mcp(&tokens.access, "tools/call", json!({"name": "herdr_fs_read", "arguments": {"path": path}})).await.json();
    let sc = &r["result"]["structuredContent"];
    assert_eq!(sc["ok"], true, "{r}");
    assert!(sc["content"].as_str().unwrap().contains("over tls"), "{r}");
}
