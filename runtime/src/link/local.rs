//! The link's client of the local runtime: plain HTTP/1.1 over the runtime's
//! Unix socket (trusted, no bearer). One connection per call keeps a slow tool
//! from blocking the others and lets a cancel simply drop its connection.

use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

use crate::edge::relay::{DeliveryState, RuntimeIdentity};

/// Largest runtime answer read; bigger ones cannot fit a relay frame anyway.
pub const MAX_ANSWER_BYTES: usize = 2 * 1024 * 1024;
const HEALTH_TIMEOUT: Duration = Duration::from_secs(5);

/// A failed local call, already in relay terms (spec §8 step 5).
#[derive(Debug, Clone, PartialEq)]
pub struct LocalError {
    pub code: &'static str,
    pub message: String,
    pub retryable: bool,
    pub delivery_state: DeliveryState,
}

impl LocalError {
    fn unreachable(socket: &Path, e: impl std::fmt::Display) -> Self {
        Self {
            code: "runtime_unavailable",
            message: format!("the local runtime at {} does not answer: {e}", socket.display()),
            retryable: true,
            delivery_state: DeliveryState::NotDelivered,
        }
    }
    fn after_send(code: &'static str, message: String) -> Self {
        Self { code, message, retryable: false, delivery_state: DeliveryState::DeliveryUnknown }
    }
}

#[derive(Clone, Debug)]
pub struct LocalRuntime {
    socket: PathBuf,
}

impl LocalRuntime {
    pub fn new(socket: PathBuf) -> Self {
        Self { socket }
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    async fn request(&self, method: Method, path: &str, body: Option<Vec<u8>>) -> Result<(u16, Bytes), LocalError> {
        let stream = tokio::net::UnixStream::connect(&self.socket).await.map_err(|e| LocalError::unreachable(&self.socket, e))?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| LocalError::unreachable(&self.socket, e))?;
        tokio::spawn(conn);
        let req = Request::builder()
            .method(method)
            .uri(path)
            .header(header::HOST, "localhost")
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, "application/json, text/event-stream")
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|e| LocalError::unreachable(&self.socket, e))?;
        let resp = sender
            .send_request(req)
            .await
            .map_err(|e| LocalError::after_send("runtime_unavailable", format!("the local runtime dropped the request: {e}")))?;
        let status = resp.status().as_u16();
        let body = Limited::new(resp.into_body(), MAX_ANSWER_BYTES).collect().await.map_err(|_| {
            LocalError::after_send("payload_too_large", format!("the runtime's answer exceeds {MAX_ANSWER_BYTES} bytes"))
        })?;
        Ok((status, body.to_bytes()))
    }

    /// The runtime's identity from `GET /health`, as a hello advertises it.
    pub async fn identity(&self) -> Result<RuntimeIdentity, LocalError> {
        let (status, body) = tokio::time::timeout(HEALTH_TIMEOUT, self.request(Method::GET, "/health", None))
            .await
            .map_err(|_| LocalError::unreachable(&self.socket, "no /health answer within 5 s"))??;
        let h: Value = serde_json::from_slice(&body).map_err(|_| LocalError::unreachable(&self.socket, "its /health is not JSON"))?;
        if status != 200 {
            return Err(LocalError::unreachable(&self.socket, format!("/health answered {status}")));
        }
        let s = |p: &str| h.pointer(p).and_then(Value::as_str).map(str::to_string);
        Ok(RuntimeIdentity {
            runtime_version: s("/version").unwrap_or_else(|| "unknown".into()),
            runtime_commit: s("/build/commit"),
            runtime_generation: s("/build/boot_id"),
            contract_epoch: h.pointer("/contract/epoch").and_then(Value::as_u64).unwrap_or(0) as u32,
            contract_hash: s("/contract/hash").unwrap_or_default(),
            herdr_version: None,
            herdr_protocol: None,
        })
    }

    /// MCP `tools/call` on the runtime (stateless POST /mcp); the `CallToolResult`.
    pub async fn call_tool(&self, name: &str, arguments: Value, timeout: Duration) -> Result<Value, LocalError> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}});
        let sent = self.request(Method::POST, "/mcp", Some(body.to_string().into_bytes()));
        let (status, body) = tokio::time::timeout(timeout, sent).await.map_err(|_| {
            LocalError::after_send("request_timeout", format!("the local runtime gave no answer within {} ms", timeout.as_millis()))
        })??;
        let message = parse_answer(&body).ok_or_else(|| {
            LocalError::after_send("runtime_unavailable", format!("the local runtime answered {status} with no JSON-RPC reply"))
        })?;
        if let Some(result) = message.get("result") {
            return Ok(result.clone());
        }
        let err = message.get("error").cloned().unwrap_or(Value::Null);
        Err(LocalError {
            code: "bad_request",
            message: format!(
                "the runtime refused the call: {}",
                err.get("message").and_then(Value::as_str).unwrap_or("unknown error")
            ),
            retryable: false,
            delivery_state: DeliveryState::Delivered,
        })
    }
}

/// A JSON-RPC reply from a JSON body or the first `data:` event of an SSE body.
fn parse_answer(body: &[u8]) -> Option<Value> {
    if let Ok(v @ Value::Object(_)) = serde_json::from_slice::<Value>(body) {
        return Some(v);
    }
    let text = std::str::from_utf8(body).ok()?;
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|v| v.get("result").is_some() || v.get("error").is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_from_json_or_sse() {
        assert_eq!(parse_answer(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#).unwrap()["result"], json!({}));
        let sse = b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"x\":1}}\n\n";
        assert_eq!(parse_answer(sse).unwrap()["result"]["x"], 1);
        assert!(parse_answer(b"oops").is_none());
    }

    #[tokio::test]
    async fn a_missing_socket_is_not_delivered() {
        let rt = LocalRuntime::new(PathBuf::from("/nonexistent/herdr.sock"));
        let e = rt.call_tool("herdr_inspect", json!({}), Duration::from_secs(1)).await.unwrap_err();
        assert_eq!((e.code, e.retryable, e.delivery_state), ("runtime_unavailable", true, DeliveryState::NotDelivered));
    }
}
