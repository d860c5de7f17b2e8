//! The push bus fed by the Herdr event cache, and its SSE / JSON routes.

mod herdr_sim;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use herdr_mcp::herdr::HerdrService;
use herdr_mcp::push::{Delivery, Filter, PushBus, PushConfig, PushEvent, Subscription, kinds};
use herdr_sim::HerdrSim;
use herdr_sim::harness::config;
use http::Request;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

const WAIT: Duration = Duration::from_secs(5);

async fn next_event(sub: &Subscription) -> PushEvent {
    match tokio::time::timeout(WAIT, sub.next()).await.expect("an event within the deadline") {
        Delivery::Event(e) => e,
        other => panic!("expected an event, got {other:?}"),
    }
}

/// Everything delivered until `kind` arrives (inclusive).
async fn until_kind(sub: &Subscription, kind: &str) -> Vec<PushEvent> {
    let mut seen = vec![];
    loop {
        let e = next_event(sub).await;
        let done = e.kind == kind;
        seen.push(e);
        if done {
            return seen;
        }
    }
}

async fn live_rig() -> (HerdrSim, Arc<HerdrService>, Arc<PushBus>, CancellationToken) {
    let sim = HerdrSim::start().await;
    sim.add_workspace("w1", "repo");
    sim.add_pane("w1", "w1:p1", "/tmp");
    sim.add_agent("w1:p1", "pi", "idle");
    sim.add_workspace("w2", "other");
    sim.add_pane("w2", "w2:p1", "/tmp");
    sim.add_agent("w2:p1", "pi", "idle");
    let bus = Arc::new(PushBus::new(PushConfig::default()));
    let service = HerdrService::new(config(&sim.socket), Some(Arc::clone(&bus)));
    let cancel = CancellationToken::new();
    service.start(cancel.clone());
    assert!(service.cache.wait_for(WAIT, |c| c.is_live()).await);
    (sim, service, bus, cancel)
}

#[tokio::test]
async fn working_to_done_yields_exactly_one_settled_with_a_new_seq() {
    let (sim, _service, bus, cancel) = live_rig().await;
    sim.set_pane_text("w1:p1", "step 1\nall tests pass\n");
    let sub = bus.subscribe(Filter::default());
    let seq_before = bus.current_seq();
    sim.set_agent_status("w1:p1", "working");
    let working = next_event(&sub).await;
    assert_eq!(working.kind, kinds::AGENT_WORKING);
    assert_eq!(working.data["pane"], "w1:p1");
    sim.set_agent_status("w1:p1", "done");
    let settled = next_event(&sub).await;
    assert_eq!(settled.kind, kinds::AGENT_SETTLED);
    assert_eq!(settled.data["status"], "done");
    assert_eq!(settled.data["workspace"], "w1");
    assert_eq!(settled.data["agent"], "pi");
    assert!(settled.seq > working.seq && working.seq > seq_before);
    assert_eq!(settled.data["seq"], settled.seq);
    let output = next_event(&sub).await;
    assert_eq!(output.kind, kinds::AGENT_OUTPUT);
    assert_eq!(output.data["output"], "step 1\nall tests pass");

    // done -> idle is the same settled state (only the "seen" bit): no second settle.
    sim.set_agent_status("w1:p1", "idle");
    sim.set_agent_status("w1:p1", "working");
    let next = next_event(&sub).await;
    assert_eq!(next.kind, kinds::AGENT_WORKING, "no settle between done and idle");
    sim.set_agent_status("w1:p1", "blocked");
    let blocked = until_kind(&sub, kinds::AGENT_SETTLED).await;
    assert_eq!(blocked.last().unwrap().data["status"], "blocked");
    sim.remove_agent("w1:p1");
    let gone = until_kind(&sub, kinds::AGENT_GONE).await;
    assert_eq!(gone.last().unwrap().data["pane"], "w1:p1");
    let settles = blocked.iter().chain(&gone).filter(|e| e.kind == kinds::AGENT_SETTLED).count();
    assert_eq!(settles, 1);
    cancel.cancel();
}

#[tokio::test]
async fn exec_completed_is_delivered_with_its_fields() {
    let bus = PushBus::new(PushConfig::default());
    let everyone = bus.subscribe(Filter::default());
    let only_w1 = bus.subscribe(Filter { workspace: Some("w1".into()), pane: None });
    let seq = bus.publish_exec_completed("exec-42", "/repo", Some(3), None, None);
    let e = next_event(&everyone).await;
    assert_eq!(e.kind, kinds::EXEC_COMPLETED);
    assert_eq!(
        (e.seq, &e.data["session_id"], &e.data["root"], &e.data["exit_code"]),
        (seq, &json!("exec-42"), &json!("/repo"), &json!(3))
    );
    assert_eq!(next_event(&only_w1).await.seq, seq, "an exec without a workspace reaches filtered clients");
    bus.publish_exec_completed("exec-43", "/other", None, Some("SIGKILL"), Some("w2"));
    let killed = next_event(&everyone).await;
    assert_eq!((&killed.data["exit_code"], &killed.data["signal"]), (&Value::Null, &json!("SIGKILL")));
    assert!(only_w1.try_next().is_none(), "w2's exec is not w1's business");
}

#[tokio::test]
async fn filters_select_workspace_and_pane() {
    let (sim, _service, bus, cancel) = live_rig().await;
    let w2 = bus.subscribe(Filter { workspace: Some("w2".into()), pane: None });
    let p1 = bus.subscribe(Filter { workspace: None, pane: Some("w1:p1".into()) });
    sim.set_agent_status("w1:p1", "working");
    sim.set_agent_status("w2:p1", "working");
    let a = next_event(&w2).await;
    assert_eq!(a.data["pane"], "w2:p1");
    let b = next_event(&p1).await;
    assert_eq!(b.data["pane"], "w1:p1");
    assert!(w2.try_next().is_none() && p1.try_next().is_none());
    cancel.cancel();
}

#[tokio::test]
async fn a_slow_consumer_lags_and_never_blocks_publishers() {
    let bus = PushBus::new(PushConfig { queue_capacity: 8, ..Default::default() });
    let slow = bus.subscribe(Filter::default());
    let started = Instant::now();
    for i in 0..100_000u64 {
        bus.publish(kinds::AGENT_WORKING, Some("w1"), Some("w1:p1"), json!({"i": i}));
    }
    // Publishing is bounded by memory work alone, never by the idle reader.
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    assert_eq!(slow.try_next(), Some(Delivery::Lagged { dropped: 100_000 - 8 }));
    let rest: Vec<u64> = std::iter::from_fn(|| match slow.try_next() {
        Some(Delivery::Event(e)) => Some(e.seq),
        _ => None,
    })
    .collect();
    assert_eq!(rest, (99_993..=100_000).collect::<Vec<_>>(), "the newest 8 survive, in order");
}

/// Reads SSE frames into `text` until it contains `want` (bounded).
async fn read_until(body: &mut Body, text: &mut String, want: &str) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !text.contains(want) {
        let frame = tokio::time::timeout_at(deadline, body.frame()).await.expect("stream stalled").unwrap().unwrap();
        if let Ok(data) = frame.into_data() {
            text.push_str(&String::from_utf8_lossy(&data));
        }
    }
}

fn sse_blocks(text: &str) -> Vec<(String, Value)> {
    text.split("\n\n")
        .filter_map(|block| {
            let event = block.lines().find_map(|l| l.strip_prefix("event: "))?;
            let data = block.lines().find_map(|l| l.strip_prefix("data: "))?;
            Some((event.to_string(), serde_json::from_str(data).ok()?))
        })
        .collect()
}

#[tokio::test]
async fn sse_route_sends_hello_then_events_and_keep_alives() {
    let (sim, _service, _bus, cancel) = live_rig().await;
    let bus = Arc::new(PushBus::new(PushConfig { keep_alive: Duration::from_millis(100), ..Default::default() }));
    bus.set_source(_service.cache.clone());
    let app = herdr_mcp::push::sse::router(Arc::clone(&bus));
    let response = app.oneshot(Request::get("/push/events?workspace=w1").body(Body::empty()).unwrap()).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut body = response.into_body();
    let mut text = String::new();
    read_until(&mut body, &mut text, "event: hello").await;
    read_until(&mut body, &mut text, ": keep-alive").await;
    bus.publish_exec_completed("exec-1", "/repo", Some(0), None, None);
    bus.publish(kinds::AGENT_WORKING, Some("w2"), Some("w2:p1"), json!({"pane": "w2:p1"}));
    bus.publish(kinds::AGENT_WORKING, Some("w1"), Some("w1:p1"), json!({"pane": "w1:p1"}));
    read_until(&mut body, &mut text, "event: agent_working").await;
    let blocks = sse_blocks(&text);
    let (kind, hello) = &blocks[0];
    assert_eq!(kind, "hello");
    assert_eq!(hello["workspaces"].as_array().unwrap().len(), 1, "hello honours the filter");
    assert_eq!(hello["agents"][0]["pane"], "w1:p1");
    assert_eq!(hello["herdr_live"], true);
    let kinds_seen: Vec<&str> = blocks.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(kinds_seen, ["hello", "exec_completed", "agent_working"], "w2's event is filtered out");
    assert!(text.contains("id: 1\n"), "events carry their seq as id");
    drop(sim);
    cancel.cancel();
}

#[tokio::test]
async fn push_state_route_reports_agents_and_workspaces() {
    let repo = tempfile::tempdir().unwrap();
    std::fs::create_dir(repo.path().join(".git")).unwrap();
    let (sim, service, bus, cancel) = live_rig().await;
    sim.add_workspace("w3", "proj");
    sim.add_pane("w3", "w3:p1", &repo.path().display().to_string());
    assert!(service.cache.wait_for(WAIT, |c| c.live_view().is_some_and(|v| v.topology.workspace("w3").is_some())).await);
    let app = herdr_mcp::push::sse::router(Arc::clone(&bus));
    let response = app.oneshot(Request::get("/push/state").body(Body::empty()).unwrap()).await.unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = serde_json::from_slice(&response.into_body().collect().await.unwrap().to_bytes()).unwrap();
    assert_eq!(body["ok"], true);
    assert_eq!(body["herdr_live"], true);
    assert_eq!(body["agents"].as_array().unwrap().len(), 2);
    assert_eq!(body["agents"][0]["status"], "idle");
    assert_eq!(body["agents"][0]["seq"], 1);
    let w3 = body["workspaces"].as_array().unwrap().iter().find(|w| w["id"] == "w3").unwrap();
    assert_eq!(w3["roots"], json!([repo.path().display().to_string()]));
    assert_eq!(w3["panes"], json!(["w3:p1"]));
    // Without any Herdr source the state is empty but well-formed.
    let lonely = herdr_mcp::push::sse::router(Arc::new(PushBus::new(PushConfig::default())));
    let response = lonely.oneshot(Request::get("/push/state").body(Body::empty()).unwrap()).await.unwrap();
    let body: Value = serde_json::from_slice(&response.into_body().collect().await.unwrap().to_bytes()).unwrap();
    assert_eq!((body["agents"].clone(), body["herdr_live"].clone()), (json!([]), json!(false)));
    cancel.cancel();
}
