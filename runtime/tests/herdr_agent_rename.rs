//! An agent renamed after the runtime first saw it: what `herdr_inspect`, a prompt by
//! name and `/push/state` show. Herdr emits no event for `agent.rename`, so a rename
//! through the runtime must reach the cache from the call's answer, and one made
//! elsewhere by the next re-snapshot.

mod herdr_sim;

use std::time::{Duration, Instant};

use herdr_mcp::herdr::{HerdrClient, HerdrConfig};
use herdr_mcp::push::PushStateSource;
use herdr_sim::HerdrSim;
use herdr_sim::harness::{Rig, call, config, fake_herdr_cli, rig_on};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(5);
/// Far below the default re-snapshot period (30 s): a name seen within this came
/// from the rename's answer, not from a fresh snapshot.
const AT_ONCE: Duration = Duration::from_secs(2);


/// A live runtime over a simulator with a `pi` agent on `w1:p1`, named `name` from the start.
async fn rig(name: Option<&str>, adjust: impl FnOnce(&mut HerdrConfig)) -> Rig {
    let sim = HerdrSim::start().await;
    sim.add_workspace("w1", "repo");
    sim.add_pane("w1", "w1:p1", "/tmp");
    sim.add_named_agent("w1:p1", "pi", "idle", name);
    let mut cfg = config(&sim.socket);
    cfg.herdr_bin = Some(fake_herdr_cli(sim.dir()));
    adjust(&mut cfg);
    rig_on(sim, cfg, true, false, WAIT).await
}

/// The name `herdr_inspect` and `/push/state` give the agent on `w1:p1`.
async fn shown_names(r: &Rig) -> (Value, Value) {
    let out = call(&r.ctx, "herdr_inspect", json!({})).await.payload;
    let inspect = out["agents"].as_array().and_then(|a| a.iter().find(|a| a["pane"] == "w1:p1")).map(|a| a["name"].clone());
    let state = r.service.cache.push_state();
    let pushed = state.agents.iter().find(|a| a["pane"] == "w1:p1").map(|a| a["name"].clone());
    (inspect.unwrap_or(Value::Null), pushed.unwrap_or(Value::Null))
}

/// Polls until both views show `name`, up to `deadline`; the last names seen otherwise.
async fn until_shown(r: &Rig, name: &str, deadline: Duration) -> Result<(), (Value, Value)> {
    let end = Instant::now() + deadline;
    let mut changes = r.service.cache.changes();
    loop {
        let seen = shown_names(r).await;
        if seen == (json!(name), json!(name)) {
            return Ok(());
        }
        if Instant::now() >= end {
            return Err(seen);
        }
        // Woken by any cache change, or re-checked after a short while at the latest.
        let _ = tokio::time::timeout(Duration::from_millis(100), changes.changed()).await;
    }
}

fn rename_args(target: &str, name: &str) -> Value {
    json!({"method": "agent.rename", "params": json!({"target": target, "name": name}).to_string()})
}

#[tokio::test]
async fn a_rename_through_herdr_call_shows_at_once() {
    let r = rig(None, |_| {}).await;
    assert_eq!(shown_names(&r).await, (json!("pi"), json!("pi")), "unnamed: the kind stands in");

    let out = call(&r.ctx, "herdr_call", rename_args("w1:p1", "alpha")).await.payload;
    assert_eq!((out["ok"].clone(), out["result"]["agent"]["name"].clone()), (json!(true), json!("alpha")), "{out}");
    until_shown(&r, "alpha", AT_ONCE).await.expect("the new name from the rename's answer");

    let out = call(&r.ctx, "herdr_prompt", json!({"target": "alpha", "text": "hello", "idempotency_key": "k1"})).await.payload;
    assert_eq!((out["ok"].clone(), out["resolved_pane"].clone()), (json!(true), json!("w1:p1")), "{out}");

    // Renamed again, by its current name: the old name no longer reaches it.
    let out = call(&r.ctx, "herdr_call", rename_args("alpha", "beta")).await.payload;
    assert_eq!(out["ok"], true, "{out}");
    until_shown(&r, "beta", AT_ONCE).await.expect("the second rename");
    let out = call(&r.ctx, "herdr_prompt", json!({"target": "alpha", "text": "lost"})).await.payload;
    assert_eq!((out["code"].clone(), out["failure_phase"].clone()), (json!("agent_not_found"), json!("resolve")), "{out}");
    assert_eq!(r.sim.prompts(), [("alpha".to_string(), "hello".to_string())]);
    assert_eq!(r.sim.count("session.snapshot"), 1, "no re-snapshot was needed");
}

#[tokio::test]
async fn a_name_refused_by_herdr_changes_nothing() {
    let r = rig(Some("alpha"), |_| {}).await;
    for bad in ["Beta", "1beta", &format!("b{}", "c".repeat(32))] {
        let out = call(&r.ctx, "herdr_call", rename_args("w1:p1", bad)).await.payload;
        assert_eq!(out["code"], "invalid_params", "{bad}: {out}");
    }
    // The longest name Herdr takes is taken.
    let longest = format!("b{}", "c".repeat(31));
    let out = call(&r.ctx, "herdr_call", rename_args("w1:p1", &longest)).await.payload;
    assert_eq!(out["ok"], true, "{out}");
    until_shown(&r, &longest, AT_ONCE).await.expect("a 32-character name");
}

#[tokio::test]
async fn a_rename_elsewhere_shows_by_the_next_resnapshot() {
    let resnapshot = Duration::from_millis(600);
    let r = rig(Some("alpha"), |c| c.timeouts.resnapshot = resnapshot).await;
    assert_eq!(shown_names(&r).await, (json!("alpha"), json!("alpha")));
    let snapshots = r.sim.count("session.snapshot");

    // Another Herdr client (the CLI, a plugin) renames it, around the runtime.
    let elsewhere = HerdrClient::new(r.sim.socket.clone(), config(&r.sim.socket).timeouts);
    let answer = elsewhere.call("agent.rename", json!({"target": "alpha", "name": "gamma"})).await.unwrap();
    assert_eq!(answer["agent"]["name"], "gamma");
    until_shown(&r, "gamma", resnapshot + AT_ONCE).await.expect("the name from the next re-snapshot");
    assert!(r.sim.count("session.snapshot") > snapshots, "it came from a re-snapshot");

    let out = call(&r.ctx, "herdr_prompt", json!({"target": "gamma", "text": "hi"})).await.payload;
    assert_eq!((out["ok"].clone(), out["resolved_pane"].clone()), (json!(true), json!("w1:p1")), "{out}");
}

#[tokio::test]
async fn an_answer_with_an_invalid_name_keeps_the_known_one() {
    // The default re-snapshot period: nothing but the answer can change the name here.
    let r = rig(Some("alpha"), |_| {}).await;
    r.sim.name_agent("w1:p1", "Not A Name");
    let out = call(&r.ctx, "herdr_call", json!({"method": "agent.get", "params": "{\"target\":\"w1:p1\"}"})).await.payload;
    assert_eq!(out["result"]["agent"]["name"], "Not A Name", "{out}");
    assert_eq!(shown_names(&r).await, (json!("alpha"), json!("alpha")));
}

#[tokio::test]
async fn a_snapshot_with_an_invalid_name_shows_the_kind() {
    let resnapshot = Duration::from_millis(600);
    let r = rig(Some("alpha"), |c| c.timeouts.resnapshot = resnapshot).await;
    r.sim.name_agent("w1:p1", "Not A Name");
    until_shown(&r, "pi", resnapshot + AT_ONCE).await.expect("the invalid name dropped at the re-snapshot");
    let t = r.service.cache.last_topology().unwrap();
    assert!(t.agent_for_pane("w1:p1").unwrap().get("name").is_none());
}
