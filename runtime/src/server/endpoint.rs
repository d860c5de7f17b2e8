//! The `/mcp` endpoint: a thin layer in front of rmcp's streamable HTTP services.
//!
//! rmcp's session-mode service answers a POST without `Mcp-Session-Id` that is not
//! `initialize` with 400, yet the extension and ChatGPT send exactly such stateless
//! `tools/list` / `tools/call` requests. So this layer reads the (bounded) body once,
//! answers malformed JSON-RPC itself (spec §3 codes), and routes:
//! - a stateless client (ChatGPT's: `openai-mcp` User-Agent, or an `initialize`
//!   naming an OpenAI client) → never a session: any `Mcp-Session-Id` it sends
//!   is dropped unchecked and rmcp's stateless service answers;
//! - `server/discover` and requests for methods nobody serves → answered here as
//!   JSON, without a session or with a live one (see `discover`);
//! - a request carrying `Mcp-Session-Id`, or an `initialize` from a client that
//!   accepts SSE → the session service (normal MCP clients);
//! - a plain `tools/call` (see `fast_tools_call`) with headers rmcp would take as
//!   they are → answered here, the same bytes rmcp's stateless service would
//!   send, without its second parse and per-request service (`call_tool`);
//! - everything else → the stateless service.
//!
//! Either way the answer leaves as spec §3 frames it (see `framing`): one SSE
//! frame for `initialize` and `tools/list` when the client accepts SSE, JSON for
//! everything else, whatever rmcp's service produced.
//!
//! rmcp's `Tool` type has no `execution` member, so `tools/list` responses get the
//! catalog's missing members merged back here; the listed tools then hash exactly
//! to the advertised contract hash.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use http::uri::Authority;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Response, StatusCode, Uri, header};
use http_body_util::{BodyExt, Limited};
use rmcp::model::{CallToolResult, ProtocolVersion, ServerJsonRpcMessage, ServerResult};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{
    SessionId, SessionManager, StreamableHttpServerConfig, StreamableHttpService,
};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::config::MAX_BODY_BYTES;
use super::envelope::{Envelope, LocalAnswer, check_envelope};
use super::fast_tools_call::PlainToolsCall;
use super::framing;
use super::jsonrpc::{self, INVALID_REQUEST};
use super::mcp::{McpHandler, SUPPORTED_PROTOCOL_VERSIONS, ServerState};
use super::sessions::SpecSessions;

/// Idle sessions close after this long (spec §3: one hour, refreshed on use).
pub const SESSION_IDLE_TIMEOUT: Duration = Duration::from_secs(3600);
/// Most sessions kept at once (spec §3); the oldest is closed to admit a new one.
pub const MAX_SESSIONS: usize = 1024;
/// SSE keep-alive comment interval on long-lived streams.
const SSE_KEEP_ALIVE: Duration = Duration::from_secs(15);
const SESSION_HEADER: &str = "mcp-session-id";
/// What the stateless service must see in `Accept` (built at compile time: a
/// `from_static` at run time checks every byte on each request).
const ACCEPT_JSON_AND_SSE: HeaderValue = HeaderValue::from_static("application/json, text/event-stream");
const CONTENT_TYPE_JSON: HeaderValue = HeaderValue::from_static("application/json");
const PROTOCOL_VERSION_HEADER: HeaderName = HeaderName::from_static("mcp-protocol-version");

type SessionService = StreamableHttpService<McpHandler, SpecSessions>;
type StatelessService = StreamableHttpService<McpHandler, NeverSessionManager>;

#[derive(Clone)]
pub struct McpEndpoint {
    inner: Arc<Inner>,
}

struct Inner {
    session: SessionService,
    sessions: Arc<SpecSessions>,
    /// Session ids in creation order, for evicting the oldest.
    session_order: tokio::sync::Mutex<VecDeque<SessionId>>,
    stateless: StatelessService,
    /// For what the endpoint answers itself (`server/discover`).
    state: Arc<ServerState>,
    /// Catalog entries by tool name, to restore members rmcp's model drops.
    catalog_by_name: HashMap<String, Map<String, Value>>,
    /// Ends the session-less keep-alive streams, so graceful shutdown never waits on them.
    shutdown: CancellationToken,
}

impl McpEndpoint {
    /// `shutdown` ends every session and open stream when cancelled.
    pub fn new(state: Arc<ServerState>, shutdown: CancellationToken) -> Self {
        let catalog_by_name = state
            .catalog
            .iter()
            .filter_map(|tool| {
                let obj = tool.as_object()?;
                Some((obj.get("name")?.as_str()?.to_string(), obj.clone()))
            })
            .collect();
        // Host/Origin checks live in the TCP layer (`auth`): the Unix socket is
        // trusted and unreachable from browsers, whatever Host its clients send.
        let base = StreamableHttpServerConfig::default()
            .disable_allowed_hosts()
            .with_sse_keep_alive(Some(SSE_KEEP_ALIVE))
            .with_cancellation_token(shutdown.clone())
            .with_max_request_body_bytes(MAX_BODY_BYTES);
        let mut local = LocalSessionManager::default();
        local.session_config.keep_alive = Some(SESSION_IDLE_TIMEOUT);
        let sessions = Arc::new(SpecSessions::new(local, &state.ctx.info.boot_id));
        let factory_state = Arc::clone(&state);
        let session = StreamableHttpService::new(
            move || Ok(McpHandler::new(Arc::clone(&factory_state))),
            Arc::clone(&sessions),
            base.clone().with_legacy_session_mode(true),
        );
        let factory_state = Arc::clone(&state);
        let stateless = StreamableHttpService::new(
            move || Ok(McpHandler::new(Arc::clone(&factory_state))),
            Arc::new(NeverSessionManager::default()),
            base.with_legacy_session_mode(false).with_json_response(true).with_sse_retry(None),
        );
        McpEndpoint {
            inner: Arc::new(Inner {
                session,
                sessions,
                session_order: tokio::sync::Mutex::new(VecDeque::new()),
                stateless,
                state,
                catalog_by_name,
                shutdown,
            }),
        }
    }

    pub async fn handle(&self, mut request: Request<Body>) -> Response<Body> {
        forget_versions_rmcp_does_not_know(request.headers_mut());
        if request.method() != Method::POST {
            // A stateless client's GET/DELETE never reaches a session, whatever id it sends.
            if !request.headers().contains_key(SESSION_HEADER) || is_stateless_client(request.headers()) {
                return sessionless_get_or_delete(&request, &self.inner.shutdown);
            }
            // rmcp's DELETE says 202 to any id, known or not; spec §3 wants 404 for
            // an unknown one, as for every other method.
            if self.inner.names_unknown_session(request.headers()).await {
                return session_not_found();
            }
            // GET of a live session: the keep-alive stream of spec §3, as for a
            // stateless client. rmcp's own stream would carry server-sent
            // messages, and this server sends none (its catalog never changes).
            if request.method() == Method::GET {
                return keepalive_stream(self.inner.shutdown.clone());
            }
            // DELETE (end session), and any other method's refusal, are rmcp's.
            return normalize_error(into_axum(self.inner.session.handle(request).await)).await;
        }
        let (mut parts, body) = request.into_parts();
        let bytes = match Limited::new(body, MAX_BODY_BYTES).collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(e) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => {
                return jsonrpc::error_response(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    INVALID_REQUEST,
                    &format!("Request body too large (limit {MAX_BODY_BYTES} bytes)"),
                    None,
                );
            }
            Err(e) => {
                return jsonrpc::error_response(
                    StatusCode::BAD_REQUEST,
                    INVALID_REQUEST,
                    &format!("Invalid Request: cannot read body: {e}"),
                    None,
                );
            }
        };
        let envelope = match check_envelope(&bytes) {
            Ok(envelope) => envelope,
            Err(response) => return response,
        };
        let is_initialize = envelope.method.as_deref() == Some("initialize");
        let has_session = parts.headers.contains_key(SESSION_HEADER);
        // Stateless clients (spec §3) get no session and skip the session checks.
        // Only asked where it changes something, so a session-less tool call costs
        // nothing more.
        if (has_session || is_initialize) && (envelope.openai_client || is_stateless_client(&parts.headers)) {
            parts.headers.remove(SESSION_HEADER);
            return self.serve_stateless(parts, bytes, envelope).await;
        }
        if let Some(local) = envelope.local {
            if has_session && self.inner.names_unknown_session(&parts.headers).await {
                return session_not_found();
            }
            return self.answer_locally(local, &parts.headers, envelope.method.as_deref().unwrap_or_default());
        }
        if !(has_session || (is_initialize && accepts_sse(&parts.headers))) {
            return self.serve_stateless(parts, bytes, envelope).await;
        }
        if parts.headers.get(header::CONTENT_TYPE).is_none() {
            // The body already parsed as JSON; a client that omits the type still
            // meant it.
            parts.headers.insert(header::CONTENT_TYPE, CONTENT_TYPE_JSON);
        }
        let is_tools_list = envelope.method.as_deref() == Some("tools/list");
        let frame = (is_initialize || is_tools_list) && accepts_sse(&parts.headers);
        let request = Request::from_parts(parts, Body::from(bytes));
        let response = into_axum(self.inner.session.handle(request).await);
        if !has_session && let Some(id) = response.headers().get(SESSION_HEADER).and_then(|v| v.to_str().ok()) {
            // The id is copied out first: `Body` is not `Sync`, so no reference
            // to the response may live across an await.
            let id = SessionId::from(id);
            self.inner.remember_session(id).await;
        }
        if !response.status().is_success() {
            return normalize_error(response).await;
        }
        // The session service streams every answer as SSE; a notification's 202
        // has no body to reframe.
        if !framing::is_event_stream(&response) {
            return response;
        }
        self.one_answer(response, is_tools_list, frame).await
    }

    /// A request served without a session: rmcp's stateless service answers JSON;
    /// `initialize` and `tools/list` then go out as one SSE frame to a client that
    /// accepts SSE (spec §3 framing).
    async fn serve_stateless(
        &self,
        mut parts: http::request::Parts,
        bytes: Bytes,
        envelope: Envelope,
    ) -> Response<Body> {
        if let Some(local) = envelope.local {
            return self.answer_locally(local, &parts.headers, envelope.method.as_deref().unwrap_or_default());
        }
        if let Some(call) = envelope.tools_call
            && rmcp_would_hand_over_as_is(&parts.uri, &parts.headers)
        {
            return self.call_tool(call).await;
        }
        let is_tools_list = envelope.method.as_deref() == Some("tools/list");
        let handshake = is_tools_list || envelope.method.as_deref() == Some("initialize");
        let frame = handshake && accepts_sse(&parts.headers);
        if parts.headers.get(header::CONTENT_TYPE).is_none() {
            // The body already parsed as JSON; a client that omits the type still
            // meant it.
            parts.headers.insert(header::CONTENT_TYPE, CONTENT_TYPE_JSON);
        }
        // The stateless service answers JSON whatever the client accepts, but rmcp
        // insists on both media types being acceptable.
        parts.headers.insert(header::ACCEPT, ACCEPT_JSON_AND_SSE);
        let request = Request::from_parts(parts, Body::from(bytes));
        let response = into_axum(self.inner.stateless.handle(request).await);
        if !response.status().is_success() {
            return normalize_error(response).await;
        }
        // A tool call's JSON goes out as rmcp wrote it: nothing more on that path.
        if is_tools_list || frame { self.one_answer(response, is_tools_list, frame).await } else { response }
    }

    /// A plain `tools/call` without a session, answered here as rmcp's stateless
    /// service answers it, byte for byte (`endpoint_tests` compares the two). That
    /// service parses the body a second time and builds a one-shot transport and a
    /// service loop for every request, which on a 2-core machine costs more than
    /// reading a small file does.
    async fn call_tool(&self, call: PlainToolsCall) -> Response<Body> {
        let PlainToolsCall { id, name, arguments } = call;
        let state = Arc::clone(&self.inner.state);
        // A task of its own, as rmcp gives every handler: a client that hangs up
        // drops this future, and must not cut a change short halfway through.
        let task = tokio::spawn(async move { super::mcp::call_tool(&state, &name, arguments).await });
        let result = match task.await {
            Ok(result) => result,
            Err(e) => {
                tracing::error!(error = %e, "a tool call ended without an answer");
                return jsonrpc::error_response(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    jsonrpc::INTERNAL_ERROR,
                    "Internal error: the tool call ended without an answer",
                    Some(id.into_json_value()),
                );
            }
        };
        let size_hint = reply_size_hint(&result);
        let mut result = ServerResult::CallToolResult(result);
        // What rmcp's handler does for every peer before 2026-07-28, the only
        // ones this path serves (`rmcp_would_hand_over_as_is`).
        result.strip_result_type_for_legacy_peer();
        result.strip_non_object_output_for_legacy_peer();
        match framing::json_body(&ServerJsonRpcMessage::response(result, id), size_hint) {
            Ok(response) => response,
            Err(e) => internal_error(format!("cannot write the tool's answer: {e}")),
        }
    }

    /// What the endpoint answers without rmcp, once the session checks passed.
    fn answer_locally(&self, local: LocalAnswer, headers: &HeaderMap, method: &str) -> Response<Body> {
        match local {
            LocalAnswer::Discover { id, openai } => super::discover::answer(&self.inner.state, headers, id, openai),
            LocalAnswer::MethodNotFound { id } => jsonrpc::error_response(
                StatusCode::OK,
                jsonrpc::METHOD_NOT_FOUND,
                &jsonrpc::method_not_found_message(method),
                Some(id),
            ),
        }
    }

    /// The one JSON-RPC answer of `response` (JSON or rmcp's SSE stream), with the
    /// catalog members rmcp's `Tool` cannot carry merged back into a `tools/list`
    /// result, sent as one SSE frame (`frame`) or as JSON (spec §3).
    async fn one_answer(&self, response: Response<Body>, is_tools_list: bool, frame: bool) -> Response<Body> {
        let (parts, text) = match framing::answer_text(response).await {
            Ok((parts, Some(text))) => (parts, text),
            Ok((_, None)) => return internal_error("the session's stream ended without an answer".into()),
            Err(e) => return internal_error(format!("cannot read the answer: {e}")),
        };
        let text = if is_tools_list { self.inner.patch_message(&text).unwrap_or(text) } else { text };
        if frame { framing::sse_frame(parts, &text) } else { framing::json(parts, text) }
    }
}

/// About the size of a tool call's JSON-RPC answer, so that it is written without
/// growing its buffer: the text blocks, about as much again for
/// `structuredContent` (the same payload), and room for escapes.
fn reply_size_hint(result: &CallToolResult) -> usize {
    let text: usize = result.content.iter().filter_map(|block| block.as_text()).map(|t| t.text.len()).sum();
    text * 2 + text / 4 + 256
}

/// True when rmcp's stateless service would take a request with this target and
/// these headers as it is: a well-formed `Host` (or an authority in the target), a
/// JSON `Content-Type` (or none, which the endpoint fills in) and no
/// `MCP-Protocol-Version` but one this server negotiates. Those all predate
/// 2026-07-28, whose header checks and result shapes only rmcp knows. (rmcp's
/// allowed hosts and origins are off here: the TCP layer checks them, see `auth`.)
fn rmcp_would_hand_over_as_is(uri: &Uri, headers: &HeaderMap) -> bool {
    let host = match headers.get(header::HOST) {
        Some(host) => host.to_str().is_ok_and(|host| Authority::try_from(host).is_ok()),
        None => uri.authority().is_some(),
    };
    let json = headers.get(header::CONTENT_TYPE).is_none_or(|v| {
        v.to_str().is_ok_and(|v| {
            let essence = v.split_once(';').map_or(v, |(essence, _)| essence);
            essence.trim().eq_ignore_ascii_case("application/json")
        })
    });
    host && json
        && headers
            .get(&PROTOCOL_VERSION_HEADER)
            .is_none_or(|v| SUPPORTED_PROTOCOL_VERSIONS.iter().any(|s| v.as_bytes() == s.as_bytes()))
}

fn internal_error(message: String) -> Response<Body> {
    jsonrpc::error_response(StatusCode::INTERNAL_SERVER_ERROR, jsonrpc::INTERNAL_ERROR, &message, None)
}

impl Inner {
    /// True when the request carries an `Mcp-Session-Id` this server does not
    /// hold: the check rmcp's session service makes for every request that names
    /// a session, whoever the client.
    async fn names_unknown_session(&self, headers: &HeaderMap) -> bool {
        let Some(id) = headers.get(SESSION_HEADER) else { return false };
        let Ok(id) = id.to_str() else { return true };
        !self.sessions.local.sessions.read().await.contains_key(&SessionId::from(id))
    }

    /// Records a newly issued session and closes the oldest ones beyond the cap.
    async fn remember_session(&self, id: SessionId) {
        let mut order = self.session_order.lock().await;
        order.push_back(id);
        if order.len() <= MAX_SESSIONS {
            return;
        }
        // Sessions that ended on their own (DELETE, idle timeout) free their slot first.
        {
            let live = self.sessions.local.sessions.read().await;
            order.retain(|id| live.contains_key(id));
        }
        while order.len() > MAX_SESSIONS {
            let Some(oldest) = order.pop_front() else { break };
            tracing::info!(session = %oldest, "session limit reached; closing the oldest session");
            if let Err(e) = self.sessions.close_session(&oldest).await {
                tracing::warn!(session = %oldest, error = %e, "could not close evicted session");
            }
        }
    }

    /// Returns the patched JSON text when `data` is a `tools/list` result.
    fn patch_message(&self, data: &str) -> Option<String> {
        let mut message: Value = serde_json::from_str(data).ok()?;
        let tools = message.get_mut("result")?.get_mut("tools")?.as_array_mut()?;
        for tool in tools.iter_mut() {
            let Some(obj) = tool.as_object_mut() else { continue };
            let Some(entry) = obj.get("name").and_then(Value::as_str).and_then(|n| self.catalog_by_name.get(n)) else {
                continue;
            };
            for (key, value) in entry {
                if !obj.contains_key(key) {
                    obj.insert(key.clone(), value.clone());
                }
            }
        }
        Some(message.to_string())
    }
}

/// The versions this server negotiates that rmcp has no constant for (2024-10-07).
static VERSIONS_RMCP_DOES_NOT_KNOW: LazyLock<Vec<&'static str>> = LazyLock::new(|| {
    SUPPORTED_PROTOCOL_VERSIONS
        .iter()
        .copied()
        .filter(|v| !ProtocolVersion::KNOWN_VERSIONS.iter().any(|k| k.as_str() == *v))
        .collect()
});

/// rmcp refuses (400) any request whose `MCP-Protocol-Version` names a version
/// outside its own list, even one this server negotiated. Such a client gets the
/// header dropped instead: rmcp then takes it for a pre-2025-06-18 client, which
/// it is. One header lookup; the list is compared only when the header is there.
fn forget_versions_rmcp_does_not_know(headers: &mut HeaderMap) {
    let unknown = headers
        .get(&PROTOCOL_VERSION_HEADER)
        .is_some_and(|v| VERSIONS_RMCP_DOES_NOT_KNOW.iter().any(|u| v.as_bytes() == u.as_bytes()));
    if unknown {
        headers.remove(&PROTOCOL_VERSION_HEADER);
    }
}

/// What an unknown or ended session gets, the same words as rmcp's refusals
/// after [`normalize_error`].
fn session_not_found() -> Response<Body> {
    jsonrpc::error_response(StatusCode::NOT_FOUND, jsonrpc::UNAUTHORIZED, "Session not found", None)
}

/// True for clients that never hold a session (spec §3: ChatGPT's `openai-mcp`).
fn is_stateless_client(headers: &HeaderMap) -> bool {
    crate::mcp_discover::has_openai_user_agent(headers)
}

/// GET and DELETE without `Mcp-Session-Id` (spec §3). A stateless client gets a
/// keep-alive SSE stream for GET and 202 for DELETE, since it has nothing to end;
/// anyone else is told that these methods need a session.
fn sessionless_get_or_delete(request: &Request<Body>, shutdown: &CancellationToken) -> Response<Body> {
    let stateless = is_stateless_client(request.headers());
    match *request.method() {
        Method::GET if stateless => keepalive_stream(shutdown.clone()),
        Method::DELETE if stateless => jsonrpc::accepted(),
        Method::GET | Method::DELETE => jsonrpc::error_response(
            StatusCode::BAD_REQUEST,
            jsonrpc::SERVER_ERROR,
            "Bad Request: this method needs an Mcp-Session-Id header",
            None,
        ),
        _ => {
            let mut response = jsonrpc::error_response(
                StatusCode::METHOD_NOT_ALLOWED,
                jsonrpc::SERVER_ERROR,
                "Method not allowed: use POST, GET or DELETE",
                None,
            );
            response.headers_mut().insert(header::ALLOW, HeaderValue::from_static("GET, POST, DELETE"));
            response
        }
    }
}

/// `: connected`, then `: keepalive` every [`SSE_KEEP_ALIVE`], until the client goes
/// away (the body is dropped) or the server shuts down.
fn keepalive_stream(shutdown: CancellationToken) -> Response<Body> {
    let first = futures::stream::once(async { Ok::<Bytes, Infallible>(Bytes::from_static(b": connected\n\n")) });
    let ticks = futures::stream::unfold(shutdown, |shutdown| async move {
        tokio::select! {
            _ = shutdown.cancelled() => None,
            _ = tokio::time::sleep(SSE_KEEP_ALIVE) => {
                Some((Ok::<Bytes, Infallible>(Bytes::from_static(b": keepalive\n\n")), shutdown))
            }
        }
    });
    let mut response = Response::new(Body::from_stream(futures::StreamExt::chain(first, ticks)));
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

fn accepts_sse(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.to_ascii_lowercase().contains("text/event-stream"))
}

fn into_axum(response: Response<http_body_util::combinators::BoxBody<Bytes, Infallible>>) -> Response<Body> {
    response.map(Body::new)
}

/// Turns rmcp's plain-text refusals (404 unknown session, 406, 415, …) into
/// JSON-RPC error bodies; JSON answers pass through untouched.
async fn normalize_error(response: Response<Body>) -> Response<Body> {
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json") || v.starts_with("text/event-stream"));
    if status.is_success() || is_json {
        return response;
    }
    let allow = response.headers().get(header::ALLOW).cloned();
    let text = match response.into_body().collect().await {
        Ok(c) => String::from_utf8_lossy(&c.to_bytes()).trim().to_string(),
        Err(_) => String::new(),
    };
    let message = if status == StatusCode::NOT_FOUND {
        "Session not found".to_string()
    } else if text.is_empty() {
        status.canonical_reason().unwrap_or("error").to_string()
    } else {
        text
    };
    let mut out = jsonrpc::error_response(status, jsonrpc::code_for_status(status), &message, None);
    if let Some(allow) = allow {
        out.headers_mut().insert(header::ALLOW, allow);
    }
    out
}

#[cfg(test)]
#[path = "endpoint_tests.rs"]
mod endpoint_tests;
