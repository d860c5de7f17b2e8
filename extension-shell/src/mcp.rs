//! Stateless MCP over the native port: the JSON-RPC request the runtime expects and the
//! reading of its answer (plain JSON or SSE; the last parseable event wins, spec §1.8).

use serde_json::{Value, json};

pub const MCP_PATH: &str = "/mcp";
pub const PROTOCOL_VERSION: &str = "2025-11-25";
pub const CLIENT_NAME: &str = "browser-json-bridge/1";
/// Transport timeout of every bridge MCP request, `tools/list` and `tools/call` alike (spec §1.8
/// `nativeTimeoutMs`). It outlasts the runtime's longest call (exec and prompt waits stop at
/// 60 s) and lies inside the host's 1–120 s clamp, so the host applies it unchanged.
pub const TIMEOUT_MS: u64 = 90_000;

/// Headers every MCP request carries.
pub fn headers() -> Value {
    json!({
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": PROTOCOL_VERSION,
        "x-herdr-client": CLIENT_NAME,
    })
}

pub fn request_body(id: &str, method: &str, params: Value) -> String {
    json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }).to_string()
}

/// The native host message (spec §6.3 `request`) carrying one MCP request; the port adds its
/// own frame `id`.
pub fn host_request(id: &str, method: &str, params: Value) -> Value {
    json!({
        "type": "request", "method": "POST", "path": MCP_PATH, "headers": headers(),
        "body": request_body(id, method, params), "timeout_ms": TIMEOUT_MS,
    })
}

/// A failed MCP exchange with a stable code (spec §1.8 names) and a detail for people.
#[derive(Debug, Clone, PartialEq)]
pub struct McpError {
    pub code: String,
    pub detail: String,
}

impl McpError {
    fn new(code: impl Into<String>, detail: impl Into<String>) -> Self {
        McpError { code: code.into(), detail: detail.into() }
    }
}

/// The `result` of a JSON-RPC answer delivered as HTTP `status` + `body`.
pub fn read_result(status: u16, body: &str) -> Result<Value, McpError> {
    if !(200..300).contains(&status) {
        let detail: String = body.chars().take(300).collect();
        return Err(McpError::new(format!("mcp-http-{status}"), detail));
    }
    let payload = last_payload(body).ok_or_else(|| McpError::new("mcp-malformed-response", "the answer holds no JSON-RPC message"))?;
    if let Some(err) = payload.get("error") {
        let code = err.get("code").and_then(Value::as_i64).unwrap_or(0);
        let message = err.get("message").and_then(Value::as_str).unwrap_or("").to_string();
        return Err(McpError::new(format!("mcp-rpc-{code}"), message));
    }
    payload.get("result").cloned().ok_or_else(|| McpError::new("mcp-malformed-response", "the answer has neither result nor error"))
}

fn last_payload(body: &str) -> Option<Value> {
    let normalized = body.replace("\r\n", "\n");
    let mut last = None;
    let mut saw_event = false;
    for block in normalized.split("\n\n") {
        let data: Vec<&str> = block.lines().filter_map(|l| l.strip_prefix("data:")).map(|d| d.strip_prefix(' ').unwrap_or(d)).collect();
        if data.is_empty() {
            continue;
        }
        saw_event = true;
        let joined = data.join("\n");
        if joined.trim() == "[DONE]" {
            continue;
        }
        if let Ok(v) = serde_json::from_str::<Value>(&joined) {
            last = Some(v);
        }
    }
    if saw_event { last } else { serde_json::from_str(body).ok() }
}

/// `result.tools` of a `tools/list` answer.
pub fn tools_of(result: &Value) -> Result<Vec<Value>, McpError> {
    result
        .get("tools")
        .and_then(Value::as_array)
        .cloned()
        .ok_or_else(|| McpError::new("mcp-malformed-response", "tools/list answer has no tools array"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_and_call_requests_ask_the_host_for_90_s() {
        for (method, params) in [("tools/list", json!({})), ("tools/call", json!({ "name": "herdr_exec", "arguments": {} }))] {
            let message = host_request("browser-json-1", method, params.clone());
            assert_eq!(message["timeout_ms"], json!(90_000), "{method}");
            assert_eq!((message["type"].as_str(), message["method"].as_str(), message["path"].as_str()), (Some("request"), Some("POST"), Some("/mcp")));
            assert_eq!(message["headers"], headers());
            let body: Value = serde_json::from_str(message["body"].as_str().unwrap()).unwrap();
            assert_eq!(body, json!({ "jsonrpc": "2.0", "id": "browser-json-1", "method": method, "params": params }));
        }
    }

    #[test]
    fn plain_json_and_sse_answers() {
        assert_eq!(read_result(200, r#"{"jsonrpc":"2.0","id":"1","result":{"a":1}}"#).unwrap(), json!({"a":1}));
        let sse = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"1\",\"result\":{\"n\":1}}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"1\",\"result\":{\"n\":2}}\n\ndata: [DONE]\n\n";
        assert_eq!(read_result(200, sse).unwrap(), json!({"n":2}));
    }

    #[test]
    fn failures_have_stable_codes() {
        assert_eq!(read_result(404, "nope").unwrap_err().code, "mcp-http-404");
        assert_eq!(read_result(200, "garbage").unwrap_err().code, "mcp-malformed-response");
        assert_eq!(read_result(200, r#"{"error":{"code":-32602,"message":"bad"}}"#).unwrap_err(), McpError::new("mcp-rpc--32602", "bad"));
        assert_eq!(read_result(200, r#"{"id":1}"#).unwrap_err().code, "mcp-malformed-response");
        assert!(tools_of(&json!({"tools":[{"name":"a"}]})).unwrap().len() == 1);
        assert!(tools_of(&json!({})).is_err());
    }
}
