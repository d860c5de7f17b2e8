//! One process holds a workstation's link per state directory: a second
//! standalone `link` refuses at start and names the holder; a `serve --link`
//! that finds the link held serves local clients without one (its `--help`
//! says so) until the holder stops, then takes the link over; and a holder
//! killed with SIGKILL leaves nothing that blocks the next start. Real binaries, sharing the default state directory, with an edge
//! nobody listens on: the lock is taken before any connection is tried.

#[path = "edge_support/procs.rs"]
mod procs;

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use herdr_mcp::edge::devices_local::{self, LocalDevice};
use procs::{Proc, command, plain, spawn_logged, wait_until};

const WORKSTATION: &str = "dev_single_holder";

/// One enrolled workstation whose processes share HOME, and so the default
/// state directory.
struct Host {
    home: PathBuf,
    device_file: PathBuf,
    socket: PathBuf,
}

impl Host {
    fn new(home: &Path) -> Host {
        let device_file = home.join("device.json");
        let device = LocalDevice {
            // A port just freed: every connection attempt is refused at once.
            edge_origin: format!("http://127.0.0.1:{}", procs::free_port()),
            device_id: WORKSTATION.into(),
            workstation_id: WORKSTATION.into(),
            credential_id: "cred_single_holder".into(),
            device_secret: "devsec_single_holder".into(),
            name: "single-holder".into(),
            enrolled_at_ms: 0,
        };
        devices_local::save(&device_file, &device).unwrap();
        std::fs::create_dir_all(home.join("root")).unwrap();
        Host { home: home.to_path_buf(), device_file, socket: home.join("runtime.sock") }
    }

    fn link(&self, log: &Path) -> Proc {
        let mut link = command(&self.home);
        link.arg("link").arg("--socket").arg(&self.socket).env(devices_local::PATH_ENV, &self.device_file);
        spawn_logged(&mut link, log)
    }

    /// `serve --link`, up once its socket answers.
    fn serve_link(&self, log: &Path) -> Proc {
        let mut serve = command(&self.home);
        serve
            .args(["serve", "--link", "--socket"])
            .arg(&self.socket)
            .arg("--root")
            .arg(self.home.join("root"))
            .env(devices_local::PATH_ENV, &self.device_file);
        let proc = spawn_logged(&mut serve, log);
        wait_until("the runtime socket", || UnixStream::connect(&self.socket).ok());
        proc
    }
}

fn text(path: &Path) -> String {
    plain(&std::fs::read_to_string(path).unwrap_or_default())
}

/// Waits until the process behind `log` has tried the edge, which it does only
/// after claiming the link; fails at once if it exited instead.
fn wait_linking(proc: &mut Proc, log: &Path) {
    wait_until("the link to try the edge", || {
        if let Some(status) = proc.0.try_wait().unwrap() {
            panic!("exited ({status}) instead of linking:\n{}", text(log));
        }
        text(log).contains("retrying").then_some(())
    });
}

fn wait_exit(proc: &mut Proc) -> ExitStatus {
    wait_until("the refused link to exit", || proc.0.try_wait().unwrap())
}

/// The one `herdr-mcp: error:` line of a refused start.
fn refusal(log: &Path) -> String {
    let said = text(log);
    assert!(!said.contains("retrying"), "a refused link never tries the edge:\n{said}");
    let errors: Vec<&str> = said.lines().filter(|l| l.starts_with("herdr-mcp: error:")).collect();
    assert_eq!(errors.len(), 1, "one error line expected in:\n{said}");
    errors[0].to_string()
}

#[test]
fn a_second_standalone_link_is_refused_and_a_killed_holder_blocks_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let host = Host::new(tmp.path());
    let first_log = tmp.path().join("first.log");
    let mut first = host.link(&first_log);
    wait_linking(&mut first, &first_log);

    let second_log = tmp.path().join("second.log");
    let mut second = host.link(&second_log);
    assert!(!wait_exit(&mut second).success());
    let line = refusal(&second_log);
    let pid = first.0.id();
    for needle in [WORKSTATION, &format!("`herdr-mcp link` (pid {pid})"), "stop that process", "serve --link"] {
        assert!(line.contains(needle), "{needle:?} missing from: {line}");
    }

    // SIGKILL: the holder writes nothing on its way out; the kernel drops its lock.
    first.0.kill().unwrap();
    first.0.wait().unwrap();
    let third_log = tmp.path().join("third.log");
    let mut third = host.link(&third_log);
    wait_linking(&mut third, &third_log);
    let lock = tmp.path().join(format!("state/herdr-mcp/link-{WORKSTATION}.lock"));
    let note = std::fs::read_to_string(&lock).unwrap();
    assert_eq!(note, format!("{} herdr-mcp link\n", third.0.id()), "the note names the new holder");
}

#[test]
fn serve_link_serves_without_a_link_while_a_standalone_link_holds_it_then_takes_it_over() {
    let tmp = tempfile::tempdir().unwrap();
    let host = Host::new(tmp.path());
    let link_log = tmp.path().join("link.log");
    let mut link = host.link(&link_log);
    wait_linking(&mut link, &link_log);

    let serve_log = tmp.path().join("serve.log");
    let mut serve = host.serve_link(&serve_log);
    let said = text(&serve_log);
    let warning = said.lines().find(|l| l.contains("already held by")).unwrap_or_else(|| panic!("no warning in:\n{said}"));
    assert!(warning.contains("WARN") && warning.contains(&format!("`herdr-mcp link` (pid {})", link.0.id())), "{warning}");
    assert!(warning.contains("without the edge link"), "{warning}");
    assert!(serve.0.try_wait().unwrap().is_none(), "the runtime keeps serving local clients");
    // A further sign that no link task runs beside the server.
    assert!(!said.contains("retrying") && !said.contains("linked"), "{said}");
    assert!(link.0.try_wait().unwrap().is_none(), "the standalone link keeps its link");

    // Once the standalone link is gone (killed: it frees nothing itself), the
    // runtime takes the link over and starts linking.
    link.0.kill().unwrap();
    link.0.wait().unwrap();
    wait_linking(&mut serve, &serve_log);
    assert!(text(&serve_log).contains("links it now"), "{}", text(&serve_log));
    let lock = tmp.path().join(format!("state/herdr-mcp/link-{WORKSTATION}.lock"));
    let note = std::fs::read_to_string(&lock).unwrap();
    assert_eq!(note, format!("{} herdr-mcp serve --link\n", serve.0.id()), "the note names the runtime");
}

#[test]
fn a_standalone_link_is_refused_while_serve_link_holds_it_and_starts_once_serve_is_killed() {
    let tmp = tempfile::tempdir().unwrap();
    let host = Host::new(tmp.path());
    let serve_log = tmp.path().join("serve.log");
    let mut serve = host.serve_link(&serve_log);
    wait_linking(&mut serve, &serve_log);

    let refused_log = tmp.path().join("refused.log");
    let mut refused = host.link(&refused_log);
    assert!(!wait_exit(&mut refused).success());
    let line = refusal(&refused_log);
    assert!(line.contains(&format!("`herdr-mcp serve --link` (pid {})", serve.0.id())), "{line}");

    serve.0.kill().unwrap();
    serve.0.wait().unwrap();
    let next_log = tmp.path().join("next.log");
    let mut next = host.link(&next_log);
    wait_linking(&mut next, &next_log);
}

#[test]
fn help_says_what_happens_when_the_link_is_held() {
    let tmp = tempfile::tempdir().unwrap();
    let help = |sub: &str| {
        let out = command(tmp.path()).args([sub, "--help"]).output().unwrap();
        assert!(out.status.success());
        // Joined into one line: clap wraps the text wherever the width falls.
        String::from_utf8_lossy(&out.stdout).split_whitespace().collect::<Vec<_>>().join(" ")
    };
    let serve = help("serve");
    assert!(serve.contains("already holds this workstation's link") && serve.contains("without a link of its own"), "{serve}");
    assert!(serve.contains("takes the link over once that process stops"), "{serve}");
    let link = help("link");
    assert!(link.contains("One process at a time holds a workstation's link") && link.contains("refuses to start"), "{link}");
}
