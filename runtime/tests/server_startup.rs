//! Startup and shutdown of `herdr-mcp serve`: socket safety rules, refusals with
//! one clear line, logging, and removal of the socket on SIGTERM.

mod common;

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::time::Duration;

use common::{Options, Runtime, git_repo, run_to_exit, short_tempdir};

const EXIT_DEADLINE: Duration = Duration::from_secs(20);

fn refusal(options: &Options) -> String {
    let (status, stderr) = run_to_exit(options, EXIT_DEADLINE);
    assert!(!status.success(), "expected a refusal, got {status}; stderr: {stderr}");
    let line = stderr.lines().rfind(|l| l.starts_with("herdr-mcp: error:")).unwrap_or_else(|| panic!("no error line in: {stderr}"));
    line.to_string()
}

fn with_root(repo: &tempfile::TempDir) -> Options {
    Options { roots: vec![repo.path().to_path_buf()], ..Options::default() }
}

#[tokio::test]
async fn socket_is_0600_in_a_new_0700_directory() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let dir = short_tempdir();
    let socket = dir.path().join("new").join("s.sock");
    let rt = Runtime::start_with(Options { socket: Some(socket.clone()), ..with_root(&repo) }).await;
    let meta = std::fs::symlink_metadata(&socket).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let parent = std::fs::metadata(socket.parent().unwrap()).unwrap();
    assert_eq!(parent.permissions().mode() & 0o777, 0o700);
    drop(rt);
}

#[tokio::test]
async fn default_socket_lives_under_xdg_config_home() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let dir = short_tempdir();
    // No --socket: the harness passes one, so run the binary by hand here.
    let mut child = std::process::Command::new(common::BIN)
        .args(["serve", "--root"])
        .arg(repo.path())
        .env_remove("HERDR_EXTENSION_IPC_SOCKET")
        .env("XDG_CONFIG_HOME", dir.path())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let socket = dir.path().join("herdr-mcp").join("extension.sock");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut answered = false;
    while std::time::Instant::now() < deadline {
        if let Ok(r) = common::raw_unix(&socket, "GET", "/health", &[], None).await
            && r.status == 200
        {
            answered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert!(answered, "no answer on the default socket");
    assert!(status.success());
    assert!(!socket.exists());
}

#[tokio::test]
async fn sigterm_stops_cleanly_and_removes_the_socket() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let mut rt = Runtime::start(&[repo.path()], &[]).await;
    // An open session with its server stream must not hold shutdown up.
    let client = rt.client().await;
    let status = rt.terminate();
    assert!(status.success(), "{status}; stderr: {}", rt.stderr());
    assert!(!rt.socket.exists(), "socket left behind");
    drop(client);
}

#[tokio::test]
async fn symlink_at_socket_path_is_refused_and_left_alone() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let dir = short_tempdir();
    let target = dir.path().join("target.txt");
    std::fs::write(&target, "keep").unwrap();
    let socket = dir.path().join("s.sock");
    std::os::unix::fs::symlink(&target, &socket).unwrap();
    let line = refusal(&Options { socket: Some(socket.clone()), ..with_root(&repo) });
    assert!(line.contains("symlink"), "{line}");
    assert!(std::fs::symlink_metadata(&socket).unwrap().file_type().is_symlink());
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
}

#[tokio::test]
async fn regular_file_at_socket_path_is_refused_and_left_alone() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let dir = short_tempdir();
    let socket = dir.path().join("s.sock");
    std::fs::write(&socket, "precious").unwrap();
    let line = refusal(&Options { socket: Some(socket.clone()), ..with_root(&repo) });
    assert!(line.contains("not a socket"), "{line}");
    assert_eq!(std::fs::read_to_string(&socket).unwrap(), "precious");
}

#[tokio::test]
async fn socket_directory_that_cannot_be_created_is_one_line_with_its_cause_once() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    // Nothing can create a directory inside /proc, not even root.
    let socket = std::path::PathBuf::from("/proc/herdr-mcp-no-such-dir/s.sock");
    let line = refusal(&Options { socket: Some(socket), ..with_root(&repo) });
    assert!(line.contains("cannot create socket directory /proc/herdr-mcp-no-such-dir"), "{line}");
    assert_eq!(line.matches("os error").count(), 1, "the cause is said once: {line}");
}

#[tokio::test]
async fn live_socket_is_refused() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let first = Runtime::start(&[repo.path()], &[]).await;
    let line = refusal(&Options { socket: Some(first.socket.clone()), ..with_root(&repo) });
    assert!(line.contains("already accepting connections"), "{line}");
    // The first server is unharmed.
    assert_eq!(first.raw("GET", "/health", &[], None).await.status, 200);
}

#[tokio::test]
async fn stale_socket_is_replaced() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let dir = short_tempdir();
    let socket = dir.path().join("s.sock");
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    assert!(std::fs::symlink_metadata(&socket).unwrap().file_type().is_socket());
    let rt = Runtime::start_with(Options { socket: Some(socket.clone()), ..with_root(&repo) }).await;
    assert_eq!(rt.raw("GET", "/health", &[], None).await.status, 200);
}

#[tokio::test]
async fn tcp_without_token_refuses_to_start() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let addr = common::free_loopback_addr().to_string();
    let line = refusal(&Options { extra_args: vec!["--listen".into(), addr], ..with_root(&repo) });
    assert!(line.contains("HERDR_MCP_TOKEN"), "{line}");
}

#[tokio::test]
async fn a_token_no_header_can_carry_refuses_to_start() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let addr = common::free_loopback_addr().to_string();
    // As `HERDR_MCP_TOKEN="$(cat token.txt) "` or a pasted line end would leave it.
    let line = refusal(&Options {
        extra_args: vec!["--listen".into(), addr],
        env: vec![("HERDR_MCP_TOKEN".into(), "secret\n".into())],
        ..with_root(&repo)
    });
    assert!(line.contains("HERDR_MCP_TOKEN") && line.contains("printable ASCII"), "{line}");
}

#[tokio::test]
async fn non_loopback_listen_refuses_to_start() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let options = Options {
        extra_args: vec!["--listen".into(), "0.0.0.0:8772".into()],
        env: vec![("HERDR_MCP_TOKEN".into(), "t".into())],
        ..with_root(&repo)
    };
    assert!(refusal(&options).contains("loopback"));
}

#[tokio::test]
async fn bad_root_refuses_to_start() {
    let dir = short_tempdir();
    let line = refusal(&Options {
        roots: vec![dir.path().join("missing")],
        cwd: Some(dir.path().to_path_buf()),
        ..Options::default()
    });
    assert!(line.len() < 400, "one short line: {line}");
}

#[tokio::test]
async fn readonly_with_a_value_other_than_1_or_0_refuses_to_start() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    // `true` reads as "read-only" to a person; serving read-write instead would betray them.
    let line = refusal(&Options { env: vec![("HERDR_MCP_READONLY".into(), "true".into())], ..with_root(&repo) });
    assert!(line.contains("HERDR_MCP_READONLY") && line.contains("set it to 1"), "{line}");
}

#[tokio::test]
async fn roots_env_of_separators_alone_refuses_to_start() {
    let dir = short_tempdir();
    let line = refusal(&Options {
        env: vec![("HERDR_MCP_ROOTS".into(), ":".into())],
        cwd: Some(dir.path().to_path_buf()),
        ..Options::default()
    });
    assert!(line.contains("HERDR_MCP_ROOTS") && line.contains("names no directory"), "{line}");
}

#[tokio::test]
async fn a_damaged_state_database_in_a_chosen_state_dir_says_what_to_do() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let dir = short_tempdir();
    let state = dir.path().join("state");
    std::fs::create_dir(&state).unwrap();
    std::fs::write(state.join("state.db"), "these bytes are no SQLite database header, whatever follows").unwrap();
    let line = refusal(&Options {
        extra_args: vec!["--state-dir".into(), state.display().to_string()],
        ..with_root(&repo)
    });
    assert!(line.contains("state.db is damaged") && line.contains("move it aside"), "{line}");
    assert_eq!(line.matches("not a database").count(), 1, "the cause once: {line}");
}

#[tokio::test]
async fn log_file_receives_the_logs() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let dir = short_tempdir();
    let log = dir.path().join("runtime.log");
    let mut rt = Runtime::start_with(Options {
        extra_args: vec!["--log-file".into(), log.to_str().unwrap().into()],
        ..with_root(&repo)
    })
    .await;
    rt.terminate();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("herdr-mcp serving"), "{text}");
    assert!(text.contains("herdr-mcp stopped"), "{text}");
}

#[tokio::test]
async fn logs_to_a_pipe_or_file_carry_no_colour_escapes() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    // The harness sends stderr to a file, as a service manager or `2>log` would.
    let mut rt = Runtime::start(&[repo.path()], &[]).await;
    rt.terminate();
    let text = rt.stderr();
    assert!(text.contains("herdr-mcp serving"), "{text}");
    // Which project is served, in the line that says it serves.
    let root = repo.path().canonicalize().unwrap();
    let serving = text.lines().find(|l| l.contains("herdr-mcp serving")).unwrap();
    assert!(serving.contains(&format!(" roots={} ", root.display())), "{serving}");
    assert!(!text.contains('\u{1b}'), "escape codes in a non-terminal log: {text:?}");
    // Values are written for people, not as Rust's Debug (`None`, `Some(..)`).
    assert!(!text.contains("=None") && !text.contains("Some("), "{text}");
}

#[tokio::test]
async fn the_default_log_level_leaves_out_rmcps_session_dump() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let dir = short_tempdir();
    let socket = dir.path().join("s.sock");
    let log = dir.path().join("stderr.log");
    // No HERDR_MCP_LOG nor RUST_LOG (the harness sets one): the default filter applies.
    let mut child = std::process::Command::new(common::BIN)
        .args(["serve", "--socket"])
        .arg(&socket)
        .arg("--root")
        .arg(repo.path())
        .env_remove("HERDR_MCP_LOG")
        .env_remove("RUST_LOG")
        .env("XDG_STATE_HOME", dir.path().join("state"))
        .env("XDG_CONFIG_HOME", dir.path().join("config"))
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while common::raw_unix(&socket, "GET", "/health", &[], None).await.map(|r| r.status).ok() != Some(200) {
        assert!(std::time::Instant::now() < deadline, "no answer on {}", socket.display());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A session: initialize, initialized, then a call that needs the session running.
    let post = |body: serde_json::Value, session: Option<String>| {
        let socket = socket.clone();
        async move {
            let mut headers = vec![("content-type", "application/json".to_string()), ("accept", "application/json, text/event-stream".to_string())];
            if let Some(s) = session {
                headers.push(("mcp-session-id", s));
            }
            let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            common::raw_unix(&socket, "POST", "/mcp", &headers, Some(body.to_string().as_bytes())).await.unwrap()
        }
    };
    let init = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let r = post(init, None).await;
    let session = r.headers.get("mcp-session-id").map(|v| v.to_str().unwrap().to_string());
    assert!(session.is_some(), "no session: {}", r.text());
    post(serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}), session.clone()).await;
    let listed = post(serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}), session).await;
    assert!(listed.text().contains("herdr_fs_read"), "{}", listed.text());
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("herdr-mcp serving"), "{text}");
    assert!(!text.contains("InitializeRequestParams"), "a Debug dump of the client's request in the log: {text}");
}

#[test]
fn serve_help_explains_defaults_and_environment() {
    let out = std::process::Command::new(common::BIN).args(["serve", "--help"]).output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    for needle in ["--socket", "--listen", "--root", "--log-file", "extension.sock", "HERDR_MCP_TOKEN", "HERDR_EXTENSION_IPC_SOCKET", "HERDR_MCP_ROOTS", "HERDR_MCP_WRITE_ROOTS", "','-separated", "HERDR_MCP_EXEC_BACKEND", "HERDR_SOCKET_PATH", "HERDR_MCP_AGENT_ALLOW", "HERDR_BIN_PATH", "0600", "SIGTERM"] {
        assert!(help.contains(needle), "help lacks {needle}:\n{help}");
    }
    let allow = herdr_mcp::herdr::visibility::DEFAULT_ALLOW.join(", ");
    assert!(help.contains(&format!("(default: {allow};")), "help names another default agent list than {allow}:\n{help}");
}
