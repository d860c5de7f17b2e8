//! The link's transport: TCP, wrapped in TLS for `https` edges (rustls with the
//! Mozilla roots, plus an optional extra CA for private deployments), then the
//! WebSocket handshake over it.

use std::path::Path;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::client::{Request, Response};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

/// Any byte stream the WebSocket can run over (plain TCP or TLS).
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

pub type Ws = WebSocketStream<Box<dyn Io>>;

pub enum ConnectError {
    /// The edge answered the upgrade with an HTTP refusal: (status, body).
    Refused(u16, Option<Vec<u8>>),
    /// Misconfiguration that no retry can fix.
    Fatal(String),
    /// A network or handshake failure worth retrying.
    Transient(String),
}

/// TLS settings for `wss://` edges.
pub fn tls_config(extra_ca: Option<&Path>) -> Result<Arc<rustls::ClientConfig>, String> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = extra_ca {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
            .map_err(|e| format!("cannot read the CA file {}: {e}", path.display()))?
            .collect::<Result<_, _>>()
            .map_err(|e| format!("the CA file {} is not PEM: {e}", path.display()))?;
        if certs.is_empty() {
            return Err(format!("the CA file {} holds no certificate", path.display()));
        }
        for c in certs {
            roots.add(c).map_err(|e| format!("the CA file {} holds an unusable certificate: {e}", path.display()))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup failed: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// Opens `req` (a `ws://` or `wss://` URL) and performs the WebSocket handshake.
pub async fn open(req: Request, tls: &Arc<rustls::ClientConfig>, config: WebSocketConfig) -> Result<(Ws, Response), ConnectError> {
    let uri = req.uri().clone();
    let host = uri.host().ok_or_else(|| ConnectError::Fatal(format!("{uri} has no host")))?.to_string();
    let secure = match uri.scheme_str() {
        Some("wss") => true,
        Some("ws") => false,
        other => return Err(ConnectError::Fatal(format!("unsupported scheme {other:?} in {uri}"))),
    };
    let port = uri.port_u16().unwrap_or(if secure { 443 } else { 80 });
    // IPv6 literals come bracketed in URIs; the socket wants them bare.
    let dial_host = host.trim_start_matches('[').trim_end_matches(']').to_string();
    let tcp = tokio::net::TcpStream::connect((dial_host.as_str(), port))
        .await
        .map_err(|e| ConnectError::Transient(format!("cannot reach {host}:{port}: {e}")))?;
    let _ = tcp.set_nodelay(true);
    let stream: Box<dyn Io> = if secure {
        let name = rustls::pki_types::ServerName::try_from(dial_host.clone())
            .map_err(|e| ConnectError::Fatal(format!("{host} is not a valid TLS server name: {e}")))?;
        let tls_stream = tokio_rustls::TlsConnector::from(Arc::clone(tls))
            .connect(name, tcp)
            .await
            .map_err(|e| ConnectError::Transient(format!("TLS with {host} failed: {e}")))?;
        Box::new(tls_stream)
    } else {
        Box::new(tcp)
    };
    match tokio_tungstenite::client_async_with_config(req, stream, Some(config)).await {
        Ok(pair) => Ok(pair),
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => {
            let status = resp.status().as_u16();
            Err(ConnectError::Refused(status, resp.into_body()))
        }
        Err(e) => Err(ConnectError::Transient(format!("WebSocket handshake with {host} failed: {e}"))),
    }
}
