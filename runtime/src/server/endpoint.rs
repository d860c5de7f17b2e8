//! The `/mcp` endpoint: a thin layer in front of rmcp's streamable HTTP services.
//!
//! rmcp's session-mode service answers a POST without `Mcp-Session-Id` that is not
//! `initialize` with 400, yet the extension and ChatGPT send exactly such stateless
//! `tools/list` / `tools/call` requests. So this layer reads the (bounded) body once,
//! answers malformed JSON-RPC itself (spec §3 codes), and routes:
//! - `server/discover` → answered here as JSON, without a session or with a
//!   live one (see `discover`);
//! - a request carrying `Mcp-Session-Id`, or an `initialize` from a client that
//!   accepts SSE → the session service (normal MCP clients);
//! - everything else → a stateless JSON-answering service.
//!
//! rmcp's `Tool` type has no `execution` member, so `tools/list` responses get the
//! catalog's missing members merged back here; the listed tools then hash exactly
//! to the advertised contract hash.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use bytes::{Bytes, BytesMut};
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use hyper::body::Frame;
use http_body_util::{BodyExt, Limited};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{
    SessionId, SessionManager, StreamableHttpServerConfig, StreamableHttpService,
};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::config::MAX_BODY_BYTES;
use super::jsonrpc::{self, INVALID_REQUEST, PARSE_ERROR};
use super::mcp::{McpHandler, ServerState};

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

type SessionService = StreamableHttpService<McpHandler, LocalSessionManager>;
type StatelessService = StreamableHttpService<McpHandler, NeverSessionManager>;

#[derive(Clone)]
pub struct McpEndpoint {
    inner: Arc<Inner>,
}

struct Inner {
    session: SessionService,
    sessions: Arc<LocalSessionManager>,
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
        let mut sessions = LocalSessionManager::default();
        sessions.session_config.keep_alive = Some(SESSION_IDLE_TIMEOUT);
        let sessions = Arc::new(sessions);
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

    pub async fn handle(&self, request: Request<Body>) -> Response<Body> {
        if request.method() != Method::POST {
            if !request.headers().contains_key(SESSION_HEADER) {
                return sessionless_get_or_delete(&request, &self.inner.shutdown);
            }
            // GET (server stream) and DELETE (end session) of a session go to rmcp.
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
        if envelope.method.as_deref() == Some(crate::mcp_discover::METHOD) {
            if self.inner.names_unknown_session(&parts.headers).await {
                return session_not_found();
            }
            return super::discover::answer(&self.inner.state, &parts.headers, &bytes);
        }
        let has_session = parts.headers.contains_key(SESSION_HEADER);
        let wants_session = envelope.method.as_deref() == Some("initialize") && accepts_sse(&parts.headers);
        if parts.headers.get(header::CONTENT_TYPE).is_none() {
            // The body already parsed as JSON; a client that omits the type still
            // meant it.
            parts.headers.insert(header::CONTENT_TYPE, CONTENT_TYPE_JSON);
        }
        let is_tools_list = envelope.method.as_deref() == Some("tools/list");
        let response = if has_session || wants_session {
            let request = Request::from_parts(parts, Body::from(bytes));
            let response = into_axum(self.inner.session.handle(request).await);
            if !has_session
                && let Some(id) = response.headers().get(SESSION_HEADER).and_then(|v| v.to_str().ok())
            {
                // The id is copied out first: `Body` is not `Sync`, so no reference
                // to the response may live across an await.
                let id = SessionId::from(id);
                self.inner.remember_session(id).await;
            }
            response
        } else {
            // The stateless service answers JSON whatever the client accepts, but
            // rmcp insists on both media types being acceptable.
            parts.headers.insert(header::ACCEPT, ACCEPT_JSON_AND_SSE);
            let request = Request::from_parts(parts, Body::from(bytes));
            into_axum(self.inner.stateless.handle(request).await)
        };
        if !response.status().is_success() {
            return normalize_error(response).await;
        }
        if is_tools_list { self.complete_tools(response).await } else { response }
    }

    /// Merges catalog members that rmcp's `Tool` cannot carry into a `tools/list`
    /// response, JSON or SSE.
    async fn complete_tools(&self, response: Response<Body>) -> Response<Body> {
        let inner = Arc::clone(&self.inner);
        let is_sse = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let (mut parts, body) = response.into_parts();
        if is_sse {
            let body = SseRewrite::new(body, move |data: &str| inner.patch_message(data));
            return Response::from_parts(parts, Body::new(body));
        }
        let bytes = match body.collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(e) => {
                return jsonrpc::error_response(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    jsonrpc::INTERNAL_ERROR,
                    &format!("cannot read tools/list response: {e}"),
                    None,
                );
            }
        };
        let text = String::from_utf8_lossy(&bytes);
        let patched = inner.patch_message(&text).unwrap_or_else(|| text.into_owned());
        parts.headers.remove(header::CONTENT_LENGTH);
        Response::from_parts(parts, Body::from(patched))
    }
}

impl Inner {
    /// True when the request carries an `Mcp-Session-Id` this server does not
    /// hold: the check rmcp's session service makes for every request that names
    /// a session, whoever the client.
    async fn names_unknown_session(&self, headers: &HeaderMap) -> bool {
        let Some(id) = headers.get(SESSION_HEADER) else { return false };
        let Ok(id) = id.to_str() else { return true };
        !self.sessions.sessions.read().await.contains_key(&SessionId::from(id))
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
            let live = self.sessions.sessions.read().await;
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

/// What the layer learned from the body.
struct Envelope {
    method: Option<String>,
}

/// Spec §3 checks that rmcp would answer as plain text or not at all: unparseable
/// JSON, batches, and messages that are not JSON-RPC 2.0.
#[allow(clippy::result_large_err, reason = "the error is the HTTP answer itself, built at most once per request")]
fn check_envelope(bytes: &Bytes) -> Result<Envelope, Response<Body>> {
    // Most bodies are plain tool calls, which a light parse recognises for sure.
    if super::fast_tools_call::is_plain_tools_call(bytes) {
        return Ok(Envelope { method: Some("tools/call".to_string()) });
    }
    // Almost every other body is a well-formed request or notification: one parse
    // into rmcp's model settles it. Anything else gets the step-by-step diagnosis.
    match serde_json::from_slice::<ClientJsonRpcMessage>(bytes) {
        Ok(ClientJsonRpcMessage::Request(request)) => {
            let method = request.request.method();
            if matches!(request.request, ClientRequest::CustomRequest(_)) && SERVED_METHODS.contains(&method) {
                let id = serde_json::to_value(&request.id).ok();
                return Err(invalid_params_for(method, id));
            }
            Ok(Envelope { method: Some(method.to_string()) })
        }
        // Notifications and responses are rare (rmcp's model does not expose a
        // notification's method name), and a body can parse as a response while
        // carrying a `method` that is not a string, which the diagnosis refuses.
        Ok(_) | Err(_) => diagnose_envelope(bytes),
    }
}

fn invalid_params_for(method: &str, id: Option<Value>) -> Response<Body> {
    jsonrpc::error_response(
        StatusCode::OK,
        jsonrpc::INVALID_PARAMS,
        &format!("Invalid params for {method}: {}", params_hint(method)),
        id,
    )
}

/// The full check, step by step, naming the first thing wrong with the body.
#[allow(clippy::result_large_err, reason = "the error is the HTTP answer itself, built at most once per request")]
fn diagnose_envelope(bytes: &Bytes) -> Result<Envelope, Response<Body>> {
    let bad = |code: i64, message: String, id: Option<Value>| {
        Err(jsonrpc::error_response(StatusCode::BAD_REQUEST, code, &message, id))
    };
    let value: Value = match serde_json::from_slice(bytes) {
        Ok(value) => value,
        Err(e) => return bad(PARSE_ERROR, format!("Parse error: {e}"), None),
    };
    let obj = match value {
        Value::Object(obj) => obj,
        Value::Array(_) => return bad(INVALID_REQUEST, "Invalid Request: batch requests are not supported".into(), None),
        _ => return bad(INVALID_REQUEST, "Invalid Request: expected a JSON-RPC object".into(), None),
    };
    let id = obj.get("id").cloned();
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return bad(INVALID_REQUEST, "Invalid Request: jsonrpc must be \"2.0\"".into(), id);
    }
    let method = match obj.get("method") {
        Some(Value::String(m)) => Some(m.clone()),
        Some(_) => return bad(INVALID_REQUEST, "Invalid Request: method must be a string".into(), id),
        None if obj.contains_key("result") || obj.contains_key("error") => None,
        None => return bad(INVALID_REQUEST, "Invalid Request: method is missing".into(), id),
    };
    // rmcp would refuse a message its model cannot represent with a bare 415; say
    // what is wrong instead.
    match serde_json::from_value::<ClientJsonRpcMessage>(Value::Object(obj)) {
        Err(e) => return bad(INVALID_REQUEST, format!("Invalid Request: {e}"), id),
        // A method we serve whose params do not fit lands in rmcp's catch-all and
        // would come back as "method not found"; name the real problem.
        Ok(ClientJsonRpcMessage::Request(request))
            if matches!(request.request, ClientRequest::CustomRequest(_))
                && method.as_deref().is_some_and(|m| SERVED_METHODS.contains(&m)) =>
        {
            return Err(invalid_params_for(method.as_deref().unwrap_or_default(), id));
        }
        Ok(_) => {}
    }
    Ok(Envelope { method })
}

/// Methods with typed params in rmcp that this server answers.
const SERVED_METHODS: &[&str] = &["initialize", "ping", "tools/list", "tools/call"];

fn params_hint(method: &str) -> &'static str {
    match method {
        "tools/call" => "params.name must be a string and params.arguments an object",
        "initialize" => "params needs protocolVersion, capabilities and clientInfo",
        _ => "params do not match the method",
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

/// Rewrites the `data:` of each complete SSE event with `patch` (when it returns
/// `Some`), passing everything else through; events split across frames are
/// reassembled first.
struct SseRewrite<F> {
    inner: Body,
    buffer: BytesMut,
    patch: F,
    done: bool,
}

impl<F: Fn(&str) -> Option<String>> SseRewrite<F> {
    fn new(inner: Body, patch: F) -> Self {
        SseRewrite { inner, buffer: BytesMut::new(), patch, done: false }
    }

    /// Splits off the next complete event (through its blank line), if any.
    fn next_event(&mut self) -> Option<Bytes> {
        let end = find_event_end(&self.buffer)?;
        Some(self.buffer.split_to(end).freeze())
    }

    fn rewrite(&self, event: Bytes) -> Bytes {
        let Ok(text) = std::str::from_utf8(&event) else { return event };
        let data: Vec<&str> = text
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .map(|d| d.strip_prefix(' ').unwrap_or(d))
            .collect();
        if data.is_empty() {
            return event;
        }
        let Some(patched) = (self.patch)(&data.join("\n")) else { return event };
        let mut out = String::with_capacity(text.len() + 64);
        let mut wrote_data = false;
        for line in text.lines() {
            if line.starts_with("data:") {
                if !wrote_data {
                    out.push_str("data: ");
                    out.push_str(&patched);
                    out.push('\n');
                    wrote_data = true;
                }
            } else if !line.is_empty() {
                out.push_str(line);
                out.push('\n');
            }
        }
        out.push('\n');
        Bytes::from(out)
    }
}

fn find_event_end(buf: &[u8]) -> Option<usize> {
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|p| p + 2);
    let crlf = buf.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4);
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

impl<F: Fn(&str) -> Option<String> + Unpin> hyper::body::Body for SseRewrite<F> {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        loop {
            if let Some(event) = self.next_event() {
                let rewritten = self.rewrite(event);
                return Poll::Ready(Some(Ok(Frame::data(rewritten))));
            }
            if self.done {
                if self.buffer.is_empty() {
                    return Poll::Ready(None);
                }
                let rest = self.buffer.split().freeze();
                return Poll::Ready(Some(Ok(Frame::data(rest))));
            }
            match Pin::new(&mut self.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => self.done = true,
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => self.buffer.extend_from_slice(&data),
                    Err(frame) => return Poll::Ready(Some(Ok(frame))),
                },
            }
        }
    }
}

#[cfg(test)]
#[path = "envelope_props.rs"]
mod envelope_props;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_errors_use_spec_codes() {
        let code = |body: &str| match check_envelope(&Bytes::from(body.to_string())) {
            Ok(_) => 0,
            Err(r) => {
                assert_eq!(r.status(), StatusCode::BAD_REQUEST);
                let b = futures::executor::block_on(r.into_body().collect()).unwrap().to_bytes();
                serde_json::from_slice::<Value>(&b).unwrap()["error"]["code"].as_i64().unwrap()
            }
        };
        assert_eq!(code("{nope"), PARSE_ERROR);
        assert_eq!(code("[]"), INVALID_REQUEST);
        assert_eq!(code("7"), INVALID_REQUEST);
        assert_eq!(code(r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#), INVALID_REQUEST);
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":1,"method":5}"#), INVALID_REQUEST);
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":1}"#), INVALID_REQUEST);
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#), 0);
        assert_eq!(code(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#), 0);
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":1,"method":5,"result":{}}"#), INVALID_REQUEST);
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#), 0);
    }

    #[test]
    fn well_formed_requests_name_their_method_and_bad_params_of_served_methods_are_named() {
        let method = |body: &str| check_envelope(&Bytes::from(body.to_string())).ok().and_then(|e| e.method);
        assert_eq!(
            method(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{}}}"#).as_deref(),
            Some("tools/call")
        );
        assert_eq!(method(r#"{"jsonrpc":"2.0","id":"a","method":"tools/list"}"#).as_deref(), Some("tools/list"));
        assert_eq!(method(r#"{"jsonrpc":"2.0","id":2,"method":"vendor/thing"}"#).as_deref(), Some("vendor/thing"));
        let response = check_envelope(&Bytes::from_static(br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":3}}"#))
            .err()
            .expect("bad tools/call params are refused");
        assert_eq!(response.status(), StatusCode::OK);
        let b = futures::executor::block_on(response.into_body().collect()).unwrap().to_bytes();
        let v: Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(v["error"]["code"], jsonrpc::INVALID_PARAMS);
        assert_eq!(v["id"], 7);
    }

    #[test]
    fn sse_events_are_reassembled_and_rewritten() {
        let chunks: Vec<Result<Frame<Bytes>, Infallible>> = vec![
            Ok(Frame::data(Bytes::from_static(b"id: 0\nretry: 3000\ndata:\n\nid: 1\nda"))),
            Ok(Frame::data(Bytes::from_static(b"ta: {\"a\":1}\n\n: keep\n\n"))),
        ];
        let body = Body::new(http_body_util::StreamBody::new(futures::stream::iter(chunks)));
        let rewrite = SseRewrite::new(body, |d: &str| {
            let v: Value = serde_json::from_str(d).ok()?;
            Some(serde_json::json!({"b": v["a"]}).to_string())
        });
        let out = futures::executor::block_on(Body::new(rewrite).collect()).unwrap().to_bytes();
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            "id: 0\nretry: 3000\ndata:\n\nid: 1\ndata: {\"b\":1}\n\n: keep\n\n"
        );
    }
}
