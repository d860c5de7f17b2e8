//! The real host binary against the real `herdr-mcp serve` on a temp socket: MCP tools/list and
//! tools/call travel through the port exactly as the extension sends them.

mod support;

use serde_json::{json, Value};
use support::host::{Host, PINNED_ORIGIN};
use support::real_runtime::RealRuntime;

/// `None` (test skipped, said loudly) only when no runtime binary can be found or built; a
/// runtime that exists but does not start is a failure.
fn start_runtime() -> Option<RealRuntime> {
    if let Err(why) = support::real_runtime::binary() {
        eprintln!("SKIPPED: no herdr-mcp runtime binary: {why}");
        return None;
    }
    Some(RealRuntime::start().expect("the real runtime starts and answers /health"))
}

fn mcp_request(id: &str, rpc: Value) -> Value {
    json!({"type":"request","id":id,"method":"POST","path":"/mcp","timeout_ms":30000,
           "headers":{"content-type":"application/json","accept":"application/json, text/event-stream",
                      "authorization":"Bearer must-not-matter"},
           "body": rpc.to_string()})
}

/// The JSON-RPC message in a streamable-HTTP answer (plain JSON, or the `data:` of an SSE event).
fn rpc_of(response: &Value) -> Value {
    assert_eq!(response["ok"], true, "{response}");
    assert_eq!(response["status"], 200, "{response}");
    let body = response["body"].as_str().expect("a body");
    let content_type = response["headers"]["content-type"].as_str().unwrap_or("");
    if content_type.starts_with("text/event-stream") {
        let data: Vec<&str> = body
            .lines()
            .filter_map(|l| l.strip_prefix("data:").map(str::trim_start))
            .filter(|d| !d.is_empty())
            .collect();
        serde_json::from_str(data.last().expect("an SSE data line")).unwrap()
    } else {
        serde_json::from_str(body).unwrap()
    }
}

fn fs_read_call(rpc_id: u64, path: &str) -> Value {
    json!({"jsonrpc":"2.0","id":rpc_id,"method":"tools/call",
           "params":{"name":"herdr_fs_read","arguments":{"path":path}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_list_and_fs_read_through_the_host() {
    let Some(runtime) = start_runtime() else { return };
    let mut host = Host::spawn(PINNED_ORIGIN, &runtime.socket);

    host.send(&json!({"type":"identity","id":"who"})).await;
    let identity = host.recv().await;
    assert_eq!(identity["runtime_available"], true, "{identity}");

    host.send(&json!({"type":"request","id":"h","path":"/health"})).await;
    let health = host.recv().await;
    assert_eq!(health["status"], 200, "{health}");

    host.send(&mcp_request("list", json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}))).await;
    let list = rpc_of(&host.recv().await);
    let names: Vec<&str> = list["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"herdr_fs_read"), "{names:?}");

    // Several reads in flight on one port, each answered with its own file.
    let mut expected = std::collections::BTreeMap::new();
    for i in 0..8u64 {
        let path = runtime.root.join(format!("f{i}.txt"));
        let text: String = (0..64).map(|line| format!("file {i} line {line:02} {}\n", "x".repeat(40))).collect();
        std::fs::write(&path, &text).unwrap();
        expected.insert(format!("read{i}"), text);
        host.send(&mcp_request(&format!("read{i}"), fs_read_call(10 + i, path.to_str().unwrap()))).await;
    }
    for _ in 0..8 {
        let frame = host.recv().await;
        let id = frame["id"].as_str().unwrap().to_owned();
        let rpc = rpc_of(&frame);
        let result = &rpc["result"]["structuredContent"];
        assert_eq!(result["ok"], true, "{rpc}");
        assert_eq!(result["content"].as_str().unwrap(), expected[&id].trim_end_matches('\n').to_owned() + "\n", "{id}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runtime_going_away_turns_into_extension_ipc_unavailable() {
    let Some(runtime) = start_runtime() else { return };
    let socket = runtime.socket.clone();
    let mut host = Host::spawn(PINNED_ORIGIN, &socket);
    host.send(&json!({"type":"request","id":"up","path":"/health"})).await;
    assert_eq!(host.recv().await["status"], 200);
    drop(runtime);
    host.send(&json!({"type":"request","id":"down","path":"/health"})).await;
    let r = host.recv().await;
    assert_eq!((r["id"].as_str(), r["error"].as_str()), (Some("down"), Some("extension_ipc_unavailable")), "{r}");
    assert!(host.still_running());
}
