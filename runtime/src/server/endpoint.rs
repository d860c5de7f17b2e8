//! The `/mcp` endpoint of the runtime and of the edge: rmcp's streamable-HTTP
//! services, with policy around them and no MCP parser of our own.
//!
//! rmcp does the protocol: JSON-RPC, both wire revisions (sessions and
//! `initialize` for 2025-xx; stateless requests, `server/discover`, `resultType`,
//! cache hints and the `Mcp-Method`/`Mcp-Name` header checks for 2026-07-28), the
//! `MCP-Protocol-Version` and media-type checks, and the Origin allow-list where
//! a side configures one. What is here:
//! - the body limit (spec §3: 413 past 1 MiB, as JSON-RPC);
//! - routing between rmcp's two services: rmcp's session service refuses a
//!   session-less request that is not `initialize` (400), yet the extension and
//!   ChatGPT send exactly such stateless requests (spec §3). So a request carrying
//!   `Mcp-Session-Id`, or an `initialize` from a client that accepts SSE, goes to
//!   the session service; everything else, 2026-07-28 included, to the stateless
//!   one. Clients that never hold a session (ChatGPT's) never reach a session.
//!   The route is picked from a glance at the body's `method` (see [`Glance`]);
//!   rmcp reads and checks the message itself.
//! - adapters where rmcp has no hook, each saying which upstream change would
//!   remove it: `server/discover` without the 2026-07-28 request `_meta`, the
//!   `execution` member of tools, spec §3's framing, and JSON-RPC bodies for
//!   rmcp's plain-text refusals.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Limited};
use rmcp::ServerHandler;
use rmcp::model::ProtocolVersion;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{
    SessionId, SessionManager, StreamableHttpServerConfig, StreamableHttpService,
};
use serde::Deserialize;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::config::MAX_BODY_BYTES;
use super::framing;
use super::jsonrpc::{self, INVALID_REQUEST};
use super::mcp::{McpHandler, SUPPORTED_PROTOCOL_VERSIONS, ServerState};
use super::sessions::SpecSessions;
use crate::mcp_discover;

/// Idle sessions close after this long (spec §3: one hour, refreshed on use).
pub const SESSION_IDLE_TIMEOUT: Duration = Duration::from_secs(3600);
/// Most sessions kept at once (spec §3); the oldest is closed to admit a new one.
pub const MAX_SESSIONS: usize = 1024;
/// SSE keep-alive comment interval on long-lived streams.
const SSE_KEEP_ALIVE: Duration = Duration::from_secs(15);
const SESSION_HEADER: &str = "mcp-session-id";
/// What the stateless service must see in `Accept`: it answers JSON whatever the
/// client accepts, but insists on both media types being acceptable.
const ACCEPT_JSON_AND_SSE: HeaderValue = HeaderValue::from_static("application/json, text/event-stream");
const CONTENT_TYPE_JSON: HeaderValue = HeaderValue::from_static("application/json");
const PROTOCOL_VERSION_HEADER: HeaderName = HeaderName::from_static("mcp-protocol-version");
/// The request `_meta` key that marks the 2026-07-28 (discover) lifecycle.
const PROTOCOL_VERSION_META_KEY: &str = "io.modelcontextprotocol/protocolVersion";

/// What a side (the runtime, the edge) adds to its rmcp handler for this layer.
pub trait McpSide: ServerHandler + Clone + Send + Sync + 'static {
    /// The tools exactly as the contract hash covers them, members rmcp's `Tool`
    /// cannot carry included (`execution`).
    fn catalog(&self) -> Vec<Value>;
    /// The `server/discover` result (`mcp_discover`); `openai` when the caller is
    /// one of OpenAI's clients.
    fn discover_result(&self, openai: bool) -> Value;
}

/// How a side configures the layer.
#[derive(Debug, Clone, Default)]
pub struct EndpointOptions {
    /// The runtime's local clients (spec §3) may omit `Content-Type`: a body that
    /// is JSON is taken as JSON. Off, rmcp refuses such a request (415).
    pub lenient_content_type: bool,
    /// Browser origins allowed to call; a request with another `Origin` gets 403
    /// (rmcp's check), one without `Origin` passes. `None`: no Origin check here
    /// (the runtime's TCP layer checks Host and Origin itself, see `auth`).
    pub allowed_origins: Option<Vec<String>>,
    /// Mixed into session ids (spec §3).
    pub boot_id: String,
}

type SessionService<H> = StreamableHttpService<H, SpecSessions>;
type StatelessService<H> = StreamableHttpService<H, NeverSessionManager>;

pub struct McpEndpoint<H: McpSide = McpHandler> {
    inner: Arc<Inner<H>>,
}

impl<H: McpSide> Clone for McpEndpoint<H> {
    fn clone(&self) -> Self {
        McpEndpoint { inner: Arc::clone(&self.inner) }
    }
}

struct Inner<H: McpSide> {
    handler: H,
    session: SessionService<H>,
    sessions: Arc<SpecSessions>,
    /// Session ids in creation order, for evicting the oldest.
    session_order: tokio::sync::Mutex<VecDeque<SessionId>>,
    stateless: StatelessService<H>,
    lenient_content_type: bool,
    /// Ends the session-less keep-alive streams, so graceful shutdown never waits on them.
    shutdown: CancellationToken,
}

impl McpEndpoint<McpHandler> {
    /// The runtime's endpoint; `shutdown` ends every session and open stream when cancelled.
    pub fn new(state: Arc<ServerState>, shutdown: CancellationToken) -> Self {
        let options = EndpointOptions {
            lenient_content_type: true,
            allowed_origins: None,
            boot_id: state.ctx.info.boot_id.clone(),
        };
        McpEndpoint::with_handler(McpHandler::new(state), options, shutdown)
    }
}

impl<H: McpSide> McpEndpoint<H> {
    pub fn with_handler(handler: H, options: EndpointOptions, shutdown: CancellationToken) -> Self {
        // Host checks live in the runtime's TCP layer (`auth`): the Unix socket is
        // trusted and unreachable from browsers, whatever Host its clients send; the
        // edge answers on its public name, behind proxies.
        let mut base = StreamableHttpServerConfig::default()
            .disable_allowed_hosts()
            .with_sse_keep_alive(Some(SSE_KEEP_ALIVE))
            .with_cancellation_token(shutdown.clone())
            .with_max_request_body_bytes(MAX_BODY_BYTES);
        if let Some(origins) = options.allowed_origins {
            base = base.with_allowed_origins(origins).enforce_origin_validation();
        }
        let mut local = LocalSessionManager::default();
        local.session_config.keep_alive = Some(SESSION_IDLE_TIMEOUT);
        let sessions = Arc::new(SpecSessions::new(local, &options.boot_id));
        let factory = handler.clone();
        let session = StreamableHttpService::new(
            move || Ok(factory.clone()),
            Arc::clone(&sessions),
            base.clone().with_legacy_session_mode(true),
        );
        let factory = handler.clone();
        let stateless = StreamableHttpService::new(
            move || Ok(factory.clone()),
            Arc::new(NeverSessionManager::default()),
            base.with_legacy_session_mode(false).with_json_response(true).with_sse_retry(None),
        );
        McpEndpoint {
            inner: Arc::new(Inner {
                handler,
                session,
                sessions,
                session_order: tokio::sync::Mutex::new(VecDeque::new()),
                stateless,
                lenient_content_type: options.lenient_content_type,
                shutdown,
            }),
        }
    }

    pub async fn handle(&self, mut request: Request<Body>) -> Response<Body> {
        forget_versions_rmcp_does_not_know(request.headers_mut());
        if request.method() != Method::POST {
            return self.handle_get_or_delete(request).await;
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
        let glance = Glance::of(&bytes);
        let method = glance.method.as_deref();
        let is_initialize = method == Some("initialize");
        let has_session = parts.headers.contains_key(SESSION_HEADER);
        // Stateless clients (spec §3) get no session and skip the session checks.
        let stateless_client = glance.openai_client() || is_stateless_client(&parts.headers);
        if stateless_client {
            parts.headers.remove(SESSION_HEADER);
        } else if has_session && self.inner.names_unknown_session(&parts.headers).await {
            return session_not_found();
        }
        let discover_lifecycle = uses_discover_lifecycle(&parts.headers);
        if method == Some(mcp_discover::METHOD) && !discover_lifecycle && !glance.has_request_protocol_version() {
            return self.discover_without_request_meta(&glance, &parts.headers);
        }
        if is_initialize && discover_lifecycle {
            // Adapter: 2026-07-28 removed `initialize` (404, -32601), but rmcp takes
            // every `initialize` for the legacy handshake whatever the header says;
            // it would go with rmcp routing on the header first.
            return jsonrpc::error_response(
                StatusCode::NOT_FOUND,
                jsonrpc::METHOD_NOT_FOUND,
                "Method not found: initialize (removed in 2026-07-28; use server/discover)",
                glance.id.clone(),
            );
        }
        if self.inner.lenient_content_type && parts.headers.get(header::CONTENT_TYPE).is_none() {
            parts.headers.insert(header::CONTENT_TYPE, CONTENT_TYPE_JSON);
        }
        let is_tools_list = method == Some("tools/list");
        // A client that takes SSE but not JSON gets every answer as one SSE frame.
        let frame = accepts_sse(&parts.headers) && (is_initialize || is_tools_list || !accepts_json(&parts.headers));
        let to_session = !stateless_client && (has_session || (is_initialize && accepts_sse(&parts.headers)));
        let request_has_session = has_session && !stateless_client;
        let body = bytes.clone();
        let response = if to_session {
            let request = Request::from_parts(parts, Body::from(bytes));
            let response = into_axum(self.inner.session.handle(request).await);
            if !request_has_session
                && let Some(id) = response.headers().get(SESSION_HEADER).and_then(|v| v.to_str().ok())
            {
                // The id is copied out first: `Body` is not `Sync`, so no reference
                // to the response may live across an await.
                let id = SessionId::from(id);
                self.inner.remember_session(id).await;
            }
            response
        } else {
            parts.headers.insert(header::ACCEPT, ACCEPT_JSON_AND_SSE);
            let request = Request::from_parts(parts, Body::from(bytes));
            into_axum(self.inner.stateless.handle(request).await)
        };
        if response.status() == StatusCode::UNSUPPORTED_MEDIA_TYPE {
            return unreadable_message(response, &body).await;
        }
        if !response.status().is_success() {
            return normalize_error(response).await;
        }
        // A notification's 202 has no body to reframe; a tool call's JSON goes out
        // as rmcp wrote it.
        if response.status() == StatusCode::ACCEPTED || !(frame || is_tools_list || framing::is_event_stream(&response))
        {
            return response;
        }
        self.one_answer(response, is_tools_list, frame).await
    }

    async fn handle_get_or_delete(&self, request: Request<Body>) -> Response<Body> {
        let headers = request.headers();
        // 2026-07-28 has no sessions: rmcp answers GET and DELETE itself (405).
        if uses_discover_lifecycle(headers) {
            return normalize_error(into_axum(self.inner.stateless.handle(request).await)).await;
        }
        // A stateless client's GET/DELETE never reaches a session, whatever id it sends.
        if !headers.contains_key(SESSION_HEADER) || is_stateless_client(headers) {
            return sessionless_get_or_delete(&request, &self.inner.shutdown);
        }
        // rmcp's DELETE says 202 to any id, known or not; spec §3 wants 404 for an
        // unknown one, as for every other method.
        if self.inner.names_unknown_session(headers).await {
            return session_not_found();
        }
        // GET of a live session: the keep-alive stream of spec §3. rmcp's own
        // stream would carry server-sent messages, and neither side sends any.
        if request.method() == Method::GET {
            return keepalive_stream(self.inner.shutdown.clone());
        }
        // DELETE (end session), and any other method's refusal, are rmcp's.
        normalize_error(into_axum(self.inner.session.handle(request).await)).await
    }

    /// Adapter: `server/discover` from a client that does not send the 2026-07-28
    /// request `_meta` (spec §3: every caller, with or without a session, gets the
    /// result as JSON). rmcp's transport and handler refuse such a request (-32602,
    /// missing `_meta`), which is right for the 2026-07-28 lifecycle that they
    /// implement and which reaches rmcp. It would go away with an rmcp option to
    /// answer discover without request metadata.
    fn discover_without_request_meta(&self, glance: &Glance, headers: &HeaderMap) -> Response<Body> {
        let Some(id) = glance.id.clone() else {
            return jsonrpc::accepted();
        };
        let openai = glance.meta_names_openai_client() || mcp_discover::has_openai_user_agent(headers);
        jsonrpc::result_response(id, &self.inner.handler.discover_result(openai))
    }

    /// The one JSON-RPC answer of `response` (JSON or rmcp's SSE stream), with the
    /// catalog members rmcp's `Tool` cannot carry merged back into a `tools/list`
    /// result, sent as one SSE frame (`frame`) or as JSON (spec §3).
    ///
    /// Adapter: rmcp's `Tool` has no `execution` member (MCP 2025-11-25
    /// `ToolExecution`); with one, the merge would go. The framing would go with
    /// an rmcp option to answer a session's request as a single SSE event without
    /// its priming event.
    async fn one_answer(&self, response: Response<Body>, is_tools_list: bool, frame: bool) -> Response<Body> {
        let (parts, text) = match framing::answer_text(response).await {
            Ok((parts, Some(text))) => (parts, text),
            Ok((_, None)) => return internal_error("the stream ended without an answer".into()),
            Err(e) => return internal_error(format!("cannot read the answer: {e}")),
        };
        let text =
            if is_tools_list { complete_tools(&self.inner.handler.catalog(), &text).unwrap_or(text) } else { text };
        if frame { framing::sse_frame(parts, &text) } else { framing::json(parts, text) }
    }
}

/// What routing needs from a POST body, and nothing more: the method, the id
/// (for the discover adapter), the request `_meta` and an `initialize`'s client
/// name. rmcp reads and checks the message itself; a body this cannot read goes
/// to rmcp, which says what is wrong with it.
#[derive(Debug, Default, Deserialize)]
struct Glance {
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    params: Option<GlanceParams>,
}

#[derive(Debug, Default, Deserialize)]
struct GlanceParams {
    #[serde(default, rename = "_meta")]
    meta: Option<Map<String, Value>>,
    #[serde(default, rename = "clientInfo")]
    client_info: Option<GlanceClient>,
}

#[derive(Debug, Default, Deserialize)]
struct GlanceClient {
    #[serde(default)]
    name: Option<String>,
}

impl Glance {
    fn of(bytes: &[u8]) -> Self {
        serde_json::from_slice(bytes).unwrap_or_default()
    }

    fn meta(&self) -> Option<&Map<String, Value>> {
        self.params.as_ref()?.meta.as_ref()
    }

    fn has_request_protocol_version(&self) -> bool {
        self.meta().is_some_and(|m| m.contains_key(PROTOCOL_VERSION_META_KEY))
    }

    fn meta_names_openai_client(&self) -> bool {
        self.meta().is_some_and(mcp_discover::meta_names_openai_client)
    }

    /// An `initialize` whose `clientInfo.name` is one of OpenAI's (spec §3).
    fn openai_client(&self) -> bool {
        self.method.as_deref() == Some("initialize")
            && self
                .params
                .as_ref()
                .and_then(|p| p.client_info.as_ref())
                .and_then(|c| c.name.as_deref())
                .is_some_and(mcp_discover::is_openai_client_name)
    }
}

/// A `tools/list` answer with each tool's catalog members that rmcp's `Tool`
/// dropped merged back, so the listed tools hash to the advertised contract hash.
pub(crate) fn complete_tools(catalog: &[Value], data: &str) -> Option<String> {
    let mut message: Value = serde_json::from_str(data).ok()?;
    let tools = message.get_mut("result")?.get_mut("tools")?.as_array_mut()?;
    for tool in tools.iter_mut() {
        let Some(obj) = tool.as_object_mut() else { continue };
        let Some(entry) = obj
            .get("name")
            .and_then(Value::as_str)
            .and_then(|n| catalog.iter().find(|t| t["name"] == n))
            .and_then(Value::as_object)
        else {
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

fn internal_error(message: String) -> Response<Body> {
    jsonrpc::error_response(StatusCode::INTERNAL_SERVER_ERROR, jsonrpc::INTERNAL_ERROR, &message, None)
}

impl<H: McpSide> Inner<H> {
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
}

/// The versions this server negotiates that rmcp has no constant for (2024-10-07).
static VERSIONS_RMCP_DOES_NOT_KNOW: LazyLock<Vec<&'static str>> = LazyLock::new(|| {
    SUPPORTED_PROTOCOL_VERSIONS
        .iter()
        .copied()
        .filter(|v| !ProtocolVersion::KNOWN_VERSIONS.iter().any(|k| k.as_str() == *v))
        .collect()
});

/// Adapter: rmcp refuses (400) any request whose `MCP-Protocol-Version` names a
/// version outside its own list, even one this server negotiated. Such a client
/// gets the header dropped instead: rmcp then takes it for a pre-2025-06-18
/// client, which it is. It would go with a constant for 2024-10-07 in rmcp.
fn forget_versions_rmcp_does_not_know(headers: &mut HeaderMap) {
    let unknown = headers
        .get(&PROTOCOL_VERSION_HEADER)
        .is_some_and(|v| VERSIONS_RMCP_DOES_NOT_KNOW.iter().any(|u| v.as_bytes() == u.as_bytes()));
    if unknown {
        headers.remove(&PROTOCOL_VERSION_HEADER);
    }
}

/// True when the request names 2026-07-28 or later in `MCP-Protocol-Version`.
fn uses_discover_lifecycle(headers: &HeaderMap) -> bool {
    headers
        .get(&PROTOCOL_VERSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28.as_str())
}

/// What an unknown or ended session gets, the same words as rmcp's refusals
/// after [`normalize_error`].
fn session_not_found() -> Response<Body> {
    jsonrpc::error_response(StatusCode::NOT_FOUND, jsonrpc::UNAUTHORIZED, "Session not found", None)
}

/// True for clients that never hold a session (spec §3: ChatGPT's `openai-mcp`).
fn is_stateless_client(headers: &HeaderMap) -> bool {
    mcp_discover::has_openai_user_agent(headers)
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

fn accepts_json(headers: &HeaderMap) -> bool {
    headers.get_all(header::ACCEPT).iter().filter_map(|v| v.to_str().ok()).any(|v| {
        let v = v.to_ascii_lowercase();
        v.contains("application/json") || v.contains("*/*")
    })
}

fn into_axum(response: Response<http_body_util::combinators::BoxBody<Bytes, Infallible>>) -> Response<Body> {
    response.map(Body::new)
}

/// Adapter: rmcp answers a body its message model cannot read with 415 (the
/// status of a wrong `Content-Type`) and -32600 whatever the reason; JSON-RPC (and
/// spec §3) give a body that is not JSON -32700 and one that is not a JSON-RPC
/// message -32600, both with 400. Only this error path looks at the body again.
/// It would go with those codes in rmcp's `expect_json`.
async fn unreadable_message(response: Response<Body>, body: &[u8]) -> Response<Body> {
    let response = normalize_error(response).await;
    let (parts, content) = response.into_parts();
    let Ok(content) = content.collect().await.map(|c| c.to_bytes()) else {
        return internal_error("cannot read rmcp's refusal".into());
    };
    let error: Value = serde_json::from_slice(&content).unwrap_or_default();
    let message = error["error"]["message"].as_str().unwrap_or_default();
    let Some(reason) = message.strip_prefix("fail to deserialize request body") else {
        // A refused Content-Type: rmcp's own answer stands.
        return Response::from_parts(parts, Body::from(content));
    };
    let reason = reason.trim();
    match serde_json::from_slice::<serde::de::IgnoredAny>(body) {
        Err(e) => {
            jsonrpc::error_response(StatusCode::BAD_REQUEST, jsonrpc::PARSE_ERROR, &format!("Parse error: {e}"), None)
        }
        Ok(_) => jsonrpc::error_response(
            StatusCode::BAD_REQUEST,
            INVALID_REQUEST,
            &format!("Invalid Request: not a JSON-RPC 2.0 message this server reads ({reason})"),
            serde_json::from_slice::<Glance>(body).ok().and_then(|g| g.id),
        ),
    }
}

/// Adapter: rmcp answers some refusals (404 unknown session, 403, 406, 415, a
/// body that is not JSON, …) as plain text; clients of spec §3 read JSON-RPC, so
/// those get a JSON-RPC error body with the same status. JSON answers pass
/// through untouched. It would go with JSON-RPC bodies for those refusals in rmcp.
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
mod tests {
    use super::*;

    #[test]
    fn the_glance_reads_routing_facts_and_nothing_else_matters() {
        let g = Glance::of(br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"ChatGPT","version":"1"}}}"#);
        assert!(g.openai_client());
        let g = Glance::of(
            br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"clientInfo":{"name":"claude-code"}}}"#,
        );
        assert!(!g.openai_client());
        let g = Glance::of(br#"{"jsonrpc":"2.0","id":"d","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#);
        assert_eq!(g.method.as_deref(), Some("server/discover"));
        assert!(g.has_request_protocol_version());
        assert!(!Glance::of(br#"{"jsonrpc":"2.0","id":1,"method":"server/discover"}"#).has_request_protocol_version());
        // Bodies the glance cannot read are rmcp's to refuse.
        for body in [&b"{nope"[..], b"[]", b"7", br#"{"method":5}"#, br#"{"method":"x","params":[1]}"#] {
            assert!(Glance::of(body).method.is_none(), "{}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn tools_list_gets_the_catalog_members_rmcp_drops() {
        let catalog = vec![serde_json::json!({"name": "a", "execution": {"taskSupport": "forbidden"}, "title": "A"})];
        let text = complete_tools(
            &catalog,
            r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a","title":"kept"},{"name":"b"}]}}"#,
        )
        .expect("a tools/list answer");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["result"]["tools"][0]["execution"]["taskSupport"], "forbidden");
        assert_eq!(v["result"]["tools"][0]["title"], "kept");
        assert!(v["result"]["tools"][1].get("execution").is_none());
        assert_eq!(complete_tools(&catalog, r#"{"jsonrpc":"2.0","id":1,"result":{}}"#), None);
    }
}
