//! The simulator behaves as spec/herdr.md section E records real Herdr 0.8.2: lifecycle
//! subscriptions replay the 512-event ring from 0, one event per subscription per
//! 100 ms poll, each type at its own pace; status subscriptions start now; new agents
//! are `unknown`, then `idle`; targets are pane ids or set names; a cwd change emits
//! nothing. Checked through the runtime's own socket client, as a client sees it.

mod herdr_sim;

use std::time::{Duration, Instant};

use herdr_mcp::herdr::HerdrClient;
use herdr_mcp::herdr::client::Subscription;
use herdr_sim::HerdrSim;
use herdr_sim::harness::fast_timeouts;
use serde_json::{Value, json};

fn client(sim: &HerdrSim) -> HerdrClient {
    HerdrClient::new(sim.socket.clone(), fast_timeouts())
}

fn subs(types: &[&str]) -> Vec<Value> {
    types.iter().map(|t| json!({"type": t})).collect()
}

/// `(event name, pane id)` of the next `n` frames, each within `within`.
async fn frames(sub: &mut Subscription, n: usize, within: Duration) -> Vec<(String, String)> {
    let mut out = vec![];
    for _ in 0..n {
        let line = tokio::time::timeout(within, sub.next_event()).await.expect("a frame in time").unwrap().expect("stream open");
        assert!(line.get("seq").is_none() && line["data"].get("seq").is_none(), "Herdr never sends its sequence: {line}");
        let pane = line["data"]["pane_id"].as_str().or_else(|| line["data"]["pane"]["pane_id"].as_str()).unwrap_or_default();
        out.push((line["event"].as_str().unwrap().to_string(), pane.to_string()));
    }
    out
}

/// Nothing arrives on `sub` for `quiet`.
async fn silent(sub: &mut Subscription, quiet: Duration) {
    if let Ok(line) = tokio::time::timeout(quiet, sub.next_event()).await {
        panic!("expected silence, got {line:?}");
    }
}

#[tokio::test]
async fn lifecycle_subscriptions_replay_the_ring_one_event_per_type_per_poll() {
    // E.1, E.2: p5, p6, p7 created, then p7 closed — all before anyone subscribed.
    let sim = HerdrSim::start().await;
    sim.add_workspace("w1", "repo");
    for p in ["w1:p5", "w1:p6", "w1:p7"] {
        sim.add_pane("w1", p, "/tmp");
    }
    sim.close_pane("w1:p7");
    let started = Instant::now();
    let mut sub = client(&sim).subscribe(subs(&["pane.created", "pane.closed"])).await.unwrap();
    let got = frames(&mut sub, 4, Duration::from_secs(2)).await;
    // The first poll gives the first of each type: a closed pane can come before its creation.
    let closed_at = got.iter().position(|(e, _)| e == "pane_closed").unwrap();
    let created_p7_at = got.iter().position(|f| f == &("pane_created".to_string(), "w1:p7".to_string())).unwrap();
    assert!(closed_at < created_p7_at, "{got:?}");
    let created: Vec<&str> = got.iter().filter(|(e, _)| e == "pane_created").map(|(_, p)| p.as_str()).collect();
    assert_eq!(created, ["w1:p5", "w1:p6", "w1:p7"], "one type replays oldest first");
    // Three of one type take three polls: at least two poll intervals after the first.
    assert!(started.elapsed() >= Duration::from_millis(200), "{:?}", started.elapsed());
    silent(&mut sub, Duration::from_millis(300)).await;
    // A second subscriber gets the whole history again; the first gets only what is new.
    let mut again = client(&sim).subscribe(subs(&["pane.created"])).await.unwrap();
    assert_eq!(frames(&mut again, 3, Duration::from_secs(2)).await.len(), 3);
    sim.add_pane("w1", "w1:p8", "/tmp");
    assert_eq!(frames(&mut sub, 1, Duration::from_secs(1)).await, [("pane_created".to_string(), "w1:p8".to_string())]);
}

#[tokio::test]
async fn the_ring_keeps_the_last_512_events() {
    let sim = HerdrSim::start().await;
    sim.set_poll_interval(Duration::from_millis(2));
    sim.add_workspace("w1", "repo");
    sim.add_pane("w1", "w1:p1", "/tmp");
    sim.add_agent("w1:p1", "pi", "idle");
    for i in 0..300 {
        sim.set_agent_status("w1:p1", if i % 2 == 0 { "working" } else { "idle" });
    }
    // 2 lifecycle + 1 pane + 1 detection + 300 status events so far; 300 more panes push
    // the oldest out.
    for i in 0..300 {
        sim.add_pane("w1", &format!("w1:q{i}"), "/tmp");
    }
    let (len, pushed) = sim.hub_events();
    assert_eq!((len, pushed), (512, 604));
    let mut sub = client(&sim).subscribe(subs(&["pane.created", "workspace.created"])).await.unwrap();
    // 92 events fell off: the workspace, the tab, the first pane, the detection and 88
    // status changes. The ring holds 212 status changes and the 300 later panes.
    let got = frames(&mut sub, 300, Duration::from_secs(2)).await;
    assert_eq!(got.first().unwrap().1, "w1:q0");
    silent(&mut sub, Duration::from_millis(100)).await;
}

#[tokio::test]
async fn status_subscriptions_start_now_and_new_agents_are_unknown_then_idle() {
    let sim = HerdrSim::start().await;
    sim.set_detection_delay(Duration::from_millis(600));
    sim.add_workspace("w1", "repo");
    sim.add_pane("w1", "w1:p1", "/tmp");
    sim.add_agent("w1:p1", "pi", "idle");
    sim.set_agent_status("w1:p1", "working");
    let c = client(&sim);
    // E.3: no replay of the earlier change; an initial event only for a matching filter.
    let mut plain = c.subscribe(vec![json!({"type": "pane.agent_status_changed", "pane_id": "w1:p1"})]).await.unwrap();
    let mut matching = c
        .subscribe(vec![json!({"type": "pane.agent_status_changed", "pane_id": "w1:p1", "agent_status": "working"})])
        .await
        .unwrap();
    assert_eq!(frames(&mut matching, 1, Duration::from_millis(300)).await[0].0, "pane.agent_status_changed");
    silent(&mut plain, Duration::from_millis(300)).await;
    sim.set_agent_status("w1:p1", "idle");
    let line = tokio::time::timeout(Duration::from_secs(1), plain.next_event()).await.unwrap().unwrap().unwrap();
    assert_eq!(line["data"]["agent_status"], "idle");

    // E.5: a detected agent is `unknown` with seq 0, then `idle`.
    sim.add_pane("w1", "w1:p2", "/tmp");
    let mut p2 = c.subscribe(vec![json!({"type": "pane.agent_status_changed", "pane_id": "w1:p2"})]).await.unwrap();
    sim.detect_agent("w1:p2", "pi", None);
    let agent = c.call("agent.get", json!({"target": "w1:p2"})).await.unwrap();
    assert_eq!((agent["agent"]["agent_status"].clone(), agent["agent"]["state_change_seq"].clone()), (json!("unknown"), json!(0)));
    let line = tokio::time::timeout(Duration::from_secs(2), p2.next_event()).await.unwrap().unwrap().unwrap();
    assert_eq!(line["data"]["agent_status"], "idle");
    let agent = c.call("agent.get", json!({"target": "w1:p2"})).await.unwrap();
    assert_eq!(agent["agent"]["agent_status"], "idle");

    // E.6: the kind is not a target; the pane id and a set name are.
    let by_kind = c.call("agent.get", json!({"target": "pi"})).await.unwrap_err();
    assert_eq!(by_kind.code, "agent_not_found");
    c.call("agent.rename", json!({"target": "w1:p2", "name": "helper"})).await.unwrap();
    assert_eq!(c.call("agent.get", json!({"target": "helper"})).await.unwrap()["agent"]["pane_id"], "w1:p2");
}

#[tokio::test]
async fn a_cwd_change_shows_in_pane_get_and_emits_nothing() {
    let sim = HerdrSim::start().await;
    sim.add_workspace("w1", "repo");
    sim.add_pane("w1", "w1:p1", "/tmp");
    let c = client(&sim);
    let mut all = c.subscribe(herdr_sim::params::PLAIN_SUBSCRIPTIONS.iter().map(|t| json!({"type": t})).collect()).await.unwrap();
    // The replay: workspace_created, tab_created, pane_created.
    frames(&mut all, 3, Duration::from_secs(1)).await;
    sim.set_pane_cwd("w1:p1", "/var");
    assert_eq!(c.call("pane.get", json!({"pane_id": "w1:p1"})).await.unwrap()["pane"]["cwd"], "/var");
    silent(&mut all, Duration::from_millis(400)).await;
    assert_eq!(c.call("pane.get", json!({"pane_id": "w1:p9"})).await.unwrap_err().code, "pane_not_found");
}
