//! An agent renamed after the runtime first saw it: what `herdr_inspect`, a prompt by
//! name and `/push/state` show. Herdr emits no event for `agent.rename`, so a rename
//! through the runtime must reach the cache from the call's answer, and one made
//! elsewhere by the next re-snapshot.

mod common;
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
/// Call budgets for a test that holds Herdr's answers: the cache must wait for a held
/// answer, not give up on it.
const PATIENT: Duration = Duration::from_secs(30);

/// A live runtime over a simulator with a `pi` agent on `w1:p1`, named `name` from the start.
async fn rig(name: Option<&str>, adjust: impl FnOnce(&mut HerdrConfig)) -> Rig {
    rig_of(&[("w1:p1", "pi", name)], adjust).await
}

/// A live runtime over a simulator with one pane per `(pane, kind, name)` in `w1`, each
/// holding an agent of that kind and name.
async fn rig_of(agents: &[(&str, &str, Option<&str>)], adjust: impl FnOnce(&mut HerdrConfig)) -> Rig {
    let sim = HerdrSim::start().await;
    sim.add_workspace("w1", "repo");
    for (pane, kind, name) in agents {
        sim.add_pane("w1", pane, "/tmp");
        sim.add_named_agent(pane, kind, "idle", *name);
    }
    let mut cfg = config(&sim.socket);
    cfg.herdr_bin = Some(fake_herdr_cli(sim.dir()));
    adjust(&mut cfg);
    rig_on(sim, cfg, true, false, WAIT).await
}

/// The name `herdr_inspect` and `/push/state` give the agent on `w1:p1`.
async fn shown_names(r: &Rig) -> (Value, Value) {
    shown_names_on(r, "w1:p1").await
}

/// The name `herdr_inspect` and `/push/state` give the agent on `pane`.
async fn shown_names_on(r: &Rig, pane: &str) -> (Value, Value) {
    let out = call(&r.ctx, "herdr_inspect", json!({})).await.payload;
    let inspect = out["agents"].as_array().and_then(|a| a.iter().find(|a| a["pane"] == pane)).map(|a| a["name"].clone());
    let state = r.service.cache.push_state();
    let pushed = state.agents.iter().find(|a| a["pane"] == pane).map(|a| a["name"].clone());
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
    let snapshots = r.sim.count("session.snapshot");

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
    assert_eq!(r.sim.count("session.snapshot"), snapshots, "no re-snapshot was needed");
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

#[tokio::test]
async fn a_snapshot_in_flight_during_a_rename_does_not_bring_the_old_name_back() {
    let r = rig(Some("alpha"), |c| {
        c.timeouts.default = PATIENT;
        c.timeouts.max = PATIENT;
    })
    .await;
    r.sim.add_pane("w1", "w1:p2", "/tmp");
    r.sim.add_pane("w1", "w1:p3", "/tmp");

    // A newly detected agent sends the cache to a fresh snapshot. Herdr answers its
    // agent list (the names the cache installs) with `alpha`, but delivers it late.
    r.sim.hold_replies("agent.list");
    r.sim.add_agent("w1:p2", "claude", "idle");
    assert!(r.sim.wait_until(WAIT, |s| s.held_replies("agent.list") == 1).await, "the re-snapshot never listed the agents");

    let out = call(&r.ctx, "herdr_call", rename_args("w1:p1", "beta")).await.payload;
    assert_eq!(out["ok"], true, "{out}");
    until_shown(&r, "beta", AT_ONCE).await.expect("the rename's answer");

    r.sim.release_replies("agent.list");
    // Only a snapshot brings the new agent's record: the held one is installed.
    let installed = |c: &herdr_mcp::herdr::EventCache| c.last_topology().is_some_and(|t| t.agent_for_pane("w1:p2").is_some());
    assert!(r.service.cache.wait_for(WAIT, installed).await, "the held snapshot was never installed");
    assert_eq!(shown_names(&r).await, (json!("beta"), json!("beta")), "the older snapshot did not undo the rename");

    // A snapshot requested after the adoption wins: here it brings a rename made elsewhere.
    let elsewhere = HerdrClient::new(r.sim.socket.clone(), config(&r.sim.socket).timeouts);
    elsewhere.call("agent.rename", json!({"target": "beta", "name": "gamma"})).await.unwrap();
    r.sim.add_agent("w1:p3", "codex", "idle");
    until_shown(&r, "gamma", WAIT).await.expect("the name from a snapshot requested after the rename");
}

#[tokio::test]
async fn names_in_an_agent_list_answer_show_at_once() {
    // The default re-snapshot period: nothing but the answer can change a name here.
    let r = rig_of(&[("w1:p1", "pi", Some("alpha")), ("w1:p2", "claude", Some("bravo"))], |_| {}).await;
    assert_eq!(shown_names_on(&r, "w1:p2").await, (json!("bravo"), json!("bravo")));
    let snapshots = r.sim.count("session.snapshot");

    // Renamed around the runtime, which no event reports; one of them against the rule.
    r.sim.name_agent("w1:p1", "delta");
    r.sim.name_agent("w1:p2", "Not A Name");
    let out = call(&r.ctx, "herdr_call", json!({"method": "agent.list"})).await.payload;
    let listed: Vec<Value> = out["result"]["agents"].as_array().expect("agents").iter().map(|a| a["name"].clone()).collect();
    assert_eq!(listed, [json!("delta"), json!("Not A Name")], "{out}");

    // The answer was adopted before the call returned.
    assert_eq!(shown_names_on(&r, "w1:p1").await, (json!("delta"), json!("delta")));
    assert_eq!(shown_names_on(&r, "w1:p2").await, (json!("bravo"), json!("bravo")), "an invalid name is dropped");
    assert_eq!(r.sim.count("session.snapshot"), snapshots, "no re-snapshot was taken");
    let out = call(&r.ctx, "herdr_prompt", json!({"target": "delta", "text": "hi", "idempotency_key": "k-list"})).await.payload;
    assert_eq!((out["ok"].clone(), out["resolved_pane"].clone()), (json!(true), json!("w1:p1")), "{out}");
}

/// The real `herdr-mcp serve` over its Unix socket, with rmcp's client: a rename through
/// `herdr_call` is what `herdr_inspect`, a prompt by name and `/push/state` see at once.
#[tokio::test]
async fn a_rename_through_the_served_runtime_shows_everywhere_at_once() {
    let repo = common::git_repo(&[("a.txt", "a\n")]);
    let sim = HerdrSim::start().await;
    sim.add_workspace("w1", "repo");
    sim.add_pane("w1", "w1:p1", &repo.path().display().to_string());
    sim.add_agent("w1:p1", "pi", "idle");
    let socket = sim.socket.display().to_string();
    let cli = fake_herdr_cli(sim.dir()).display().to_string();
    let env = [("HERDR_SOCKET_PATH", socket.as_str()), ("HERDR_BIN_PATH", cli.as_str()), ("HERDR_MCP_AGENT_ALLOW", "all")];
    let rt = common::Runtime::start(&[repo.path()], &env).await;
    let pushed_name = |state: &Value| {
        state["agents"].as_array().and_then(|a| a.iter().find(|a| a["pane"] == "w1:p1")).map(|a| a["name"].clone())
    };
    let push_state = || async { common::raw_unix(&rt.socket, "GET", "/push/state", &[], None).await.expect("push state").json() };
    // A separate process: polled, with a deadline, until its cache is live.
    let deadline = Instant::now() + WAIT;
    loop {
        let state = push_state().await;
        if state["herdr_live"] == true && pushed_name(&state) == Some(json!("pi")) {
            break;
        }
        assert!(Instant::now() < deadline, "the runtime never showed the agent: {state}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let snapshots = sim.count("session.snapshot");

    let client = rt.client().await;
    let out = common::call_tool(&client, "herdr_call", rename_args("w1:p1", "alpha")).await;
    assert_eq!((out["ok"].clone(), out["result"]["agent"]["name"].clone()), (json!(true), json!("alpha")), "{out}");

    // No waiting from here on: the rename's answer was adopted before its call returned.
    let inspect = common::call_tool(&client, "herdr_inspect", json!({})).await;
    let agent = inspect["agents"].as_array().and_then(|a| a.iter().find(|a| a["pane"] == "w1:p1")).cloned();
    assert_eq!(agent.map(|a| a["name"].clone()), Some(json!("alpha")), "{inspect}");
    let state = push_state().await;
    assert_eq!(pushed_name(&state), Some(json!("alpha")), "{state}");
    let out =
        common::call_tool(&client, "herdr_prompt", json!({"target": "alpha", "text": "hello", "idempotency_key": "k-serve"}))
            .await;
    assert_eq!((out["ok"].clone(), out["resolved_pane"].clone()), (json!(true), json!("w1:p1")), "{out}");
    assert_eq!(sim.prompts(), [("alpha".to_string(), "hello".to_string())]);
    assert_eq!(sim.count("session.snapshot"), snapshots, "no re-snapshot was needed");
}
