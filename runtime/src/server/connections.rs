//! Bounded connections for every listener (the runtime's Unix socket and TCP,
//! the edge): an accept loop of our own instead of `axum::serve`, which can set
//! neither a connection cap nor hyper's timeouts.
//!
//! - Each listener has its own cap. A connection beyond it is accepted and closed
//!   at once (the client sees the refusal instead of hanging in the backlog), so a
//!   flood of one listener cannot take the descriptors another one needs.
//! - hyper's header-read timeout runs while a request head is awaited: a client
//!   that says nothing, stops in the middle of its headers, or keeps an idle
//!   keep-alive connection is closed after [`HEADER_READ_TIMEOUT`]. A request in
//!   progress (a long tool call, an SSE stream) and an upgraded connection (the
//!   edge's WebSocket links) are not affected.
//! - The soft `RLIMIT_NOFILE` is raised to the hard limit ([`raise_open_file_limit`])
//!   and the caps are sized from it with room left for SQLite, git and children.

use std::fmt::Debug;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// How long a connection may take to send a complete request head, also between
/// requests on a keep-alive connection.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Descriptors left for everything that is not a connection: the store, git and
/// command children, log files, the Herdr socket.
const DESCRIPTOR_RESERVE: u64 = 256;
/// No cap goes below this, however small the descriptor limit.
const MIN_CAP: usize = 16;
/// How often at most the "cap reached" warning is repeated while it lasts.
const CAP_WARNING_EVERY: Duration = Duration::from_secs(60);
/// Back-off after an accept error that is not about one connection (EMFILE).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Raises the soft open-file limit to the hard limit (a login default of 1024 is
/// far below what a server needs); returns the soft limit in force afterwards.
pub fn raise_open_file_limit() -> u64 {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        tracing::warn!("cannot read the open-file limit: {}", io::Error::last_os_error());
        return 1024;
    }
    if lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit { rlim_cur: lim.rlim_max, rlim_max: lim.rlim_max };
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            tracing::debug!(from = lim.rlim_cur, to = lim.rlim_max, "raised the open-file limit");
            lim.rlim_cur = lim.rlim_max;
        } else {
            tracing::warn!(soft = lim.rlim_cur, "cannot raise the open-file limit: {}", io::Error::last_os_error());
        }
    }
    lim.rlim_cur
}

/// The cap for one of `listeners` listeners sharing `open_file_limit`
/// descriptors: an equal share of what the reserve leaves, at most `max`.
pub fn cap_for(open_file_limit: u64, listeners: u64, max: usize) -> usize {
    let share = open_file_limit.saturating_sub(DESCRIPTOR_RESERVE) / listeners.max(1);
    usize::try_from(share).unwrap_or(usize::MAX).clamp(MIN_CAP, max.max(MIN_CAP))
}

/// The limits of one listener.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Named in log lines ("tcp", "unix", "edge").
    pub name: &'static str,
    pub max_connections: usize,
    pub header_read_timeout: Duration,
}

/// A listener the accept loop can take connections from.
pub trait Accept: Send + 'static {
    type Io: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    type Addr: Debug + Send + 'static;
    fn accept(&self) -> impl Future<Output = io::Result<(Self::Io, Self::Addr)>> + Send;
}

impl Accept for tokio::net::TcpListener {
    type Io = tokio::net::TcpStream;
    type Addr = std::net::SocketAddr;
    fn accept(&self) -> impl Future<Output = io::Result<(Self::Io, Self::Addr)>> + Send {
        tokio::net::TcpListener::accept(self)
    }
}

impl Accept for tokio::net::UnixListener {
    type Io = tokio::net::UnixStream;
    type Addr = tokio::net::unix::SocketAddr;
    fn accept(&self) -> impl Future<Output = io::Result<(Self::Io, Self::Addr)>> + Send {
        tokio::net::UnixListener::accept(self)
    }
}

/// A connection's stream holding its place under the cap: the place is given
/// back when the stream is dropped, also after an HTTP upgrade handed it on.
pub struct Permitted<S> {
    io: S,
    _permit: OwnedSemaphorePermit,
}

impl<S: AsyncRead + Unpin> AsyncRead for Permitted<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Permitted<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

/// Serves `app` on `listener` until `shutdown`, within `limits`. Each accepted
/// connection goes through `setup` first (a TLS handshake, say; `None` drops it),
/// which also gives the value handlers see as `ConnectInfo<_>`. After `shutdown`
/// nothing more is accepted, every connection is asked to finish its request and
/// close, and this returns when all have.
pub async fn serve<L, P, F, C, I>(
    listener: L,
    limits: Limits,
    app: Router,
    shutdown: CancellationToken,
    setup: P,
) -> io::Result<()>
where
    L: Accept,
    P: Fn(Permitted<L::Io>, L::Addr) -> F + Send + 'static,
    F: Future<Output = Option<(C, I)>> + Send + 'static,
    C: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    I: Clone + Send + Sync + 'static,
{
    let places = Arc::new(Semaphore::new(limits.max_connections));
    let mut connections = tokio::task::JoinSet::new();
    let mut refused: u64 = 0;
    let mut last_warning: Option<Instant> = None;
    loop {
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            accepted = listener.accept() => accepted,
        };
        let (io, addr) = match accepted {
            Ok(c) => c,
            Err(e) if is_connection_error(&e) => continue,
            Err(e) => {
                // Typically EMFILE: back off instead of spinning.
                tracing::warn!(listener = limits.name, "accept failed: {e}");
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = tokio::time::sleep(ACCEPT_BACKOFF) => continue,
                }
            }
        };
        let Ok(permit) = Arc::clone(&places).try_acquire_owned() else {
            drop(io);
            refused += 1;
            if last_warning.is_none_or(|at| at.elapsed() >= CAP_WARNING_EVERY) {
                tracing::warn!(
                    listener = limits.name,
                    cap = limits.max_connections,
                    refused,
                    "connection cap reached; closing new connections until open ones end"
                );
                last_warning = Some(Instant::now());
                refused = 0;
            }
            continue;
        };
        tracing::trace!(listener = limits.name, peer = ?addr, "connection accepted");
        let ready = setup(Permitted { io, _permit: permit }, addr);
        connections.spawn(connection(ready, app.clone(), limits, shutdown.clone()));
    }
    drop(listener);
    while connections.join_next().await.is_some() {}
    Ok(())
}

/// One connection: its setup, then HTTP/1.1 with upgrades until it ends or, after
/// `shutdown`, finishes the request in progress.
async fn connection<F, C, I>(ready: F, app: Router, limits: Limits, shutdown: CancellationToken)
where
    F: Future<Output = Option<(C, I)>> + Send + 'static,
    C: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    I: Clone + Send + Sync + 'static,
{
    let (io, info) = tokio::select! {
        ready = ready => match ready {
            Some(ready) => ready,
            None => return,
        },
        _ = shutdown.cancelled() => return,
    };
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        let mut request = request.map(Body::new);
        request.extensions_mut().insert(ConnectInfo(info.clone()));
        app.clone().oneshot(request)
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(limits.header_read_timeout);
    let conn = builder.serve_connection(TokioIo::new(io), service).with_upgrades();
    let mut conn = std::pin::pin!(conn);
    let result = tokio::select! {
        result = conn.as_mut() => result,
        _ = shutdown.cancelled() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = result {
        tracing::debug!(listener = limits.name, "connection ended: {e}");
    }
}

/// Accept errors that concern only the one connection (as hyper and axum treat them).
fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
    )
}

/// For [`serve`]'s `setup` when there is nothing to set up: the stream as it is,
/// with `info` as the connect info.
pub fn plain<S, I>(io: S, info: I) -> std::future::Ready<Option<(S, I)>> {
    std::future::ready(Some((io, info)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_leave_the_reserve_and_share_the_rest() {
        assert_eq!(cap_for(1024, 2, 512), 384);
        assert_eq!(cap_for(1_048_576, 2, 512), 512);
        assert_eq!(cap_for(1024, 1, 4096), 768);
        assert_eq!(cap_for(100, 2, 512), MIN_CAP);
    }
}
