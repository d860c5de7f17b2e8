//! Restart safety through the real binary: `herdr-mcp serve` is killed with
//! SIGKILL in the middle of a keyed `herdr_exec`, restarted on the same state
//! directory, and the same call replays truthfully without a second run.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const DEADLINE: Duration = Duration::from_secs(30);

async fn poll<T>(mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let end = Instant::now() + DEADLINE;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() >= end {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path).map(|s| s.lines().count()).unwrap_or(0)
}

fn gone(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| matches!(s.rsplit(')').next().and_then(|r| r.split_whitespace().next()), Some("Z" | "X")))
        .unwrap_or(true)
}

async fn start(root: &Path, state: &Path) -> common::Runtime {
    let state = state.display().to_string();
    common::Runtime::start(&[root], &[("HERDR_MCP_STATE_DIR", state.as_str()), ("SHELL", "/bin/sh")]).await
}

#[tokio::test]
async fn kill_9_mid_exec_then_restart_replays_without_a_second_run() {
    let repo = common::git_repo(&[("README", "x\n")]);
    let root = repo.path().canonicalize().unwrap();
    let workspace = root.file_name().unwrap().to_string_lossy().into_owned();
    let state = tempfile::tempdir().unwrap();
    let counter = root.join("counter");
    let pid_file = root.join("shell.pid");
    let command = format!("echo line >> {}; echo $$ > {}; exec sleep 300", counter.display(), pid_file.display());
    let args = json!({"workspace": workspace, "command": command, "intent": "non_idempotent_write",
                      "idempotency_key": "conv-1/msg-7", "timeout_ms": 60_000});

    let first = start(&root, state.path()).await;
    let health = first.raw("GET", "/health", &[], None).await.json();
    assert_eq!(health["exec_sessions"]["ready"], true, "{health}");
    let socket = first.socket.clone();
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "herdr_exec", "arguments": args}});
    // This call blocks until the command ends, which it never does: the runtime dies first.
    let blocked = tokio::spawn(async move {
        let body = request.to_string();
        common::raw_unix(&socket, "POST", "/mcp", &[("content-type", "application/json"), ("accept", "application/json, text/event-stream")], Some(body.as_bytes())).await
    });
    let shell_pid: i32 = poll(|| std::fs::read_to_string(&pid_file).ok()?.trim().parse().ok()).await.expect("command started");
    // The ledger row says "delivered" once the session exists; wait for it so the
    // kill lands mid-run, not mid-spawn.
    let db_path = state.path().join("state.db");
    poll(|| {
        let conn = delivered_count(&db_path)?;
        (conn == 1).then_some(())
    })
    .await
    .expect("delivery recorded");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(first.pid() as i32), nix::sys::signal::Signal::SIGKILL).unwrap();
    let answer = blocked.await.unwrap();
    assert!(answer.is_err() || answer.as_ref().is_ok_and(|r| r.status != 200 || !r.text().contains("\"ok\":true")), "no result may come from a killed runtime");
    drop(first);
    assert_eq!(lines(&counter), 1);
    assert!(!gone(shell_pid), "the command outlives the killed runtime");

    let second = start(&root, state.path()).await;
    // Startup recovery ended the orphaned command.
    assert!(poll(|| gone(shell_pid).then_some(())).await.is_some(), "orphan not terminated after restart");
    let client = second.client().await;
    let replay = common::call_tool(&client, "herdr_exec", args.clone()).await;
    assert_eq!(replay["idempotent_replay"], true, "{replay}");
    assert_eq!(replay["idempotency_persisted"], true);
    assert_eq!(replay["phase"], "interrupted");
    assert_eq!(replay["code"], "exec_interrupted");
    assert_eq!(replay["recovery_state"], "reaped_on_restart");
    assert_eq!(replay["execution"], json!({"started": true, "completed": false, "exit_code": null}));
    assert_eq!(lines(&counter), 1, "the replay must not run the command again");
    let session = replay["session_id"].as_str().unwrap();
    let read = common::call_tool(&client, "herdr_exec_read", json!({"session_id": session})).await;
    assert_eq!(read["reason"], "session_recovered_after_restart", "{read}");
    assert_eq!(read["recovery_state"], "reaped_on_restart");
    // A fresh key runs normally in the restarted runtime.
    let mut fresh = args.clone();
    fresh["idempotency_key"] = json!("conv-1/msg-8");
    fresh["command"] = json!(format!("echo line >> {}", counter.display()));
    let out: Value = common::call_tool(&client, "herdr_exec", fresh).await;
    assert_eq!(out["ok"], true, "{out}");
    assert_eq!(lines(&counter), 2);
}

/// Counts delivered ledger rows by reading the database with the runtime's own
/// state module (a second connection; WAL lets it read while the runtime writes).
fn delivered_count(db_path: &Path) -> Option<i64> {
    let dir = db_path.parent()?;
    let db = herdr_mcp::state::StateDb::open(dir, "test-observer").ok()?;
    db.with(|c| c.query_row("SELECT COUNT(*) FROM operations WHERE state = 'delivered'", [], |r| r.get(0))).ok()
}
