//! `herdr_exec` with `intent` + `idempotency_key`, checked on disk: a command that
//! appends to a counter file runs exactly once however often it is sent. Plus the
//! workspace / project-root selection and the busy gate.

mod exec_support;

use std::path::PathBuf;
use std::sync::Arc;

use exec_support::{DEADLINE, Rig, line_count, poll};
use herdr_mcp::exec::workspaces::{Workspace, WorkspaceSource};
use herdr_mcp::tools::BoxFuture;
use serde_json::{Value, json};

fn exec_args(rig: &Rig, command: &str, key: &str) -> Value {
    let _ = rig;
    json!({"workspace": "proj", "command": command, "intent": "non_idempotent_write", "idempotency_key": key})
}

#[tokio::test]
async fn same_key_same_request_runs_once_and_replays() {
    let rig = Rig::new();
    let counter = rig.path("counter");
    let cmd = format!("echo line >> {}; echo done", counter.display());
    let first = rig.call("herdr_exec", exec_args(&rig, &cmd, "k-1")).await;
    assert_eq!(first["ok"], true, "{first}");
    assert_eq!((first["idempotent_replay"].clone(), first["idempotency_persisted"].clone()), (json!(false), json!(true)));
    assert_eq!(first["intent"], "non_idempotent_write");
    assert_eq!(first["safe_retry_mode"], "replay_with_same_key");
    assert_eq!(first["execution"], json!({"started": true, "completed": true, "exit_code": 0}));
    assert_eq!(first["output"], "done\n");
    assert_eq!(line_count(&counter), 1);

    let second = rig.call("herdr_exec", exec_args(&rig, &cmd, "k-1")).await;
    assert_eq!(second["idempotent_replay"], true, "{second}");
    assert_eq!(second["session_id"], first["session_id"]);
    assert_eq!(second["output"], "done\n");
    assert_eq!(line_count(&counter), 1, "the replay must not run the command again");

    // A different timeout is the same request; a different command is not.
    let mut slower = exec_args(&rig, &cmd, "k-1");
    slower["timeout_ms"] = json!(500);
    assert_eq!(rig.call("herdr_exec", slower).await["idempotent_replay"], true);
    let conflict = rig.call("herdr_exec", exec_args(&rig, &format!("{cmd}; echo other"), "k-1")).await;
    assert_eq!(conflict["code"], "idempotency_key_conflict", "{conflict}");
    assert_eq!(conflict["safe_retry_mode"], "new_key_for_a_different_request");
    assert_eq!(line_count(&counter), 1);

    // A new key is a new operation.
    assert_eq!(rig.call("herdr_exec", exec_args(&rig, &cmd, "k-2")).await["ok"], true);
    assert_eq!(line_count(&counter), 2);
}

#[tokio::test]
async fn concurrent_calls_with_one_key_deliver_once() {
    let rig = Arc::new(Rig::new());
    let counter = rig.path("counter");
    let cmd = format!("echo line >> {}; sleep 0.5", counter.display());
    let calls = (0..8).map(|_| {
        let (rig, cmd) = (Arc::clone(&rig), cmd.clone());
        tokio::spawn(async move { rig.call("herdr_exec", exec_args(&rig, &cmd, "same")).await })
    });
    let results: Vec<Value> = futures::future::join_all(calls).await.into_iter().map(|r| r.unwrap()).collect();
    let delivered = results.iter().filter(|r| r["ok"] == true && r["idempotent_replay"] == false).count();
    let unsettled = results.iter().filter(|r| r["code"] == "idempotency_in_flight").count();
    let replays = results.iter().filter(|r| r["idempotent_replay"] == true).count();
    assert_eq!(delivered, 1, "{results:#?}");
    assert_eq!(delivered + unsettled + replays, 8, "{results:#?}");
    for r in results.iter().filter(|r| r["code"] == "idempotency_in_flight") {
        assert_eq!(r["safe_retry_mode"], "wait_then_replay_with_same_key");
        assert_eq!(r["idempotent_replay"], false);
    }
    assert_eq!(line_count(&counter), 1);
}

#[tokio::test]
async fn a_timed_out_run_keeps_going_and_replays_its_session() {
    let rig = Rig::new();
    let marker = rig.path("marker");
    let cmd = format!("echo started; sleep 1; echo finished > {}", marker.display());
    let mut args = exec_args(&rig, &cmd, "slow");
    args["timeout_ms"] = json!(100);
    let first = rig.call("herdr_exec", args.clone()).await;
    assert_eq!(first["code"], "exec_timeout", "{first}");
    assert_eq!(first["phase"], "running");
    assert_eq!(first["failure_origin"], "timeout");
    assert_eq!(first["execution"], json!({"started": true, "completed": false, "exit_code": null}));
    let session = first["session_id"].as_str().unwrap().to_string();
    assert_eq!(first["op_id"], session.as_str());

    let replay = rig.call("herdr_exec", args).await;
    assert_eq!(replay["idempotent_replay"], true, "{replay}");
    assert_eq!(replay["code"], "exec_timeout");
    assert_eq!(replay["session_id"], session.as_str());

    // The command was not stopped by the timeout: it finishes and writes its marker once.
    let done = rig.wait_done(&session).await;
    assert_eq!(done["exit_code"], 0);
    assert!(poll(DEADLINE, || async { marker.exists().then_some(()) }).await.is_some());
    assert_eq!(rig.read_all(&session, "stdout").await.0, "started\n");
}

#[tokio::test]
async fn bad_intent_and_key_combinations_are_refused_before_anything_runs() {
    let rig = Rig::new();
    let counter = rig.path("counter");
    let cmd = format!("echo x >> {}", counter.display());
    for args in [
        json!({"workspace": "proj", "command": cmd, "idempotency_key": "k"}),
        json!({"workspace": "proj", "command": cmd, "intent": "idempotent_write"}),
        json!({"workspace": "proj", "command": cmd, "intent": "non_idempotent_write"}),
        json!({"workspace": "proj", "command": cmd, "intent": "often"}),
        json!({"workspace": "proj", "command": cmd, "intent": "read_only", "idempotency_key": ""}),
        json!({"workspace": "proj", "command": cmd, "intent": "read_only", "idempotency_key": "k".repeat(257)}),
        json!({"workspace": "proj"}),
        json!({"workspace": "proj", "command": cmd, "steps": [{"program": "true"}]}),
        json!({"workspace": "proj", "command": cmd, "timeout_ms": 60_001}),
        json!({"workspace": "proj", "command": cmd, "timeout_ms": 0}),
    ] {
        let out = rig.call("herdr_exec", args.clone()).await;
        assert_eq!(out["code"], "invalid_params", "{args} → {out}");
    }
    assert_eq!(line_count(&counter), 0);
    // The edges that are allowed.
    let out = rig.call("herdr_exec", json!({"workspace": "proj", "command": "true", "intent": "read_only"})).await;
    assert_eq!((out["ok"].clone(), out["idempotency_persisted"].clone(), out["safe_retry_mode"].clone()), (json!(true), json!(false), json!("retry_freely")));
    let key = "k".repeat(256);
    let out = rig.call("herdr_exec", json!({"workspace": "proj", "command": "true", "intent": "idempotent_write", "idempotency_key": key, "timeout_ms": 60_000})).await;
    assert_eq!(out["ok"], true, "{out}");
    // Without intent or key nothing idempotency-related is added.
    let out = rig.call("herdr_exec", json!({"workspace": "proj", "command": "true"})).await;
    assert!(out.get("intent").is_none() && out.get("safe_retry_mode").is_none(), "{out}");
}

#[tokio::test]
async fn steps_run_as_a_quoted_chain() {
    let rig = Rig::new();
    let out = rig
        .call("herdr_exec", json!({"workspace": "proj", "steps": [
            {"program": "printf", "args": ["%s|", "a b", "it's", "$HOME"]},
            {"program": "false"},
            {"program": "echo", "args": ["never"]}
        ]}))
        .await;
    assert_eq!(out["exit_code"], 1, "{out}");
    assert_eq!(out["ok"], false);
    assert_eq!(out["failure_origin"], "child_process");
    assert_eq!(out["output"], "a b|it's|$HOME|");
}

#[tokio::test]
async fn a_gate_refusal_gives_the_key_back() {
    let rig = Rig::with_policy(|p| p.with_readonly(true));
    let args = exec_args(&rig, "true", "gated");
    let out = rig.call("herdr_exec", args.clone()).await;
    assert_eq!(out["reason"], "readonly_mode", "{out}");
    assert!(out.get("execution").is_none(), "a gate refusal carries no execution evidence: {out}");
    assert_eq!((out["idempotency_persisted"].clone(), out["safe_retry_mode"].clone()), (json!(false), json!("retry_with_same_key")));
    let rows: i64 = rig.exec.db().with(|c| c.query_row("SELECT COUNT(*) FROM operations", [], |r| r.get(0))).unwrap();
    assert_eq!(rows, 0);
}

#[tokio::test]
async fn standalone_workspaces_are_named_after_their_root() {
    let rig = Rig::new();
    let out = rig.call("herdr_exec", json!({"workspace": "nope", "command": "true"})).await;
    assert_eq!(out["reason"], "workspace_not_found", "{out}");
    assert_eq!(out["available"], json!([{"id": "proj", "label": "proj"}]));
    let out = rig.call("herdr_exec", json!({"workspace": "proj", "command": "pwd", "project_root": rig.root_str()})).await;
    assert_eq!(out["output"], format!("{}\n", rig.root_str()));
    assert_eq!(out["effective_cwd"], rig.root_str());
    let elsewhere = tempfile::tempdir().unwrap();
    let out = rig.call("herdr_exec", json!({"workspace": "proj", "command": "true", "project_root": elsewhere.path().display().to_string()})).await;
    assert_eq!(out["reason"], "project_root_not_in_workspace", "{out}");
    assert_eq!(out["candidates"], json!([rig.root_str()]));
}

/// A Herdr-like source: one workspace with two projects, an agent working in one.
struct TwoProjects {
    a: PathBuf,
    b: PathBuf,
}

impl WorkspaceSource for TwoProjects {
    fn workspaces(&self) -> BoxFuture<Vec<Workspace>> {
        let w = Workspace { id: "w1".into(), label: "main".into(), roots: vec![self.a.clone(), self.b.clone()] };
        Box::pin(async move { vec![w] })
    }
    fn working_agents(&self, root: PathBuf) -> BoxFuture<Vec<Value>> {
        let busy = root == self.b;
        Box::pin(async move { if busy { vec![json!({"pane": "p2", "agent": "claude"})] } else { vec![] } })
    }
}

#[tokio::test]
async fn several_projects_need_a_project_root_and_busy_projects_need_confirmation() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let (a, b) = (a.canonicalize().unwrap(), b.canonicalize().unwrap());
    let rig = Rig::new();
    let mut ctx = herdr_mcp::tools::ToolContext::new(rig.ctx.info.clone(), herdr_mcp::policy::Policy::for_tests(vec![a.clone(), b.clone()]));
    ctx.services = rig.ctx.services.clone();
    ctx.services.workspaces = Some(Arc::new(TwoProjects { a: a.clone(), b: b.clone() }));
    let ctx = Arc::new(ctx);
    let call = |args: Value| {
        let ctx = Arc::clone(&ctx);
        async move { herdr_mcp::tools::ToolRegistry::standard().call(&ctx, "herdr_exec", Some(args)).await.payload }
    };
    let out = call(json!({"workspace": "main", "command": "true"})).await;
    assert_eq!(out["reason"], "project_root_required", "{out}");
    assert_eq!(out["candidates"].as_array().unwrap().len(), 2);
    assert!(out.get("execution").is_none());
    let out = call(json!({"workspace": "w1", "command": "pwd", "project_root": a.display().to_string()})).await;
    assert_eq!(out["output"], format!("{}\n", a.display()), "{out}");
    let out = call(json!({"workspace": "w1", "command": "touch busy", "project_root": b.display().to_string()})).await;
    assert_eq!(out["reason"], "agent_working", "{out}");
    assert_eq!(out["working"], json!([{"pane": "p2", "agent": "claude"}]));
    assert!(out["hint"].as_str().is_some_and(|h| h.contains("confirm_busy")), "{out}");
    assert!(!b.join("busy").exists());
    let out = call(json!({"workspace": "w1", "command": "touch busy", "project_root": b.display().to_string(), "confirm_busy": true})).await;
    assert_eq!(out["ok"], true, "{out}");
    assert_eq!(out["warnings"], json!({"working": [{"pane": "p2", "agent": "claude"}]}));
    assert!(b.join("busy").exists());
}
