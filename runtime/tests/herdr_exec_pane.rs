//! The utility_pane backend of herdr_exec against the Herdr simulator, whose panes
//! really run what is typed into them: the pane is created once and reused, the
//! command's output and exit code come back through an ordinary exec session, a busy
//! pane or a missing Herdr refuses before anything is typed, and killing the session
//! interrupts the pane.

mod exec_support;
mod herdr_sim;

use std::sync::Arc;
use std::time::Duration;

use exec_support::{poll, test_config};
use herdr_mcp::exec::ExecRegistry;
use herdr_mcp::exec::backend::BackendChoice;
use herdr_mcp::exec::procfs;
use herdr_mcp::exec::workspaces::StandaloneWorkspaces;
use herdr_mcp::herdr::HerdrService;
use herdr_mcp::herdr::utility_pane::LABEL;
use herdr_mcp::herdr::workspaces::HerdrWorkspaces;
use herdr_mcp::policy::Policy;
use herdr_mcp::runtime_info::RuntimeInfo;
use herdr_mcp::state::StateDb;
use herdr_mcp::tools::ToolContext;
use herdr_sim::HerdrSim;
use herdr_sim::harness::{call, config};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(10);

struct Rig {
    sim: HerdrSim,
    ctx: Arc<ToolContext>,
    root: std::path::PathBuf,
    cancel: CancellationToken,
    _tmp: tempfile::TempDir,
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// Workspace `w1` with one pane in a git project; herdr_exec forced to the utility pane.
async fn make_rig(with_herdr: bool) -> Rig {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("proj/.git")).unwrap();
    let root = tmp.path().join("proj").canonicalize().unwrap();
    let sim = HerdrSim::start().await;
    sim.add_workspace("w1", "proj");
    sim.add_pane("w1", "w1:p1", &root.display().to_string());
    let info = RuntimeInfo::new();
    let db = Arc::new(StateDb::open(&tmp.path().join("state"), &info.boot_id).unwrap());
    let exec = ExecRegistry::new(Arc::clone(&db), test_config());
    let policy = Policy::for_tests(vec![root.clone()]);
    let mut ctx = ToolContext::new(info, policy.clone());
    ctx.services.state = Some(db);
    ctx.services.exec = Some(exec);
    ctx.services.exec_backend = BackendChoice::UtilityPane;
    let cancel = CancellationToken::new();
    if with_herdr {
        let service = HerdrService::new(config(&sim.socket), None);
        service.start(cancel.clone());
        assert!(service.cache.wait_for(WAIT, |c| c.is_live()).await);
        ctx.services.workspaces = Some(Arc::new(HerdrWorkspaces::new(Arc::clone(&service), StandaloneWorkspaces::from_policy(&policy))));
        ctx.services.herdr = Some(service);
    }
    Rig { sim, ctx: Arc::new(ctx), root, cancel, _tmp: tmp }
}

async fn exec(rig: &Rig, args: Value) -> Value {
    call(&rig.ctx, "herdr_exec", args).await.payload
}

fn utility_panes(sim: &HerdrSim) -> Vec<String> {
    sim.pane_ids().into_iter().filter(|p| sim.pane(p).is_some_and(|v| v["label"] == LABEL)).collect()
}

#[tokio::test]
async fn a_command_runs_in_the_labelled_pane_and_reports_output_and_exit_code() {
    let rig = make_rig(true).await;
    let out = exec(&rig, json!({"workspace": "w1", "command": "pwd; echo to-stderr >&2; echo made > made.txt; exit 3"})).await;
    assert_eq!(out["backend"], "utility_pane", "{out}");
    assert_eq!((out["ok"].clone(), out["exit_code"].clone(), out["phase"].clone()), (json!(false), json!(3), json!("completed")));
    assert_eq!(out["execution"], json!({"started": true, "completed": true, "exit_code": 3}));
    assert_eq!(out["failure_origin"], "child_process");
    let output = out["output"].as_str().unwrap();
    assert!(output.contains(&rig.root.display().to_string()) && output.contains("to-stderr"), "{output}");
    assert_eq!(out["command"], "pwd; echo to-stderr >&2; echo made > made.txt; exit 3");
    assert_eq!(out["effective_cwd"], rig.root.display().to_string());
    assert_eq!(std::fs::read_to_string(rig.root.join("made.txt")).unwrap(), "made\n", "it ran in the project root");
    let panes = utility_panes(&rig.sim);
    assert_eq!(panes.len(), 1, "one pane was created and labelled");
    assert_eq!(out["pane_id"], panes[0]);
    assert_eq!(rig.sim.count("pane.split"), 1);

    // A second command reuses the pane; its session reads like any other.
    let again = exec(&rig, json!({"workspace": "w1", "command": "echo '{\"n\": 1}'"})).await;
    assert_eq!((again["ok"].clone(), again["pane_id"].clone()), (json!(true), json!(panes[0])));
    assert_eq!(again["structured_output"], json!({"n": 1}));
    assert_eq!(rig.sim.count("pane.split"), 1);
    let read = call(&rig.ctx, "herdr_exec_read", json!({"session_id": again["session_id"]})).await.payload;
    assert_eq!((read["text"].clone(), read["exit_code"].clone()), (json!("{\"n\": 1}\n"), json!(0)));
}

#[tokio::test]
async fn a_busy_pane_or_no_herdr_refuses_before_typing_anything() {
    let rig = make_rig(true).await;
    let first = exec(&rig, json!({"workspace": "w1", "command": "true"})).await;
    let pane = first["pane_id"].as_str().unwrap().to_string();
    rig.sim.set_pane_busy(&pane, true);
    let typed_before = rig.sim.count("pane.send_text");
    let out = exec(&rig, json!({"workspace": "w1", "command": "touch should-not-exist", "intent": "non_idempotent_write", "idempotency_key": "k1"})).await;
    assert_eq!(out["code"], "utility_pane_not_ready", "{out}");
    assert_eq!((out["retryable"].clone(), out["retry_after_ms"].clone()), (json!(true), json!(500)));
    assert_eq!(out["conflict_key"], "workspace:w1:utility_pane");
    assert_eq!(out["safe_retry_mode"], "retry_after_resource_release");
    assert_eq!(out["execution"]["started"], false);
    assert_eq!(rig.sim.count("pane.send_text"), typed_before);
    assert!(!rig.root.join("should-not-exist").exists());
    // Nothing was delivered, so the same key works once the pane is free.
    rig.sim.set_pane_busy(&pane, false);
    let retry = exec(&rig, json!({"workspace": "w1", "command": "touch should-not-exist", "intent": "non_idempotent_write", "idempotency_key": "k1"})).await;
    assert_eq!((retry["ok"].clone(), retry["idempotent_replay"].clone()), (json!(true), json!(false)), "{retry}");
    assert!(rig.root.join("should-not-exist").exists());

    let bare = make_rig(false).await;
    let out = exec(&bare, json!({"workspace": "proj", "command": "true"})).await;
    assert_eq!(out["code"], "utility_pane_unavailable", "{out}");
    assert_eq!(out["delivery_state"], "not_delivered");
    assert_eq!(out["safe_retry_mode"], "retry_after_control_plane_recovery");
    assert_eq!(out["failure_origin"], "herdr_control_plane");
    assert_eq!(out["execution"]["started"], false);
}

#[tokio::test]
async fn a_new_pane_without_a_prompt_or_a_failing_split_is_reported() {
    let quiet = make_rig(true).await;
    quiet.sim.set_no_prompt(true);
    let out = exec(&quiet, json!({"workspace": "w1", "command": "true"})).await;
    assert_eq!(out["code"], "utility_pane_not_ready", "{out}");
    assert_eq!(quiet.sim.count("pane.send_text"), 0);

    let rig = make_rig(true).await;
    rig.sim.set_method_fault("pane.split", Some(herdr_sim::Fault::Garbage));
    let out = exec(&rig, json!({"workspace": "w1", "command": "true"})).await;
    assert_eq!(out["code"], "utility_pane_unavailable", "{out}");
    assert_eq!(out["herdr_code"], "parse_error");
    assert_eq!(rig.sim.count("pane.send_text"), 0);
}

#[tokio::test]
async fn a_timed_out_command_keeps_running_and_kill_interrupts_the_pane() {
    let rig = make_rig(true).await;
    let out = exec(&rig, json!({"workspace": "w1", "command": "echo started; sleep 30; echo never", "timeout_ms": 400})).await;
    assert_eq!(out["code"], "exec_timeout", "{out}");
    assert_eq!(out["backend"], "utility_pane");
    let id = out["session_id"].as_str().unwrap().to_string();
    let pane = out["pane_id"].as_str().unwrap().to_string();
    let seen = poll(WAIT, || async {
        let r = call(&rig.ctx, "herdr_exec_read", json!({"session_id": id})).await.payload;
        r["text"].as_str().is_some_and(|t| t.contains("started")).then_some(r)
    })
    .await
    .expect("output of the running command");
    assert_eq!(seen["running"], true);
    // While it runs, the pane is busy for anyone else.
    let busy = exec(&rig, json!({"workspace": "w1", "command": "true"})).await;
    assert_eq!(busy["code"], "utility_pane_not_ready", "{busy}");
    // Interrupt only once `sleep` itself runs: a Ctrl-C that lands between the
    // shell's fork and the child's exec is lost with the shell's handler in the
    // child, and the pane would then stay busy for the full 30 s.
    let job = rig.sim.pane_job(&pane).expect("the pane runs the command");
    poll(WAIT, || async { runs_program(job, "sleep").then_some(()) }).await.expect("the command reaches `sleep`");

    let killed = call(&rig.ctx, "herdr_exec_kill", json!({"session_id": id})).await.payload;
    assert_eq!((killed["killed"].clone(), killed["pane_interrupted"].clone()), (json!(true), json!(true)), "{killed}");
    assert!(rig.sim.keys_sent().contains(&(pane.clone(), vec!["ctrl+c".to_string()])));
    // The interrupted pane takes commands again.
    let next = poll(WAIT, || async {
        let r = exec(&rig, json!({"workspace": "w1", "command": "echo free"})).await;
        (r["ok"] == true).then_some(r)
    })
    .await
    .expect("the pane is free after the interrupt");
    assert_eq!(next["pane_id"], pane);
}

/// Whether a process named `program` runs in process group `pgid`.
fn runs_program(pgid: i32, program: &str) -> bool {
    procfs::group_members(pgid).iter().any(|m| procfs::name(m.pid).as_deref() == Some(program))
}

#[tokio::test]
async fn closing_the_utility_pane_ends_a_session_still_waiting_for_it() {
    let rig = make_rig(true).await;
    let out = exec(&rig, json!({"workspace": "w1", "command": "sleep 30", "timeout_ms": 200})).await;
    assert_eq!(out["code"], "exec_timeout", "{out}");
    let id = out["session_id"].as_str().unwrap().to_string();
    let pane = out["pane_id"].as_str().unwrap().to_string();
    rig.sim.close_pane(&pane);
    let ended = poll(WAIT, || async {
        let r = call(&rig.ctx, "herdr_exec_read", json!({"session_id": id})).await.payload;
        (r["running"] == false).then_some(r)
    })
    .await
    .expect("the session ends once its pane is gone");
    assert_eq!(ended["phase"], "completed");
    assert_eq!(ended["signal"], "SIGTERM", "{ended}");
}
