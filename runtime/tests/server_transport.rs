//! HTTP-level behavior of the endpoint: TCP bearer and DNS-rebinding guards, body
//! limits and JSON-RPC error codes of spec §3, and `/health`.

mod common;

use common::{Runtime, TOKEN, git_repo};
use herdr_mcp::contract::{CONTRACT_EPOCH, contract_hash};
use herdr_mcp::server::config::MAX_BODY_BYTES;
use herdr_mcp::tools::ToolRegistry;
use serde_json::{Value, json};

const LIST: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;

fn json_headers() -> Vec<(&'static str, &'static str)> {
    vec![("content-type", "application/json"), ("accept", "application/json, text/event-stream")]
}

#[tokio::test]
async fn tcp_requires_the_exact_bearer() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let rt = Runtime::start_tcp(&[repo.path()], &[]).await;
    let unauthorized = json!({"jsonrpc": "2.0", "error": {"code": -32001, "message": "Unauthorized"}, "id": null});

    let resp = rt.raw_tcp("POST", "/mcp", &json_headers(), Some(LIST.as_bytes())).await;
    assert_eq!(resp.status, 401);
    assert_eq!(resp.json(), unauthorized);

    for bad in
        ["Bearer wrong", "Bearer ", "Basic dGVzdA==", &format!("Bearer {TOKEN}x"), &format!("Bearer {}", &TOKEN[1..])]
    {
        let mut h = json_headers();
        h.push(("authorization", bad));
        let resp = rt.raw_tcp("POST", "/mcp", &h, Some(LIST.as_bytes())).await;
        assert_eq!(resp.status, 401, "{bad}");
        assert_eq!(resp.json(), unauthorized);
    }

    let bearer = format!("Bearer {TOKEN}");
    let mut h = json_headers();
    h.push(("authorization", &bearer));
    let resp = rt.raw_tcp("POST", "/mcp", &h, Some(LIST.as_bytes())).await;
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert!(resp.json()["result"]["tools"].is_array());
}

#[tokio::test]
async fn tcp_refuses_non_loopback_host_and_origin() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let rt = Runtime::start_tcp(&[repo.path()], &[]).await;
    let bearer = format!("Bearer {TOKEN}");
    let port = rt.tcp.unwrap().port().to_string();
    let cases: Vec<(Vec<(&str, String)>, u16)> = vec![
        (vec![("host", "evil.example:80".into())], 403),
        (vec![("host", format!("attacker.test:{port}"))], 403),
        (vec![("host", format!("localhost:{port}")), ("origin", "http://evil.example".into())], 403),
        (vec![("host", format!("localhost:{port}")), ("origin", "null".into())], 403),
        (vec![("host", format!("localhost:{port}")), ("origin", format!("http://localhost:{port}"))], 200),
        (vec![("host", format!("127.0.0.1:{port}"))], 200),
        (vec![("host", format!("[::1]:{port}"))], 200),
    ];
    for (extra, expected) in cases {
        let mut h: Vec<(&str, &str)> = json_headers();
        h.push(("authorization", &bearer));
        for (k, v) in &extra {
            h.push((k, v));
        }
        let resp = rt.raw_tcp("POST", "/mcp", &h, Some(LIST.as_bytes())).await;
        assert_eq!(resp.status, expected, "{extra:?}: {}", resp.text());
        if expected == 403 {
            assert!(resp.json()["error"]["code"].is_i64());
        }
    }
    // Even /health is refused to a rebinding page.
    let resp = rt.raw_tcp("GET", "/health", &[("host", "evil.example")], None).await;
    assert_eq!(resp.status, 403);
    // The log names the refused values as text, not as Rust's Some("…").
    let log = rt.stderr();
    let refusals: Vec<&str> = log.lines().filter(|l| l.contains("refused non-loopback Host/Origin")).collect();
    assert!(refusals.iter().any(|l| l.contains("host=evil.example ")), "{log}");
    assert!(refusals.iter().all(|l| !l.contains("Some(")), "{refusals:?}");
}

#[tokio::test]
async fn unix_socket_needs_no_bearer_and_accepts_any_host() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let rt = Runtime::start(&[repo.path()], &[]).await;
    let mut h = json_headers();
    h.push(("host", "whatever.invalid"));
    let resp = rt.raw("POST", "/mcp/", &h, Some(LIST.as_bytes())).await;
    assert_eq!(resp.status, 200, "{}", resp.text());
}

/// A body of exactly `len` bytes: a valid ping padded with trailing whitespace.
fn ping_of_len(len: usize) -> Vec<u8> {
    let mut body = br#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#.to_vec();
    body.resize(len, b' ');
    body
}

#[tokio::test]
async fn body_limit_is_one_mebibyte() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let rt = Runtime::start(&[repo.path()], &[]).await;
    let resp = rt.raw("POST", "/mcp", &json_headers(), Some(&ping_of_len(MAX_BODY_BYTES))).await;
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.json()["id"], 7);

    let resp = rt.raw("POST", "/mcp", &json_headers(), Some(&ping_of_len(MAX_BODY_BYTES + 1))).await;
    assert_eq!(resp.status, 413);
    let body = resp.json();
    assert_eq!(body["error"]["code"], -32600);
    assert!(body["error"]["message"].as_str().unwrap().contains("too large"), "{body}");
}

#[tokio::test]
async fn malformed_json_rpc_gets_spec_error_codes() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let rt = Runtime::start(&[repo.path()], &[]).await;
    let cases: &[(&str, u16, i64)] = &[
        ("{\"jsonrpc\":\"2.0\",", 400, -32700),
        ("not json at all", 400, -32700),
        ("", 400, -32700),
        (r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#, 400, -32600),
        (r#""just a string""#, 400, -32600),
        (r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#, 400, -32600),
        (r#"{"id":1,"method":"ping"}"#, 400, -32600),
        (r#"{"jsonrpc":"2.0","id":1,"method":42}"#, 400, -32600),
        // Valid JSON-RPC with bad params: an ordinary JSON-RPC error, invalid params
        // (rmcp's model cannot type them; MCP's code for it).
        (r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}"#, 200, -32602),
        (r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#, 200, -32602),
        (r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":null}}"#, 200, -32602),
        (r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":3}}"#, 200, -32602),
        (r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":[1]}}"#, 200, -32602),
    ];
    for (body, status, code) in cases {
        let resp = rt.raw("POST", "/mcp", &json_headers(), Some(body.as_bytes())).await;
        assert_eq!(resp.status, *status, "{body}: {}", resp.text());
        let v: Value = resp.json();
        assert_eq!(v["jsonrpc"], "2.0");
        assert_eq!(v["error"]["code"], *code, "{body}: {v}");
    }
    let resp = rt.raw("POST", "/mcp", &json_headers(), Some(b"{oops")).await;
    assert!(resp.json()["error"]["message"].as_str().unwrap().starts_with("Parse error"));
}

#[tokio::test]
async fn health_reports_identity_contract_and_subsystems() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let rt = Runtime::start(&[repo.path()], &[]).await;
    let resp = rt.raw("GET", "/health", &[], None).await;
    assert_eq!(resp.status, 200);
    let h = resp.json();
    let registry = ToolRegistry::standard();
    assert_eq!(h["ok"], true);
    assert_eq!(h["name"], "herdr-mcp");
    assert_eq!(h["version"], env!("CARGO_PKG_VERSION"));
    assert!(h["build"]["commit"].is_string());
    assert_eq!(h["build"]["pid"], rt.pid());
    assert_eq!(h["contract"]["epoch"], CONTRACT_EPOCH);
    assert_eq!(h["contract"]["hash"], contract_hash(&registry.catalog()).unwrap());
    assert_eq!(h["tool_count"], registry.len());
    assert!(h["uptime_ms"].is_u64());
    assert_eq!(h["herdr"]["status"], "unavailable");
    // The exec work reports its sessions here (`exec_sessions`); before it, `exec`.
    assert!(h["exec_sessions"].is_object() || h["exec"]["status"].is_string(), "{h}");

    // Uptime moves forward.
    let first = h["uptime_ms"].as_u64().unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(30)).await;
    let later = rt.raw("GET", "/health", &[], None).await.json()["uptime_ms"].as_u64().unwrap();
    assert!(later >= first + 30, "{first} -> {later}");
}

#[tokio::test]
async fn sessionless_get_and_delete_follow_spec_section_3() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let repo = git_repo(&[("a.txt", "a\n")]);
    let rt = Runtime::start(&[repo.path()], &[]).await;

    // Not a stateless client and no session: both methods need a session.
    for method in ["GET", "DELETE"] {
        let resp = rt.raw(method, "/mcp", &[("accept", "text/event-stream")], None).await;
        assert_eq!(resp.status, 400, "{method}: {}", resp.text());
        assert_eq!(resp.json()["error"]["code"], -32000, "{method}");
    }

    // A stateless client (ChatGPT's user agent) has nothing to end: DELETE is 202.
    let resp = rt.raw("DELETE", "/mcp", &[("user-agent", "openai-mcp/1.0.0")], None).await;
    assert_eq!(resp.status, 202, "{}", resp.text());

    // ...and GET opens a keep-alive SSE stream that starts with `: connected`.
    let mut stream = tokio::net::UnixStream::connect(&rt.socket).await.expect("connect");
    stream
        .write_all(b"GET /mcp HTTP/1.1\r\nhost: localhost\r\nuser-agent: openai-mcp/1.0.0\r\naccept: text/event-stream\r\n\r\n")
        .await
        .expect("write request");
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while !String::from_utf8_lossy(&seen).contains(": connected") {
        let mut buf = [0u8; 1024];
        let n = tokio::time::timeout_at(deadline, stream.read(&mut buf))
            .await
            .expect("keep-alive stream sent nothing within 10 s")
            .expect("read");
        assert!(n > 0, "stream closed early: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    let head = String::from_utf8_lossy(&seen).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains("content-type: text/event-stream"), "{head}");
}

#[tokio::test]
async fn runtime_generation_header_is_on_every_answer_when_set() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let rt = Runtime::start_tcp(&[repo.path()], &[("HERDR_MCP_RUNTIME_GENERATION", "gen-42")]).await;
    let generation = |resp: &common::RawResponse| resp.header("x-herdr-runtime-generation").map(str::to_string);
    let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"no_such_tool","arguments":{}}}"#;
    for (method, path, body) in [
        ("POST", "/mcp", Some(LIST)),
        ("POST", "/mcp", Some(call)),
        ("POST", "/", Some("{oops")),
        ("GET", "/health", None),
    ] {
        let resp = rt.raw(method, path, &json_headers(), body.map(str::as_bytes)).await;
        assert_eq!(generation(&resp).as_deref(), Some("gen-42"), "{method} {path} {body:?}: {}", resp.text());
    }
    // Over TCP, the bearer's refusal carries it as well as the answer.
    let resp = rt.raw_tcp("POST", "/mcp", &json_headers(), Some(LIST.as_bytes())).await;
    assert_eq!((resp.status, generation(&resp).as_deref()), (401, Some("gen-42")));
    let bearer = format!("Bearer {TOKEN}");
    let mut h = json_headers();
    h.push(("authorization", &bearer));
    let resp = rt.raw_tcp("POST", "/mcp", &h, Some(LIST.as_bytes())).await;
    assert_eq!((resp.status, generation(&resp).as_deref()), (200, Some("gen-42")));

    // Unset or empty: no header. A value no header can carry: none either, and the log says why.
    for (value, warned) in [(None, false), (Some(""), false), (Some("gen\u{1}43"), true)] {
        let env: Vec<(&str, &str)> = value.map(|v| ("HERDR_MCP_RUNTIME_GENERATION", v)).into_iter().collect();
        let rt = Runtime::start(&[repo.path()], &env).await;
        let resp = rt.raw("POST", "/mcp", &json_headers(), Some(LIST.as_bytes())).await;
        assert_eq!((resp.status, generation(&resp)), (200, None), "{value:?}");
        assert_eq!(
            rt.stderr().contains("HERDR_MCP_RUNTIME_GENERATION holds characters"),
            warned,
            "{value:?}: {}",
            rt.stderr()
        );
    }
}

#[tokio::test]
async fn get_and_delete_of_a_session_follow_spec_section_3() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let rt = Runtime::start(&[repo.path()], &[]).await;
    let session = rt.open_session().await;

    // An id this server never issued: 404 for both methods (rmcp alone says 202 to DELETE).
    for method in ["DELETE", "GET"] {
        let resp = rt.raw(method, "/mcp", &with("ms_0123456789abcdef0123456789abcdef"), None).await;
        assert_eq!(resp.status, 404, "{method}: {}", resp.text());
        assert_eq!(resp.json()["error"], json!({"code": -32001, "message": "Session not found"}), "{method}");
    }
    // A live session ends with 202; after that its id is unknown.
    let resp = rt.raw("DELETE", "/mcp", &with(&session), None).await;
    assert_eq!(resp.status, 202, "{}", resp.text());
    let resp = rt.raw("DELETE", "/mcp", &with(&session), None).await;
    assert_eq!(resp.status, 404, "{}", resp.text());
}

fn with(session: &str) -> Vec<(&str, &str)> {
    vec![("mcp-session-id", session), ("accept", "text/event-stream")]
}

/// Opens `GET /mcp` with `headers` and reads until `: connected` (10 s at most);
/// the response head and what came of the stream.
async fn read_until_connected(socket: &std::path::Path, headers: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::UnixStream::connect(socket).await.expect("connect");
    let request = format!("GET /mcp HTTP/1.1\r\nhost: localhost\r\naccept: text/event-stream\r\n{headers}\r\n");
    stream.write_all(request.as_bytes()).await.expect("write request");
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while !String::from_utf8_lossy(&seen).contains(": connected") {
        let mut buf = [0u8; 1024];
        let Ok(read) = tokio::time::timeout_at(deadline, stream.read(&mut buf)).await else {
            panic!("no `: connected` within 10 s; got {:?}", String::from_utf8_lossy(&seen));
        };
        let n = read.expect("read");
        assert!(n > 0, "stream closed early: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&seen).into_owned()
}

#[tokio::test]
async fn a_sessions_get_is_the_same_keepalive_stream() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let rt = Runtime::start(&[repo.path()], &[]).await;
    let session = rt.open_session().await;
    let seen = read_until_connected(&rt.socket, &format!("mcp-session-id: {session}\r\n")).await;
    let head = seen.to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains("content-type: text/event-stream"), "{head}");
    let body = &seen[seen.find("\r\n\r\n").expect("end of the head") + 4..];
    assert!(body.contains(": connected\n\n") && !body.contains("data:"), "only comments: {body:?}");
}
