//! The edge's HTTP surface: route assembly, CORS, shared response helpers, body
//! limits and the accept loop of `edge serve`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::EdgeState;
use crate::server::connections;

/// Connections for plain HTTP clients (OAuth, `/mcp`, `/health`) on top of the link cap:
/// the listener's cap is the hub's `max_links` plus these, so a full fleet of links still
/// leaves room for ChatGPT and the operator, and a link past `max_links` reaches the hub
/// and gets its 1013 close instead of being cut at accept. Without a hub (no links), these alone.
const HTTP_CONNECTIONS: usize = 1024;

pub fn router(state: Arc<EdgeState>) -> Router {
    router_with_links(state, None)
}

/// The edge's routes plus, when `links` is given, the workstation link at
/// `/ws/<workstation_id>`.
pub fn router_with_links(state: Arc<EdgeState>, links: Option<Arc<super::link_hub::LinkHub>>) -> Router {
    let ws = links.map(super::link_hub_socket::routes).unwrap_or_default();
    Router::new()
        .merge(super::discovery::routes())
        .merge(super::dcr::routes())
        .merge(super::authorize::routes())
        .merge(super::token::routes())
        .merge(super::mcp::routes())
        .merge(super::devices_http::routes())
        .merge(super::connectors_http::routes())
        .merge(super::status::routes())
        .route("/health", axum::routing::get(super::info::health))
        .route("/info", axum::routing::get(super::info::info))
        .fallback(not_found)
        .with_state(state)
        .merge(ws)
        .layer(middleware::from_fn(cors))
}

/// Serves until `shutdown`; calls `on_bound` with the real address first (so
/// `--listen 127.0.0.1:0` works for tests).
pub async fn serve_plain(
    state: Arc<EdgeState>,
    listen: SocketAddr,
    links: Option<Arc<super::link_hub::LinkHub>>,
    shutdown: CancellationToken,
    on_bound: impl FnOnce(SocketAddr) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    serve(state, listen, links, None, shutdown, on_bound).await
}

/// The listener's connection cap before the open-file limit is applied: every link the hub
/// may hold, plus [`HTTP_CONNECTIONS`].
fn max_connections(max_links: Option<usize>) -> usize {
    max_links.unwrap_or(0).saturating_add(HTTP_CONNECTIONS)
}

/// As [`serve_plain`], with built-in TLS when `tls` is given (see [`super::tls`]).
pub async fn serve(
    state: Arc<EdgeState>,
    listen: SocketAddr,
    links: Option<Arc<super::link_hub::LinkHub>>,
    tls: Option<Arc<rustls::ServerConfig>>,
    shutdown: CancellationToken,
    on_bound: impl FnOnce(SocketAddr) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    // Before any descriptor is opened for a connection; the cap is sized from it.
    let open_files = crate::server::connections::raise_open_file_limit();
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {listen}: {e}"))?;
    let addr = listener.local_addr()?;
    on_bound(addr).map_err(|e| anyhow::anyhow!("cannot report the bound address: {e}"))?;
    let sweeper = super::connectors::spawn_sweeper(Arc::clone(&state.store), shutdown.clone());
    let hub = links.clone();
    let stop = shutdown.clone();
    let closer = tokio::spawn(async move {
        stop.cancelled().await;
        // Links are long-lived: without this, graceful shutdown would wait on them.
        if let Some(hub) = hub {
            hub.close_all();
        }
    });
    let limits_for = max_connections(links.as_ref().map(|hub| hub.max_links()));
    let app = router_with_links(state, links);
    let limits = connections::Limits {
        name: "edge",
        max_connections: connections::cap_for(open_files, 1, limits_for),
        header_read_timeout: connections::HEADER_READ_TIMEOUT,
    };
    // With the peer address (`ConnectInfo<PeerAddr>`), which the per-source limits
    // and the approval page's "from" need.
    match tls {
        Some(config) => {
            let handshake = super::tls::handshake(config);
            connections::serve(listener, limits, app, shutdown.clone(), handshake).await?
        }
        None => {
            let setup = |io, peer| connections::plain(io, super::ratelimit::PeerAddr(peer));
            connections::serve(listener, limits, app, shutdown.clone(), setup).await?
        }
    }
    sweeper.abort();
    closer.abort();
    Ok(())
}

async fn not_found(req: Request) -> Response {
    json_response(404, json!({"ok": false, "code": "not_found", "retryable": false, "path": req.uri().path()}))
}

/// CORS for browser-based MCP/OAuth clients: any origin, no credentials (bearers
/// travel in headers, never cookies, so `*` leaks nothing).
async fn cors(req: Request, next: Next) -> Response {
    let mut resp = if req.method() == Method::OPTIONS {
        StatusCode::NO_CONTENT.into_response()
    } else {
        next.run(req).await
    };
    let h = resp.headers_mut();
    h.insert("access-control-allow-origin", HeaderValue::from_static("*"));
    h.insert("access-control-allow-methods", HeaderValue::from_static("GET,HEAD,POST,OPTIONS"));
    h.insert(
        "access-control-allow-headers",
        HeaderValue::from_static("Authorization, Content-Type, Accept, Mcp-Session-Id, Mcp-Protocol-Version"),
    );
    h.insert("access-control-expose-headers", HeaderValue::from_static("WWW-Authenticate, Mcp-Session-Id"));
    resp
}

/// JSON with `Cache-Control: no-store` (every OAuth answer carries state or secrets).
pub fn json_response(status: u16, body: Value) -> Response {
    let mut resp = (StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR), axum::Json(body)).into_response();
    resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

/// RFC 6749 §5.2 error shape.
pub fn oauth_error(status: u16, error: &str, description: &str) -> Response {
    json_response(status, json!({"error": error, "error_description": description}))
}

pub fn internal_error(context: &str, e: impl std::fmt::Display) -> Response {
    tracing::error!("{context}: {e}");
    oauth_error(500, "server_error", context)
}

/// Reads at most `limit` bytes of body; more is a 413 in OAuth error shape.
pub async fn read_body(body: Body, limit: usize, error_code: &str) -> Result<Bytes, Response> {
    match Limited::new(body, limit).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(_) => Err(oauth_error(413, error_code, &format!("request body exceeds {limit} bytes"))),
    }
}

pub fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().to_ascii_lowercase().starts_with("application/json"))
}

/// Flat string parameters from a JSON object or a form body. RFC 6749 §3.1: a
/// parameter sent twice is an error, not "last one wins".
pub fn flat_params(headers: &HeaderMap, body: &[u8]) -> Result<HashMap<String, String>, String> {
    let mut out = HashMap::new();
    if is_json(headers) {
        let v: Value = serde_json::from_slice(body).map_err(|e| format!("body is not JSON: {e}"))?;
        let obj = v.as_object().ok_or("body must be a JSON object")?;
        for (k, v) in obj {
            match v {
                Value::String(s) => {
                    out.insert(k.clone(), s.clone());
                }
                Value::Null => {}
                _ => return Err(format!("parameter {k:?} must be a string")),
            }
        }
    } else {
        let pairs: Vec<(String, String)> =
            serde_urlencoded::from_bytes(body).map_err(|e| format!("body is not form-encoded: {e}"))?;
        for (k, v) in pairs {
            if out.insert(k.clone(), v).is_some() {
                return Err(format!("parameter {k:?} is repeated"));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod connection_cap_tests {
    use super::*;

    /// The default fleet of 10,000 links must fit under the listener's cap with room for
    /// HTTP clients; before, a fixed 4,096 cut every link past it at accept.
    #[test]
    fn the_connection_cap_holds_every_link_plus_http_clients() {
        assert_eq!(max_connections(Some(super::super::link_hub::DEFAULT_MAX_LINKS)), 10_000 + HTTP_CONNECTIONS);
        assert_eq!(max_connections(Some(2)), 2 + HTTP_CONNECTIONS);
        assert_eq!(max_connections(None), HTTP_CONNECTIONS);
        assert_eq!(max_connections(Some(usize::MAX)), usize::MAX);
    }
}
