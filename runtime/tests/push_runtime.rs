//! The real `herdr-mcp serve` process with a simulated Herdr: the push routes on
//! the Unix socket and behind the TCP bearer, and the Herdr tools over MCP.

mod common;
mod herdr_sim;

use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{Runtime, TOKEN, call_tool, raw_unix};
use herdr_sim::HerdrSim;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(15);

/// Polls `/push/state` (an external process: nothing to subscribe to) until `pred`.
async fn push_state_until(socket: &Path, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let state = raw_unix(socket, "GET", "/push/state", &[], None).await.expect("push state").json();
        if pred(&state) {
            return state;
        }
        assert!(Instant::now() < deadline, "push state never matched: {state}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// An open `/push/events` stream over the Unix socket.
struct Sse {
    body: hyper::body::Incoming,
    text: String,
}

impl Sse {
    async fn open(socket: &Path, query: &str) -> Sse {
        let stream = tokio::net::UnixStream::connect(socket).await.unwrap();
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
        tokio::spawn(conn);
        let request =
            http::Request::get(format!("/push/events{query}")).header("host", "localhost").body(Empty::<Bytes>::new()).unwrap();
        let response = sender.send_request(request).await.unwrap();
        assert_eq!(response.status(), 200);
        Sse { body: response.into_body(), text: String::new() }
    }

    async fn read_until(&mut self, want: &str) {
        self.read_until_count(want, 1).await;
    }

    async fn read_until_count(&mut self, want: &str, count: usize) {
        let deadline = tokio::time::Instant::now() + WAIT;
        while self.text.matches(want).count() < count {
            let frame = tokio::time::timeout_at(deadline, self.body.frame())
                .await
                .unwrap_or_else(|_| panic!("no {want:?} in the stream: {}", self.text))
                .expect("stream open")
                .expect("frame");
            if let Ok(data) = frame.into_data() {
                self.text.push_str(&String::from_utf8_lossy(&data));
            }
        }
    }
}

#[tokio::test]
async fn runtime_serves_push_and_herdr_tools_from_a_live_herdr() {
    let repo = common::git_repo(&[("a.txt", "a\n")]);
    let sim = HerdrSim::start().await;
    sim.add_workspace("w1", "repo");
    sim.add_pane("w1", "w1:p1", &repo.path().display().to_string());
    sim.add_agent("w1:p1", "pi", "idle");
    let socket = sim.socket.display().to_string();
    let rt = Runtime::start_tcp(&[repo.path()], &[("HERDR_SOCKET_PATH", &socket), ("HERDR_MCP_AGENT_ALLOW", "all")]).await;

    let state = push_state_until(&rt.socket, |s| s["herdr_live"] == true).await;
    assert_eq!(state["agents"][0]["pane"], "w1:p1");
    assert_eq!(state["workspaces"][0]["id"], "w1");
    // The extension's options page shows the Herdr layer from /health.
    let health = raw_unix(&rt.socket, "GET", "/health", &[], None).await.unwrap().json();
    assert_eq!(health["herdr"]["status"], "connected", "{health}");

    let mut sse = Sse::open(&rt.socket, "?workspace=w1").await;
    sse.read_until("event: hello").await;
    sim.set_agent_status("w1:p1", "working");
    sse.read_until("event: agent_working").await;
    sim.set_agent_status("w1:p1", "done");
    sse.read_until("event: agent_settled").await;
    sim.set_agent_status("w1:p1", "idle");
    sim.set_agent_status("w1:p1", "working");
    sse.read_until_count("event: agent_working", 2).await;
    assert_eq!(sse.text.matches("event: agent_settled").count(), 1, "{}", sse.text);

    // TCP: the push routes sit behind the bearer like everything else.
    let denied = rt.raw_tcp("GET", "/push/state", &[], None).await;
    assert_eq!(denied.status, 401);
    let auth = format!("Bearer {TOKEN}");
    let allowed = rt.raw_tcp("GET", "/push/state", &[("authorization", &auth)], None).await;
    assert_eq!(allowed.status, 200);
    assert_eq!(allowed.json()["herdr_live"], true);

    let client = rt.client().await;
    let since = call_tool(&client, "herdr_since", json!({})).await;
    assert_eq!(since["ok"], true, "{since}");
    assert!(since["event_count"].as_u64().unwrap() >= 3);
    let inspect = call_tool(&client, "herdr_inspect", json!({})).await;
    assert_eq!(inspect["mode"], "herdr");
    assert_eq!(inspect["workspaces"][0]["projects"][0]["managed"], true);
    // The agent still works in the repo: a file change there needs confirm_busy.
    let path = repo.path().join("b.txt").display().to_string();
    let refused = call_tool(&client, "herdr_fs_write", json!({"path": path, "content": "b"})).await;
    assert_eq!(refused["reason"], "agent_working", "{refused}");
    let written = call_tool(&client, "herdr_fs_write", json!({"path": path, "content": "b", "confirm_busy": true})).await;
    assert_eq!(written["warnings"]["working"][0]["pane"], "w1:p1", "{written}");
}

#[tokio::test]
async fn runtime_without_herdr_answers_unavailable_and_an_empty_push_state() {
    let repo = common::git_repo(&[("a.txt", "a\n")]);
    let rt = Runtime::start(&[repo.path()], &[]).await;
    let state = raw_unix(&rt.socket, "GET", "/push/state", &[], None).await.unwrap().json();
    assert_eq!(
        (state["ok"].clone(), state["herdr_live"].clone(), state["agents"].clone()),
        (json!(true), json!(false), json!([]))
    );
    let health = raw_unix(&rt.socket, "GET", "/health", &[], None).await.unwrap().json();
    assert_eq!(health["herdr"]["status"], "unavailable", "{health}");
    assert!(health["herdr"]["message"].as_str().is_some_and(|m| m.contains("start Herdr")), "{health}");
    let client = rt.client().await;
    let started = Instant::now();
    let since = call_tool(&client, "herdr_since", json!({})).await;
    assert_eq!(since["code"], "herdr_unavailable", "{since}");
    let inspect = call_tool(&client, "herdr_inspect", json!({})).await;
    assert_eq!(inspect["ok"], true);
    assert_eq!(inspect["herdr_available"], false);
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!((inspect["agent_visibility"].as_str(), inspect["agent_allow"][0].as_str()), (Some("allowlist"), Some("pi")));
}

#[tokio::test]
async fn without_herdr_inspect_reports_the_configured_agent_visibility() {
    let repo = common::git_repo(&[("a.txt", "a\n")]);
    let dir = common::short_tempdir();
    let absent = dir.path().join("none.sock").display().to_string();
    let rt = Runtime::start(&[repo.path()], &[("HERDR_SOCKET_PATH", &absent), ("HERDR_MCP_AGENT_ALLOW", "all")]).await;
    let inspect = call_tool(&rt.client().await, "herdr_inspect", json!({})).await;
    assert_eq!(inspect["herdr_available"], false, "{inspect}");
    assert_eq!(inspect["agent_visibility"], "all", "{inspect}");
    assert_eq!(inspect["agent_allow"], json!([]));
    assert_eq!(inspect["workstation_info"]["agent_visibility"], "all");
}

#[tokio::test]
async fn a_finished_exec_reaches_the_push_stream() {
    let repo = common::git_repo(&[("a.txt", "a\n")]);
    let rt = Runtime::start(&[repo.path()], &[]).await;
    let mut sse = Sse::open(&rt.socket, "").await;
    sse.read_until("event: hello").await;
    let client = rt.client().await;
    let root = repo.path().canonicalize().unwrap().display().to_string();
    let started = call_tool(&client, "herdr_exec_start", json!({"root": root, "command": "exit 3"})).await;
    assert_eq!(started["ok"], true, "{started}");
    let session = started["session_id"].as_str().expect("session id").to_string();
    sse.read_until("event: exec_completed").await;
    let data: Value = sse
        .text
        .split("\n\n")
        .find(|b| b.contains("event: exec_completed"))
        .and_then(|b| b.lines().find_map(|l| l.strip_prefix("data: ")))
        .map(|d| serde_json::from_str(d).unwrap())
        .unwrap();
    assert_eq!(data["session_id"], session);
    assert_eq!(data["exit_code"], 3);
    assert_eq!(data["root"], root);
}
