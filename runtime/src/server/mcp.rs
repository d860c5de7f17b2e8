//! The MCP server handler: `tools/list` and `tools/call` over the shared tool
//! registry, plus the contract identity in `initialize` and `tools/list` `_meta`.

use std::borrow::Cow;
use std::sync::{Arc, LazyLock};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CustomRequest, CustomResult, DiscoverResult,
    ErrorCode, Implementation, InitializeResult, JsonObject, ListToolsResult, MetaObject, PaginatedRequestParams,
    ProtocolVersion, ServerCapabilities, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Map, Value, json};

use crate::activity::redact::{Redactor, root_of};
use crate::activity::{ActivityLog, Caller, Entry};
use crate::contract::{CONTRACT_EPOCH, contract_hash};
use crate::mcp_discover::Discovery;
use crate::tools::{ToolContext, ToolOutput, ToolRegistry};

/// Protocol versions this side serves, newest first: the order `server/discover`
/// lists them in (rmcp only looks for membership). 2026-07-28 is served without
/// `initialize` (stateless, `server/discover`); `initialize` answers with the
/// requested version when it is listed and has a handshake, else with
/// [`HANDSHAKE_VERSION`]. The edge serves the same list.
pub const SUPPORTED_PROTOCOL_VERSIONS: &[&str] =
    &["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05", "2024-10-07"];

/// What `initialize` answers with when the requested version is not one it negotiates.
pub const HANDSHAKE_VERSION: ProtocolVersion = ProtocolVersion::V_2025_11_25;

/// [`SUPPORTED_PROTOCOL_VERSIONS`] in rmcp's type, for its negotiation. rmcp has no
/// constant for 2024-10-07 and keeps the constructor private, so each version is
/// built the way rmcp reads one off the wire; a name it could not read would be
/// missing here, which `negotiable_versions_are_exactly_the_supported_ones` catches.
pub static NEGOTIABLE_VERSIONS: LazyLock<Vec<ProtocolVersion>> = LazyLock::new(|| {
    SUPPORTED_PROTOCOL_VERSIONS.iter().filter_map(|v| serde_json::from_value(Value::from(*v)).ok()).collect()
});

const INSTRUCTIONS: &str = "This server operates the developer's workstation: files, Git, commands and \
Herdr workspaces inside the managed roots. Begin with herdr_inspect to see the roots and their state, \
read herdr_skill once for the working rules, then prefer the dedicated file and Git tools. Every result \
is JSON with an `ok` flag; when a change may or may not have happened, check before repeating it.";

/// Everything built once at startup and shared by every request and session.
pub struct ServerState {
    pub registry: ToolRegistry,
    pub ctx: Arc<ToolContext>,
    /// The catalog exactly as the contract hash covers it.
    pub catalog: Vec<Value>,
    /// The same catalog in rmcp's typed form (which has no `execution` field; the
    /// HTTP layer adds it back, see `endpoint::complete_tools`).
    pub tools: Vec<Tool>,
    pub contract_hash: String,
    meta: MetaObject,
    server_config: InitializeResult,
    /// `server/discover` results, built once: for other clients and for OpenAI's.
    discover_results: [Value; 2],
    /// Where every served `tools/call` is recorded (with a state database only).
    pub activity: Option<Arc<ActivityLog>>,
    redactor: Redactor,
}

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("the tool catalog is invalid: {0}")]
    Contract(#[from] crate::contract::ContractError),
    #[error("tool {name} cannot be described to MCP clients: {source}")]
    Tool { name: String, source: serde_json::Error },
    #[error("the server capabilities cannot be written as JSON: {0}")]
    Capabilities(serde_json::Error),
}

impl ServerState {
    pub fn new(registry: ToolRegistry, ctx: Arc<ToolContext>) -> Result<Self, StateError> {
        let catalog = registry.catalog();
        let contract_hash = contract_hash(&catalog)?;
        let tools = catalog
            .iter()
            .map(|entry| {
                serde_json::from_value::<Tool>(entry.clone()).map_err(|source| StateError::Tool {
                    name: entry.get("name").and_then(Value::as_str).unwrap_or("?").to_string(),
                    source,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let meta = contract_meta(&contract_hash);
        let mut server_config =
            InitializeResult::new(ServerCapabilities::builder().enable_tools().enable_tool_list_changed().build())
                .with_server_info(Implementation::new(ctx.info.name, ctx.info.version))
                .with_instructions(INSTRUCTIONS)
                .with_protocol_version(HANDSHAKE_VERSION);
        server_config.meta = Some(meta.clone());
        let discovery = discovery_of(&server_config)?;
        let discover_results = [discovery.result(false), discovery.result(true)];
        let activity = ctx.services.state.clone().filter(|_| crate::activity::enabled_by_env()).map(ActivityLog::start);
        Ok(ServerState {
            registry,
            ctx,
            catalog,
            tools,
            contract_hash,
            meta,
            server_config,
            discover_results,
            activity,
            redactor: Redactor::from_env(),
        })
    }

    /// The `server/discover` result; `openai` adds the probe version.
    pub fn discover_result(&self, openai: bool) -> &Value {
        &self.discover_results[usize::from(openai)]
    }
}

/// What `server/discover` reports: the very values `initialize` answers with, and
/// the versions rmcp negotiates for this handler.
fn discovery_of(config: &InitializeResult) -> Result<Discovery, StateError> {
    Ok(Discovery {
        supported_versions: SUPPORTED_PROTOCOL_VERSIONS.iter().map(|v| v.to_string()).collect(),
        capabilities: serde_json::to_value(&config.capabilities).map_err(StateError::Capabilities)?,
        instructions: config.instructions.clone().unwrap_or_default(),
        server_name: config.server_info.name.clone(),
        server_version: config.server_info.version.clone(),
        meta: config.meta.clone().map(|m| m.0).unwrap_or_default(),
    })
}

fn contract_meta(hash: &str) -> MetaObject {
    let mut map = Map::new();
    map.insert("herdr_contract_epoch".into(), json!(CONTRACT_EPOCH));
    map.insert("herdr_contract_hash".into(), json!(hash));
    MetaObject(map)
}

/// The rmcp handler; one clone per session or stateless request, all sharing state.
#[derive(Clone)]
pub struct McpHandler {
    state: Arc<ServerState>,
}

impl McpHandler {
    pub fn new(state: Arc<ServerState>) -> Self {
        McpHandler { state }
    }
}

impl ServerHandler for McpHandler {
    fn get_info(&self) -> InitializeResult {
        self.state.server_config.clone()
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(NEGOTIABLE_VERSIONS.as_slice())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let mut result = ListToolsResult::with_all_items(self.state.tools.clone());
        result.meta = Some(self.state.meta.clone());
        Ok(result)
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.state.tools.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let caller = Caller::of(context.extensions.get::<http::request::Parts>());
        let started = (crate::state::now_ms(), std::time::Instant::now());
        if !self.state.tools.iter().any(|t| t.name == request.name) {
            record(&self.state, caller, started, &request.name, request.arguments.as_ref(), None);
            return Err(unknown_tool(&request.name));
        }
        let Some(log) = &self.state.activity else {
            return Ok(CallToolResponse::Complete(call_tool(&self.state, &request.name, request.arguments).await));
        };
        // The summary is built first: the arguments move into the call.
        let args = self.state.redactor.summary(request.arguments.as_ref());
        let roots = self.state.ctx.policy.managed_roots();
        let arg_root = root_of(&Value::Null, request.arguments.as_ref(), &roots);
        let result = call_tool(&self.state, &request.name, request.arguments).await;
        let payload = result.structured_content.as_ref().unwrap_or(&Value::Null);
        let root = payload.get("root").and_then(Value::as_str).filter(|r| !crate::policy::secret::is_secret(r));
        let code = (payload.get("ok") != Some(&Value::Bool(true)) || result.is_error == Some(true)).then(|| {
            payload.get("code").or_else(|| payload.get("reason")).and_then(Value::as_str).unwrap_or("error").to_string()
        });
        log.record(Entry {
            at_ms: started.0,
            caller: caller.kind.to_string(),
            caller_detail: caller.detail,
            tool: request.name.to_string(),
            root: root.map(str::to_string).or(arg_root),
            args,
            outcome: if code.is_some() { "error" } else { "ok" }.to_string(),
            code,
            duration_ms: started.1.elapsed().as_millis() as i64,
        });
        Ok(CallToolResponse::Complete(result))
    }

    /// The same result as the discover adapter of the endpoint gives (`mcp_discover`).
    async fn discover(&self, context: RequestContext<RoleServer>) -> Result<DiscoverResult, McpError> {
        let openai = crate::mcp_discover::meta_names_openai_client(&context.meta.0);
        discover_result_of(self.state.discover_result(openai))
    }

    /// rmcp's default answers with the bare method name as the message; the spec's
    /// text says what happened, the method says to what.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, McpError> {
        Err(custom_request_error(&request.method))
    }
}

/// The answer to a request rmcp could not type: a method served here whose params
/// do not fit rmcp's model lands in rmcp's catch-all (`on_custom_request`) and is
/// told so (-32602); any other method is not found (-32601).
pub fn custom_request_error(method: &str) -> McpError {
    const SERVED: &[&str] = &["initialize", "ping", "tools/list", "tools/call", "server/discover"];
    if SERVED.contains(&method) {
        let hint = match method {
            "tools/call" => "params.name must be a string and params.arguments an object",
            "initialize" => "params needs protocolVersion, capabilities and clientInfo",
            _ => "params do not match the method",
        };
        return McpError::invalid_params(format!("Invalid params for {method}: {hint}"), None);
    }
    McpError::new(ErrorCode::METHOD_NOT_FOUND, super::jsonrpc::method_not_found_message(method), None)
}

/// A tool that is not in the catalog: a protocol error (-32602) in both wire
/// revisions (MCP 2025-11-25 and 2026-07-28, "Tools: error handling"), alike on
/// the runtime and the edge.
pub fn unknown_tool(name: &str) -> McpError {
    McpError::invalid_params(format!("Unknown tool: {name}"), None)
}

/// A `server/discover` result built by `mcp_discover`, in rmcp's type.
pub fn discover_result_of(result: &Value) -> Result<DiscoverResult, McpError> {
    serde_json::from_value(result.clone())
        .map_err(|e| McpError::internal_error(format!("the discover result does not fit rmcp's model: {e}"), None))
}

impl super::endpoint::McpSide for McpHandler {
    fn catalog(&self) -> Vec<Value> {
        self.state.catalog.clone()
    }

    fn discover_result(&self, openai: bool) -> Value {
        self.state.discover_result(openai).clone()
    }
}

/// Records a call that was refused before it ran (an unknown tool).
fn record(
    state: &ServerState,
    caller: Caller,
    started: (i64, std::time::Instant),
    tool: &str,
    arguments: Option<&JsonObject>,
    root: Option<String>,
) {
    let Some(log) = &state.activity else { return };
    log.record(Entry {
        at_ms: started.0,
        caller: caller.kind.to_string(),
        caller_detail: caller.detail,
        tool: tool.chars().take(64).collect(),
        root,
        args: state.redactor.summary(arguments),
        outcome: "error".into(),
        code: Some("unknown_tool".into()),
        duration_ms: started.1.elapsed().as_millis() as i64,
    });
}

/// Runs one tool call: the answer to `tools/call`, in a session or not.
pub async fn call_tool(state: &ServerState, name: &str, arguments: Option<JsonObject>) -> CallToolResult {
    let output = state.registry.call(&state.ctx, name, arguments.map(Value::Object)).await;
    to_call_result(output)
}

/// The payload as compact JSON, in a buffer sized up front: growing it while a
/// file's content is written would copy that content several times over.
fn payload_text(payload: &Value) -> String {
    let mut text = Vec::with_capacity(approx_text_len(payload));
    match serde_json::to_writer(&mut text, payload) {
        // SAFETY: serde_json writes UTF-8 only (its own `to_string` relies on that too).
        Ok(()) => unsafe { String::from_utf8_unchecked(text) },
        // Writing a `Value` to memory does not fail (its keys are strings, nothing
        // does I/O); should it ever, `Display` writes the same text.
        Err(_) => payload.to_string(),
    }
}

/// About the length of `value`'s compact JSON: its strings' bytes plus a few bytes
/// of punctuation per element (escapes and long numbers may add a little).
fn approx_text_len(value: &Value) -> usize {
    match value {
        Value::String(s) => s.len() + 2,
        Value::Array(items) => 2 + items.iter().map(|v| approx_text_len(v) + 1).sum::<usize>(),
        Value::Object(map) => 2 + map.iter().map(|(k, v)| k.len() + 4 + approx_text_len(v)).sum::<usize>(),
        _ => 8,
    }
}

/// One text block with the payload JSON, the same object as `structuredContent`,
/// an image block when the tool produced one; `isError` only for protocol failures.
pub fn to_call_result(output: ToolOutput) -> CallToolResult {
    let text = payload_text(&output.payload);
    let mut content = vec![ContentBlock::text(text)];
    if let Some(image) = output.image {
        content.push(ContentBlock::image(image.data_base64, image.mime_type));
    }
    let mut result = CallToolResult::success(content);
    result.structured_content = Some(output.payload);
    result.is_error = output.is_error.then_some(true);
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::ImageBlock;

    #[test]
    fn negotiable_versions_are_exactly_the_supported_ones() {
        let negotiable: Vec<&str> = NEGOTIABLE_VERSIONS.iter().map(ProtocolVersion::as_str).collect();
        assert_eq!(negotiable, SUPPORTED_PROTOCOL_VERSIONS);
        // The newest is served without initialize; the handshake's fallback is the newest with one.
        assert_eq!(SUPPORTED_PROTOCOL_VERSIONS[0], ProtocolVersion::V_2026_07_28.as_str());
        assert!(!NEGOTIABLE_VERSIONS[0].has_initialize());
        assert_eq!(SUPPORTED_PROTOCOL_VERSIONS[1], HANDSHAKE_VERSION.as_str());
        assert!(NEGOTIABLE_VERSIONS[1..].iter().all(ProtocolVersion::has_initialize));
    }

    #[test]
    fn results_carry_text_structured_content_and_error_flag() {
        let ok = to_call_result(ToolOutput::payload(json!({"ok": true, "n": 1})));
        let v = serde_json::to_value(&ok).unwrap();
        assert_eq!(v["content"][0]["type"], "text");
        assert_eq!(
            serde_json::from_str::<Value>(v["content"][0]["text"].as_str().unwrap()).unwrap(),
            json!({"ok": true, "n": 1})
        );
        assert_eq!(v["structuredContent"], json!({"ok": true, "n": 1}));
        assert!(v.get("isError").is_none(), "{v}");

        let mut failed = ToolOutput::protocol_error("unknown_tool", "no such tool");
        failed.image = Some(ImageBlock { data_base64: "AAAA".into(), mime_type: "image/png".into() });
        let v = serde_json::to_value(to_call_result(failed)).unwrap();
        assert_eq!(v["isError"], true);
        assert_eq!(v["content"][1]["type"], "image");
        assert_eq!(v["content"][1]["mimeType"], "image/png");
    }
}
