//! Built-in TLS for `edge serve --tls-cert FILE --tls-key FILE` (rustls, ring).
//! The alternative is a reverse proxy terminating TLS in front of a loopback
//! `edge serve` (see the README's edge section); both serve the same router.
//!
//! Handshakes run in each connection's own task with a deadline, so a client that
//! opens a socket and stalls never blocks the accept loop, and a stalled handshake
//! holds its place under the edge's connection cap like any other connection.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use futures::future::BoxFuture;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use super::ratelimit::PeerAddr;

pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Loads a PEM certificate chain and private key into a server config (HTTP/1.1 only,
/// the one protocol the router speaks).
pub fn server_config(cert: &Path, key: &Path) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| anyhow::anyhow!("cannot read --tls-cert {}: {e}", cert.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow::anyhow!("--tls-cert {} is not PEM: {e}", cert.display()))?;
    if chain.is_empty() {
        anyhow::bail!("--tls-cert {} holds no certificate", cert.display());
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| anyhow::anyhow!("cannot read a private key from --tls-key {}: {e}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| anyhow::anyhow!("TLS setup failed: {e}"))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| anyhow::anyhow!("the TLS certificate and key do not fit together: {e}"))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The per-connection setup for [`crate::server::connections::serve`]: the TLS
/// handshake, in the connection's own task and under its place in the connection
/// cap, given [`HANDSHAKE_TIMEOUT`] to finish.
pub fn handshake<S>(
    config: Arc<rustls::ServerConfig>,
) -> impl Fn(S, SocketAddr) -> BoxFuture<'static, Option<(TlsStream<S>, PeerAddr)>> + Send + 'static
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let tls = TlsAcceptor::from(config);
    move |stream, peer| {
        let accept = tls.accept(stream);
        Box::pin(async move {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, accept).await {
                Ok(Ok(s)) => Some((s, PeerAddr(peer))),
                Ok(Err(e)) => {
                    tracing::debug!("TLS handshake with {peer} failed: {e}");
                    None
                }
                Err(_) => {
                    tracing::debug!("TLS handshake with {peer} timed out");
                    None
                }
            }
        })
    }
}
