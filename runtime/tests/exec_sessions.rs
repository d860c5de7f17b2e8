//! Exec sessions through the tools, with real child processes: output by offset,
//! `both` interleaving, kill semantics, structured output, pruning, a concurrent
//! burst, and the refusals.

mod exec_support;

use std::time::Duration;

use exec_support::{DEADLINE, Rig, poll, process_gone, test_config};
use serde_json::json;

#[tokio::test]
async fn start_returns_at_once_and_read_reports_the_exit() {
    let rig = Rig::new();
    let out = rig.call("herdr_exec_start", json!({"root": rig.root_str(), "command": "echo hello; echo $HERDR_MCP_EXEC_ID; pwd; exit 3"})).await;
    assert_eq!(out["ok"], true, "{out}");
    assert_eq!(out["phase"], "started");
    assert_eq!(out["progress"], json!({"bytes_read": 0, "bytes_total": 0, "elapsed_ms": 0}));
    assert_eq!(out["root"], rig.root_str());
    let id = out["session_id"].as_str().unwrap();
    let shape = regex::Regex::new(r"^es_[0-9a-f]+-[0-9a-f]+-[0-9a-f]+$").unwrap();
    assert!(shape.is_match(id), "{id}");
    let done = rig.wait_done(id).await;
    assert_eq!((done["phase"].clone(), done["exit_code"].clone(), done["signal"].clone()), (json!("completed"), json!(3), json!(null)));
    let (text, truncated) = rig.read_all(id, "stdout").await;
    assert!(!truncated);
    assert_eq!(text, format!("hello\n{id}\n{}\n", rig.root_str()));
}

#[tokio::test]
async fn offsets_page_through_a_stream() {
    let rig = Rig::new();
    let id = rig.start("printf 0123456789").await;
    rig.wait_done(&id).await;
    let a = rig.read(&id, "stdout", 0, 4).await;
    assert_eq!((a["text"].clone(), a["offset"].clone(), a["next_offset"].clone()), (json!("0123"), json!(0), json!(4)));
    assert_eq!(a["bytes_total"], 10);
    let b = rig.read(&id, "stdout", 4, 100).await;
    assert_eq!((b["text"].clone(), b["next_offset"].clone()), (json!("456789"), json!(10)));
    let end = rig.read(&id, "stdout", 50, 100).await;
    assert_eq!((end["text"].clone(), end["next_offset"].clone(), end["truncated"].clone()), (json!(""), json!(10), json!(false)));
}

#[tokio::test]
async fn both_interleaves_in_write_order() {
    let rig = Rig::new();
    // The pauses make the write order observable across two pipes.
    let id = rig.start("echo one; sleep 0.3; echo two >&2; sleep 0.3; echo three; sleep 0.3; echo four >&2").await;
    rig.wait_done(&id).await;
    assert_eq!(rig.read_all(&id, "both").await.0, "one\ntwo\nthree\nfour\n");
    assert_eq!(rig.read_all(&id, "stdout").await.0, "one\nthree\n");
    assert_eq!(rig.read_all(&id, "stderr").await.0, "two\nfour\n");
}

#[tokio::test]
async fn read_limit_and_stream_are_validated_at_their_edges() {
    let rig = Rig::new();
    let id = rig.start("true").await;
    for (limit, ok) in [(0, false), (1, true), (262_144, true), (262_145, false)] {
        let r = rig.read(&id, "both", 0, limit).await;
        assert_eq!(r["ok"] == true, ok, "limit {limit}: {r}");
        if !ok {
            assert_eq!(r["code"], "invalid_params");
        }
    }
    let r = rig.call("herdr_exec_read", json!({"session_id": id, "stream": "stdin"})).await;
    assert_eq!(r["code"], "invalid_params");
    let r = rig.call("herdr_exec_read", json!({"session_id": "es_0-0-0"})).await;
    assert_eq!(r["reason"], "session_not_found");
}

#[tokio::test]
async fn kill_terminates_the_whole_group_with_sigterm() {
    let rig = Rig::new();
    // A grandchild in the background plus the shell waiting on it.
    let id = rig.start("sleep 300 & echo $!; wait").await;
    let grandchild: i32 = poll(DEADLINE, || async {
        rig.read(&id, "stdout", 0, 100).await["text"].as_str().and_then(|t| t.trim().parse().ok())
    })
    .await
    .expect("grandchild pid");
    let k = rig.call("herdr_exec_kill", json!({"session_id": id})).await;
    assert_eq!(k, json!({"ok": true, "session_id": id, "killed": true, "exit_code": null, "signal": null}));
    let done = rig.wait_done(&id).await;
    assert_eq!(done["signal"], "SIGTERM", "{done}");
    assert!(poll(DEADLINE, || async { process_gone(grandchild).then_some(()) }).await.is_some(), "grandchild survived");
    let again = rig.call("herdr_exec_kill", json!({"session_id": id})).await;
    assert_eq!(again["killed"], false);
    assert_eq!(again["signal"], "SIGTERM");
}

#[tokio::test]
async fn kill_escalates_to_sigkill_when_term_is_ignored() {
    let rig = Rig::new();
    let id = rig.start("trap '' TERM; (trap '' TERM; sleep 300) & echo $!; echo ready; wait; wait").await;
    let grandchild: i32 = poll(DEADLINE, || async {
        let t = rig.read(&id, "stdout", 0, 100).await["text"].as_str().unwrap_or("").to_string();
        t.contains("ready").then(|| t.lines().next().unwrap().trim().parse().unwrap())
    })
    .await
    .expect("ready");
    let started = std::time::Instant::now();
    assert_eq!(rig.call("herdr_exec_kill", json!({"session_id": id})).await["killed"], true);
    let done = rig.wait_done(&id).await;
    assert_eq!(done["signal"], "SIGKILL", "{done}");
    // SIGKILL only comes after the 1.5 s grace.
    assert!(started.elapsed() >= Duration::from_millis(1400), "{:?}", started.elapsed());
    assert!(poll(DEADLINE, || async { process_gone(grandchild).then_some(()) }).await.is_some(), "grandchild survived");
}

#[tokio::test]
async fn a_one_object_stream_becomes_structured_output() {
    let rig = Rig::new();
    let out = rig.call("herdr_exec", json!({"workspace": "proj", "command": "echo '  {\"n\": 1, \"s\": \"x\"}'; echo noise >&2"})).await;
    assert_eq!(out["ok"], true, "{out}");
    assert_eq!(out["structured_output"], json!({"n": 1, "s": "x"}));
    assert_eq!(out["structured_output_stream"], "stdout");
    let out = rig.call("herdr_exec", json!({"workspace": "proj", "command": "echo '[1]'; echo '{\"e\":true}' >&2"})).await;
    assert_eq!(out["structured_output"], json!({"e": true}));
    assert_eq!(out["structured_output_stream"], "stderr");
    let out = rig.call("herdr_exec", json!({"workspace": "proj", "command": "echo '{\"a\":1} {\"b\":2}'"})).await;
    assert!(out.get("structured_output").is_none(), "{out}");
}

#[tokio::test]
async fn sessions_are_pruned_after_the_retention_period() {
    let mut config = test_config();
    config.retention = Duration::from_millis(300);
    let rig = Rig::with_config(config);
    let id = rig.start("true").await;
    rig.wait_done(&id).await;
    // Still readable right after the end...
    assert_eq!(rig.read(&id, "both", 0, 1).await["ok"], true);
    // ...and gone once the retention has passed (memory and database).
    let gone = poll(DEADLINE, || async {
        let r = rig.read(&id, "both", 0, 1).await;
        (r["reason"] == "session_not_found").then_some(())
    })
    .await;
    assert!(gone.is_some());
    let db = rig.exec.db();
    let row = db.with(|c| herdr_mcp::state::sessions::get(c, &id)).unwrap();
    assert!(row.is_none(), "{row:?}");
}

#[tokio::test]
async fn a_running_session_is_never_pruned() {
    let mut config = test_config();
    config.retention = Duration::from_millis(1);
    let rig = Rig::with_config(config);
    let id = rig.start("sleep 1").await;
    tokio::time::sleep(Duration::from_millis(50)).await; // exceeds the retention while running
    assert_eq!(rig.read(&id, "both", 0, 1).await["running"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hundred_concurrent_starts_lose_no_session() {
    let rig = std::sync::Arc::new(Rig::new());
    let calls = (0..100).map(|i| {
        let rig = std::sync::Arc::clone(&rig);
        tokio::spawn(async move {
            let out = rig.call("herdr_exec_start", json!({"root": rig.root_str(), "command": format!("echo n{i}")})).await;
            assert_eq!(out["ok"], true, "{out}");
            (i, out["session_id"].as_str().unwrap().to_string())
        })
    });
    let started: Vec<(usize, String)> = futures::future::join_all(calls).await.into_iter().map(|r| r.unwrap()).collect();
    let ids: std::collections::HashSet<&String> = started.iter().map(|(_, id)| id).collect();
    assert_eq!(ids.len(), 100, "session ids must be unique");
    for (i, id) in &started {
        let done = rig.wait_done(id).await;
        assert_eq!(done["exit_code"], 0, "{done}");
        assert_eq!(rig.read_all(id, "stdout").await.0, format!("n{i}\n"));
    }
    let rows: i64 = rig.exec.db().with(|c| c.query_row("SELECT COUNT(*) FROM exec_sessions", [], |r| r.get(0))).unwrap();
    assert_eq!(rows, 100);
}

#[tokio::test]
async fn start_refuses_non_roots_files_and_gated_roots() {
    let rig = Rig::new();
    let sub = rig.path("sub");
    std::fs::create_dir(&sub).unwrap();
    let out = rig.call("herdr_exec_start", json!({"root": sub.display().to_string(), "command": "true"})).await;
    assert_eq!(out["reason"], "root_not_project_root", "{out}");
    std::fs::write(rig.path("f"), "x").unwrap();
    let out = rig.call("herdr_exec_start", json!({"root": rig.path("f").display().to_string(), "command": "true"})).await;
    assert_eq!(out["reason"], "not_a_directory", "{out}");
    let out = rig.call("herdr_exec_start", json!({"root": "proj", "command": "true"})).await;
    assert_eq!(out["reason"], "root_not_project_root", "relative roots are refused: {out}");
    let out = rig.call("herdr_exec_start", json!({"root": rig.root_str(), "command": "   "})).await;
    assert_eq!(out["code"], "invalid_params");

    let ro = Rig::with_policy(|p| p.with_readonly(true));
    let out = ro.call("herdr_exec_start", json!({"root": ro.root_str(), "command": "touch x"})).await;
    assert_eq!(out["reason"], "readonly_mode", "{out}");
    // The gate is shared with the file tools; its words must fit a command too.
    assert!(out["message"].as_str().unwrap().contains("no command is run"), "{out}");
    assert!(!ro.path("x").exists());
    let other = tempfile::tempdir().unwrap();
    let wr = Rig::with_policy(|p| p.with_write_roots(Some(vec![other.path().to_path_buf()])));
    let out = wr.call("herdr_exec_start", json!({"root": wr.root_str(), "command": "true"})).await;
    assert_eq!(out["reason"], "root_not_whitelisted", "{out}");
    assert!(out["hint"].as_str().is_some_and(|h| h.contains("HERDR_MCP_WRITE_ROOTS")), "{out}");
}

#[tokio::test]
async fn command_length_limit_is_exact() {
    let rig = Rig::new();
    let at_limit = format!("true {}", "x".repeat(65_536 - 5));
    assert_eq!(at_limit.len(), 65_536);
    let id = rig.call("herdr_exec_start", json!({"root": rig.root_str(), "command": at_limit})).await;
    assert_eq!(id["ok"], true, "{id}");
    let over = format!("{at_limit}x");
    let out = rig.call("herdr_exec_start", json!({"root": rig.root_str(), "command": over})).await;
    assert_eq!(out["code"], "invalid_params");
}

#[tokio::test]
async fn without_an_exec_service_the_tools_refuse_clearly() {
    let root = tempfile::tempdir().unwrap();
    let ctx = std::sync::Arc::new(herdr_mcp::tools::ToolContext::new(
        herdr_mcp::runtime_info::RuntimeInfo::new(),
        herdr_mcp::policy::Policy::for_tests(vec![root.path().to_path_buf()]),
    ));
    let tools = herdr_mcp::tools::ToolRegistry::standard();
    let root = root.path().canonicalize().unwrap().display().to_string();
    for (tool, args) in [
        ("herdr_exec_start", json!({"root": root, "command": "true"})),
        ("herdr_exec_read", json!({"session_id": "es_1-1-1"})),
        ("herdr_exec_kill", json!({"session_id": "es_1-1-1"})),
        ("herdr_exec", json!({"workspace": "x", "command": "true"})),
    ] {
        let out = tools.call(&ctx, tool, Some(args)).await;
        assert!(!out.is_error);
        assert_eq!(out.payload["reason"], "exec_unavailable", "{tool}: {}", out.payload);
    }
}

#[tokio::test]
async fn every_ended_session_is_announced_once() {
    let rig = Rig::new();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let _forwarder = herdr_mcp::exec::on_completion(&rig.exec, move |done| {
        let _ = tx.send(done);
    });
    let ok = rig.start("exit 0").await;
    let failed = rig.start("exit 7").await;
    let mut seen = Vec::new();
    for _ in 0..2 {
        let done = tokio::time::timeout(DEADLINE, rx.recv()).await.expect("completion within deadline").unwrap();
        seen.push((done.session_id, done.exit_code, done.root));
    }
    seen.sort();
    let mut want = vec![(ok, Some(0), rig.root.clone()), (failed, Some(7), rig.root.clone())];
    want.sort();
    assert_eq!(seen, want);
    assert!(rx.try_recv().is_err(), "no duplicate announcements");
}

/// A page the limit cuts ends before a character it would split, and the next
/// page starts with that character, so paging by next_offset shows the text
/// without replacement marks. A page of one partial character is still given
/// (paging must move on), and the end of a finished stream is never held back.
#[tokio::test]
async fn a_page_cut_by_the_limit_ends_on_a_whole_character() {
    let rig = Rig::new();
    let id = rig.start("printf 'a€b€'; printf '\\342\\202' >&2").await;
    rig.wait_done(&id).await;
    // stdout is a, €(3 bytes), b, €: 8 bytes.
    for (offset, limit, text, next) in [
        (0u64, 3u64, "a", 1u64),
        (0, 4, "a€", 4),
        (1, 3, "€", 4),
        (4, 2, "b", 5),
        (5, 3, "€", 8),
        (1, 1, "\u{fffd}", 2),
    ] {
        let r = rig.read(&id, "stdout", offset, limit).await;
        assert_eq!((r["text"].as_str(), r["next_offset"].as_u64()), (Some(text), Some(next)), "offset {offset} limit {limit}: {r}");
    }
    // Paging from 0 two bytes at a time still reaches the end, with the whole text.
    let (mut offset, mut text) = (0u64, String::new());
    while offset < 8 {
        let r = rig.read(&id, "stdout", offset, 2).await;
        text.push_str(r["text"].as_str().unwrap());
        offset = r["next_offset"].as_u64().unwrap();
    }
    assert_eq!(text, "a\u{fffd}\u{fffd}b\u{fffd}\u{fffd}", "2-byte pages cannot hold a 3-byte character whole");
    // stderr ends in a partial character: the last page gives it as it is.
    let r = rig.read(&id, "stderr", 0, 10).await;
    assert_eq!((r["text"].as_str(), r["next_offset"].as_u64()), (Some("\u{fffd}"), Some(2)), "{r}");
}
