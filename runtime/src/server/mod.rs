//! `herdr-mcp serve`: the MCP endpoint over a trusted Unix socket and, optionally,
//! bearer-protected loopback TCP, with `/health` and graceful shutdown.

pub mod auth;
pub mod config;
pub mod connections;
pub mod endpoint;
mod framing;
pub mod health;
pub mod jsonrpc;
pub mod logging;
pub mod mcp;
pub mod sessions;
pub mod token_strength;
pub mod unix_socket;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::response::Response;
use axum::routing::{any, get};
use http::{HeaderName, HeaderValue};
use tokio_util::sync::CancellationToken;

use self::config::ListenConfig;
use self::endpoint::McpEndpoint;
use self::mcp::ServerState;

/// How long open connections get to finish after a shutdown signal.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// Open connections per listener at most (one person's clients need a handful).
const MAX_CONNECTIONS: usize = 512;
/// Set by whoever supervises the runtime; echoed on every answer (spec §3) so a
/// client can tell a restarted runtime from the one it talked to before.
pub const RUNTIME_GENERATION_ENV: &str = "HERDR_MCP_RUNTIME_GENERATION";
const RUNTIME_GENERATION_HEADER: HeaderName = HeaderName::from_static("x-herdr-runtime-generation");

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
        // Read-only and bounded: the newest activity-log entries (crate::activity).
        .route("/activity", get(crate::activity::http::activity))
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
    // Before any descriptor is opened for a connection; the caps are sized from it.
    let open_files = connections::raise_open_file_limit();
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
    let generation = runtime_generation();
    let mut tasks = tokio::task::JoinSet::new();
    let tcp_addr = match tcp {
        Some((listener, guard)) => {
            let addr = listener.local_addr()?;
            let tcp_app = app
                .clone()
                .layer(axum::Extension(crate::activity::caller::Listener::Tcp))
                .layer(axum::middleware::from_fn_with_state(guard, auth::guard));
            // Outside the guard, so that its refusals carry the header too.
            let tcp_app = with_runtime_generation(tcp_app, generation.clone());
            // `ConnectInfo<SocketAddr>`: the guard slows repeated 401s down per peer.
            let limits = listener_limits("tcp", open_files);
            tasks.spawn(connections::serve(listener, limits, tcp_app, shutdown.clone(), connections::plain));
            Some(addr)
        }
        None => None,
    };
    let app = with_runtime_generation(app.layer(axum::Extension(crate::activity::caller::Listener::Unix)), generation);
    let limits = listener_limits("unix", open_files);
    tasks.spawn(connections::serve(unix_listener, limits, app, shutdown.clone(), connections::plain));
    // The roots in the first line a person sees: a start from the wrong folder shows at once.
    let roots = state.ctx.policy.managed_roots().iter().map(|r| r.display().to_string()).collect::<Vec<_>>().join(",");
    tracing::info!(
        socket = %socket_guard.path().display(),
        %roots,
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
    // Push streams never end by themselves; end them so the listeners drain now.
    if let Some(bus) = &state.ctx.services.push {
        bus.close();
    }
    if let Some(Ok(Err(e))) = first {
        tracing::error!(error = %e, "listener failed");
    }
    let drained = tokio::time::timeout(SHUTDOWN_GRACE, async { while tasks.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        tracing::warn!("connections still open after {SHUTDOWN_GRACE:?}; closing them");
        tasks.abort_all();
    }
    drop(socket_guard);
    // The activity log's last calls reach state.db before the process ends.
    if let Some(log) = state.activity.clone() {
        let _ = tokio::task::spawn_blocking(move || log.flush_and_stop()).await;
    }
    tracing::info!("herdr-mcp stopped");
    Ok(())
}

/// Each listener (Unix socket, TCP) gets its own cap, half of the descriptors the
/// reserve leaves and at most [`MAX_CONNECTIONS`]: a TCP flood fills only its own.
fn listener_limits(name: &'static str, open_files: u64) -> connections::Limits {
    connections::Limits {
        name,
        max_connections: connections::cap_for(open_files, 2, MAX_CONNECTIONS),
        header_read_timeout: connections::HEADER_READ_TIMEOUT,
    }
}

/// The value of [`RUNTIME_GENERATION_ENV`] when it is set, not empty and fit for
/// an HTTP header; a value that is not is reported once and left out.
fn runtime_generation() -> Option<HeaderValue> {
    let value = std::env::var_os(RUNTIME_GENERATION_ENV)?;
    if value.is_empty() {
        return None;
    }
    match value.to_str().and_then(|v| HeaderValue::from_str(v).ok()) {
        Some(header) => Some(header),
        None => {
            tracing::warn!("{RUNTIME_GENERATION_ENV} holds characters an HTTP header cannot carry; not sending it");
            None
        }
    }
}

/// Adds the runtime generation header to every answer of `app`; `None` leaves
/// `app` as it is, without even a layer to pass through.
fn with_runtime_generation(app: Router, generation: Option<HeaderValue>) -> Router {
    let Some(generation) = generation else {
        return app;
    };
    app.layer(axum::middleware::map_response(move |mut response: Response| {
        response.headers_mut().insert(RUNTIME_GENERATION_HEADER, generation.clone());
        async move { response }
    }))
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
