//! The real `herdr-mcp serve` process against a simulator that replays like Herdr
//! 0.8.2 (spec/herdr.md section E): replayed events are never news — no push events
//! while agents idle, exactly one `agent_working` / `agent_settled` per real start /
//! finish, none for a new agent, a quiet `herdr_since`, a busy guard that holds, a
//! closed pane's repository that stays unmanaged across renewals, cwd changes noticed
//! without events, agents prompted by the name `herdr_inspect` shows, and a bounded
//! request rate while nothing happens.
//!
//! Two combined scenarios (they run in parallel) keep the wall time near 45 s.

mod common;
mod herdr_sim;

use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{Runtime, call_tool, raw_unix};
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
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// An open `/push/events` stream, with the event names seen so far.
struct Sse {
    body: hyper::body::Incoming,
    buffer: String,
    events: Vec<(String, Value)>,
}

impl Sse {
    async fn open(socket: &Path) -> Sse {
        let stream = tokio::net::UnixStream::connect(socket).await.unwrap();
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
        tokio::spawn(conn);
        let request = http::Request::get("/push/events").header("host", "localhost").body(Empty::<Bytes>::new()).unwrap();
        let response = sender.send_request(request).await.unwrap();
        assert_eq!(response.status(), 200);
        Sse { body: response.into_body(), buffer: String::new(), events: vec![] }
    }

    /// Reads frames until `deadline`, or until `stop` holds for the events seen.
    async fn read(&mut self, deadline: tokio::time::Instant, stop: impl Fn(&[(String, Value)]) -> bool) {
        while !stop(&self.events) {
            let Ok(frame) = tokio::time::timeout_at(deadline, self.body.frame()).await else { return };
            let frame = frame.expect("stream open").expect("frame");
            if let Ok(data) = frame.into_data() {
                self.buffer.push_str(&String::from_utf8_lossy(&data));
            }
            while let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let name = block.lines().find_map(|l| l.strip_prefix("event: ")).map(str::to_string);
                let data = block.lines().find_map(|l| l.strip_prefix("data: ")).and_then(|d| serde_json::from_str(d).ok());
                if let (Some(name), Some(data)) = (name, data) {
                    self.events.push((name, data));
                }
            }
        }
    }

    async fn read_for(&mut self, d: Duration) {
        self.read(tokio::time::Instant::now() + d, |_| false).await;
    }

    async fn read_until(&mut self, kind: &str, count: usize) {
        let deadline = tokio::time::Instant::now() + WAIT;
        self.read(deadline, |e| e.iter().filter(|(k, _)| k == kind).count() >= count).await;
        assert!(self.count(kind) >= count, "fewer than {count} {kind}: {:?}", self.names());
    }

    fn count(&self, kind: &str) -> usize {
        self.events.iter().filter(|(k, _)| k == kind).count()
    }

    fn names(&self) -> Vec<&str> {
        self.events.iter().map(|(k, _)| k.as_str()).collect()
    }

    /// Every event but `hello`.
    fn news(&self) -> Vec<&(String, Value)> {
        self.events.iter().filter(|(k, _)| k != "hello").collect()
    }
}

/// A Herdr with history: panes created and closed, a shell that exited, status changes
/// and title updates — all in its ring, so every subscription replays them.
fn sim_with_history(sim: &HerdrSim, cwd: &str) {
    sim.add_workspace("w1", "repo");
    sim.add_pane("w1", "w1:p1", cwd);
    sim.add_agent("w1:p1", "pi", "idle");
    for (pane, how) in [("w1:p7", "close"), ("w1:p8", "exit"), ("w1:p9", "close")] {
        sim.add_pane("w1", pane, "/tmp");
        if how == "close" { sim.close_pane(pane) } else { sim.exit_pane(pane) }
    }
    sim.add_workspace("w3", "gone");
    sim.add_pane("w3", "w3:p1", "/tmp");
    sim.exit_pane("w3:p1");
    for (status, title) in [("working", "✳ old task"), ("idle", "done"), ("working", "✳ older"), ("idle", "")] {
        sim.set_agent_status("w1:p1", status);
        sim.set_terminal_title("w1:p1", title);
    }
}

/// `herdr_since` events after `cursor`.
async fn since(client: &common::McpClient, cursor: u64) -> Value {
    let out = call_tool(client, "herdr_since", json!({"cursor": cursor})).await;
    assert_eq!(out["ok"], true, "{out}");
    out
}

#[tokio::test]
async fn idle_agents_are_quiet_and_one_real_round_is_one_working_and_one_settled() {
    let repo = common::git_repo(&[("a.txt", "a\n")]);
    let sim = HerdrSim::start().await;
    sim_with_history(&sim, &repo.path().display().to_string());
    sim.set_pane_text("w1:p1", "step 1\nall tests pass\n");
    let socket = sim.socket.display().to_string();
    // Herdr's own timings and the runtime's defaults: what a user runs.
    let rt = Runtime::start(&[repo.path()], &[("HERDR_SOCKET_PATH", &socket), ("HERDR_MCP_AGENT_ALLOW", "all")]).await;
    push_state_until(&rt.socket, |s| s["herdr_live"] == true && s["agents"][0]["status"] == "idle").await;
    let client = rt.client().await;
    let mut sse = Sse::open(&rt.socket).await;
    sse.read_until("hello", 1).await;
    let cursor = since(&client, 0).await["cursor"].as_u64().unwrap();

    // 10 s of nothing (the replay of the ring happens meanwhile): no push event, no
    // history, a bounded number of Herdr requests.
    let requests_before = sim.request_count();
    let quiet_from = Instant::now();
    sse.read_for(Duration::from_secs(10)).await;
    let requests = sim.request_count() - requests_before;
    let per_minute = requests as f64 * 60.0 / quiet_from.elapsed().as_secs_f64();
    eprintln!("figures: idle push events {}, Herdr requests/min while idle {per_minute:.0}", sse.news().len());
    assert!(sse.news().is_empty(), "push events while idle: {:?}", sse.news());
    let quiet = since(&client, cursor).await;
    assert_eq!(quiet["event_count"], 0, "{quiet}");
    assert!(per_minute <= 120.0, "{per_minute:.0} Herdr requests per minute while idle");

    // One real round: working, then done.
    let before_working = Instant::now();
    let at_start = herdr_mcp::runtime_info::rfc3339(std::time::SystemTime::now());
    sim.set_agent_status("w1:p1", "working");
    sse.read_until("agent_working", 1).await;
    // While it works the busy guard holds every time.
    let mut refused = 0;
    for _ in 0..20 {
        let out = call_tool(&client, "herdr_exec", json!({"workspace": "w1", "command": "true"})).await;
        if out["reason"] == "agent_working" || out["code"] == "agent_working" {
            refused += 1;
        }
    }
    assert_eq!(refused, 20, "busy guard refused {refused} of 20");
    sim.set_agent_status("w1:p1", "done");
    sse.read_until("agent_settled", 1).await;
    sse.read_until("agent_output", 1).await;
    // Any duplicate (a replay, a poll, a renewal) would arrive within a few seconds.
    sse.read_for(Duration::from_secs(3)).await;
    assert_eq!((sse.count("agent_working"), sse.count("agent_settled")), (1, 1), "{:?}", sse.names());
    let seqs: Vec<u64> = sse.news().iter().map(|(_, d)| d["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "seq moves only on real changes: {seqs:?}");
    assert!(before_working.elapsed() < Duration::from_secs(60));

    // herdr_since: exactly the two changes, at the time they happened.
    let round = since(&client, cursor).await;
    let statuses: Vec<&str> = round["events"].as_array().unwrap().iter().filter_map(|e| e["agent_status"].as_str()).collect();
    assert_eq!(statuses, ["working", "done"], "{round}");
    assert_eq!(round["event_count"], 2, "{round}");
    let at = round["events"][0]["at"].as_str().unwrap();
    assert!(at >= at_start.as_str(), "{at} is before the change ({at_start})");

    // A title change (what a working agent shows of its task) reaches /push/state at once.
    let titled = Instant::now();
    sim.set_terminal_title("w1:p1", "✳ new task");
    push_state_until(&rt.socket, |s| s["agents"][0]["terminal_title"] == "✳ new task").await;
    assert!(titled.elapsed() < Duration::from_secs(1), "title shown after {:?}", titled.elapsed());
}

#[tokio::test]
async fn roots_follow_closes_and_cds_new_agents_never_settle_and_inspected_names_are_targets() {
    let home = common::git_repo(&[("a.txt", "a\n")]);
    let second = common::git_repo(&[("b.txt", "b\n")]);
    let third = common::git_repo(&[("c.txt", "c\n")]);
    let sim = HerdrSim::start().await;
    sim_with_history(&sim, &home.path().display().to_string());
    sim.add_pane("w1", "w1:p2", &second.path().display().to_string());
    sim.add_pane("w1", "w1:p3", "/tmp");
    let socket = sim.socket.display().to_string();
    let cli = herdr_sim::harness::fake_herdr_cli(sim.dir()).display().to_string();
    // Renewals every 2 s, so that 30 s see many (the default is rare).
    let rt = Runtime::start(
        &[home.path()],
        &[
            ("HERDR_SOCKET_PATH", &socket),
            ("HERDR_BIN_PATH", &cli),
            ("HERDR_MCP_AGENT_ALLOW", "all"),
            ("HERDR_MCP_HERDR_RENEW_MS", "2000"),
        ],
    )
    .await;
    push_state_until(&rt.socket, |s| s["herdr_live"] == true).await;
    let client = rt.client().await;
    let read = |path: std::path::PathBuf| {
        let client = &client;
        async move { call_tool(client, "herdr_fs_read", json!({"path": path.display().to_string()})).await }
    };
    let readable_within = |path: std::path::PathBuf, want: bool, within: Duration| {
        let read = &read;
        async move {
            let deadline = Instant::now() + within;
            loop {
                let out = read(path.clone()).await;
                if (out["ok"] == true) == want {
                    return Some(out);
                }
                if Instant::now() > deadline {
                    return None;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    assert!(readable_within(second.path().join("b.txt"), true, WAIT).await.is_some(), "the second repo never became readable");

    // A cd emits nothing; the runtime notices within ~2 s.
    let mut sse = Sse::open(&rt.socket).await;
    sse.read_until("hello", 1).await;
    let cd_at = Instant::now();
    sim.set_pane_cwd("w1:p3", &third.path().display().to_string());
    let noticed = readable_within(third.path().join("c.txt"), true, Duration::from_secs(10)).await;
    let cd_took = cd_at.elapsed();
    eprintln!("figures: time to notice a cd {cd_took:?}");
    assert!(noticed.is_some() && cd_took < Duration::from_secs(3), "cd noticed after {cd_took:?}");

    // A new agent: unknown for ~3 s, then idle — which is no settle.
    sim.detect_agent("w1:p3", "pi", None);
    push_state_until(&rt.socket, |s| s["agents"].as_array().is_some_and(|a| a.iter().any(|a| a["pane"] == "w1:p3"))).await;
    assert!(
        sim.wait_until(WAIT, |s| s.pane("w1:p3").is_some_and(|p| p["agent_status"] == "idle")).await,
        "the simulator never made the new agent idle"
    );
    sse.read_for(Duration::from_secs(2)).await;
    assert_eq!((sse.count("agent_settled"), sse.count("agent_working")), (0, 0), "{:?}", sse.names());

    // The name herdr_inspect shows for an agent without a set name is its kind: a target.
    sim.remove_agent("w1:p3");
    push_state_until(&rt.socket, |s| s["agents"].as_array().is_some_and(|a| a.len() == 1)).await;
    let inspect = call_tool(&client, "herdr_inspect", json!({})).await;
    let name = inspect["agents"][0]["name"].as_str().expect("an agent name").to_string();
    assert_eq!(name, "pi", "{inspect}");
    let prompted =
        call_tool(&client, "herdr_prompt", json!({"target": name, "text": "run the tests", "idempotency_key": "k1"})).await;
    assert_eq!(prompted["ok"], true, "{prompted}");
    assert!(sim.prompts().iter().any(|(_, text)| text == "run the tests"), "{:?}", sim.prompts());
    let called = call_tool(&client, "herdr_call", json!({"method": "agent.get", "params": "{\"target\":\"pi\"}"})).await;
    assert_eq!(called["result"]["agent"]["pane_id"], "w1:p1", "{called}");

    // The pane in the second repo closes: unreadable within 5 s, and still 30 s later,
    // after many renewals replayed its creation.
    let closed_at = Instant::now();
    sim.close_pane("w1:p2");
    assert!(
        readable_within(second.path().join("b.txt"), false, Duration::from_secs(5)).await.is_some(),
        "the closed pane's repo is still readable"
    );
    eprintln!("figures: closed pane's root dropped after {:?}", closed_at.elapsed());
    let subscribes_before = sim.count("events.subscribe");
    let snapshots_before = sim.count("session.snapshot");
    let until = Instant::now() + Duration::from_secs(30);
    while Instant::now() < until {
        let out = read(second.path().join("b.txt")).await;
        assert_ne!(out["ok"], true, "the closed pane's repo came back: {out}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(sim.count("events.subscribe") > subscribes_before + 5, "no renewals in 30 s");
    // A renewal's replay asks for no picture (the scheduled one comes every 30 s).
    let snapshots = sim.count("session.snapshot") - snapshots_before;
    eprintln!("figures: {} renewals and {snapshots} snapshots in 30 s", sim.count("events.subscribe") - subscribes_before);
    assert!(snapshots <= 3, "{snapshots} snapshots in 30 s of renewals");
}
