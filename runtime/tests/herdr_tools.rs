//! Every Herdr-backed tool through the tool registry, against the simulator.

mod herdr_sim;

use std::sync::Arc;
use std::time::{Duration, Instant};

use herdr_mcp::herdr::visibility::AgentVisibility;
use herdr_mcp::herdr::{HerdrConfig, HerdrService};
use herdr_sim::harness::{Rig, call, config, context, fake_herdr_cli, rig_on};
use herdr_sim::{Fault, HerdrSim};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(5);

/// A simulator with one workspace, two panes and a `pi` agent on `w1:p1`.
async fn rig_with(adjust: impl FnOnce(&mut HerdrConfig, &HerdrSim), live_cache: bool, readonly: bool) -> Rig {
    let sim = HerdrSim::start().await;
    sim.add_workspace("w1", "repo");
    sim.add_pane("w1", "w1:p1", "/tmp");
    sim.add_pane("w1", "w1:p2", "/tmp");
    sim.add_agent("w1:p1", "pi", "idle");
    let mut cfg = config(&sim.socket);
    adjust(&mut cfg, &sim);
    rig_on(sim, cfg, live_cache, readonly, WAIT).await
}

async fn rig() -> Rig {
    rig_with(|c, sim| c.herdr_bin = Some(fake_herdr_cli(sim.dir())), true, false).await
}

#[tokio::test]
async fn tools_answer_herdr_unavailable_without_a_server() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(&dir.path().join("absent.sock"));
    cfg.herdr_bin = Some(fake_herdr_cli(dir.path()));
    let service = HerdrService::new(cfg, None);
    let ctx = context(Some(service), None, false);
    let started = Instant::now();
    for (tool, args) in [
        ("herdr_since", json!({})),
        ("herdr_call", json!({"method": "pane.list"})),
        ("herdr_prompt", json!({"target": "w1:p1", "text": "hi"})),
    ] {
        let out = call(&ctx, tool, args).await;
        assert_eq!(out.payload["ok"], false, "{tool}");
        assert_eq!(out.payload["code"], "herdr_unavailable", "{tool}: {}", out.payload);
        assert_eq!(out.payload["herdr_code"], "socket_missing");
        assert!(out.payload["hint"].as_str().unwrap().contains("herdr"), "{tool} says how to start Herdr");
        assert!(!out.is_error);
    }
    let prompt = call(&ctx, "herdr_prompt", json!({"target": "w1:p1", "text": "hi"})).await;
    assert_eq!(prompt.payload["retryable"], true);
    assert_eq!(prompt.payload["delivery_uncertain"], false);
    // A runtime without any Herdr service answers the same way.
    let bare = context(None, None, false);
    assert_eq!(call(&bare, "herdr_since", json!({})).await.payload["code"], "herdr_unavailable");
    assert!(started.elapsed() < Duration::from_secs(2), "nothing waits on a missing socket");
}

#[tokio::test]
async fn methods_reads_the_cli_schema_and_filters() {
    let r = rig().await;
    let all = call(&r.ctx, "herdr_methods", json!({})).await.payload;
    assert_eq!(all["ok"], true);
    assert_eq!(all["count"], 12);
    assert_eq!(all["source"], "herdr api schema --json (live, 60s cache)");
    let read = call(&r.ctx, "herdr_methods", json!({"query": "PANE.READ"})).await.payload;
    assert_eq!(read["count"], 1);
    let m = &read["methods"][0];
    assert_eq!(m["method"], "pane.read");
    assert_eq!(m["params"]["required"], json!(["pane_id", "source"]));
    assert_eq!(m["params"]["properties"]["source"]["enum"][1], "recent");
    assert_eq!(call(&r.ctx, "herdr_methods", json!({"query": "nothing-like-this"})).await.payload["count"], 0);
}

#[tokio::test]
async fn methods_and_call_without_the_cli_are_schema_unavailable() {
    let r = rig_with(|_, _| {}, false, false).await;
    let out = call(&r.ctx, "herdr_methods", json!({})).await.payload;
    assert_eq!((out["ok"].clone(), out["reason"].clone()), (json!(false), json!("schema_unavailable")));
    let out = call(&r.ctx, "herdr_call", json!({"method": "pane.list"})).await.payload;
    assert_eq!(out["reason"], "schema_unavailable");
    assert_eq!(r.sim.count("pane.list"), 0);
}

#[tokio::test]
async fn call_local_methods_fail_closed() {
    let r = rig().await;
    let before = r.sim.requests().len();
    for m in ["herdr_mcp.skill.list", "continuity.resume", "work_memory.get", "artifact.list", "herdr_mcp.browser_open"] {
        let out = call(&r.ctx, "herdr_call", json!({"method": m})).await.payload;
        assert_eq!(out["code"], "unknown_local_method", "{m}");
    }
    assert_eq!(r.sim.requests().len(), before, "nothing was forwarded");
}

#[tokio::test]
async fn call_validates_params_before_sending() {
    let r = rig().await;
    // The event cache asks Herdr in the background; these calls must add nothing.
    let sent = |sim: &HerdrSim| sim.count("pane.read") + sim.count("pane.teleport");
    let before = sent(&r.sim);
    let out = call(&r.ctx, "herdr_call", json!({"method": "pane.read", "params": "{not json"})).await.payload;
    assert_eq!(out["code"], "invalid_params_json");
    let out = call(&r.ctx, "herdr_call", json!({"method": "pane.read", "params": "[1,2]"})).await.payload;
    assert_eq!(out["code"], "invalid_params");
    assert_eq!(out["message"], "herdr_call params must decode to an object");
    let out =
        call(&r.ctx, "herdr_call", json!({"method": "pane.read", "params": "{\"pane_id\": 7, \"source\": \"everything\"}"}))
            .await
            .payload;
    assert_eq!(out["code"], "invalid_params");
    let names: Vec<&str> = out["errors"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["pane_id", "source"]);
    let out = call(&r.ctx, "herdr_call", json!({"method": "pane.read", "params": "{\"source\": \"recent\"}"})).await.payload;
    assert_eq!(out["errors"][0]["name"], "pane_id");
    let out = call(&r.ctx, "herdr_call", json!({"method": "pane.teleport"})).await.payload;
    assert_eq!(out["code"], "unknown_method");
    assert_eq!(sent(&r.sim), before, "no socket call for invalid params");
}

#[tokio::test]
async fn call_passes_results_errors_and_warnings_through() {
    let r = rig().await;
    r.sim.set_pane_text("w1:p2", "hello from the pane\n");
    let out = call(
        &r.ctx,
        "herdr_call",
        json!({"method": "pane.read", "params": "{\"pane_id\":\"w1:p2\",\"source\":\"recent\",\"colour\":true}"}),
    )
    .await
    .payload;
    assert_eq!(out["ok"], true, "{out}");
    assert_eq!(out["result"]["read"]["text"], "hello from the pane\n");
    assert!(out["warnings"][0].as_str().unwrap().contains("colour"));
    let sent = r.sim.requests().into_iter().rev().find(|q| q["method"] == "pane.read").unwrap();
    assert_eq!(sent["params"]["colour"], true, "unknown params are still sent");
    let out =
        call(&r.ctx, "herdr_call", json!({"method": "pane.read", "params": "{\"pane_id\":\"w9:p9\",\"source\":\"recent\"}"}))
            .await
            .payload;
    assert_eq!(
        (out["ok"].clone(), out["code"].clone(), out["method"].clone()),
        (json!(false), json!("pane_not_found"), json!("pane.read"))
    );
    let out = call(&r.ctx, "herdr_call", json!({"method": "workspace.list"})).await.payload;
    assert_eq!(out["result"]["workspaces"][0]["workspace_id"], "w1");
}

#[tokio::test]
async fn call_reports_silent_and_garbage_sockets_clearly() {
    let r = rig().await;
    r.sim.set_method_fault("pane.list", Some(Fault::Garbage));
    let out = call(&r.ctx, "herdr_call", json!({"method": "pane.list"})).await.payload;
    assert_eq!(out["code"], "parse_error");
    assert!(out["message"].as_str().unwrap().contains("not JSON"));
    r.sim.set_method_fault("pane.list", Some(Fault::Silent));
    let started = Instant::now();
    let out = call(&r.ctx, "herdr_call", json!({"method": "pane.list"})).await.payload;
    assert_eq!(out["code"], "timeout");
    assert!(started.elapsed() < Duration::from_secs(3), "bounded by the configured budget");
}

#[tokio::test]
async fn since_cursors_ring_and_reset() {
    let r = rig().await;
    let first = call(&r.ctx, "herdr_since", json!({})).await.payload;
    assert_eq!(first["ok"], true);
    assert_eq!(first["boot_id"], r.ctx.info.boot_id);
    assert_eq!(first["cursor"], 0);
    assert_eq!(first["agents"][0]["pane"], "w1:p1");
    assert_eq!(first["workspaces"][0]["workspace_id"], "w1");
    assert_eq!(first["workspaces"][0]["panes"], json!(["w1:p1", "w1:p2"]));

    r.sim.set_agent_status("w1:p1", "working");
    r.sim.set_agent_status("w1:p1", "done");
    assert!(r.service.cache.wait_for(WAIT, |c| c.history_page(0, |_| true).cursor == 2).await);
    let page = call(&r.ctx, "herdr_since", json!({"cursor": 0})).await.payload;
    assert_eq!(page["event_count"], 2);
    assert_eq!(page["events"][0]["type"], "pane.agent_status_changed");
    assert_eq!(page["events"][1]["agent_status"], "done");
    assert_eq!(page["events"][1]["pane_id"], "w1:p1");
    assert_eq!(page["agents"][0]["status"], "done");
    assert!(page["agents"][0]["last_activity_at"].is_string());
    let newer = call(&r.ctx, "herdr_since", json!({"cursor": 1})).await.payload;
    assert_eq!(newer["event_count"], 1);
    assert_eq!(newer["events"][0]["cursor"], 2);
    let none = call(&r.ctx, "herdr_since", json!({"cursor": 2})).await.payload;
    assert_eq!((none["event_count"].clone(), none["cursor_reset"].clone()), (json!(0), json!(false)));
    let reset = call(&r.ctx, "herdr_since", json!({"cursor": 99})).await.payload;
    assert_eq!(reset["cursor_reset"], true);
    assert_eq!(reset["warnings"], json!(["cursor_reset_boot_or_rollover"]));
    let bad = call(&r.ctx, "herdr_since", json!({"cursor": -1})).await.payload;
    assert_eq!(bad["code"], "invalid_params");
}

#[tokio::test]
async fn since_filters_by_workspace_and_hides_agents_outside_the_allowlist() {
    let r = rig_with(|c, _| c.visibility = AgentVisibility::from_setting(None), true, false).await;
    r.sim.add_workspace("w2", "other");
    r.sim.add_pane("w2", "w2:p1", "/tmp");
    r.sim.add_agent("w2:p1", "claude", "idle");
    assert!(r.service.cache.wait_for(WAIT, |c| c.live_view().is_some_and(|v| v.topology.agents.len() == 2)).await);
    let all = call(&r.ctx, "herdr_since", json!({})).await.payload;
    assert_eq!(all["agent_visibility"], "allowlist");
    assert_eq!(all["agents_hidden"], 1, "claude is not on the default allowlist");
    assert_eq!(all["agents"].as_array().unwrap().len(), 1);
    let by_label = call(&r.ctx, "herdr_since", json!({"workspace": "other"})).await.payload;
    assert_eq!(by_label["workspaces"].as_array().unwrap().len(), 1);
    assert_eq!(by_label["workspaces"][0]["workspace_id"], "w2");
    assert!(by_label["events"].as_array().unwrap().iter().all(|e| e["workspace_id"] == "w2"));
    assert!(!by_label["events"].as_array().unwrap().is_empty());
}

#[tokio::test]
async fn since_without_a_live_cache_takes_a_snapshot() {
    let r = rig_with(|_, _| {}, false, false).await;
    let out = call(&r.ctx, "herdr_since", json!({})).await.payload;
    assert_eq!(out["ok"], true);
    assert_eq!(out["agents"][0]["pane"], "w1:p1");
    assert_eq!(out["warnings"], json!(["event_cache_not_live"]));
}

#[tokio::test]
async fn prompt_observes_the_agent_before_and_after() {
    let r = rig().await;
    r.sim.set_on_prompt(&["working"]);
    let out =
        call(&r.ctx, "herdr_prompt", json!({"target": "w1:p1", "text": "fix the tests", "idempotency_key": "k1"})).await.payload;
    assert_eq!(out["ok"], true, "{out}");
    assert_eq!(out["status"], "submitted");
    assert_eq!(out["submitted"], true);
    assert_eq!(out["resolved_pane"], "w1:p1");
    assert_eq!(out["before"]["agent_status"], "idle");
    assert_eq!(out["after"]["agent_status"], "working");
    assert_eq!(out["state_observation"]["changed"], true);
    assert_eq!(out["idempotent_replay"], false);
    assert_eq!(r.sim.prompts(), [("w1:p1".to_string(), "fix the tests".to_string())]);
    assert_eq!(r.sim.count("pane.send_text"), 0, "prompts never go through pane.send_text");

    // With wait: the agent works and finishes; the call returns when it is done.
    r.sim.set_on_prompt(&["working", "done"]);
    let out = call(
        &r.ctx,
        "herdr_prompt",
        json!({"target": "w1:p1", "text": "again", "wait": {"until": ["done"], "timeout_ms": 2000}}),
    )
    .await
    .payload;
    assert_eq!(out["ok"], true, "{out}");
    assert_eq!(out["after"]["agent_status"], "done");
    assert_eq!(out["wait"]["completed"], true);
    assert!(out["idempotency_hint"].is_string());

    // Nothing observable happens: without wait the change is unknown.
    r.sim.set_on_prompt(&[]);
    let out = call(&r.ctx, "herdr_prompt", json!({"target": "w1:p1", "text": "quiet"})).await.payload;
    assert_eq!(out["state_observation"]["changed"], "unknown");
    assert!(out["seq_note"].is_string());
}

#[tokio::test]
async fn prompt_idempotency_replays_conflicts_and_in_flight() {
    let r = rig().await;
    r.sim.set_on_prompt(&["working"]);
    let args = json!({"target": "w1:p1", "text": "once only", "idempotency_key": "same"});
    let first = call(&r.ctx, "herdr_prompt", args.clone()).await.payload;
    assert_eq!(first["ok"], true);
    let again = call(&r.ctx, "herdr_prompt", args.clone()).await.payload;
    assert_eq!(again["idempotent_replay"], true);
    assert_eq!(again["after"], first["after"]);
    assert_eq!(r.sim.prompts().len(), 1, "the replay did not type the prompt again");
    let other = call(&r.ctx, "herdr_prompt", json!({"target": "w1:p1", "text": "something else", "idempotency_key": "same"}))
        .await
        .payload;
    assert_eq!((other["code"].clone(), other["retryable"].clone()), (json!("idempotency_key_conflict"), json!(false)));

    // In flight: a prompt that waits for a status that never comes holds its key.
    r.sim.set_on_prompt(&["working"]);
    let slow_args =
        json!({"target": "w1:p1", "text": "slow", "idempotency_key": "slow", "wait": {"until": ["done"], "timeout_ms": 1500}});
    let ctx = Arc::clone(&r.ctx);
    let a = slow_args.clone();
    let slow = tokio::spawn(async move { call(&ctx, "herdr_prompt", a).await.payload });
    assert!(r.sim.wait_until(WAIT, |s| s.prompts().len() == 2).await);
    let dup = call(&r.ctx, "herdr_prompt", slow_args.clone()).await.payload;
    assert_eq!((dup["code"].clone(), dup["submitted"].clone()), (json!("idempotency_in_flight"), json!("unknown")));
    let timed_out = slow.await.unwrap();
    assert_eq!(timed_out["ok"], false);
    assert_eq!(timed_out["failure"], "agent_status_wait_timeout");
    assert_eq!(timed_out["failure_phase"], "post_submission_status_wait");
    assert_eq!(timed_out["submitted"], true);
    assert_eq!(timed_out["delivery_uncertain"], true);
    assert_eq!(timed_out["retryable"], false);
    assert_eq!(timed_out["wait"]["reason"], "agent_status_timeout");
    let replay = call(&r.ctx, "herdr_prompt", slow_args).await.payload;
    assert_eq!(replay["idempotent_replay"], true);
    assert_eq!(replay["failure"], "agent_status_wait_timeout");
    assert_eq!(r.sim.prompts().len(), 2);
}

#[tokio::test]
async fn prompt_refusals_blocked_unknown_readonly_and_lost_answers() {
    let r = rig().await;
    r.sim.set_agent_status("w1:p1", "blocked");
    let out = call(&r.ctx, "herdr_prompt", json!({"target": "w1:p1", "text": "hi", "idempotency_key": "b"})).await.payload;
    assert_eq!((out["code"].clone(), out["submitted"].clone()), (json!("agent_blocked"), json!(false)));
    assert_eq!(out["delivery_uncertain"], false);
    assert!(r.sim.prompts().is_empty());

    let out = call(&r.ctx, "herdr_prompt", json!({"target": "nobody", "text": "hi", "idempotency_key": "n"})).await.payload;
    assert_eq!((out["code"].clone(), out["failure_phase"].clone()), (json!("agent_not_found"), json!("resolve")));
    assert_eq!(out["delivery_uncertain"], false);

    r.sim.set_agent_status("w1:p1", "idle");
    r.sim.set_method_fault("agent.prompt", Some(Fault::Garbage));
    let out = call(&r.ctx, "herdr_prompt", json!({"target": "w1:p1", "text": "hi"})).await.payload;
    assert_eq!(out["failure_phase"], "submit_or_response_lost");
    assert_eq!(out["submitted"], "unknown");
    assert_eq!(out["delivery_uncertain"], true);
    assert_eq!(out["retryable"], false);

    let ro = rig_with(|_, _| {}, false, true).await;
    let out = call(&ro.ctx, "herdr_prompt", json!({"target": "w1:p1", "text": "hi"})).await.payload;
    assert_eq!((out["reason"].clone(), out["action"].clone()), (json!("readonly_mode"), json!("herdr_prompt")));
    assert!(ro.sim.prompts().is_empty());
    assert_eq!(call(&ro.ctx, "herdr_prompt", json!({"target": "", "text": "x"})).await.payload["code"], "invalid_params");
}

#[tokio::test]
async fn inspect_live_parts_report_herdr_topology_and_projects() {
    let repo = tempfile::tempdir().unwrap();
    std::fs::create_dir(repo.path().join(".git")).unwrap();
    let repo_s = repo.path().display().to_string();
    let r = rig_with(|c, _| c.visibility = AgentVisibility::from_setting(None), false, false).await;
    r.sim.add_workspace("w2", "proj");
    r.sim.add_pane("w2", "w2:p1", &repo_s);
    r.sim.add_agent("w2:p1", "claude", "working");
    r.sim.name_agent("w1:p1", "pi-main");
    let live = herdr_mcp::herdr::inspect::live_parts(&r.service).await.unwrap();
    assert_eq!(live["herdr_version"], "0.8.2");
    assert_eq!(live["protocol"], 20);
    assert_eq!(live["focused_workspace"], "w1");
    assert_eq!(live["capability_inventory"]["source"], "session.snapshot");
    assert_eq!(live["agent_visibility"], "allowlist");
    assert_eq!(live["agents_hidden"], 1);
    assert_eq!(live["agents"].as_array().unwrap().len(), 1);
    assert_eq!(live["agents"][0]["name"], "pi-main");
    assert_eq!(live["agents"][0]["kind"], "pi");
    let hidden_pane = live["panes"].as_array().unwrap().iter().find(|p| p["id"] == "w2:p1").unwrap();
    assert!(hidden_pane["agent"].is_null(), "hidden agents are nulled on their pane");
    let ws2 = live["workspaces"].as_array().unwrap().iter().find(|w| w["id"] == "w2").unwrap();
    assert_eq!(ws2["projects"][0]["root"], repo_s);
    assert_eq!(ws2["projects"][0]["managed"], true);
    assert_eq!(ws2["projects"][0]["vcs"], "git");
    assert_eq!(live["managed_git_roots"], json!([repo_s]));
    assert_eq!(live["tabs"].as_array().unwrap().len(), 2);

    // With the snapshot failing the list APIs stand in, with a warning.
    r.sim.set_snapshot_fails(true);
    let live = herdr_mcp::herdr::inspect::live_parts(&r.service).await.unwrap();
    assert_eq!(live["warnings"], json!(["snapshot_failed_used_list_apis"]));
    // A silent ping fails in the ping phase, within its budget.
    r.sim.set_method_fault("ping", Some(Fault::Silent));
    let failure = herdr_mcp::herdr::inspect::live_parts(&r.service).await.unwrap_err();
    assert_eq!((failure.phase, failure.error.code.as_str()), ("ping", "timeout"));
    let out = failure.to_output().payload;
    assert_eq!((out["code"].clone(), out["failure_phase"].clone()), (json!("timeout"), json!("ping")));
}

#[tokio::test]
async fn inspect_tool_overlays_live_herdr_on_the_standalone_payload() {
    let r = rig().await;
    let out = call(&r.ctx, "herdr_inspect", json!({})).await.payload;
    assert_eq!(out["ok"], true, "{out}");
    assert_eq!(out["mode"], "herdr");
    assert_eq!(out["herdr_available"], true);
    assert_eq!(out["herdr_version"], "0.8.2");
    assert_eq!(out["capability_inventory"]["source"], "event_cache");
    assert_eq!(out["workspaces"][0]["id"], "w1");
    assert_eq!(out["agents"][0]["pane"], "w1:p1");
    assert_eq!(out["workstation_info"]["boot_id"], r.ctx.info.boot_id, "standalone fields stay");

    // Herdr configured but not running: the standalone answer, saying why.
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(Some(HerdrService::new(config(&dir.path().join("gone.sock")), None)), None, false);
    let out = call(&ctx, "herdr_inspect", json!({})).await.payload;
    assert_eq!(out["ok"], true);
    assert_eq!(out["herdr_available"], false);
    assert_eq!(out["herdr"]["code"], "socket_missing");
    assert!(out["herdr"]["hint"].is_string());

    // A Herdr that answers garbage is an error with its phase, not a silent fallback.
    r.sim.set_method_fault("ping", Some(Fault::Garbage));
    let out = call(&r.ctx, "herdr_inspect", json!({})).await.payload;
    assert_eq!((out["code"].clone(), out["failure_phase"].clone()), (json!("parse_error"), json!("ping")));
}

/// The guide's live block follows the runtime: connected while Herdr's event
/// cache is live, configured-but-silent when Herdr does not answer.
#[tokio::test]
async fn skill_reports_herdr_as_the_runtime_sees_it() {
    let live = rig().await;
    let out = call(&live.ctx, "herdr_skill", json!({"include_native_reference": false})).await.payload;
    let status = out["runtime"]["herdr"].as_str().unwrap();
    assert!(status.starts_with("connected"), "{status}");
    assert!(out["content"].as_str().unwrap().contains(status), "the text block says the same");

    let dir = tempfile::tempdir().unwrap();
    let silent = context(Some(HerdrService::new(config(&dir.path().join("absent.sock")), None)), None, false);
    let out = call(&silent, "herdr_skill", json!({})).await.payload;
    assert!(out["runtime"]["herdr"].as_str().unwrap().starts_with("configured but not answering"), "{out}");
}

/// A task-group failure inside Herdr while prompting is reported as Herdr's
/// internal failure (spec §1.18): not retryable, the delivery unknown, with the
/// error as Herdr gave it. The key is spent: a retry replays the answer and
/// never types the prompt a second time.
#[tokio::test]
async fn prompt_reports_a_taskgroup_failure_as_herdr_internal() {
    let r = rig().await;
    r.sim.set_method_fault("agent.prompt", Some(Fault::TaskGroup));
    let args = json!({"target": "w1:p1", "text": "hi", "idempotency_key": "tg"});
    let out = call(&r.ctx, "herdr_prompt", args.clone()).await.payload;
    assert_eq!(out["ok"], false, "{out}");
    assert_eq!((out["code"].clone(), out["failure"].clone()), (json!("control_plane_taskgroup"), json!("herdr_internal")), "{out}");
    assert_eq!(out["failure_phase"], "control_plane_taskgroup");
    assert_eq!((out["retryable"].clone(), out["delivery_uncertain"].clone(), out["submitted"].clone()), (json!(false), json!(true), json!("unknown")));
    assert_eq!(out["error"]["type"], "internal_error", "{out}");
    assert!(out["error"]["message"].as_str().unwrap().contains("TaskGroup"), "{out}");
    assert!(out["error"]["raw"].as_str().unwrap().contains("TaskGroup"), "{out}");
    assert_eq!(out["before"]["agent_status"], "idle", "{out}");
    let sent = r.sim.count("agent.prompt");
    r.sim.set_method_fault("agent.prompt", None);
    let again = call(&r.ctx, "herdr_prompt", args).await.payload;
    assert_eq!(again["idempotent_replay"], true, "{again}");
    assert_eq!(again["code"], "control_plane_taskgroup");
    assert_eq!(r.sim.count("agent.prompt"), sent, "the replay sent nothing");
}

#[tokio::test]
async fn prompt_to_an_agent_that_does_not_react_is_stalled_yet_submitted() {
    // Herdr 0.8.2: agent.prompt with wait, from a non-working agent that shows no
    // change within 5 s, answers `agent_prompt_stalled` — after typing the text.
    let r = rig().await;
    r.sim.set_prompt_stall(Some(Duration::from_millis(300)));
    r.sim.set_on_prompt(&[]);
    let args = json!({"target": "w1:p1", "text": "anyone there?", "idempotency_key": "quiet",
        "wait": {"until": ["idle", "done"], "timeout_ms": 2000}});
    let out = call(&r.ctx, "herdr_prompt", args.clone()).await.payload;
    assert_eq!((out["ok"].clone(), out["code"].clone()), (json!(false), json!("agent_prompt_stalled")), "{out}");
    assert_eq!(out["failure"], "agent_prompt_stalled");
    assert_eq!(out["failure_phase"], "post_submission_status_wait");
    assert_eq!(out["submitted"], true, "Herdr typed the prompt before it gave up watching");
    assert_eq!((out["delivery_uncertain"].clone(), out["retryable"].clone()), (json!(true), json!(false)));
    assert_eq!(out["wait"], json!({"completed": false, "reason": "agent_did_not_react"}));
    assert_eq!(out["after"]["agent_status"], "idle");
    let replay = call(&r.ctx, "herdr_prompt", args).await.payload;
    assert_eq!((replay["idempotent_replay"].clone(), replay["code"].clone()), (json!(true), json!("agent_prompt_stalled")));
    assert_eq!(r.sim.prompts().len(), 1, "never typed twice");

    // An agent that reacts is not stalled, even when it ends where it started.
    r.sim.set_on_prompt(&["working", "idle"]);
    let out =
        call(&r.ctx, "herdr_prompt", json!({"target": "w1:p1", "text": "go", "wait": {"until": ["idle"], "timeout_ms": 2000}}))
            .await
            .payload;
    assert_eq!((out["ok"].clone(), out["wait"]["completed"].clone()), (json!(true), json!(true)), "{out}");
}

#[tokio::test]
async fn call_gives_a_prompt_wait_the_time_it_asks_for() {
    // herdr_call agent.prompt with wait.timeout_ms beyond the default budget (1.5 s in
    // these tests): the answer is Herdr's, not a local timeout that would leave the
    // caller unsure whether the prompt was typed.
    let r = rig().await;
    r.sim.set_on_prompt(&["working"]);
    let params = json!({"target": "w1:p1", "text": "long one", "wait": {"until": ["done"], "timeout_ms": 2000}});
    let started = Instant::now();
    let out = call(&r.ctx, "herdr_call", json!({"method": "agent.prompt", "params": params.to_string()})).await.payload;
    assert_eq!(out["code"], "timeout", "{out}");
    assert_eq!(out["message"], "timed out waiting for agent status", "Herdr's own answer: {out}");
    assert!(started.elapsed() >= Duration::from_secs(2), "{:?}", started.elapsed());
    assert_eq!(r.sim.prompts().len(), 1);
}

#[tokio::test]
async fn prompt_wait_longer_than_the_call_cap_is_a_wait_timeout_not_a_lost_answer() {
    // The prompt call is capped (60 s; 3 s in these tests), so a wait near the top of its
    // range outlasts it: our own timeout then ends the wait. The prompt was sent on a
    // connection Herdr accepted, so this is the wait running out, with delivery unknown.
    let r = rig().await;
    r.sim.set_on_prompt(&["working"]);
    let args = json!({"target": "w1:p1", "text": "take your time", "idempotency_key": "long",
        "wait": {"until": ["done"], "timeout_ms": 5000}});
    let started = Instant::now();
    let out = call(&r.ctx, "herdr_prompt", args.clone()).await.payload;
    assert!(started.elapsed() < Duration::from_secs(5), "the cap ended it: {:?}", started.elapsed());
    assert_eq!((out["ok"].clone(), out["failure"].clone()), (json!(false), json!("agent_status_wait_timeout")), "{out}");
    assert_eq!(out["failure_phase"], "post_submission_status_wait");
    assert_eq!((out["submitted"].clone(), out["delivery_uncertain"].clone()), (json!("unknown"), json!(true)));
    assert_eq!(out["wait"], json!({"completed": false, "reason": "agent_status_timeout"}));
    assert_eq!(
        (out["before"]["agent_status"].clone(), out["after"]["agent_status"].clone()),
        (json!("idle"), json!("working")),
        "{out}"
    );
    let replay = call(&r.ctx, "herdr_prompt", args).await.payload;
    assert_eq!(replay["idempotent_replay"], true, "the key is kept: never typed twice");
    assert_eq!(r.sim.prompts().len(), 1);
}
