//! Issue 22, runtime items 6–8 and 11–14: each test drives the real `herdr-mcp`
//! binary over its real sockets (with real git and, where Herdr is involved, the
//! Herdr simulator) and is named after the item it proves.

mod common;
mod herdr_sim;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{Options, Runtime, TOKEN, call_tool, git_repo};
use herdr_sim::HerdrSim;
use herdr_sim::harness::fake_herdr_cli;
use serde_json::json;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.invalid")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.invalid")
        .output()
        .expect("run git");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn write(path: &Path, content: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

/// Item 6: with `HERDR_MCP_READONLY=1`, `herdr_call` refuses every Herdr method
/// that changes something (and any method it cannot classify), and nothing of it
/// reaches Herdr; reading methods still work.
#[tokio::test]
async fn readonly_refuses_mutating_herdr_call() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let sim = HerdrSim::start().await;
    sim.add_workspace("w1", "repo");
    sim.add_pane("w1", "w1:p1", &repo.path().display().to_string());
    sim.add_agent("w1:p1", "pi", "idle");
    let cli = fake_herdr_cli(sim.dir());
    let socket = sim.socket.display().to_string();
    let rt = Runtime::start(
        &[repo.path()],
        &[
            ("HERDR_SOCKET_PATH", &socket),
            ("HERDR_BIN_PATH", cli.to_str().unwrap()),
            ("HERDR_MCP_READONLY", "1"),
            ("HERDR_MCP_AGENT_ALLOW", "all"),
        ],
    )
    .await;
    let client = rt.client().await;

    let listed = call_tool(&client, "herdr_call", json!({"method": "pane.list"})).await;
    assert_eq!(listed["ok"], true, "a reading method still works in read-only mode: {listed}");

    let mutations = [
        ("pane.send_text", json!({"pane_id": "w1:p1", "text": "rm -rf ~"})),
        ("agent.prompt", json!({"target": "w1:p1", "text": "delete everything"})),
        ("agent.rename", json!({"target": "w1:p1", "name": "owned"})),
    ];
    for (method, params) in &mutations {
        let out = call_tool(&client, "herdr_call", json!({"method": method, "params": params.to_string()})).await;
        eprintln!("observed {method}: {out}");
        assert_eq!(out["ok"], false, "{method} passed in read-only mode: {out}");
        assert_eq!(out["reason"], "readonly_mode", "{method}: {out}");
        assert_eq!(out["method"], *method, "{out}");
    }
    for (method, _) in &mutations {
        assert_eq!(sim.count(method), 0, "{method} reached Herdr in read-only mode");
    }
}

/// Item 7: a managed root that is a subfolder of a repository sees only its own
/// part of the repository in `herdr_git` status, diff and log (read-only mode too).
#[tokio::test]
async fn git_stays_inside_managed_root() {
    let repo = git_repo(&[("outside.txt", "o\n"), ("pkg/inside.txt", "i\n")]);
    write(&repo.path().join("outside.txt"), "OUTSIDE-CHANGE\n");
    git(repo.path(), &["commit", "-qam", "outside-only commit"]);
    git(repo.path(), &["commit", "-q", "--allow-empty", "-m", "empty commit"]);
    write(&repo.path().join("outside.txt"), "OUTSIDE-DIRTY\n");
    write(&repo.path().join("outside-new.txt"), "x\n");
    write(&repo.path().join("pkg/inside.txt"), "INSIDE-DIRTY\n");
    let pkg = repo.path().join("pkg");
    for readonly in ["0", "1"] {
        let rt = Runtime::start(&[&pkg], &[("HERDR_MCP_READONLY", readonly)]).await;
        let client = rt.client().await;
        let root = pkg.display().to_string();
        let status = call_tool(&client, "herdr_git", json!({"root": root, "action": "status"})).await;
        let diff = call_tool(&client, "herdr_git", json!({"root": root, "action": "diff"})).await;
        let log = call_tool(&client, "herdr_git", json!({"root": root, "action": "log"})).await;
        eprintln!("observed (readonly={readonly}):\nstatus: {status}\ndiff: {diff}\nlog: {log}");
        for out in [&status, &diff, &log] {
            assert_eq!(out["ok"], true, "{out}");
        }
        let status = status["output"].as_str().unwrap();
        assert!(status.contains("inside.txt"), "{status}");
        assert!(!status.contains("outside"), "status shows the parent repository: {status}");
        let diff = diff["output"].as_str().unwrap();
        assert!(diff.contains("INSIDE-DIRTY"), "{diff}");
        assert!(!diff.contains("OUTSIDE"), "diff shows the parent repository: {diff}");
        let log = log["output"].as_str().unwrap();
        assert!(log.contains("initial"), "{log}");
        assert!(
            !log.contains("outside-only commit") && !log.contains("empty commit"),
            "log shows commits outside the root: {log}"
        );
    }
}

/// Item 8: `herdr_inspect` stops a slow `git status` at 750 ms; the status must
/// not hold `.git/index.lock`, or the kill leaves it behind and the user's next
/// commit fails. A FIFO named `.gitignore` makes git's untracked-file scan hang
/// (it opens the FIFO and waits for a writer) while it would hold the lock.
#[tokio::test]
async fn inspect_git_status_leaves_no_index_lock() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    std::fs::create_dir(repo.path().join("sub")).unwrap();
    nix::unistd::mkfifo(&repo.path().join("sub/.gitignore"), nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let lock = repo.path().join(".git/index.lock");

    // Without Herdr: the runtime's own project list.
    let rt = Runtime::start(&[repo.path()], &[]).await;
    let inspect = call_tool(&rt.client().await, "herdr_inspect", json!({})).await;
    eprintln!("observed without Herdr: index.lock present = {}", lock.exists());
    assert_eq!(inspect["ok"], true, "{inspect}");
    assert!(!lock.exists(), "herdr_inspect (no Herdr) left {}", lock.display());
    drop(rt);

    // With Herdr: the projects of its workspaces.
    let sim = HerdrSim::start().await;
    sim.add_workspace("w1", "repo");
    sim.add_pane("w1", "w1:p1", &repo.path().display().to_string());
    let socket = sim.socket.display().to_string();
    let rt = Runtime::start(&[repo.path()], &[("HERDR_SOCKET_PATH", &socket), ("HERDR_MCP_AGENT_ALLOW", "all")]).await;
    let client = rt.client().await;
    let started = Instant::now();
    let inspect = loop {
        let out = call_tool(&client, "herdr_inspect", json!({})).await;
        if out["mode"] == "herdr" || started.elapsed() > Duration::from_secs(15) {
            break out;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(inspect["mode"], "herdr", "{inspect}");
    let project = &inspect["workspaces"][0]["projects"][0];
    eprintln!("observed with Herdr: project {project}, index.lock present = {}", lock.exists());
    assert!(project["dirty"].is_null(), "the status was expected to be slow and stopped: {project}");
    assert!(!lock.exists(), "herdr_inspect (Herdr) left {}", lock.display());
}

/// The credential files item 11 adds, each with a distinct marker in its content.
const CREDENTIAL_FILES: [&str; 8] =
    [".netrc", ".npmrc", ".pgpass", ".pypirc", "kubeconfig", ".kube/config", ".docker/config.json", ".ssh/known_hosts"];

fn marker(path: &str) -> String {
    format!("MARKER-{}", path.replace(['/', '.'], "_"))
}

/// Item 11: credential files are secret paths for read, grep, list and git diff.
#[tokio::test]
async fn secret_paths_cover_credential_files() {
    let files: Vec<(&str, String)> = CREDENTIAL_FILES.iter().map(|p| (*p, format!("{}\n", marker(p)))).collect();
    let committed: Vec<(&str, &str)> = files.iter().map(|(p, _)| (*p, "old\n")).collect();
    let repo = git_repo(&committed);
    for (path, content) in &files {
        write(&repo.path().join(path), content);
    }
    write(&repo.path().join("sub/.ssh/id_custom"), "MARKER-ssh-key\n");
    write(&repo.path().join(".git/config.worktree"), "[x]\n\tMARKER-worktree-config\n");
    write(&repo.path().join(".git/modules/lib/config"), "[remote]\n\tMARKER-module-config\n");
    let rt = Runtime::start(&[repo.path()], &[]).await;
    let client = rt.client().await;
    let root = repo.path().display().to_string();

    let mut leaks = vec![];
    let read_paths: Vec<&str> = CREDENTIAL_FILES
        .iter()
        .copied()
        .chain(["sub/.ssh/id_custom", ".git/config.worktree", ".git/modules/lib/config"])
        .collect();
    for path in &read_paths {
        let out = call_tool(&client, "herdr_fs_read", json!({"path": repo.path().join(path).display().to_string()})).await;
        if out["reason"] != "secret_path_denied" {
            leaks.push(format!("read {path}: {}", out["ok"]));
        }
    }
    let grep = call_tool(&client, "herdr_fs_grep", json!({"root": root, "pattern": "MARKER"})).await;
    assert_eq!(grep["ok"], true, "{grep}");
    for m in grep["matches"].as_array().unwrap() {
        leaks.push(format!("grep {}", m["file"]));
    }
    let list = call_tool(&client, "herdr_fs_list", json!({"path": root, "recursive": true, "max_entries": 2000})).await;
    assert_eq!(list["ok"], true, "{list}");
    for e in list["entries"].as_array().unwrap() {
        let rel = e["relative_path"].as_str().unwrap();
        if read_paths.contains(&rel) || rel.contains(".ssh") {
            leaks.push(format!("list {rel}"));
        }
    }
    let diff = call_tool(&client, "herdr_git", json!({"root": root, "action": "diff"})).await;
    assert_eq!(diff["ok"], true, "{diff}");
    for (path, _) in &files {
        if diff["output"].as_str().unwrap().contains(&marker(path)) {
            leaks.push(format!("diff {path}"));
        }
    }
    eprintln!("observed leaks: {leaks:?}");
    assert!(leaks.is_empty(), "credential files reached the caller: {leaks:#?}");
}

/// Item 12: a secret name whose case variant is not ASCII (the Kelvin sign `K`
/// lowercases to `k`) is kept out of `herdr_git diff` as it is out of `herdr_fs_read`.
#[tokio::test]
async fn git_diff_excludes_by_policy_matcher() {
    let name = "to\u{212A}en.txt";
    let repo = git_repo(&[(name, "old\n"), ("plain.txt", "old\n")]);
    write(&repo.path().join(name), "KELVIN-SECRET\n");
    write(&repo.path().join("plain.txt"), "PLAIN-CHANGE\n");
    let rt = Runtime::start(&[repo.path()], &[]).await;
    let client = rt.client().await;
    let read = call_tool(&client, "herdr_fs_read", json!({"path": repo.path().join(name).display().to_string()})).await;
    assert_eq!(read["reason"], "secret_path_denied", "{read}");
    let root = repo.path().display().to_string();
    for args in [json!({"root": root, "action": "diff"}), json!({"root": root, "action": "diff", "path": "."})] {
        let diff = call_tool(&client, "herdr_git", args).await;
        eprintln!("observed diff: {diff}");
        assert_eq!(diff["ok"], true, "{diff}");
        let output = diff["output"].as_str().unwrap();
        assert!(output.contains("PLAIN-CHANGE"), "{output}");
        assert!(!output.contains("KELVIN-SECRET"), "the secret's diff was printed: {output}");
    }
    // Staged: still nothing of it.
    git(repo.path(), &["add", "-A"]);
    let staged = call_tool(&client, "herdr_git", json!({"root": root, "action": "diff", "staged": true})).await;
    eprintln!("observed staged diff: {staged}");
    assert!(staged["output"].as_str().unwrap().contains("PLAIN-CHANGE"), "{staged}");
    assert!(!staged["output"].as_str().unwrap().contains("KELVIN-SECRET"), "{staged}");
}

/// Item 13: with write roots set, `herdr_exec` and `herdr_exec_start` refuse a
/// workspace outside them, and the help and tool descriptions say plainly that a
/// command itself is not sandboxed.
#[tokio::test]
async fn exec_outside_write_roots_is_refused_and_no_sandbox_is_promised() {
    let writable = git_repo(&[("a.txt", "a\n")]);
    let other = git_repo(&[("b.txt", "b\n")]);
    let rt =
        Runtime::start(&[writable.path(), other.path()], &[("HERDR_MCP_WRITE_ROOTS", writable.path().to_str().unwrap())]).await;
    let client = rt.client().await;
    let other_root = other.path().canonicalize().unwrap();
    let ws = other_root.file_name().unwrap().to_str().unwrap();
    let exec = call_tool(&client, "herdr_exec", json!({"workspace": ws, "command": "touch made-by-exec"})).await;
    assert_eq!(exec["reason"], "root_not_whitelisted", "{exec}");
    let start = call_tool(
        &client,
        "herdr_exec_start",
        json!({"root": other_root.display().to_string(), "command": "touch made-by-start"}),
    )
    .await;
    assert_eq!(start["reason"], "root_not_whitelisted", "{start}");
    assert!(!other_root.join("made-by-exec").exists() && !other_root.join("made-by-start").exists());

    let tools = client.list_all_tools().await.unwrap();
    let description =
        |name: &str| tools.iter().find(|t| t.name == name).unwrap().description.clone().unwrap_or_default().to_string();
    let help = Command::new(common::BIN).args(["serve", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    let texts = [
        ("serve --help", help),
        ("herdr_exec", description("herdr_exec")),
        ("herdr_exec_start", description("herdr_exec_start")),
    ];
    for (what, text) in &texts {
        eprintln!("observed {what} says not sandboxed: {}", text.contains("not sandboxed"));
        assert!(text.contains("not sandboxed"), "{what} does not say commands are not sandboxed:\n{text}");
    }
}

/// Item 14: a short or low-entropy `HERDR_MCP_TOKEN` refuses the start, and the
/// refusal says how to make a good one.
#[tokio::test]
async fn weak_bearer_token_is_refused() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    for weak in ["a", "test-token-0123456789abcdef", &"a".repeat(64), &"ab".repeat(32), "abcdefghijklmnopqrstuvwxyz0123456789"] {
        let options = Options {
            roots: vec![repo.path().to_path_buf()],
            extra_args: vec!["--listen".into(), common::free_loopback_addr().to_string()],
            env: vec![("HERDR_MCP_TOKEN".into(), weak.to_string())],
            ..Options::default()
        };
        let Ok(rt) = Runtime::try_start(options).await.map_err(|e| eprintln!("observed refusal for {weak:?}: {e}")) else {
            continue;
        };
        drop(rt);
        panic!("the runtime started with the weak token {weak:?}");
    }
    let (status, stderr) = common::run_to_exit(
        &Options {
            roots: vec![repo.path().to_path_buf()],
            extra_args: vec!["--listen".into(), common::free_loopback_addr().to_string()],
            env: vec![("HERDR_MCP_TOKEN".into(), "a".into())],
            ..Options::default()
        },
        Duration::from_secs(30),
    );
    assert!(!status.success());
    assert!(stderr.contains("openssl rand -hex 32"), "the refusal says how to make a token: {stderr}");
    // The harness token, and tokens made as the refusal says, are accepted.
    let rt = Runtime::start_tcp(&[repo.path()], &[]).await;
    assert_eq!(call_tool(&rt.tcp_client().await, "herdr_inspect", json!({})).await["ok"], true);
    assert!(TOKEN.len() >= 32);
}

/// Item 14: repeated 401s from one source are slowed down; the right bearer from
/// the same source is not.
#[tokio::test]
async fn repeated_401s_are_slowed_down() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let rt = Runtime::start_tcp(&[repo.path()], &[]).await;
    let bad = format!("Bearer {}", "f".repeat(TOKEN.len()));
    let mut times = vec![];
    for _ in 0..12 {
        let started = Instant::now();
        let resp =
            rt.raw_tcp("POST", "/mcp", &[("authorization", &bad), ("content-type", "application/json")], Some(b"{}")).await;
        assert_eq!(resp.status, 401);
        times.push(started.elapsed());
    }
    eprintln!("observed 401 latencies: {times:?}");
    let slow: Duration = times[8..].iter().sum();
    assert!(slow >= Duration::from_millis(1500), "the last guesses were not slowed down: {times:?}");
    let good = format!("Bearer {TOKEN}");
    let started = Instant::now();
    let health = rt.raw_tcp("GET", "/push/state", &[("authorization", &good)], None).await;
    assert_eq!(health.status, 200);
    assert!(started.elapsed() < Duration::from_millis(500), "the right bearer waited {:?}", started.elapsed());
}
