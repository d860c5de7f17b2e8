//! The public MCP endpoint (`/mcp`, `/mcp/`) behind the OAuth bearer: the same
//! rmcp-based layer as the runtime's (`crate::server::endpoint`), with the edge's
//! handler ([`EdgeHandler`]: `herdr_devices` plus the forwarded runtime tools), its
//! bearer check in front and its Origin allow-list (`EdgeConfig::mcp_allowed_origins`).
//! rmcp checks `MCP-Protocol-Version` (400 for an unknown one) and `Content-Type`
//! (415). Every request re-verifies the token against the store (see
//! [`super::token::verify_bearer`]), so a revoked connector fails on its next call.
//!
//! Forwarding to workstations goes through [`WorkstationRouter`]:
//! [`super::forward::LinkRouter`] in `edge serve`; [`NoWorkstations`] where no
//! link can exist (no runtime catalog, `workstation_offline` for any tool).

use std::sync::{Arc, OnceLock};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use futures::future::BoxFuture;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, DiscoverResult, Implementation, InitializeResult,
    ListToolsResult, MetaObject, PaginatedRequestParams, ProtocolVersion, ServerCapabilities, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::EdgeState;
use super::discovery::{SERVER_NAME, bearer_challenge};
use super::http::json_response;
use super::token::{Principal, verify_bearer};
use crate::mcp_discover::Discovery;
use crate::server::endpoint::{EndpointOptions, McpEndpoint, McpSide};
use crate::server::mcp::{
    HANDSHAKE_VERSION, NEGOTIABLE_VERSIONS, SUPPORTED_PROTOCOL_VERSIONS, discover_result_of, unknown_tool,
};

pub const MAX_BODY_BYTES: usize = 1024 * 1024;
/// Epoch of the edge's public catalog (ours; it moves when the catalog shape does:
/// 2 added the public read-only and open-world hints).
pub const PUBLIC_CONTRACT_EPOCH: u32 = 2;
/// The versions the edge serves: the runtime's list (one implementation, rmcp's).
pub const SUPPORTED_VERSIONS: &[&str] = SUPPORTED_PROTOCOL_VERSIONS;
/// Browser origins allowed on `/mcp` unless configured otherwise (`edge serve
/// --mcp-allowed-origin`): ChatGPT's, since whether its connector sends an
/// `Origin` is not known; requests without `Origin` pass.
pub const DEFAULT_ALLOWED_ORIGINS: &[&str] = &["https://chatgpt.com", "https://chat.openai.com"];
const INSTRUCTIONS: &str =
    "Tools here act on the user's linked workstations. Call herdr_devices first to see which are online.";

/// Told alike by `initialize` and `server/discover`.
fn capabilities() -> Value {
    json!({"tools": {"listChanged": false}})
}

/// The seam between the public endpoint and the workstation links.
pub trait WorkstationRouter: Send + Sync {
    /// The runtime tool catalog the links serve, or `None` when none can.
    fn runtime_catalog(&self) -> Option<Vec<Value>>;
    /// Rows of `herdr_devices` (`device_id`, `name`, `connection`, …), or why
    /// the device registry could not be read.
    fn devices(&self) -> Result<Vec<Value>, String>;
    /// The `herdr_devices` row of one device (what an automation token bound to
    /// it sees); a router with an index reads that device only.
    fn device_row(&self, device_id: &str) -> Result<Option<Value>, String> {
        Ok(self.devices()?.into_iter().find(|d| d["device_id"] == device_id))
    }
    /// Routes one runtime tool call (with its optional `device` selector) and
    /// returns a `CallToolResult` object.
    fn forward<'a>(&'a self, principal: &'a Principal, name: &'a str, arguments: Value) -> BoxFuture<'a, Value>;
}

/// The router used until the link exists: nothing is reachable.
pub struct NoWorkstations;

impl WorkstationRouter for NoWorkstations {
    fn runtime_catalog(&self) -> Option<Vec<Value>> {
        None
    }
    fn devices(&self) -> Result<Vec<Value>, String> {
        Ok(Vec::new())
    }
    fn forward<'a>(&'a self, _: &'a Principal, _: &'a str, _: Value) -> BoxFuture<'a, Value> {
        Box::pin(async {
            tool_error_result(json!({
                "ok": false,
                "code": "workstation_offline",
                "retryable": true,
                "delivery_state": "not_delivered",
                "retry_after_ms": 5000,
                "message": "no workstation is linked to this edge",
            }))
        })
    }
}

/// Told to the model with every device list: pairing and revocation are for the
/// user at a terminal; a connector has no tool for either.
const PAIRING_HINT: &str = "To add a computer, the user runs `herdr-mcp worker pair` on an enrolled one and `herdr-mcp worker connect <address>` on the new one.";
const REVOKE_HINT: &str =
    "To remove a computer, the user runs `herdr-mcp worker revoke <device_id> --confirm` on an enrolled one.";

/// The `herdr_devices` answer. An unreadable registry is an error result, never
/// an empty list: "no devices" would send the user to pair computers they have.
/// An automation token (`bound` to one device) sees only that device.
fn devices_result(router: &dyn WorkstationRouter, bound: Option<&str>) -> Value {
    let rows = match bound {
        Some(b) => router.device_row(b).map(|row| row.into_iter().collect()),
        None => router.devices(),
    };
    match rows {
        Ok(devices) => {
            tool_ok_result(json!({
                "ok": true,
                "devices": devices,
                "pairing_hint": PAIRING_HINT,
                "revoke_hint": REVOKE_HINT,
            }))
        }
        Err(e) => {
            tracing::error!("device registry unreadable: {e}");
            tool_error_result(json!({
                "ok": false,
                "code": "device_registry_unavailable",
                "retryable": true,
                "message": "the edge cannot read its device registry right now; try again shortly",
            }))
        }
    }
}

pub fn herdr_devices_tool() -> Value {
    json!({
        "name": "herdr_devices",
        "title": "List linked devices",
        "description": "Lists the workstations linked to this edge with their connection state, so you can pick a `device` for other tools.",
        "inputSchema": {"type": "object", "properties": {}, "additionalProperties": false},
        "annotations": {"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false},
        "execution": {"taskSupport": "forbidden"},
    })
}

/// Forwarded tools that change nothing (spec edge.md §9; with `herdr_devices`, 11 of
/// the 19). The runtime's frozen catalog marks only `herdr_skill`; the public one
/// marks them all, since a connector client asks before every call not marked.
const READ_ONLY: &[&str] = &[
    "herdr_methods",
    "herdr_inspect",
    "herdr_skill",
    "herdr_since",
    "herdr_fs_read",
    "herdr_fs_list",
    "herdr_fs_grep",
    "herdr_fs_image",
    "herdr_git",
    "herdr_exec_read",
];
/// Forwarded tools whose effects reach beyond the workstation's files (a browser,
/// a shell, an agent).
const OPEN_WORLD: &[&str] = &["herdr_skill", "herdr_call", "herdr_exec_start", "herdr_exec", "herdr_prompt"];

fn public_annotations(tool: &mut Value) {
    let name = tool["name"].as_str().unwrap_or_default().to_string();
    let Some(obj) = tool.as_object_mut() else { return };
    let annotations = obj.entry("annotations").or_insert_with(|| json!({}));
    if let Some(a) = annotations.as_object_mut() {
        a.insert("readOnlyHint".into(), json!(READ_ONLY.contains(&name.as_str())));
        a.insert("openWorldHint".into(), json!(OPEN_WORLD.contains(&name.as_str())));
    }
}

/// The public catalog: `herdr_devices` plus the runtime's tools, each with an
/// optional `device` selector and the public read-only/open-world hints.
pub fn public_catalog(router: &dyn WorkstationRouter) -> Vec<Value> {
    let mut tools = vec![herdr_devices_tool()];
    for mut tool in router.runtime_catalog().unwrap_or_default() {
        public_annotations(&mut tool);
        if let Some(props) = tool.pointer_mut("/inputSchema/properties").and_then(Value::as_object_mut) {
            props.insert(
                "device".into(),
                json!({"type": "string", "description": "Which device runs this (device_id or unique name); optional when only one is linked."}),
            );
        }
        tools.push(tool);
    }
    tools
}

/// What `server/discover` reports: the values `initialize` answers with, the
/// public catalog's identity flat in `_meta` (as the runtime puts its own) and
/// also under `herdr`, as `initialize` and `tools/list` carry it here.
fn discovery(router: &dyn WorkstationRouter) -> Discovery {
    let herdr = contract_meta(&public_catalog(router))["herdr"].take();
    let mut meta = Map::new();
    meta.insert("herdr_contract_epoch".into(), herdr["contract_epoch"].clone());
    meta.insert("herdr_contract_hash".into(), herdr["contract_hash"].clone());
    meta.insert("herdr".into(), herdr);
    Discovery {
        supported_versions: SUPPORTED_VERSIONS.iter().map(|v| v.to_string()).collect(),
        capabilities: capabilities(),
        instructions: INSTRUCTIONS.to_string(),
        server_name: SERVER_NAME.to_string(),
        server_version: env!("CARGO_PKG_VERSION").to_string(),
        meta,
    }
}

pub(crate) fn contract_meta(tools: &[Value]) -> Value {
    let hash = crate::contract::contract_hash(tools).unwrap_or_default();
    json!({"herdr": {"contract_epoch": PUBLIC_CONTRACT_EPOCH, "contract_hash": hash, "tool_count": tools.len()}})
}

fn tool_error_result(payload: Value) -> Value {
    json!({"content": [{"type": "text", "text": payload.to_string()}], "structuredContent": payload, "isError": true})
}

fn tool_ok_result(payload: Value) -> Value {
    json!({"content": [{"type": "text", "text": payload.to_string()}], "structuredContent": payload, "isError": false})
}

pub fn routes() -> Router<Arc<EdgeState>> {
    // One endpoint (and so one session table) per router, that is per edge,
    // built on its first request, when the state is at hand.
    let endpoint: Arc<OnceLock<McpEndpoint<EdgeHandler>>> = Arc::default();
    let handler = move |State(s): State<Arc<EdgeState>>, request: Request| {
        let endpoint = Arc::clone(&endpoint);
        async move { serve_mcp(&s, &endpoint, request).await }
    };
    Router::new().route("/mcp", any(handler.clone())).route("/mcp/", any(handler))
}

pub fn unauthorized(s: &EdgeState) -> Response {
    let mut resp = json_response(401, json!({"jsonrpc": "2.0", "error": {"code": -32000, "message": "unauthorized"}}));
    if let Ok(v) = HeaderValue::from_str(&bearer_challenge(&s.config)) {
        resp.headers_mut().insert(header::WWW_AUTHENTICATE, v);
    }
    resp
}

pub(super) fn bearer(headers: &HeaderMap) -> Option<&str> {
    let v = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = v.split_once(' ')?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty()).then(|| token.trim())
}

/// How long a client should wait before it opens the GET stream again. The edge
/// never pushes anything, so there is no reason to come back soon.
pub const SSE_PROBE_RETRY_MS: u64 = 300_000;

/// `GET /mcp` (spec §10): a sessionless SSE probe. The edge is stateless and sends
/// nothing unprompted, so the stream says it is connected, asks the client to
/// wait [`SSE_PROBE_RETRY_MS`] before reopening it, and ends: no connection is
/// held open (nor keeps a shutdown waiting) for messages that never come.
fn sse_probe(headers: &HeaderMap) -> Response {
    let accepts_sse = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.to_ascii_lowercase().contains("text/event-stream"));
    if !accepts_sse {
        return json_response(
            406,
            rpc_error(Value::Null, -32600, "GET /mcp is an event stream: send Accept: text/event-stream"),
        );
    }
    let mut resp = (StatusCode::OK, format!(": connected\nretry: {SSE_PROBE_RETRY_MS}\n\n")).into_response();
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

fn rpc_error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// The edge's policy in front of the shared layer: the bearer, then the GET probe;
/// everything else is the layer's (rmcp's), with the principal in the request's
/// extensions for [`EdgeHandler::call_tool`].
async fn serve_mcp(
    s: &Arc<EdgeState>,
    endpoint: &OnceLock<McpEndpoint<EdgeHandler>>,
    mut request: Request,
) -> Response {
    let principal = match bearer(request.headers()).map(|t| verify_bearer(&s.store, t)) {
        Some(Ok(Some(p))) => p,
        Some(Err(e)) => {
            tracing::error!("bearer check failed: {e}");
            return json_response(
                500,
                json!({"jsonrpc": "2.0", "error": {"code": -32603, "message": "internal error"}}),
            );
        }
        _ => return unauthorized(s),
    };
    // The edge never sends anything unprompted: a GET, with or without a session,
    // gets the probe that ends at once (no stream is held open for nothing). A
    // 2026-07-28 GET is rmcp's (405: that revision has no GET stream).
    let discover_lifecycle = request
        .headers()
        .get("mcp-protocol-version")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28.as_str());
    if request.method() == axum::http::Method::GET && !discover_lifecycle {
        return sse_probe(request.headers());
    }
    request.extensions_mut().insert(principal);
    let endpoint = endpoint.get_or_init(|| {
        let options = EndpointOptions {
            lenient_content_type: false,
            allowed_origins: Some(s.config.mcp_allowed_origins.clone()),
            boot_id: format!("edge|{}", s.config.issuer),
        };
        // Sessions and the edge's open requests end with the process: nothing here
        // holds a stream open (the GET probe ends at once).
        McpEndpoint::with_handler(EdgeHandler { router: Arc::clone(&s.router) }, options, CancellationToken::new())
    });
    endpoint.handle(request).await.into_response()
}

/// The edge's rmcp handler: `herdr_devices` answered here, every other public
/// tool forwarded to a workstation through the [`WorkstationRouter`].
#[derive(Clone)]
pub struct EdgeHandler {
    router: Arc<dyn WorkstationRouter>,
}

impl EdgeHandler {
    fn tools(&self) -> Vec<Tool> {
        public_catalog(self.router.as_ref())
            .into_iter()
            .filter_map(|entry| match serde_json::from_value::<Tool>(entry) {
                Ok(tool) => Some(tool),
                Err(e) => {
                    tracing::error!("a public tool cannot be described to MCP clients: {e}");
                    None
                }
            })
            .collect()
    }
}

fn meta_object(value: Value) -> MetaObject {
    MetaObject(match value {
        Value::Object(map) => map,
        _ => Map::new(),
    })
}

impl ServerHandler for EdgeHandler {
    fn get_info(&self) -> InitializeResult {
        let capabilities: ServerCapabilities = serde_json::from_value(capabilities()).unwrap_or_default();
        let mut info = InitializeResult::new(capabilities)
            .with_server_info(Implementation::new(SERVER_NAME, env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
            .with_protocol_version(HANDSHAKE_VERSION);
        info.meta = Some(meta_object(contract_meta(&public_catalog(self.router.as_ref()))));
        info
    }

    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        std::borrow::Cow::Borrowed(NEGOTIABLE_VERSIONS.as_slice())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let catalog = public_catalog(self.router.as_ref());
        let mut result = ListToolsResult::with_all_items(self.tools());
        result.meta = Some(meta_object(contract_meta(&catalog)));
        Ok(result)
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools().into_iter().find(|t| t.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let principal = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Principal>())
            .cloned()
            .ok_or_else(|| McpError::internal_error("the request carries no verified principal", None))?;
        let name = request.name.as_ref();
        let args = request.arguments.map(Value::Object).unwrap_or(Value::Null);
        if let Err(problem) = super::relay::check_arguments_shape(&args) {
            // Refused here: forwarded, it would make the link drop.
            return Err(McpError::invalid_params(format!("Invalid params: {problem}"), None));
        }
        let result = if name == "herdr_devices" {
            if args.as_object().is_some_and(|a| !a.is_empty()) {
                return Err(McpError::invalid_params("herdr_devices takes no arguments", None));
            }
            devices_result(self.router.as_ref(), principal.device_id.as_deref())
        } else if public_catalog(self.router.as_ref()).iter().any(|t| t["name"] == name) {
            self.router.forward(&principal, name, args).await
        } else {
            return Err(unknown_tool(name));
        };
        let result: CallToolResult = serde_json::from_value(result).map_err(|e| {
            McpError::internal_error(format!("the workstation's answer is not a tool result: {e}"), None)
        })?;
        Ok(CallToolResponse::Complete(result))
    }

    async fn discover(&self, context: RequestContext<RoleServer>) -> Result<DiscoverResult, McpError> {
        let openai = crate::mcp_discover::meta_names_openai_client(&context.meta.0);
        discover_result_of(&discovery(self.router.as_ref()).result(openai))
    }

    async fn on_custom_request(
        &self,
        request: rmcp::model::CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CustomResult, McpError> {
        Err(crate::server::mcp::custom_request_error(&request.method))
    }
}

impl McpSide for EdgeHandler {
    fn catalog(&self) -> Vec<Value> {
        public_catalog(self.router.as_ref())
    }

    fn discover_result(&self, openai: bool) -> Value {
        discovery(self.router.as_ref()).result(openai)
    }
}
