//! Restart safety with a real `kill -9`: a child process plays the runtime (this
//! test binary re-executed in a "runtime role"), starts keyed `herdr_exec` calls and
//! is killed mid-run. A fresh registry on the same state directory then recovers:
//! the orphaned process group is ended, the ledger answers the replay truthfully
//! without running the command again, and old sessions answer
//! `session_recovered_after_restart`.

mod exec_support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use exec_support::{DEADLINE, Rig, line_count, poll, process_gone};
use serde_json::{Value, json};

const ROLE_ENV: &str = "HERDR_MCP_EXEC_TEST_ROLE_DIR";

fn keyed(command: &str, key: &str) -> Value {
    json!({"workspace": "proj", "command": command, "intent": "non_idempotent_write", "idempotency_key": key, "timeout_ms": 60_000})
}

fn counter_cmd(dir: &Path) -> String {
    format!("echo line >> {}; echo $$ > {}; exec sleep 300", dir.join("proj/counter").display(), dir.join("proj/shell.pid").display())
}

/// The "runtime" role: a quick session that finishes, then a keyed call that blocks.
/// Only active when the parent test sets the role variable.
#[tokio::test]
#[ignore = "helper role, started by restart_after_kill_9_replays_truthfully"]
async fn runtime_role() {
    let Ok(dir) = std::env::var(ROLE_ENV) else { return };
    let dir = std::path::PathBuf::from(dir);
    let rig = Rig::reopen_at(&dir);
    let quick = rig.start("echo quick").await;
    rig.wait_done(&quick).await;
    std::fs::write(dir.join("quick.id"), &quick).unwrap();
    let out = rig.call("herdr_exec", keyed(&counter_cmd(&dir), "restart-key")).await;
    panic!("the runtime role should have been killed, but herdr_exec answered {out}");
}

#[tokio::test]
async fn restart_after_kill_9_replays_truthfully() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "runtime_role", "--ignored", "--nocapture"])
        .env(ROLE_ENV, dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();

    // Wait until the command ran (one counter line) and the ledger knows it was
    // delivered, then kill the "runtime" without any chance to clean up.
    let counter = dir.path().join("proj/counter");
    let shell_pid: i32 = poll(DEADLINE, || async {
        let pid = std::fs::read_to_string(dir.path().join("proj/shell.pid")).ok()?.trim().parse().ok()?;
        let delivered = herdr_mcp::state::StateDb::open(&dir.path().join("state"), "observer")
            .ok()?
            .with(|c| c.query_row("SELECT COUNT(*) FROM operations WHERE state = 'delivered'", [], |r| r.get::<_, i64>(0)))
            .ok()?;
        (delivered == 1).then_some(pid)
    })
    .await
    .expect("the runtime role never delivered its command");
    assert_eq!(line_count(&counter), 1);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert!(!process_gone(shell_pid), "the command must outlive the killed runtime (it is an orphan now)");

    // "Restart": a new registry and boot id on the same state directory.
    let rig = Rig::reopen_at(dir.path());
    let report = herdr_mcp::exec::recover(&rig.exec).await.unwrap();
    assert_eq!(report.reaped, 1, "{report:?}");
    assert_eq!(report.interrupted_operations, 1, "{report:?}");
    assert!(poll(DEADLINE, || async { process_gone(shell_pid).then_some(()) }).await.is_some(), "orphan not terminated");

    let replay = rig.call("herdr_exec", keyed(&counter_cmd(dir.path()), "restart-key")).await;
    assert_eq!(replay["idempotent_replay"], true, "{replay}");
    assert_eq!(replay["code"], "exec_interrupted");
    assert_eq!(replay["phase"], "interrupted");
    assert_eq!(replay["recovery_state"], "reaped_on_restart");
    assert_eq!(replay["execution"], json!({"started": true, "completed": false, "exit_code": null}));
    let session = replay["session_id"].as_str().unwrap().to_string();
    assert_eq!(line_count(&counter), 1, "the replay must not run the command again");

    let old = rig.read(&session, "both", 0, 10).await;
    assert_eq!(old["reason"], "session_recovered_after_restart", "{old}");
    assert_eq!(old["recovery_state"], "reaped_on_restart");
    let quick = std::fs::read_to_string(dir.path().join("quick.id")).unwrap();
    let old = rig.read(&quick, "both", 0, 10).await;
    assert_eq!(old["recovery_state"], "closed_before_restart", "{old}");
    assert_eq!(old["exit_code"], 0);
    let kill = rig.call("herdr_exec_kill", json!({"session_id": session})).await;
    assert_eq!(kill["reason"], "session_recovered_after_restart");

    // A second recovery finds nothing left to do.
    let again = herdr_mcp::exec::recover(&rig.exec).await.unwrap();
    assert_eq!(again, herdr_mcp::exec::RecoveryReport::default());
}

#[tokio::test]
async fn an_orphan_that_already_ended_is_detached_and_a_foreign_pid_is_never_signalled() {
    use herdr_mcp::state::sessions::{SessionRow, insert};
    let dir = tempfile::tempdir().unwrap();
    let rig = Rig::reopen_at(dir.path());
    // A row left "running" by an earlier boot whose process is gone.
    let gone = SessionRow {
        session_id: "es_dead-1-1".into(),
        boot_id: "earlier".into(),
        pid: 999_999_999,
        pgid: 999_999_999,
        proc_start_ticks: Some(1),
        root: rig.root_str(),
        cwd: rig.root_str(),
        command: "sleep 1".into(),
        started_at_ms: 1,
        state: "running".into(),
        exit_code: None,
        signal: None,
        ended_at_ms: None,
        recovery_state: None,
    };
    // A row whose pid/pgid now belong to an unrelated process (this test's own
    // process group, with a wrong start time and no exec id): it must survive.
    let me = herdr_mcp::exec::procfs::stat(std::process::id() as i32).unwrap();
    let mut foreign = gone.clone();
    foreign.session_id = "es_reused-1-1".into();
    foreign.pid = me.pid as i64;
    foreign.pgid = me.pgrp as i64;
    foreign.proc_start_ticks = Some(me.start_ticks as i64 + 7);
    rig.exec.db().with(|c| {
        insert(c, &gone)?;
        insert(c, &foreign)
    })
    .unwrap();
    let report = herdr_mcp::exec::recover(&rig.exec).await.unwrap();
    assert_eq!((report.reaped, report.detached), (0, 2), "{report:?}");
    let r = rig.read("es_dead-1-1", "both", 0, 1).await;
    assert_eq!(r["recovery_state"], "detached_unverified", "{r}");
    // We are still alive, which is the point.
    tokio::time::sleep(Duration::from_millis(1)).await;
}

#[tokio::test]
async fn two_live_runtimes_on_one_state_dir_leave_each_other_alone() {
    let dir = tempfile::tempdir().unwrap();
    let a = Rig::reopen_at(dir.path());
    let id = a.start("sleep 300").await;
    // A second runtime process on the same state directory (same pid here, but its
    // own boot): A's running session is not an orphan while A lives.
    let b = Rig::reopen_at(dir.path());
    let report = herdr_mcp::exec::recover(&b.exec).await.unwrap();
    assert_eq!(report, herdr_mcp::exec::RecoveryReport::default());
    assert_eq!(a.read(&id, "both", 0, 1).await["running"], true);
    let from_b = b.read(&id, "both", 0, 1).await;
    assert_eq!(from_b["reason"], "session_not_found", "{from_b}");
    assert!(from_b["message"].as_str().unwrap().contains("another herdr-mcp"), "{from_b}");
    assert_eq!(a.call("herdr_exec_kill", json!({"session_id": id})).await["killed"], true);
    assert_eq!(a.wait_done(&id).await["signal"], "SIGTERM");
}
