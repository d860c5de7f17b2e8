//! The Herdr socket client against the protocol simulator: framing, ids, error
//! codes, caps and time budgets.

mod herdr_sim;

use std::time::{Duration, Instant};

use herdr_mcp::herdr::HerdrClient;
use herdr_sim::harness::fast_timeouts;
use herdr_sim::{Fault, HerdrSim};
use serde_json::json;

fn client(sim: &HerdrSim) -> HerdrClient {
    HerdrClient::new(sim.socket.clone(), fast_timeouts())
}

#[tokio::test]
async fn ping_reads_version_and_protocol() {
    let sim = HerdrSim::start().await;
    let pong = client(&sim).ping().await.unwrap();
    assert_eq!(pong.version.as_deref(), Some("0.8.2"));
    assert_eq!(pong.protocol, Some(20));
}

#[tokio::test]
async fn ids_are_rust_n_and_params_are_always_sent() {
    let sim = HerdrSim::start().await;
    let c = client(&sim);
    c.ping().await.unwrap();
    c.call("workspace.list", json!({})).await.unwrap();
    let reqs = sim.requests();
    assert_eq!(reqs.len(), 2, "one request per connection");
    assert_eq!(reqs[0]["id"], "rust-1");
    assert_eq!(reqs[1]["id"], "rust-2");
    assert!(reqs.iter().all(|r| r["params"].is_object()));
}

#[tokio::test]
async fn missing_socket_is_socket_missing_and_fast() {
    let dir = tempfile::tempdir().unwrap();
    let c = HerdrClient::new(dir.path().join("absent.sock"), fast_timeouts());
    let started = Instant::now();
    let e = c.ping().await.unwrap_err();
    assert_eq!(e.code, "socket_missing");
    assert!(e.is_unavailable());
    assert!(started.elapsed() < Duration::from_millis(200));
}

#[tokio::test]
async fn stale_socket_is_connection_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    let e = HerdrClient::new(path, fast_timeouts()).ping().await.unwrap_err();
    assert_eq!(e.code, "connection_refused");
    assert!(e.is_unavailable());
}

#[tokio::test]
async fn silent_socket_hits_the_timeout_without_hanging() {
    let sim = HerdrSim::start().await;
    sim.set_fault(Some(Fault::Silent));
    let started = Instant::now();
    let e = client(&sim).call_with_timeout("workspace.list", json!({}), Duration::from_millis(300)).await.unwrap_err();
    let took = started.elapsed();
    assert_eq!(e.code, "timeout");
    assert!(!e.is_unavailable());
    assert!(took >= Duration::from_millis(300) && took < Duration::from_secs(2), "{took:?}");
}

#[tokio::test]
async fn requested_timeouts_are_capped_at_the_maximum() {
    let sim = HerdrSim::start().await;
    sim.set_fault(Some(Fault::Silent));
    let started = Instant::now();
    let e = client(&sim).call_with_timeout("workspace.list", json!({}), Duration::from_secs(600)).await.unwrap_err();
    assert_eq!(e.code, "timeout");
    let took = started.elapsed();
    assert!(took >= fast_timeouts().max && took < fast_timeouts().max + Duration::from_secs(1), "{took:?}");
}

#[tokio::test]
async fn garbage_reply_is_a_parse_error() {
    let sim = HerdrSim::start().await;
    sim.set_fault(Some(Fault::Garbage));
    let e = client(&sim).ping().await.unwrap_err();
    assert_eq!(e.code, "parse_error");
    assert!(e.message.contains("not JSON"), "{}", e.message);
}

#[tokio::test]
async fn oversized_reply_is_response_too_large() {
    let sim = HerdrSim::start().await;
    sim.set_fault(Some(Fault::Oversized));
    let e = client(&sim).ping().await.unwrap_err();
    assert_eq!(e.code, "response_too_large");
}

#[tokio::test]
async fn hangup_is_unexpected_eof() {
    let sim = HerdrSim::start().await;
    sim.set_fault(Some(Fault::Hangup));
    let e = client(&sim).ping().await.unwrap_err();
    assert_eq!(e.code, "unexpected_eof");
}

#[tokio::test]
async fn daemon_errors_pass_through() {
    let sim = HerdrSim::start().await;
    let e = client(&sim).call("agent.get", json!({"target": "w9:p9"})).await.unwrap_err();
    assert_eq!(e.code, "agent_not_found");
    assert!(e.from_daemon);
    let e = client(&sim).call("no.such.method", json!({})).await.unwrap_err();
    assert_eq!(e.code, "invalid_request");
}

#[tokio::test]
async fn subscription_streams_status_changes() {
    let sim = HerdrSim::start().await;
    sim.add_workspace("w1", "repo");
    sim.add_pane("w1", "w1:p1", "/tmp");
    sim.add_agent("w1:p1", "pi", "idle");
    let mut sub = client(&sim).subscribe(vec![json!({"type": "pane.agent_status_changed", "pane_id": "w1:p1"})]).await.unwrap();
    sim.set_agent_status("w1:p1", "working");
    let ev = tokio::time::timeout(Duration::from_secs(2), sub.next_event()).await.unwrap().unwrap().unwrap();
    assert_eq!(ev["event"], "pane.agent_status_changed");
    assert_eq!(ev["data"]["agent_status"], "working");
    assert_eq!(ev["data"]["agent"], "pi");
    sim.drop_subscribers();
    let end = tokio::time::timeout(Duration::from_secs(2), sub.next_event()).await.unwrap().unwrap();
    assert!(end.is_none(), "a closed stream ends cleanly");
}

/// One raw request line on its own connection; the reply as JSON.
async fn raw(sim: &HerdrSim, line: &str) -> serde_json::Value {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let mut stream = tokio::net::UnixStream::connect(&sim.socket).await.unwrap();
    stream.write_all(format!("{line}\n").as_bytes()).await.unwrap();
    let mut reply = String::new();
    tokio::time::timeout(Duration::from_secs(2), BufReader::new(stream).read_line(&mut reply)).await.unwrap().unwrap();
    serde_json::from_str(&reply).unwrap()
}

#[tokio::test]
async fn requests_herdr_cannot_parse_are_invalid_request_with_an_empty_id() {
    // Herdr parses a request into a serde enum before it looks at any state, so a
    // missing or mistyped field is `invalid_request` with "id":"" (spec §A, §B, D.5),
    // never a `*_not_found` or a success.
    let sim = HerdrSim::start().await;
    sim.add_workspace("w1", "repo");
    sim.add_pane("w1", "w1:p1", "/tmp");
    let reply = raw(&sim, r#"{"id":"req_pane.read","method":"pane.read","params":{"pane_id":"w1:p1"}}"#).await;
    assert_eq!(reply["id"], "", "{reply}");
    assert_eq!(reply["error"]["code"], "invalid_request");
    assert!(reply["error"]["message"].as_str().unwrap().starts_with("invalid request: missing field `source`"), "{reply}");
    // `id` is a required string and `params` is required, even for ping (§A, D.5).
    for (line, why) in [
        (r#"{"method":"ping","params":{}}"#, "missing field `id`"),
        (r#"{"id":7,"method":"ping","params":{}}"#, "invalid type: integer `7`, expected a string"),
        (r#"{"id":"c","params":{}}"#, "missing field `method`"),
        (r#"{"id":"c","method":"ping"}"#, "missing field `params`"),
        ("this is not json", "expected ident"),
        ("[1]", "invalid type: sequence"),
    ] {
        let reply = raw(&sim, line).await;
        assert_eq!((&reply["id"], &reply["error"]["code"]), (&json!(""), &json!("invalid_request")), "{line}: {reply}");
        let message = reply["error"]["message"].as_str().unwrap();
        assert!(message.starts_with("invalid request: ") && message.contains(why), "{line}: {message}");
    }
    let c = client(&sim);
    let refused = [
        ("pane.send_text", json!({"pane_id": "w1:p1"}), "missing field `text`"),
        ("agent.get", json!({"target": 5}), "invalid type: integer `5`, expected a string"),
        ("pane.read", json!({"pane_id": "w1:p1", "source": "screen"}), "unknown variant `screen`"),
        ("pane.split", json!({"target_pane_id": "w1:p1"}), "missing field `direction`"),
        ("pane.wait_for_output", json!({"pane_id": "w1:p1", "source": "recent"}), "missing field `match`"),
        ("agent.prompt", json!({"target": "w1:p1", "text": "x", "wait": {"until": ["finished"]}}), "unknown variant `finished`"),
        ("pane.list", json!([]), "invalid type: sequence, expected a map"),
    ];
    for (method, params, why) in refused {
        let e = c.call(method, params.clone()).await.unwrap_err();
        assert_eq!((e.code.as_str(), e.from_daemon), ("invalid_request", true), "{method} {params}");
        assert!(e.message.contains(why), "{method} {params}: {}", e.message);
    }
    // Extra fields are ignored; null stands for an absent optional field.
    c.call("pane.list", json!({"workspace_id": null, "verbose": true})).await.unwrap();
    // An unknown method names the methods Herdr has; a real one the simulator does
    // not model says so instead of passing for Herdr.
    let e = c.call("pane.teleport", json!({})).await.unwrap_err();
    assert_eq!(e.code, "invalid_request");
    assert!(e.message.contains("unknown variant `pane.teleport`") && e.message.contains("`plugin.pane.close`"), "{}", e.message);
    assert_eq!(c.call("worktree.list", json!({})).await.unwrap_err().code, "sim_unimplemented");
}

#[tokio::test]
async fn subscriptions_herdr_does_not_know_are_refused() {
    let sim = HerdrSim::start().await;
    let c = client(&sim);
    for bad in [json!({"type": "pane.create"}), json!({"type": "pane.agent_status_changed"}), json!({"kind": "pane.created"})] {
        let e = c.subscribe(vec![json!({"type": "pane.created"}), bad.clone()]).await.err().unwrap();
        assert_eq!(e.code, "invalid_request", "{bad}");
    }
    assert_eq!(sim.subscriber_count(), 0, "a refused subscription streams nothing");
    // Herdr probes the pane of a parameterised subscription: an unknown one fails the request.
    let e = c
        .subscribe(vec![json!({"type": "pane.created"}), json!({"type": "pane.agent_status_changed", "pane_id": "w9:p9"})])
        .await;
    let e = e.err().unwrap();
    assert_eq!((e.code.as_str(), e.from_daemon), ("pane_not_found", true));
    // Every type the event cache subscribes to is one Herdr knows.
    sim.add_workspace("w1", "repo");
    sim.add_pane("w1", "w1:p1", "/tmp");
    let mut all: Vec<serde_json::Value> =
        herdr_mcp::herdr::cache::LIFECYCLE_SUBSCRIPTIONS.iter().map(|t| json!({"type": t})).collect();
    all.push(json!({"type": "pane.agent_status_changed", "pane_id": "w1:p1"}));
    c.subscribe(all).await.unwrap();
}

#[tokio::test]
async fn a_blank_key_is_invalid_key() {
    // Herdr refuses a literal " " (the key is named "space"), spec D.6.
    let sim = HerdrSim::start().await;
    sim.add_workspace("w1", "repo");
    sim.add_pane("w1", "w1:p1", "/tmp");
    let c = client(&sim);
    let e = c.call("pane.send_keys", json!({"pane_id": "w1:p1", "keys": ["e", " ", "enter"]})).await.unwrap_err();
    assert_eq!((e.code.as_str(), e.message.as_str()), ("invalid_key", "unsupported key  "));
    c.call("pane.send_keys", json!({"pane_id": "w1:p1", "keys": ["e", "space", "enter"]})).await.unwrap();
}

#[tokio::test]
async fn a_fresh_snapshot_is_shaped_like_the_transcript() {
    // No focus ids (absent, not null) until something exists; `layouts` is always there.
    let sim = HerdrSim::start().await;
    let snap = client(&sim).call("session.snapshot", json!({})).await.unwrap();
    assert_eq!(
        snap,
        json!({"type": "session_snapshot", "snapshot": {"version": "0.8.2", "protocol": 20,
            "workspaces": [], "tabs": [], "panes": [], "layouts": [], "agents": []}})
    );
    sim.add_workspace("w1", "repo");
    sim.add_pane("w1", "w1:p1", "/tmp");
    let snap = client(&sim).call("session.snapshot", json!({})).await.unwrap();
    let s = &snap["snapshot"];
    assert_eq!(
        (&s["focused_workspace_id"], &s["focused_tab_id"], &s["focused_pane_id"]),
        (&json!("w1"), &json!("w1:t1"), &json!("w1:p1"))
    );
}

#[tokio::test]
async fn pane_read_lines_count_screen_rows_blank_ones_included() {
    // Spec D.2, on a 39-row pane with three lines of output.
    let sim = HerdrSim::start().await;
    sim.add_workspace("w1", "repo");
    sim.add_pane("w1", "w1:p1", "/tmp");
    sim.set_pane_text("w1:p1", "$ echo hi\nhi\n$\n");
    let c = client(&sim);
    let read = |source: &'static str, lines: Option<u64>| {
        let c = &c;
        async move {
            let mut params = json!({"pane_id": "w1:p1", "source": source});
            if let Some(n) = lines {
                params["lines"] = json!(n);
            }
            let r = c.call("pane.read", params).await.unwrap();
            (r["read"]["text"].as_str().unwrap().to_string(), r["read"]["truncated"].as_bool().unwrap())
        }
    };
    let all = ("$ echo hi\nhi\n$\n".to_string(), false);
    assert_eq!(read("recent", None).await, all);
    assert_eq!(read("recent", Some(10)).await, (String::new(), true));
    assert_eq!(read("recent_unwrapped", Some(10)).await, (String::new(), true));
    assert_eq!(read("recent", Some(38)).await, ("hi\n$\n".to_string(), true), "one row short of the screen");
    assert_eq!(read("recent", Some(39)).await, all);
    assert_eq!(read("visible", Some(2)).await, ("$ echo hi\nhi\n".to_string(), true));
    assert_eq!(read("detection", None).await, all);
}

#[tokio::test]
async fn wait_for_output_matches_line_by_line_and_times_out() {
    // Spec §3 and §B: existing text first, then every change; the first matching line.
    let sim = HerdrSim::start().await;
    sim.add_workspace("w1", "repo");
    sim.add_pane("w1", "w1:p1", "/tmp");
    sim.set_pane_text("w1:p1", "$ echo hi-from-herdr\nhi-from-herdr\n");
    let c = client(&sim);
    let wait = |kind: &str, value: &str, timeout_ms: u64| json!({"pane_id": "w1:p1", "source": "recent", "match": {"type": kind, "value": value}, "timeout_ms": timeout_ms});
    let hit = c.call("pane.wait_for_output", wait("substring", "hi-from-herdr", 1000)).await.unwrap();
    assert_eq!((hit["type"].as_str(), hit["matched_line"].as_str()), (Some("output_matched"), Some("$ echo hi-from-herdr")));
    let hit = c.call("pane.wait_for_output", wait("regex", "^hi-from-herdr$", 1000)).await.unwrap();
    assert_eq!(hit["matched_line"], "hi-from-herdr");

    let started = Instant::now();
    let e = c.call("pane.wait_for_output", wait("substring", "never-appears", 300)).await.unwrap_err();
    assert_eq!((e.code.as_str(), e.message.as_str()), ("timeout", "timed out waiting for output match"));
    assert!(started.elapsed() >= Duration::from_millis(300), "{:?}", started.elapsed());
    assert_eq!(c.call("pane.wait_for_output", wait("regex", "(", 300)).await.unwrap_err().code, "invalid_regex");
    let mut gone = wait("substring", "x", 300);
    gone["pane_id"] = json!("w9:p9");
    assert_eq!(c.call("pane.wait_for_output", gone).await.unwrap_err().code, "pane_not_found");

    // Output that comes later still matches.
    let later = tokio::spawn({
        let c = client(&sim);
        async move { c.call_with_timeout("pane.wait_for_output", wait("regex", "^x42$", 5000), Duration::from_secs(3)).await }
    });
    assert!(sim.wait_until(Duration::from_secs(2), |s| s.count("pane.wait_for_output") == 6).await);
    sim.set_pane_text("w1:p1", "$ printf x42\nx42\n");
    assert_eq!(later.await.unwrap().unwrap()["matched_line"], "x42");

    // A shell pane shows its prompt, which is what the utility-pane backend waits for.
    sim.add_pane("w1", "w1:p2", "/tmp");
    sim.set_pane_shell("w1:p2");
    let prompt = herdr_mcp::herdr::utility_pane::PROMPT_REGEX;
    let params = json!({"pane_id": "w1:p2", "source": "recent_unwrapped", "match": {"type": "regex", "value": prompt}, "timeout_ms": 1000});
    assert_eq!(c.call("pane.wait_for_output", params).await.unwrap()["matched_line"], "$ ");
}

#[tokio::test]
async fn agent_read_and_the_waits_behave_like_herdr() {
    let sim = HerdrSim::start().await;
    sim.add_workspace("w1", "repo");
    sim.add_pane("w1", "w1:p1", "/tmp");
    sim.add_named_agent("w1:p1", "claude", "idle", Some("fakey"));
    sim.set_pane_text("w1:p1", "fake claude ready\n");
    let c = client(&sim);
    // agent.read answers pane_read, by name or pane (§B).
    let read = c.call("agent.read", json!({"target": "fakey", "source": "recent"})).await.unwrap();
    assert_eq!((read["type"].as_str(), read["read"]["text"].as_str()), (Some("pane_read"), Some("fake claude ready\n")));
    assert_eq!(c.call("agent.read", json!({"target": "nobody", "source": "recent"})).await.unwrap_err().code, "agent_not_found");

    // agent.wait returns at once when the status already matches (default until: idle|done|blocked).
    let now = c.call("agent.wait", json!({"target": "w1:p1", "timeout_ms": 1000})).await.unwrap();
    assert_eq!((now["type"].as_str(), now["agent"]["agent_status"].as_str()), (Some("agent_info"), Some("idle")));
    let e = c.call("agent.wait", json!({"target": "fakey", "until": ["blocked"], "timeout_ms": 200})).await.unwrap_err();
    assert_eq!(e.code, "timeout");
    let blocked = tokio::spawn({
        let c = client(&sim);
        async move { c.call("agent.wait", json!({"target": "fakey", "until": ["blocked"], "timeout_ms": 2000})).await }
    });
    assert!(sim.wait_until(Duration::from_secs(2), |s| s.count("agent.wait") == 3).await);
    sim.set_agent_status("w1:p1", "blocked");
    assert_eq!(blocked.await.unwrap().unwrap()["agent"]["agent_status"], "blocked");

    // events.wait: only agent status matches work in 0.8.2 (D.1), and only a change counts.
    let e = c.call("events.wait", json!({"match_event": {"event": "pane_exited", "pane_id": "w1:p1"}, "timeout_ms": 200})).await;
    assert_eq!(e.unwrap_err().code, "unsupported_event_wait_match");
    let e = c.call("events.wait", json!({"match_event": {"event": "pane_agent_status_changed", "pane_id": "w1:p1"}})).await;
    assert_eq!(e.unwrap_err().code, "invalid_request", "agent_status is required");
    // Served as a filtered status subscription: a pane already in the status matches at once.
    let status = json!({"match_event": {"event": "pane_agent_status_changed", "pane_id": "w1:p1", "agent_status": "blocked"}, "timeout_ms": 200});
    assert_eq!(c.call("events.wait", status).await.unwrap()["event"]["data"]["agent_status"], "blocked");
    let status = json!({"match_event": {"event": "pane_agent_status_changed", "pane_id": "w1:p1", "agent_status": "done"}, "timeout_ms": 200});
    assert_eq!(c.call("events.wait", status).await.unwrap_err().code, "timeout");
    let working = tokio::spawn({
        let c = client(&sim);
        let wait = json!({"match_event": {"event": "pane_agent_status_changed", "pane_id": "w1:p1", "agent_status": "working"}, "timeout_ms": 2000});
        async move { c.call("events.wait", wait).await }
    });
    assert!(sim.wait_until(Duration::from_secs(2), |s| s.count("events.wait") == 5).await);
    sim.set_agent_status("w1:p1", "working");
    let matched = working.await.unwrap().unwrap();
    assert_eq!(
        matched,
        json!({"type": "wait_matched", "event": {"event": "pane_agent_status_changed", "data": {"type": "pane_agent_status_changed",
            "pane_id": "w1:p1", "workspace_id": "w1", "agent_status": "working", "agent": "claude"}}})
    );
}

async fn next(sub: &mut herdr_mcp::herdr::client::Subscription) -> serde_json::Value {
    tokio::time::timeout(Duration::from_secs(2), sub.next_event())
        .await
        .expect("an event in time")
        .unwrap()
        .expect("the stream is open")
}

#[tokio::test]
async fn event_frames_follow_the_recorded_quirks() {
    let sim = HerdrSim::start().await;
    sim.add_workspace("w1", "repo");
    sim.add_pane("w1", "w1:p1", "/tmp");
    sim.add_pane("w1", "w1:p2", "/tmp");
    sim.add_agent("w1:p1", "pi", "idle");
    let c = client(&sim);
    // A status subscription with agent_status hears only that status (§5).
    let mut blocked = c
        .subscribe(vec![json!({"type": "pane.agent_status_changed", "pane_id": "w1:p1", "agent_status": "blocked"})])
        .await
        .unwrap();
    sim.set_agent_status("w1:p1", "working");
    sim.set_agent_status("w1:p1", "blocked");
    let ev = next(&mut blocked).await;
    // ... and, filtered on the status the pane already has, starts with it.
    let mut already = c
        .subscribe(vec![json!({"type": "pane.agent_status_changed", "pane_id": "w1:p1", "agent_status": "blocked"})])
        .await
        .unwrap();
    assert_eq!(next(&mut already).await["data"]["agent_status"], "blocked");
    assert_eq!(
        ev,
        json!({"data": {"agent": "pi", "agent_status": "blocked", "pane_id": "w1:p1", "workspace_id": "w1"}, "event": "pane.agent_status_changed"})
    );

    // Lifecycle events arrive underscored, with `type` in their data (§C); an explicit
    // close is followed by the survivor's focus (D.3); an agent leaving releases its detection.
    let subs = ["pane.closed", "pane.focused", "pane.exited", "pane.agent_detected"].map(|t| json!({"type": t}));
    let mut life = c.subscribe(subs.to_vec()).await.unwrap();
    // A lifecycle subscription first replays what is in Herdr's ring (spec E.1): the detection.
    let replayed = next(&mut life).await;
    assert_eq!(replayed["data"], json!({"type": "pane_agent_detected", "agent": "pi", "pane_id": "w1:p1", "workspace_id": "w1"}));
    sim.remove_agent("w1:p1");
    let released = next(&mut life).await;
    assert_eq!(released["event"], "pane_agent_detected");
    assert_eq!(
        released["data"],
        json!({"type": "pane_agent_detected", "agent": "pi", "final_status": "blocked", "pane_id": "w1:p1", "released": true, "workspace_id": "w1"})
    );
    sim.close_pane("w1:p1");
    let closed = next(&mut life).await;
    assert_eq!(
        closed,
        json!({"data": {"type": "pane_closed", "pane_id": "w1:p1", "workspace_id": "w1"}, "event": "pane_closed"})
    );
    let focused = next(&mut life).await;
    assert_eq!(
        focused,
        json!({"data": {"type": "pane_focused", "pane_id": "w1:p2", "workspace_id": "w1"}, "event": "pane_focused"})
    );
    sim.exit_pane("w1:p2");
    let exited = next(&mut life).await;
    assert_eq!(
        exited,
        json!({"data": {"type": "pane_exited", "pane_id": "w1:p2", "workspace_id": "w1"}, "event": "pane_exited"})
    );
    let listed = c.call("pane.list", json!({})).await.unwrap();
    assert_eq!(listed["panes"], json!([]), "an exited pane leaves the lists without a close event");
}
