//! Starts the real `herdr-mcp serve` on a temp socket with a temp managed root.
//!
//! The binary is `$HERDR_MCP_BIN` when set (e.g. a runtime built from another checkout), else
//! the one next to the running test or bench executable (`target/<profile>/herdr-mcp`); when it
//! is not there it is built once with cargo, in the same profile and target dir.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// `target/<profile>` for the running executable (`target/<profile>/deps/<name>-<hash>`).
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    exe.parent().and_then(Path::parent).expect("executable lives in target/<profile>/deps").to_path_buf()
}

/// Path to `herdr-mcp`, building it when missing. `Err` says why it cannot be had.
pub fn binary() -> Result<PathBuf, String> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            if let Some(explicit) = std::env::var_os("HERDR_MCP_BIN") {
                let explicit = PathBuf::from(explicit);
                return if explicit.is_file() {
                    Ok(explicit)
                } else {
                    Err(format!("HERDR_MCP_BIN={} is not a file", explicit.display()))
                };
            }
            let dir = profile_dir();
            let candidate = dir.join("herdr-mcp");
            if candidate.is_file() {
                return Ok(candidate);
            }
            let release = dir.file_name().is_some_and(|n| n == "release");
            let target_dir = dir.parent().expect("target dir").to_path_buf();
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
            let mut cmd = Command::new(cargo);
            cmd.args(["build", "-p", "herdr-mcp", "--bin", "herdr-mcp"]).env("CARGO_TARGET_DIR", &target_dir);
            if release {
                cmd.arg("--release");
            }
            let status = cmd.status().map_err(|e| format!("cannot run cargo to build herdr-mcp: {e}"))?;
            if !status.success() || !candidate.is_file() {
                return Err(format!("`cargo build -p herdr-mcp` failed ({status}); {} missing", candidate.display()));
            }
            Ok(candidate)
        })
        .clone()
}

pub struct RealRuntime {
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
    pub root: PathBuf,
    child: Child,
}

impl Drop for RealRuntime {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl RealRuntime {
    /// Starts the runtime and waits (polling, bounded) until its socket answers `/health`.
    pub fn start() -> Result<RealRuntime, String> {
        let binary = binary()?;
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let root = dir.path().join("root");
        let state = dir.path().join("state");
        std::fs::create_dir_all(&root).map_err(|e| e.to_string())?;
        let root = root.canonicalize().map_err(|e| e.to_string())?;
        let socket = dir.path().join("extension.sock");
        let log = dir.path().join("runtime.log");
        let child = Command::new(&binary)
            .arg("serve")
            .arg("--socket")
            .arg(&socket)
            .arg("--root")
            .arg(&root)
            .arg("--log-file")
            .arg(&log)
            // The state dir by environment: builds that predate `--state-dir` ignore it.
            .env("HERDR_MCP_STATE_DIR", &state)
            .env_remove("HERDR_MCP_READONLY")
            .env_remove("HERDR_MCP_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
        let mut runtime = RealRuntime { dir, socket, root, child };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = runtime.child.try_wait().map_err(|e| e.to_string())? {
                let log = std::fs::read_to_string(&log).unwrap_or_default();
                return Err(format!("herdr-mcp serve exited early ({status}): {log}"));
            }
            if health_ok(&runtime.socket) {
                return Ok(runtime);
            }
            if Instant::now() > deadline {
                return Err("herdr-mcp serve did not answer /health within 30 s".to_owned());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A minimal blocking HTTP/1.1 GET /health over the socket (keeps this helper runtime-agnostic).
fn health_ok(socket: &Path) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::os::unix::net::UnixStream::connect(socket) else { return false };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").is_err() {
        return false;
    }
    let mut response = Vec::new();
    let _ = s.read_to_end(&mut response);
    response.starts_with(b"HTTP/1.1 200")
}
