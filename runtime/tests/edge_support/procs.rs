//! Real processes for the edge tests: the `herdr-mcp` binary run with a private
//! home (so no developer configuration leaks in), children that die with the
//! test, waits that poll against one deadline, and a started `edge serve`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_herdr-mcp");
/// How long any one wait may take before the test fails; generous because
/// the machine running the tests is shared and slow.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// Variables that would point a child at the developer's real edge, runtime,
/// device credential or link instead of the test's own.
const SCRUBBED_ENV: &[&str] = &[
    "HERDR_MCP_EDGE_DIR",
    "HERDR_MCP_STATE_DIR",
    "HERDR_EDGE_ISSUER",
    "HERDR_EDGE_ENV",
    "HERDR_EXTENSION_IPC_SOCKET",
    "HERDR_MCP_TOKEN",
    "HERDR_MCP_ROOTS",
    "HERDR_SOCKET_PATH",
    "HERDR_MCP_DEVICE_FILE",
    "HERDR_MCP_EDGE_CA_FILE",
    "HERDR_LINK_SECRET",
    "HERDR_LINK_EDGE",
    "HERDR_LINK_WORKSTATION_ID",
    "HERDR_LINK_CREDENTIAL_FILE",
    "HERDR_LINK_CA_FILE",
];

/// `herdr-mcp` with `home` as its HOME, XDG config and XDG state.
pub fn command(home: &Path) -> Command {
    let mut c = Command::new(BIN);
    for v in SCRUBBED_ENV {
        c.env_remove(v);
    }
    c.env("HOME", home).env("XDG_CONFIG_HOME", home.join("config")).env("XDG_STATE_HOME", home.join("state"));
    c
}

/// A child process killed and reaped when the test lets go of it, also on panic.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Spawns `cmd` with stdout discarded and stderr appended to `log`, so a failing
/// test can show what the process said.
pub fn spawn_logged(cmd: &mut Command, log: &Path) -> Proc {
    let file = std::fs::File::create(log).unwrap_or_else(|e| panic!("cannot create log {}: {e}", log.display()));
    Proc(cmd.stdout(Stdio::null()).stderr(file).spawn().unwrap_or_else(|e| panic!("cannot start {BIN}: {e}")))
}

/// Blocks until `f` yields a value, failing the test after [`DEADLINE`].
pub fn wait_until<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// [`wait_until`] for async tests: yields to the runtime between tries.
pub async fn poll<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A loopback port free at the time of asking (the issuer must name the port
/// before the edge listens on it).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The rest of the first line of `text` that starts with `prefix`, trimmed.
pub fn line_after<'a>(text: &'a str, prefix: &str) -> &'a str {
    text.lines().find_map(|l| l.strip_prefix(prefix)).unwrap_or_else(|| panic!("no {prefix:?} line in:\n{text}")).trim()
}

/// `herdr-mcp edge init --issuer` then `edge serve` on a loopback port, ready
/// (its address file written) when returned.
pub struct EdgeProcess {
    /// The issuer and base URL, `http://127.0.0.1:<port>`.
    pub base: String,
    pub edge_dir: PathBuf,
    pub log: PathBuf,
    /// The first pairing `edge init` printed: (address, 6-digit code).
    pub first_pairing: (String, String),
    _proc: Proc,
}

impl EdgeProcess {
    pub fn start(home: &Path) -> EdgeProcess {
        Self::start_with(home, |_| {})
    }

    /// [`Self::start`] with `configure` adding arguments or variables to `edge serve`.
    pub fn start_with(home: &Path, configure: impl FnOnce(&mut Command)) -> EdgeProcess {
        let edge_dir = home.join("edge");
        let port = free_port();
        let base = format!("http://127.0.0.1:{port}");
        let init = command(home).args(["edge", "init", "--issuer", &base, "--edge-dir"]).arg(&edge_dir).output().unwrap();
        let init_out = String::from_utf8_lossy(&init.stdout).to_string();
        assert!(init.status.success(), "edge init: {}", String::from_utf8_lossy(&init.stderr));
        let first_pairing = (line_after(&init_out, "pairing address:").to_string(), line_after(&init_out, "code:").to_string());
        let addr_file = home.join("edge.addr");
        let log = home.join("edge.log");
        let mut serve = command(home);
        serve
            .args(["edge", "serve", "--issuer", &base, "--listen", &format!("127.0.0.1:{port}"), "--edge-dir"])
            .arg(&edge_dir)
            .arg("--addr-file")
            .arg(&addr_file);
        configure(&mut serve);
        let proc = spawn_logged(&mut serve, &log);
        wait_until("the edge address file", || std::fs::read_to_string(&addr_file).ok());
        EdgeProcess { base, edge_dir, log, first_pairing, _proc: proc }
    }

    /// What `edge serve` wrote to stderr so far, for failure messages.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// Log text without the terminal colour sequences the link writes.
pub fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            chars.by_ref().find(|c| c.is_ascii_alphabetic());
        } else {
            out.push(c);
        }
    }
    out
}
