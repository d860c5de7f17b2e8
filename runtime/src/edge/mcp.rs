//! The public MCP endpoint (`/mcp`, `/mcp/`): stateless streamable HTTP behind the
//! OAuth bearer. Every request re-verifies the token against the store (see
//! [`super::token::verify_bearer`]), so a revoked connector fails on its next call.
//!
//! Forwarding to workstations goes through [`WorkstationRouter`]:
//! [`super::forward::LinkRouter`] in `edge serve`; [`NoWorkstations`] where no
//! link can exist (no runtime catalog, `workstation_offline` for any tool).

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use futures::future::BoxFuture;
use serde_json::{Map, Value, json};

use super::discovery::{SERVER_NAME, bearer_challenge};
use super::http::{json_response, read_body};
use super::token::{Principal, verify_bearer};
use super::EdgeState;
use crate::mcp_discover::{Discovery, METHOD as METHOD_DISCOVER, check_params as check_discover_params, is_openai_request};

pub const MAX_BODY_BYTES: usize = 1024 * 1024;
/// Epoch of the edge's public catalog (ours; it moves when the catalog shape does:
/// 2 added the public read-only and open-world hints).
pub const PUBLIC_CONTRACT_EPOCH: u32 = 2;
/// The versions `initialize` negotiates, newest first; another one gets the first.
pub const SUPPORTED_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05", "2024-10-07"];
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
const PAIRING_HINT: &str =
    "To add a computer, the user runs `herdr-mcp worker pair` on an enrolled one and `herdr-mcp worker connect <address>` on the new one.";
const REVOKE_HINT: &str = "To remove a computer, the user runs `herdr-mcp worker revoke <device_id> --confirm` on an enrolled one.";

/// The `herdr_devices` answer. An unreadable registry is an error result, never
/// an empty list: "no devices" would send the user to pair computers they have.
/// An automation token (`bound` to one device) sees only that device.
fn devices_result(router: &dyn WorkstationRouter, bound: Option<&str>) -> Value {
    match router.devices() {
        Ok(mut devices) => {
            if let Some(b) = bound {
                devices.retain(|d| d["device_id"] == b);
            }
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
    "herdr_methods", "herdr_inspect", "herdr_skill", "herdr_since", "herdr_fs_read", "herdr_fs_list", "herdr_fs_grep",
    "herdr_fs_image", "herdr_git", "herdr_exec_read",
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
    Router::new().route("/mcp", any(endpoint)).route("/mcp/", any(endpoint))
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
        return json_response(406, rpc_error(Value::Null, -32600, "GET /mcp is an event stream: send Accept: text/event-stream"));
    }
    let mut resp = (StatusCode::OK, format!(": connected\nretry: {SSE_PROBE_RETRY_MS}\n\n")).into_response();
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

fn rpc_error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

async fn endpoint(State(s): State<Arc<EdgeState>>, method: axum::http::Method, headers: HeaderMap, body: Body) -> Response {
    let principal = match bearer(&headers).map(|t| verify_bearer(&s.store, t)) {
        Some(Ok(Some(p))) => p,
        Some(Err(e)) => {
            tracing::error!("bearer check failed: {e}");
            return json_response(500, json!({"jsonrpc": "2.0", "error": {"code": -32603, "message": "internal error"}}));
        }
        _ => return unauthorized(&s),
    };
    if method == axum::http::Method::GET {
        return sse_probe(&headers);
    }
    if method != axum::http::Method::POST {
        let mut resp = json_response(405, rpc_error(Value::Null, -32600, "use POST for requests, or GET with Accept: text/event-stream"));
        resp.headers_mut().insert(header::ALLOW, HeaderValue::from_static("GET, POST"));
        return resp;
    }
    let body = match read_body(body, MAX_BODY_BYTES, "invalid_request").await {
        Ok(b) => b,
        Err(_) => return json_response(413, rpc_error(Value::Null, -32600, "request exceeds 1 MiB")),
    };
    let msg: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(_) => return json_response(400, rpc_error(Value::Null, -32700, "parse error")),
    };
    let Some(obj) = msg.as_object().filter(|o| o.get("jsonrpc") == Some(&json!("2.0"))) else {
        return json_response(400, rpc_error(Value::Null, -32600, "expected one JSON-RPC 2.0 object"));
    };
    let method = obj.get("method").and_then(Value::as_str).unwrap_or("");
    let Some(id) = obj.get("id").cloned() else {
        // Notifications (e.g. notifications/initialized) need no answer.
        return StatusCode::NO_CONTENT.into_response();
    };
    let params_ref = obj.get("params");
    let params = params_ref.cloned().unwrap_or(Value::Null);
    let answer = match method {
        "initialize" => {
            let asked = params.get("protocolVersion").and_then(Value::as_str).unwrap_or("");
            let version = SUPPORTED_VERSIONS.iter().find(|v| **v == asked).copied().unwrap_or(SUPPORTED_VERSIONS[0]);
            let tools = public_catalog(s.router.as_ref());
            json!({"jsonrpc": "2.0", "id": id, "result": {
                "protocolVersion": version,
                "capabilities": capabilities(),
                "serverInfo": {"name": SERVER_NAME, "version": env!("CARGO_PKG_VERSION")},
                "instructions": INSTRUCTIONS,
                "_meta": contract_meta(&tools),
            }})
        }
        // Metadata about the edge and its public catalog: answered here, never
        // forwarded to a workstation.
        METHOD_DISCOVER => match check_discover_params(params_ref) {
            Err(problem) => rpc_error(id, -32602, &format!("Invalid params for {METHOD_DISCOVER}: {problem}")),
            Ok(()) => {
                let openai = is_openai_request(&headers, params_ref);
                json!({"jsonrpc": "2.0", "id": id, "result": discovery(s.router.as_ref()).result(openai)})
            }
        },
        "ping" => json!({"jsonrpc": "2.0", "id": id, "result": {}}),
        "tools/list" => {
            let tools = public_catalog(s.router.as_ref());
            let meta = contract_meta(&tools);
            json!({"jsonrpc": "2.0", "id": id, "result": {"tools": tools, "_meta": meta}})
        }
        "tools/call" => {
            let name = params.get("name").and_then(Value::as_str).unwrap_or("");
            let args = params.get("arguments").cloned().unwrap_or(Value::Null);
            if !(args.is_object() || args.is_null()) {
                rpc_error(id, -32602, "arguments must be an object")
            } else if let Err(problem) = super::relay::check_arguments_shape(&args) {
                // Refused here: forwarded, it would make the link drop.
                rpc_error(id, -32602, &format!("Invalid params: {problem}"))
            } else if name == "herdr_devices" {
                if args.as_object().is_some_and(|a| !a.is_empty()) {
                    rpc_error(id, -32602, "herdr_devices takes no arguments")
                } else {
                    json!({"jsonrpc": "2.0", "id": id, "result": devices_result(s.router.as_ref(), principal.device_id.as_deref())})
                }
            } else if public_catalog(s.router.as_ref()).iter().any(|t| t["name"] == name) {
                let result = s.router.forward(&principal, name, args).await;
                json!({"jsonrpc": "2.0", "id": id, "result": result})
            } else {
                rpc_error(id, -32602, &format!("tool is not in public contract epoch {PUBLIC_CONTRACT_EPOCH}"))
            }
        }
        _ => rpc_error(id, -32601, "method not found"),
    };
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("").to_ascii_lowercase();
    let sse = accept.contains("text/event-stream");
    // ChatGPT's connector takes the handshake (`initialize`, `tools/list`) as SSE
    // whenever it offers SSE; other answers stay JSON unless JSON is not accepted,
    // and `server/discover` is JSON whatever the client accepts (spec §3).
    let json_only = method == METHOD_DISCOVER;
    if sse && !json_only && (!accept.contains("application/json") || matches!(method, "initialize" | "tools/list")) {
        let mut resp = (StatusCode::OK, format!("event: message\ndata: {answer}\n\n")).into_response();
        resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
        resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        return resp;
    }
    json_response(200, answer)
}
