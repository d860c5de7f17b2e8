//! The link's client of the local runtime: plain HTTP/1.1 over the runtime's
//! Unix socket (trusted, no bearer), on keep-alive connections from a small
//! pool. A call has a connection to itself while it runs, so a slow tool never
//! blocks the others, and a cancelled or timed-out call closes its connection
//! (the runtime sees it go) instead of giving it back. A connection idle for
//! [`REUSE_IDLE_FOR`] or longer is not reused: the runtime closes idle ones after
//! its header-read timeout, and a request must never meet that close.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::FutureExt;
use http::{Method, Request, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::task::AbortHandle;
use serde_json::{Value, json};

use crate::edge::relay::{DeliveryState, RuntimeIdentity};

/// Largest runtime answer read; bigger ones cannot fit a relay frame anyway.
pub const MAX_ANSWER_BYTES: usize = 2 * 1024 * 1024;
const HEALTH_TIMEOUT: Duration = Duration::from_secs(5);
/// Idle connections kept for the next calls at most; more are closed when done.
pub const POOL_IDLE_MAX: usize = 32;
/// An idle connection is reused only this soon after its last answer, well inside
/// the runtime's 10 s header-read timeout that closes idle connections.
pub const REUSE_IDLE_FOR: Duration = Duration::from_secs(4);

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

type Sender = SendRequest<Full<Bytes>>;

/// An open connection: the request side and the task driving it.
struct Conn {
    sender: Sender,
    task: AbortHandle,
}

impl Drop for Conn {
    fn drop(&mut self) {
        // Closes the socket even in the middle of a request (a cancel, a timeout).
        self.task.abort();
    }
}

/// Idle connections, the most recently used last.
#[derive(Default)]
struct Pool {
    idle: Mutex<Vec<(Conn, Instant)>>,
}

impl Pool {
    fn take(&self) -> Option<Conn> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        while let Some((mut conn, since)) = idle.pop() {
            if since.elapsed() < REUSE_IDLE_FOR && matches!(conn.sender.ready().now_or_never(), Some(Ok(()))) {
                return Some(conn);
            }
            // Too old or closed: dropped, which closes it. Older ones are older still.
            idle.clear();
        }
        None
    }

    fn give_back(self: &Arc<Self>, mut conn: Conn) {
        match conn.sender.ready().now_or_never() {
            Some(Ok(())) => self.keep(conn),
            Some(Err(_)) => {}
            // The connection's task has not finished with the answer yet.
            None => {
                let pool = Arc::clone(self);
                tokio::spawn(async move {
                    if let Ok(Ok(())) = tokio::time::timeout(Duration::from_secs(1), conn.sender.ready()).await {
                        pool.keep(conn);
                    }
                });
            }
        }
    }

    fn keep(&self, conn: Conn) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < POOL_IDLE_MAX && !conn.sender.is_closed() {
            idle.push((conn, Instant::now()));
        }
    }
}

#[derive(Clone)]
pub struct LocalRuntime {
    socket: PathBuf,
    pool: Arc<Pool>,
}

impl std::fmt::Debug for LocalRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalRuntime").field("socket", &self.socket).finish_non_exhaustive()
    }
}

impl LocalRuntime {
    pub fn new(socket: PathBuf) -> Self {
        Self { socket, pool: Arc::default() }
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    async fn connect(&self) -> Result<Conn, LocalError> {
        let stream = tokio::net::UnixStream::connect(&self.socket).await.map_err(|e| LocalError::unreachable(&self.socket, e))?;
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| LocalError::unreachable(&self.socket, e))?;
        let task = tokio::spawn(async move {
            let _ = conn.await;
        })
        .abort_handle();
        Ok(Conn { sender, task })
    }

    fn build(&self, method: Method, path: &str, body: Bytes, edge_request: Option<&str>) -> Result<Request<Full<Bytes>>, LocalError> {
        let mut builder = Request::builder();
        if let Some(id) = edge_request {
            // The edge's id of the request, for the runtime's activity log.
            builder = builder.header(crate::activity::caller::EDGE_REQUEST_HEADER, id);
        }
        builder
            .method(method)
            .uri(path)
            .header(header::HOST, "localhost")
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, "application/json, text/event-stream")
            // The runtime's activity log names these calls' caller `edge`.
            .header(crate::activity::caller::CALLER_HEADER, "edge")
            .body(Full::new(body))
            .map_err(|e| LocalError::unreachable(&self.socket, e))
    }

    async fn request(&self, method: Method, path: &str, body: Option<Vec<u8>>) -> Result<(u16, Bytes), LocalError> {
        self.request_as(method, path, body, None).await
    }

    async fn request_as(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        edge_request: Option<&str>,
    ) -> Result<(u16, Bytes), LocalError> {
        let body = Bytes::from(body.unwrap_or_default());
        let dropped = |e: hyper::Error| LocalError::after_send("runtime_unavailable", format!("the local runtime dropped the request: {e}"));
        let (conn, resp) = match self.pool.take() {
            Some(mut conn) => match conn.sender.try_send_request(self.build(method.clone(), path, body.clone(), edge_request)?).await {
                Ok(resp) => (conn, resp),
                // Given back unsent: the idle connection was closing. A new one.
                Err(e) if e.message().is_some() => {
                    let mut conn = self.connect().await?;
                    let resp = conn.sender.send_request(self.build(method, path, body, edge_request)?).await.map_err(dropped)?;
                    (conn, resp)
                }
                Err(e) => return Err(dropped(e.into_error())),
            },
            None => {
                let mut conn = self.connect().await?;
                let resp = conn.sender.send_request(self.build(method, path, body, edge_request)?).await.map_err(dropped)?;
                (conn, resp)
            }
        };
        let status = resp.status().as_u16();
        let body = Limited::new(resp.into_body(), MAX_ANSWER_BYTES).collect().await.map_err(|_| {
            LocalError::after_send("payload_too_large", format!("the runtime's answer exceeds {MAX_ANSWER_BYTES} bytes"))
        })?;
        // Only a connection whose answer was read whole goes back.
        self.pool.give_back(conn);
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
        let raw = self.call_tool_text(name, arguments, timeout).await?;
        serde_json::from_str(&raw).map_err(|e| LocalError::after_send("runtime_unavailable", format!("the runtime's result: {e}")))
    }

    /// [`Self::call_tool`] as JSON text: the runtime's own text of the result
    /// when its answer is a plain JSON-RPC reply (checked to be JSON, passed on
    /// without building and re-encoding a tree of it), else the parsed result
    /// written out again.
    pub async fn call_tool_text(&self, name: &str, arguments: Value, timeout: Duration) -> Result<String, LocalError> {
        self.call_tool_text_as(name, arguments, timeout, None).await
    }

    /// [`Self::call_tool_text`] for the edge's request `request_id`, which the runtime's
    /// activity log records with the call.
    pub async fn call_tool_text_for_edge(
        &self,
        name: &str,
        arguments: Value,
        timeout: Duration,
        request_id: &str,
    ) -> Result<String, LocalError> {
        self.call_tool_text_as(name, arguments, timeout, Some(request_id)).await
    }

    async fn call_tool_text_as(
        &self,
        name: &str,
        arguments: Value,
        timeout: Duration,
        edge_request: Option<&str>,
    ) -> Result<String, LocalError> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}});
        let sent = self.request_as(Method::POST, "/mcp", Some(body.to_string().into_bytes()), edge_request);
        let (status, body) = tokio::time::timeout(timeout, sent).await.map_err(|_| {
            LocalError::after_send("request_timeout", format!("the local runtime gave no answer within {} ms", timeout.as_millis()))
        })??;
        if let Some(raw) = std::str::from_utf8(&body).ok().and_then(|text| member_text(text, "result")) {
            return Ok(raw.to_string());
        }
        let mut message = parse_answer(&body).ok_or_else(|| {
            LocalError::after_send("runtime_unavailable", format!("the local runtime answered {status} with no JSON-RPC reply"))
        })?;
        if let Some(result) = message.get_mut("result") {
            return Ok(result.take().to_string());
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

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while b.get(i).is_some_and(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// The text of the member `key` of the JSON object `text` (top level only),
/// itself checked to be one JSON value; `None` when `text` does not start as
/// such an object or lacks the member before a malformed part.
fn member_text<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let b = text.as_bytes();
    let mut i = skip_ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i += 1;
    loop {
        i = skip_ws(b, i);
        let mut keys = serde_json::Deserializer::from_str(&text[i..]).into_iter::<String>();
        let k = keys.next()?.ok()?;
        i = skip_ws(b, i + keys.byte_offset());
        if b.get(i) != Some(&b':') {
            return None;
        }
        i = skip_ws(b, i + 1);
        let mut values = serde_json::Deserializer::from_str(&text[i..]).into_iter::<serde::de::IgnoredAny>();
        values.next()?.ok()?;
        let end = i + values.byte_offset();
        if k == key {
            return Some(&text[i..end]);
        }
        i = skip_ws(b, end);
        if b.get(i) != Some(&b',') {
            return None;
        }
        i += 1;
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
    fn the_result_member_is_found_as_the_runtime_wrote_it() {
        let body = r#" { "jsonrpc" : "2.0", "id":1 ,"result" : {"content":[{"type":"text","text":"a \"}\" b"}],"n":-1.5e3} } "#;
        assert_eq!(member_text(body, "result"), Some(r#"{"content":[{"type":"text","text":"a \"}\" b"}],"n":-1.5e3}"#));
        assert_eq!(member_text(body, "id"), Some("1"));
        assert_eq!(member_text(r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602}}"#, "result"), None);
        assert_eq!(member_text(r#"{"a\u0072esult":1}"#, "result"), None, "a key is compared decoded");
        assert_eq!(member_text(r#"{"ar":1,"result":2}"#, "result"), Some("2"));
        for bad in ["", "[]", r#"{"result":{"x":}}"#, r#"{"result" {}}"#, r#"{"id":1 "result":{}}"#, "data: {}"] {
            assert_eq!(member_text(bad, "result"), None, "{bad}");
        }
    }

    #[test]
    fn answers_from_json_or_sse() {
        assert_eq!(parse_answer(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#).unwrap()["result"], json!({}));
        let sse = b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"x\":1}}\n\n";
        assert_eq!(parse_answer(sse).unwrap()["result"]["x"], 1);
        assert!(parse_answer(b"oops").is_none());
    }

    /// A stand-in runtime on a Unix socket: answers every POST with an empty
    /// tool result (`slow` never answers), counts the connections it accepted and
    /// those that ended.
    struct Counting {
        accepted: Arc<std::sync::atomic::AtomicUsize>,
        ended: Arc<std::sync::atomic::AtomicUsize>,
        _tmp: tempfile::TempDir,
        socket: PathBuf,
    }

    async fn counting_runtime(keep_alive: bool) -> Counting {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let tmp = tempfile::tempdir().unwrap();
        let socket = tmp.path().join("rt.sock");
        let listener = tokio::net::UnixListener::bind(&socket).unwrap();
        let (accepted, ended) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (a, e) = (Arc::clone(&accepted), Arc::clone(&ended));
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                a.fetch_add(1, Ordering::SeqCst);
                let e = Arc::clone(&e);
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(|req: Request<hyper::body::Incoming>| async move {
                        let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                        if memchr::memmem::find(&body, b"\"slow\"").is_some() {
                            std::future::pending::<()>().await;
                        }
                        let answer = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#;
                        Ok::<_, std::convert::Infallible>(http::Response::new(Full::new(Bytes::from_static(answer.as_bytes()))))
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .keep_alive(keep_alive)
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                    e.fetch_add(1, Ordering::SeqCst);
                });
            }
        });
        Counting { accepted, ended, _tmp: tmp, socket }
    }

    #[tokio::test]
    async fn calls_share_one_keep_alive_connection() {
        use std::sync::atomic::Ordering;
        let rt = counting_runtime(true).await;
        let local = LocalRuntime::new(rt.socket.clone());
        for _ in 0..20 {
            // Each call through its own clone, as the link's request tasks do.
            let r = local.clone().call_tool("herdr_inspect", json!({}), Duration::from_secs(5)).await.unwrap();
            assert_eq!(r, json!({"content": []}));
        }
        assert_eq!(rt.accepted.load(Ordering::SeqCst), 1, "20 calls, one connection");
        // Calls at once each get a connection; afterwards at most POOL_IDLE_MAX stay.
        let calls = (0..12).map(|_| local.call_tool("herdr_inspect", json!({}), Duration::from_secs(5)));
        for r in futures::future::join_all(calls).await {
            r.unwrap();
        }
        let idle = local.pool.idle.lock().unwrap().len();
        assert!((1..=POOL_IDLE_MAX).contains(&idle), "{idle} idle");
    }

    #[tokio::test]
    async fn a_runtime_that_closes_each_connection_still_answers_every_call() {
        use std::sync::atomic::Ordering;
        let rt = counting_runtime(false).await;
        let local = LocalRuntime::new(rt.socket.clone());
        for _ in 0..5 {
            local.call_tool("herdr_inspect", json!({}), Duration::from_secs(5)).await.unwrap();
        }
        assert_eq!(rt.accepted.load(Ordering::SeqCst), 5);
    }

    #[tokio::test]
    async fn a_timed_out_call_closes_its_connection_and_the_next_gets_a_new_one() {
        use std::sync::atomic::Ordering;
        let rt = counting_runtime(true).await;
        let local = LocalRuntime::new(rt.socket.clone());
        local.call_tool("herdr_inspect", json!({}), Duration::from_secs(5)).await.unwrap();
        let e = local.call_tool("slow", json!({}), Duration::from_millis(200)).await.unwrap_err();
        assert_eq!(e.code, "request_timeout");
        // The runtime sees the timed-out call's connection end (the one it reused).
        let deadline = Instant::now() + Duration::from_secs(10);
        while rt.ended.load(Ordering::SeqCst) < 1 {
            assert!(Instant::now() < deadline, "the abandoned connection stayed open");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        local.call_tool("herdr_inspect", json!({}), Duration::from_secs(5)).await.unwrap();
        assert_eq!(rt.accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_missing_socket_is_not_delivered() {
        let rt = LocalRuntime::new(PathBuf::from("/nonexistent/herdr.sock"));
        let e = rt.call_tool("herdr_inspect", json!({}), Duration::from_secs(1)).await.unwrap_err();
        assert_eq!((e.code, e.retryable, e.delivery_state), ("runtime_unavailable", true, DeliveryState::NotDelivered));
    }
}
