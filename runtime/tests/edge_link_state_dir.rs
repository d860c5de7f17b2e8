//! Where a standalone `herdr-mcp link` keeps the answers to changes, when the
//! state database cannot be opened: a directory the user chose stops the link
//! before it connects anywhere; an unusable default is a warning on stderr, and
//! the link goes on (it tries the edge), keeping answers in memory only. A
//! `serve --link` without a state database says the same in its log.

#[path = "edge_support/procs.rs"]
mod procs;

use std::path::Path;
use std::process::Command;

use herdr_mcp::edge::devices_local::{self, LocalDevice};
use procs::{Proc, command, plain, spawn_logged, wait_until};

/// A link with every identity flag given, to an edge nobody listens on: what
/// it does first depends only on the state directory.
fn link_to_nowhere(home: &Path) -> Command {
    let secret = home.join("secret");
    std::fs::write(&secret, "s3cret").unwrap();
    std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    // A port just freed: connecting to it is refused at once.
    let port = procs::free_port();
    let mut cmd = command(home);
    cmd.args(["link", "--edge", &format!("http://127.0.0.1:{port}"), "--workstation-id", "ws_state_test", "--credential-file"])
        .arg(&secret)
        .arg("--socket")
        .arg(home.join("runtime.sock"));
    cmd
}

fn text(path: &Path) -> String {
    plain(&std::fs::read_to_string(path).unwrap_or_default())
}

#[test]
fn a_chosen_state_dir_that_cannot_be_used_stops_the_link() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let not_a_dir = home.join("a-file");
    std::fs::write(&not_a_dir, "").unwrap();
    for via_env in [false, true] {
        let log = home.join(format!("link-{via_env}.log"));
        let mut cmd = link_to_nowhere(home);
        if via_env {
            cmd.env("HERDR_MCP_STATE_DIR", &not_a_dir);
        } else {
            cmd.arg("--state-dir").arg(&not_a_dir);
        }
        let mut link = spawn_logged(&mut cmd, &log);
        let status = wait_until("the link to exit", || link.0.try_wait().unwrap());
        let said = text(&log);
        assert!(!status.success(), "via env: {via_env}: {said}");
        assert!(said.contains("herdr-mcp: error: state directory") && said.contains("a-file"), "via env: {via_env}: {said}");
        assert!(!said.contains("retrying"), "it never tried the edge: {said}");
    }
}

#[test]
fn an_unusable_default_state_dir_is_a_warning_and_the_link_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    // The default is $XDG_STATE_HOME/herdr-mcp; a file there cannot hold a directory.
    let blocked = home.join("blocked-state");
    std::fs::write(&blocked, "").unwrap();
    let log = home.join("link.log");
    let _link: Proc = spawn_logged(link_to_nowhere(home).env("XDG_STATE_HOME", &blocked), &log);
    let said = wait_until("the link to warn and then try the edge", || {
        let said = text(&log);
        said.contains("retrying").then_some(said)
    });
    let warning = said.lines().find(|l| l.starts_with("herdr-mcp: warning:")).unwrap_or_else(|| panic!("no warning in:\n{said}"));
    assert!(warning.contains("blocked-state") && warning.contains("in memory only"), "{warning}");
    assert!(!said.contains("herdr-mcp: error"), "{said}");
}

#[test]
fn serve_link_without_a_state_database_warns_that_answers_stay_in_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let blocked = home.join("blocked-state");
    std::fs::write(&blocked, "").unwrap();
    let device_file = home.join("device.json");
    let device = LocalDevice {
        edge_origin: format!("http://127.0.0.1:{}", procs::free_port()),
        device_id: "dev_state_test".into(),
        workstation_id: "dev_state_test".into(),
        credential_id: "cred_state_test".into(),
        device_secret: "devsec_state_test".into(),
        name: "state-test".into(),
        enrolled_at_ms: 0,
    };
    devices_local::save(&device_file, &device).unwrap();
    let root = home.join("root");
    std::fs::create_dir_all(&root).unwrap();
    let log = home.join("serve.log");
    let mut serve = command(home);
    serve
        .args(["serve", "--socket"])
        .arg(home.join("runtime.sock"))
        .arg("--root")
        .arg(&root)
        .arg("--link")
        .env("XDG_STATE_HOME", &blocked)
        .env(devices_local::PATH_ENV, &device_file);
    let _serve: Proc = spawn_logged(&mut serve, &log);
    let said = wait_until("the runtime's link to try the edge", || {
        let said = text(&log);
        said.contains("retrying").then_some(said)
    });
    assert!(said.contains("command execution is off"), "{said}");
    assert!(said.contains("the link keeps the answers to changes in memory only"), "{said}");
}

#[test]
fn link_help_says_where_answers_are_kept_and_what_a_failure_does() {
    let tmp = tempfile::tempdir().unwrap();
    let out = command(tmp.path()).args(["link", "--help"]).output().unwrap();
    assert!(out.status.success());
    // Joined into one line: clap wraps the text wherever the width falls.
    let help = String::from_utf8_lossy(&out.stdout).split_whitespace().collect::<Vec<_>>().join(" ");
    for needle in ["--state-dir", "HERDR_MCP_STATE_DIR", "stops", "in memory only"] {
        assert!(help.contains(needle), "{needle:?} missing from:\n{help}");
    }
}
