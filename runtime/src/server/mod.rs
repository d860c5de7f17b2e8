//! `herdr-mcp serve`: the MCP endpoint over a trusted Unix socket and, optionally,
//! bearer-protected loopback TCP, with `/health` and graceful shutdown.

pub mod auth;
pub mod config;
mod discover;
pub mod endpoint;
mod envelope;
mod fast_tools_call;
pub mod health;
pub mod jsonrpc;
pub mod logging;
pub mod mcp;
pub mod unix_socket;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::routing::{any, get};
use tokio_util::sync::CancellationToken;

use self::config::ListenConfig;
use self::endpoint::McpEndpoint;
use self::mcp::ServerState;

/// How long open connections get to finish after a shutdown signal.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Routes shared by both listeners: the MCP endpoint at `/mcp`, `/mcp/` and `/`.
pub fn router(state: Arc<ServerState>, endpoint: McpEndpoint) -> Router {
    let mcp = move |request: Request| {
        let endpoint = endpoint.clone();
        async move { endpoint.handle(request).await }
    };
    // The push stream (/push/events, /push/state) rides on the same listeners, so
    // TCP gets it behind the same bearer.
    let push = state.ctx.services.push.clone();
    let routes = Router::new()
        .route("/health", get(health::health))
        .route("/mcp", any(mcp.clone()))
        .route("/mcp/", any(mcp.clone()))
        .route("/", any(mcp))
        .with_state(state);
    match push {
        Some(bus) => routes.merge(crate::push::sse::router(bus)),
        None => routes,
    }
}

/// Binds every listener (failing fast with a clear error), then serves until
/// `shutdown` is cancelled; the socket file is removed before returning.
pub async fn serve(listen: ListenConfig, state: Arc<ServerState>, shutdown: CancellationToken) -> anyhow::Result<()> {
    let (unix_listener, socket_guard) = unix_socket::bind(&listen.socket_path)?;
    let tcp = match &listen.tcp {
        Some(tcp) => {
            let listener = tokio::net::TcpListener::bind(tcp.addr)
                .await
                .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", tcp.addr))?;
            Some((listener, auth::TcpGuard::new(&tcp.token)))
        }
        None => None,
    };

    let endpoint = McpEndpoint::new(Arc::clone(&state), shutdown.clone());
    let app = router(Arc::clone(&state), endpoint);
    let mut tasks = tokio::task::JoinSet::new();
    let tcp_addr = match tcp {
        Some((listener, guard)) => {
            let addr = listener.local_addr()?;
            let tcp_app = app.clone().layer(axum::middleware::from_fn_with_state(guard, auth::guard));
            let stop = shutdown.clone();
            tasks.spawn(async move {
                axum::serve(listener, tcp_app).with_graceful_shutdown(stop.cancelled_owned()).await
            });
            Some(addr)
        }
        None => None,
    };
    let stop = shutdown.clone();
    tasks.spawn(async move { axum::serve(unix_listener, app).with_graceful_shutdown(stop.cancelled_owned()).await });
    tracing::info!(
        socket = %socket_guard.path().display(),
        tcp = %tcp_addr.map_or_else(|| "off".to_string(), |a| a.to_string()),
        tools = state.registry.len(),
        contract = %state.contract_hash,
        "herdr-mcp serving"
    );

    // A listener failing on its own ends the whole server.
    let first = tokio::select! {
        _ = shutdown.cancelled() => None,
        done = tasks.join_next() => done,
    };
    shutdown.cancel();
    if let Some(Ok(Err(e))) = first {
        tracing::error!(error = %e, "listener failed");
    }
    let drained = tokio::time::timeout(SHUTDOWN_GRACE, async { while tasks.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        tracing::warn!("connections still open after {SHUTDOWN_GRACE:?}; closing them");
        tasks.abort_all();
    }
    drop(socket_guard);
    tracing::info!("herdr-mcp stopped");
    Ok(())
}

/// Cancels `token` on SIGINT or SIGTERM.
pub fn cancel_on_signals(token: CancellationToken) -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
            _ = int.recv() => tracing::info!("SIGINT: shutting down"),
        }
        token.cancel();
    });
    Ok(())
}
