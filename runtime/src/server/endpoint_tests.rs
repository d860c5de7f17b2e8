//! The endpoint answers a plain stateless `tools/call` itself (`McpEndpoint::call_tool`);
//! these tests hold that answer to the one rmcp's stateless service gives, byte for
//! byte, and check that what rmcp would refuse still reaches rmcp.

use std::path::Path;
use std::sync::Arc;

use axum::body::Body;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, Uri, header};
use http_body_util::BodyExt;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::super::fast_tools_call::parse_plain_tools_call;
use super::super::mcp::ServerState;
use super::{ACCEPT_JSON_AND_SSE, McpEndpoint, PROTOCOL_VERSION_HEADER};
use crate::policy::Policy;
use crate::runtime_info::RuntimeInfo;
use crate::tools::{ToolContext, ToolRegistry};

fn endpoint(root: &Path) -> McpEndpoint {
    let ctx = Arc::new(ToolContext::new(RuntimeInfo::new(), Policy::for_tests(vec![root.to_path_buf()])));
    let state = Arc::new(ServerState::new(ToolRegistry::standard(), ctx).expect("the standard catalog"));
    McpEndpoint::new(state, CancellationToken::new())
}

fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("four_k.txt"), "line \"quoted\" \\ tab\t é 😀\n".repeat(150)).unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::write(dir.path().join("sub/b.rs"), "fn main() {}\n// needle\n").unwrap();
    std::fs::write(dir.path().join(".env"), "SECRET=1\n").unwrap();
    dir
}

/// Calls whose answers do not change from one call to the next: successes, tool
/// errors, refusals by policy and by schema, an unknown tool.
fn calls(root: &Path) -> Vec<String> {
    let root = root.canonicalize().unwrap();
    let file = root.join("four_k.txt");
    let file = file.display();
    let root = root.display();
    vec![
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"herdr_fs_read","arguments":{{"path":"{file}"}}}}}}"#),
        format!(r#"{{"jsonrpc":"2.0","id":"s-2","method":"tools/call","params":{{"arguments":{{"path":"{file}","start_line":3,"end_line":4}},"name":"herdr_fs_read"}}}}"#),
        format!(r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"herdr_fs_list","arguments":{{"path":"{root}"}}}}}}"#),
        format!(r#"{{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{{"name":"herdr_fs_grep","arguments":{{"root":"{root}","pattern":"needle"}}}}}}"#),
        format!(r#"{{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{{"name":"herdr_fs_read","arguments":{{"path":"{root}/.env"}}}}}}"#),
        format!(r#"{{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{{"name":"herdr_fs_read","arguments":{{"path":"/etc/hostname"}}}}}}"#),
        r#"{"jsonrpc":"2.0","id":-7,"method":"tools/call","params":{"name":"herdr_fs_read","arguments":{"path":3}}}"#.into(),
        r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"no_such_tool","arguments":null}}"#.into(),
        r#"{"jsonrpc":"2.0","id":"\u00e9","method":"tools/call","params":{"name":"herdr_fs_read"}}"#.into(),
    ]
}

fn post(body: &str, headers: &[(&str, &str)]) -> Request<Body> {
    let mut request = Request::builder().method(Method::POST).uri("/mcp");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.body(Body::from(body.to_string())).unwrap()
}

async fn parts(response: Response<Body>) -> (StatusCode, Option<HeaderValue>, Bytes) {
    let status = response.status();
    let content_type = response.headers().get(header::CONTENT_TYPE).cloned();
    (status, content_type, response.into_body().collect().await.expect("in-memory body").to_bytes())
}

/// The version headers the endpoint's own answer covers: none (rmcp then assumes
/// 2025-03-26) and each version both this server and rmcp know.
const VERSION_HEADERS: [Option<&str>; 4] = [None, Some("2025-03-26"), Some("2025-06-18"), Some("2025-11-25")];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateless_tool_calls_answer_as_rmcp_does() {
    let dir = project();
    let endpoint = endpoint(dir.path());
    for body in calls(dir.path()) {
        let call = parse_plain_tools_call(body.as_bytes()).unwrap_or_else(|| panic!("not a plain call: {body}"));
        let ours = parts(endpoint.call_tool(call).await).await;
        assert_eq!(ours.0, StatusCode::OK, "{body}");
        let ours_json: Value = serde_json::from_slice(&ours.2).expect("JSON");
        assert!(ours_json["result"]["structuredContent"]["ok"].is_boolean(), "{body} → {ours_json}");
        for version in VERSION_HEADERS {
            let mut headers =
                vec![("host", "localhost"), ("content-type", "application/json"), ("accept", "application/json, text/event-stream")];
            headers.extend(version.map(|v| ("mcp-protocol-version", v)));
            let rmcp = parts(super::into_axum(endpoint.inner.stateless.handle(post(&body, &headers)).await)).await;
            assert_eq!((ours.0, &ours.1), (rmcp.0, &rmcp.1), "{body} with version {version:?}: {:?}", rmcp.2);
            let differs_at = ours.2.iter().zip(rmcp.2.iter()).position(|(a, b)| a != b);
            assert!(ours.2 == rmcp.2, "{body} with version {version:?}: the bodies differ at {differs_at:?} (lengths {} and {})",
                ours.2.len(), rmcp.2.len());
            // The whole endpoint, as a client reaches it, gives the same answer.
            let mut client_headers = vec![("host", "localhost"), ("accept", "application/json")];
            client_headers.extend(version.map(|v| ("mcp-protocol-version", v)));
            assert_eq!(parts(endpoint.handle(post(&body, &client_headers)).await).await, ours, "{body}");
        }
    }
}

#[test]
fn only_headers_rmcp_takes_as_they_are_get_the_endpoints_own_answer() {
    let headers = |pairs: &[(&str, &str)]| {
        let mut map = HeaderMap::new();
        map.insert(header::HOST, HeaderValue::from_static("localhost"));
        for (name, value) in pairs {
            map.append(http::HeaderName::from_bytes(name.as_bytes()).unwrap(), HeaderValue::from_str(value).unwrap());
        }
        map
    };
    let path_only: Uri = "/mcp".parse().unwrap();
    let rmcp_would_hand_over_as_is = |headers: &HeaderMap| super::rmcp_would_hand_over_as_is(&path_only, headers);
    assert!(rmcp_would_hand_over_as_is(&headers(&[])));
    assert!(rmcp_would_hand_over_as_is(&headers(&[("content-type", "application/json")])));
    assert!(rmcp_would_hand_over_as_is(&headers(&[("content-type", "Application/JSON ; charset=utf-8")])));
    assert!(rmcp_would_hand_over_as_is(&headers(&[("accept", "text/plain")])), "the endpoint sets Accept itself");
    for version in SUPPORTED_VERSIONS_RMCP_KNOWS {
        assert!(rmcp_would_hand_over_as_is(&headers(&[(PROTOCOL_VERSION_HEADER.as_str(), version)])), "{version}");
    }
    assert!(!rmcp_would_hand_over_as_is(&headers(&[("content-type", "text/plain")])));
    assert!(!rmcp_would_hand_over_as_is(&headers(&[("content-type", "application/jsonx")])));
    for version in ["2026-07-28", "2099-01-01", "2025-11-25 ", ""] {
        assert!(!rmcp_would_hand_over_as_is(&headers(&[(PROTOCOL_VERSION_HEADER.as_str(), version)])), "{version}");
    }
    let mut odd = headers(&[]);
    odd.insert(header::CONTENT_TYPE, HeaderValue::from_bytes(b"application/json\xff").unwrap());
    assert!(!rmcp_would_hand_over_as_is(&odd));
    // rmcp wants to know the host, even with its host checks off.
    assert!(!rmcp_would_hand_over_as_is(&HeaderMap::new()));
    assert!(rmcp_would_hand_over_as_is(&headers(&[("host", "a b")])), "the first Host counts, as for rmcp");
    let mut no_host = headers(&[]);
    no_host.remove(header::HOST);
    let absolute: Uri = "http://localhost:8772/mcp".parse().unwrap();
    assert!(super::rmcp_would_hand_over_as_is(&absolute, &no_host), "HTTP/2 carries the host in the target");
    for bad in [&b"local\xffhost"[..], b"a b", b"", b"[::1"] {
        let mut bad_host = headers(&[]);
        bad_host.insert(header::HOST, HeaderValue::from_bytes(bad).unwrap());
        assert!(!rmcp_would_hand_over_as_is(&bad_host), "{:?}", String::from_utf8_lossy(bad));
    }
    // The Accept the endpoint gives rmcp is one rmcp takes.
    assert_eq!(ACCEPT_JSON_AND_SSE, "application/json, text/event-stream");
}

const SUPPORTED_VERSIONS_RMCP_KNOWS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_calls_rmcp_would_refuse_are_still_refused() {
    let dir = project();
    let endpoint = endpoint(dir.path());
    let body = &calls(dir.path())[0];
    let refused = |pairs: &'static [(&'static str, &'static str)]| {
        let endpoint = endpoint.clone();
        let request = post(body, pairs);
        async move { parts(endpoint.handle(request).await).await }
    };
    let (status, _, text) = refused(&[("host", "localhost"), ("content-type", "text/plain")]).await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{}", String::from_utf8_lossy(&text));
    let (status, _, text) = refused(&[]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "no Host: {}", String::from_utf8_lossy(&text));
    assert!(String::from_utf8_lossy(&text).contains("Host"), "{}", String::from_utf8_lossy(&text));
    let (status, _, text) = refused(&[("host", "a b")]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "a bad Host: {}", String::from_utf8_lossy(&text));
    let (status, _, text) = refused(&[("host", "localhost"), ("mcp-protocol-version", "2099-01-01")]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{}", String::from_utf8_lossy(&text));
    let refusal: Value = serde_json::from_slice(&text).expect("a JSON-RPC error");
    assert!(refusal["error"]["message"].as_str().is_some_and(|m| m.contains("2099-01-01")), "{refusal}");
}
