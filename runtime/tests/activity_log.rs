//! The activity log (issue 27 item 4) as its users meet it: a real `herdr-mcp
//! serve` with TCP, calls from the Unix socket as the extension and as the edge
//! link send them, from a bearer-holding TCP client and from an ordinary Unix
//! client; then `state.db` holds one redacted row per call (no file content, no
//! bearer anywhere in its bytes), `GET /activity` lists the extension's calls
//! and `herdr-mcp log --json` prints them.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const SECRET_CONTENT: &str = "AKIA-SECRET-CONTENT-7f3e9b1c";

fn state_db(rt: &common::Runtime) -> std::path::PathBuf {
    rt.dir.path().join("state").join("herdr-mcp").join("state.db")
}

/// The rows (oldest first) once there are at least `n`, waiting up to 10 s for the writer.
fn wait_rows(db: &Path, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let rows = read_rows(db);
        if rows.len() >= n {
            return rows;
        }
        assert!(Instant::now() < deadline, "only {} of {n} activity rows: {rows:#?}", rows.len());
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn read_rows(db: &Path) -> Vec<Value> {
    let Ok(conn) = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY) else {
        return Vec::new();
    };
    let Ok(mut stmt) = conn.prepare(
        "SELECT caller, caller_detail, tool, root, args, outcome, code, duration_ms, at_ms FROM activity ORDER BY seq",
    ) else {
        return Vec::new();
    };
    stmt.query_map([], |r| {
        Ok(json!({
            "caller": r.get::<_, String>(0)?, "caller_detail": r.get::<_, Option<String>>(1)?,
            "tool": r.get::<_, String>(2)?, "root": r.get::<_, Option<String>>(3)?,
            "args": serde_json::from_str::<Value>(&r.get::<_, String>(4)?).unwrap(),
            "outcome": r.get::<_, String>(5)?, "code": r.get::<_, Option<String>>(6)?,
            "duration_ms": r.get::<_, i64>(7)?, "at_ms": r.get::<_, i64>(8)?,
        }))
    })
    .unwrap()
    .collect::<Result<_, _>>()
    .unwrap()
}

fn tools_call(name: &str, arguments: Value) -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}})
        .to_string()
}

const MCP_HEADERS: [(&str, &str); 2] =
    [("content-type", "application/json"), ("accept", "application/json, text/event-stream")];

#[tokio::test]
async fn every_call_is_logged_redacted_with_its_caller_and_the_log_command_prints_it() {
    let repo = common::git_repo(&[("a.txt", "hello\n")]);
    let root = std::fs::canonicalize(repo.path()).unwrap();
    let rt = common::Runtime::start_tcp(&[repo.path()], &[]).await;
    let db = state_db(&rt);

    // 1. The extension (its bridge's client name, as the native host forwards it).
    let mut ext_headers = MCP_HEADERS.to_vec();
    ext_headers.push(("x-herdr-client", "browser-json-bridge/1"));
    let resp = rt
        .raw("POST", "/mcp", &ext_headers, Some(tools_call("herdr_fs_read", json!({"path": "a.txt"})).as_bytes()))
        .await;
    assert_eq!(resp.status, 200, "{}", resp.text());
    // 2. The edge link (the headers `herdr-mcp link` sets).
    let mut edge_headers = MCP_HEADERS.to_vec();
    edge_headers.extend([("x-herdr-caller", "edge"), ("x-herdr-edge-request", "req-42")]);
    let body = tools_call("herdr_fs_read", json!({"path": "missing.txt"}));
    rt.raw("POST", "/mcp", &edge_headers, Some(body.as_bytes())).await;
    // 3. A TCP client with the bearer writes a secret-looking content and greps for the bearer.
    let tcp = rt.tcp_client().await;
    let wrote = common::call_tool(&tcp, "herdr_fs_write", json!({"path": "new.txt", "content": SECRET_CONTENT})).await;
    assert_eq!(wrote["ok"], true, "{wrote}");
    common::call_tool(&tcp, "herdr_fs_grep", json!({"pattern": common::TOKEN})).await;
    // 4. An ordinary Unix client, posing as the edge over TCP does not work.
    let plain = rt.client().await;
    common::call_tool(&plain, "herdr_fs_read", json!({"path": ".env"})).await;
    let mut posing = MCP_HEADERS.to_vec();
    let bearer = format!("Bearer {}", common::TOKEN);
    posing.extend([("x-herdr-caller", "edge"), ("authorization", bearer.as_str())]);
    let resp = rt.raw_tcp("POST", "/mcp", &posing, Some(tools_call("no_such_tool", json!({})).as_bytes())).await;
    assert_eq!(resp.status, 200, "{}", resp.text());

    let rows = wait_rows(&db, 6);
    assert_eq!(rows.len(), 6, "{rows:#?}");
    let root_s = root.display().to_string();
    assert_eq!(
        (rows[0]["caller"].as_str(), rows[0]["tool"].as_str(), rows[0]["outcome"].as_str()),
        (Some("extension"), Some("herdr_fs_read"), Some("ok"))
    );
    assert_eq!(rows[0]["root"], root_s.as_str());
    assert_eq!(rows[0]["args"], json!({"path": "a.txt"}));
    assert_eq!(rows[1]["caller"], "edge");
    assert_eq!(rows[1]["caller_detail"], "request req-42");
    assert_eq!(rows[1]["outcome"], "error");
    assert!(rows[1]["code"].as_str().is_some_and(|c| !c.is_empty() && c != "error"), "{}", rows[1]);
    assert_eq!((rows[2]["caller"].as_str(), rows[2]["tool"].as_str()), (Some("tcp"), Some("herdr_fs_write")));
    assert_eq!(rows[2]["args"], json!({"path": "new.txt", "content": format!("<{} bytes>", SECRET_CONTENT.len())}));
    assert_eq!(rows[3]["args"]["pattern"], "<redacted>");
    assert_eq!(
        (rows[4]["caller"].as_str(), rows[4]["args"]["path"].as_str()),
        (Some("unix"), Some("<secret-like path>"))
    );
    assert_eq!((rows[5]["caller"].as_str(), rows[5]["code"].as_str()), (Some("tcp"), Some("unknown_tool")));
    for row in &rows {
        assert!(row["duration_ms"].as_i64().unwrap() >= 0 && row["at_ms"].as_i64().unwrap() > 1_700_000_000_000);
    }

    // Neither the content nor the bearer is anywhere in the database's files.
    for file in ["state.db", "state.db-wal"] {
        let bytes = std::fs::read(db.with_file_name(file)).unwrap_or_default();
        for needle in [SECRET_CONTENT, common::TOKEN] {
            assert!(memchr::memmem::find(&bytes, needle.as_bytes()).is_none(), "{needle} found in {file}");
        }
    }

    // GET /activity: the extension's calls only, newest first, bounded.
    let resp = rt.raw("GET", "/activity?caller=extension&limit=5", &[], None).await;
    let v = resp.json();
    assert_eq!(v["ok"], true, "{v}");
    let entries = v["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{v}");
    assert_eq!(entries[0]["tool"], "herdr_fs_read");
    let all = rt.raw("GET", "/activity?limit=100000", &[], None).await.json();
    assert_eq!(all["entries"].as_array().unwrap().len(), 6);
    assert_eq!(all["entries"][0]["code"], "unknown_tool", "newest first");
    // Read-only: nothing but GET.
    let post = rt.raw("POST", "/activity", &MCP_HEADERS, Some(b"{}")).await;
    assert_eq!(post.status, 405);

    // `herdr-mcp log --json`: the same calls, oldest first, in a stable shape.
    let log = |args: &[&str]| {
        let out = std::process::Command::new(common::BIN)
            .arg("log")
            .args(args)
            .env_remove("HERDR_MCP_STATE_DIR")
            .env("XDG_STATE_HOME", rt.dir.path().join("state"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let v: Value = serde_json::from_str(&log(&["--json"])).unwrap();
    let entries = v["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 6);
    let keys: Vec<&str> = entries[0].as_object().unwrap().keys().map(String::as_str).collect();
    let mut expected =
        vec!["args", "at_ms", "caller", "caller_detail", "code", "duration_ms", "outcome", "root", "time", "tool"];
    expected.sort();
    let mut keys = keys;
    keys.sort();
    assert_eq!(keys, expected);
    assert_eq!(entries[0]["caller"], "extension");
    assert!(entries[0]["time"].as_str().unwrap().ends_with('Z'));
    assert!(entries[0]["args"].is_object());
    let v: Value = serde_json::from_str(&log(&["--json", "--limit", "2", "--since", "1h"])).unwrap();
    let tools: Vec<&str> = v["entries"].as_array().unwrap().iter().map(|e| e["tool"].as_str().unwrap()).collect();
    assert_eq!(tools, ["herdr_fs_read", "no_such_tool"], "the newest two, oldest first");
    let v: Value = serde_json::from_str(&log(&["--json", "--since", "2999-01-01"])).unwrap();
    assert_eq!(v["entries"], json!([]));
    let text = log(&[]);
    assert_eq!(text.lines().count(), 6, "{text}");
    assert!(text.contains("herdr_fs_write") && !text.contains(SECRET_CONTENT), "{text}");
}

/// `herdr-mcp link`'s client of the local runtime marks its calls, so a call
/// forwarded from the edge is logged with caller `edge`.
#[tokio::test]
async fn calls_forwarded_by_the_link_are_logged_as_edge() {
    let repo = common::git_repo(&[("a.txt", "hello\n")]);
    let rt = common::Runtime::start(&[repo.path()], &[]).await;
    let local = herdr_mcp::link::local::LocalRuntime::new(rt.socket.clone());
    local.call_tool("herdr_fs_read", json!({"path": "a.txt"}), Duration::from_secs(10)).await.unwrap();
    // As the link serves an edge request: the edge's request id goes with the call.
    local.call_tool_text_for_edge("herdr_inspect", json!({}), Duration::from_secs(10), "9f2c").await.unwrap();
    let rows = wait_rows(&state_db(&rt), 2);
    assert_eq!((rows[0]["caller"].as_str(), rows[0]["tool"].as_str()), (Some("edge"), Some("herdr_fs_read")), "{rows:?}");
    assert_eq!((rows[1]["caller"].as_str(), rows[1]["caller_detail"].as_str()), (Some("edge"), Some("request 9f2c")), "{rows:?}");
}
