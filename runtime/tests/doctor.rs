//! `herdr-mcp doctor --json` as a process against real layers: a running
//! `herdr-mcp serve` on its Unix socket, the real `herdr-nmhost` registered with
//! `herdr-nmhost install` and launched by doctor as Chrome would, a Herdr stand-in
//! answering `ping` on its socket, and the device credential file of the link.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_herdr-mcp");
const PINNED_ORIGIN: &str = "chrome-extension://ocghgnmfcfoelnpjkmemmjdjjacdjmcl/";

/// `herdr-nmhost`, built beside `herdr-mcp` (`cargo test --workspace` builds both).
fn nmhost() -> PathBuf {
    let path = Path::new(BIN).with_file_name("herdr-nmhost");
    assert!(path.exists(), "{} is missing: run `cargo build -p herdr-nmhost` first", path.display());
    path
}

/// A home of its own: config, state, project, browser profile, a PATH without browsers.
struct World {
    dir: tempfile::TempDir,
    runtime: Option<Child>,
    herdr: Option<std::thread::JoinHandle<()>>,
}

impl World {
    fn new() -> World {
        let dir = tempfile::Builder::new().prefix("dr").tempdir_in("/tmp").unwrap();
        let w = World { dir, runtime: None, herdr: None };
        std::fs::create_dir_all(w.bin()).unwrap();
        // git only, so that no browser of the machine running the test shows up.
        let git = ["/usr/bin/git", "/bin/git"].into_iter().find(|p| Path::new(p).exists()).expect("git");
        std::os::unix::fs::symlink(git, w.bin().join("git")).unwrap();
        let project = w.project();
        std::fs::create_dir_all(&project).unwrap();
        assert!(Command::new("git").args(["init", "-q"]).current_dir(&project).status().unwrap().success());
        w
    }

    fn home(&self) -> &Path {
        self.dir.path()
    }
    fn bin(&self) -> PathBuf {
        self.home().join("bin")
    }
    fn project(&self) -> PathBuf {
        self.home().join("project")
    }
    fn profile(&self) -> PathBuf {
        self.home().join("profile")
    }
    fn socket(&self) -> PathBuf {
        self.home().join("config/herdr-mcp/extension.sock")
    }
    fn herdr_socket(&self) -> PathBuf {
        self.home().join("herdr.sock")
    }
    fn manifest(&self) -> PathBuf {
        self.profile().join("NativeMessagingHosts/dev.herdr.mcp.json")
    }

    fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new(program);
        cmd.env_clear()
            .env("HOME", self.home())
            .env("XDG_CONFIG_HOME", self.home().join("config"))
            .env("HERDR_MCP_STATE_DIR", self.home().join("state"))
            .env("HERDR_SOCKET_PATH", self.herdr_socket())
            .env("PATH", self.bin())
            .env("NO_COLOR", "1")
            .current_dir(self.project());
        cmd
    }

    fn start_runtime(&mut self) {
        let log = std::fs::File::create(self.home().join("runtime.log")).unwrap();
        let child = self
            .command(BIN)
            // The runtime stays standalone (the stand-in answers only ping, not the
            // snapshot herdr_inspect needs); doctor checks Herdr on its own socket.
            .env("HERDR_SOCKET_PATH", self.home().join("runtime-no-herdr.sock"))
            .args(["serve", "--root"])
            .arg(self.project())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.runtime = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        while !self.health_answers() {
            assert!(Instant::now() < deadline, "runtime did not answer /health in 30 s");
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    fn health_answers(&self) -> bool {
        let Ok(mut s) = std::os::unix::net::UnixStream::connect(self.socket()) else { return false };
        let _ = s.write_all(b"GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        let mut first = String::new();
        let _ = BufReader::new(s).read_line(&mut first);
        first.contains(" 200 ")
    }

    fn install(&self, extra: &[&str]) {
        let out = self
            .command(nmhost())
            .arg("install")
            .arg("--user-data-dir")
            .arg(self.profile())
            .args(extra)
            .output()
            .unwrap();
        assert!(out.status.success(), "install: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// A Herdr stand-in that answers every request line with `ping`'s result.
    fn start_herdr(&mut self) {
        let listener = UnixListener::bind(self.herdr_socket()).unwrap();
        self.herdr = Some(std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    let mut line = String::new();
                    while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
                        let req: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
                        let reply = if req["method"] == "ping" {
                            json!({"id": req["id"], "result": {"version": "0.9.1", "protocol": 3}})
                        } else {
                            json!({"id": req["id"], "error": {"code": "unknown_method", "message": "stand-in"}})
                        };
                        let _ = (&stream).write_all(format!("{reply}\n").as_bytes());
                        line.clear();
                    }
                });
            }
        }));
    }

    /// `herdr-mcp doctor --json --user-data-dir <profile>`: exit success and the report.
    fn doctor(&self, env: &[(&str, &str)]) -> (bool, Value) {
        let mut cmd = self.command(BIN);
        cmd.args(["doctor", "--json", "--user-data-dir"]).arg(self.profile());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let report: Value = serde_json::from_str(&text).unwrap_or_else(|e| {
            panic!("doctor --json printed no JSON ({e}): {text}\n{}", String::from_utf8_lossy(&out.stderr))
        });
        assert_eq!(report["ok"], out.status.success(), "ok matches the exit code: {report:#}");
        (out.status.success(), report)
    }
}

impl Drop for World {
    fn drop(&mut self) {
        if let Some(mut child) = self.runtime.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The report's row whose layer starts with `layer`.
fn row<'a>(report: &'a Value, layer: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["layer"].as_str().is_some_and(|l| l.starts_with(layer)))
        .unwrap_or_else(|| panic!("no {layer} row: {report:#}"))
}

fn layers(report: &Value) -> Vec<String> {
    report["checks"].as_array().unwrap().iter().map(|c| c["layer"].as_str().unwrap().to_string()).collect()
}

#[test]
fn everything_healthy() {
    let mut w = World::new();
    w.start_runtime();
    w.install(&[]);
    w.start_herdr();
    let (ok, report) = w.doctor(&[]);
    assert!(ok, "{report:#}");
    let order = layers(&report);
    assert!(
        order[0] == "runtime" && order[1].starts_with("native host") && order[2] == "herdr" && order[3] == "edge link",
        "{order:?}"
    );
    let runtime = row(&report, "runtime");
    assert_eq!(runtime["status"], "ok", "{runtime}");
    let project = w.project().canonicalize().unwrap().display().to_string();
    assert_eq!(runtime["details"]["roots"], json!([project]), "{runtime}");
    assert_eq!(runtime["details"]["socket"], w.socket().display().to_string());
    let host = row(&report, "native host");
    assert_eq!(host["status"], "ok", "{host}");
    assert_eq!(host["details"]["allowed_origins"], json!([PINNED_ORIGIN]));
    assert!(host["details"]["round_trip_ms"].is_u64(), "a real round trip: {host}");
    let herdr = row(&report, "herdr");
    assert_eq!(herdr["status"], "ok", "{herdr}");
    assert_eq!(herdr["details"]["version"], "0.9.1");
    assert_eq!(herdr["details"]["protocol"], 3);
    // Not enrolled: optional, a warning with the command that enrolls.
    let link = row(&report, "edge link");
    assert_eq!(link["status"], "warn", "{link}");
    assert_eq!(link["details"]["enrolled"], false);
    assert!(link["fix"].as_str().unwrap().contains(&format!("{BIN} worker connect")), "{link}");
}

#[test]
fn runtime_down() {
    let w = World::new();
    w.install(&[]);
    let (ok, report) = w.doctor(&[]);
    assert!(!ok);
    let runtime = row(&report, "runtime");
    assert_eq!(runtime["status"], "fail");
    assert!(runtime["message"].as_str().unwrap().contains(&w.socket().display().to_string()), "{runtime}");
    let fix = runtime["fix"].as_str().unwrap();
    assert!(fix.starts_with(&format!("{BIN} serve")), "{fix}");
    assert!(fix.contains(&format!("--root {}", w.project().canonicalize().unwrap().display())), "{fix}");
    // The host itself is fine and says so: it reached no runtime.
    let host = row(&report, "native host");
    assert_eq!(host["status"], "fail", "{host}");
    assert_eq!(host["details"]["host_error"], "extension_ipc_unavailable", "{host}");
    assert_eq!(host["fix"], runtime["fix"]);
}

#[test]
fn runtime_socket_with_a_loose_mode() {
    let mut w = World::new();
    w.start_runtime();
    std::fs::set_permissions(w.socket(), std::fs::Permissions::from_mode(0o666)).unwrap();
    let (ok, report) = w.doctor(&[]);
    assert!(!ok);
    let runtime = row(&report, "runtime");
    assert_eq!(runtime["status"], "fail", "{runtime}");
    assert!(runtime["message"].as_str().unwrap().contains("0666"), "{runtime}");
    assert_eq!(runtime["fix"], format!("chmod 600 {}", w.socket().display()));
}

#[test]
fn manifest_missing() {
    let mut w = World::new();
    w.start_runtime();
    let (ok, report) = w.doctor(&[]);
    assert!(!ok);
    let host = row(&report, "native host");
    assert_eq!(host["status"], "fail", "{host}");
    assert!(host["message"].as_str().unwrap().contains(&w.manifest().display().to_string()), "{host}");
    assert_eq!(host["fix"], format!("{} install --user-data-dir {}", nmhost().display(), w.profile().display()));
    assert_eq!(row(&report, "runtime")["status"], "ok");
}

#[test]
fn manifest_pointing_at_a_deleted_binary() {
    let mut w = World::new();
    w.start_runtime();
    let copy = w.home().join("old-nmhost");
    std::fs::copy(nmhost(), &copy).unwrap();
    w.install(&["--binary", copy.to_str().unwrap()]);
    std::fs::remove_file(&copy).unwrap();
    let (ok, report) = w.doctor(&[]);
    assert!(!ok);
    let host = row(&report, "native host");
    assert_eq!(host["status"], "fail", "{host}");
    assert!(host["message"].as_str().unwrap().contains("old-nmhost"), "{host}");
    assert!(host["message"].as_str().unwrap().contains("not an existing executable"), "{host}");
    assert!(host["fix"].as_str().unwrap().contains(" install --user-data-dir "), "{host}");
}

#[test]
fn wrong_origin() {
    let mut w = World::new();
    w.start_runtime();
    w.install(&["--extension-id", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"]);
    let (ok, report) = w.doctor(&[]);
    assert!(!ok);
    let host = row(&report, "native host");
    assert_eq!(host["status"], "fail", "{host}");
    let message = host["message"].as_str().unwrap();
    assert!(
        message.contains("chrome-extension://aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/") && message.contains(PINNED_ORIGIN),
        "{message}"
    );
    assert!(host["fix"].as_str().unwrap().ends_with(&format!(" install --user-data-dir {}", w.profile().display())));
}

#[test]
fn herdr_down_is_a_warning() {
    let mut w = World::new();
    w.start_runtime();
    w.install(&[]);
    let (ok, report) = w.doctor(&[]);
    assert!(ok, "Herdr is optional: {report:#}");
    let herdr = row(&report, "herdr");
    assert_eq!(herdr["status"], "warn", "{herdr}");
    assert!(herdr["message"].as_str().unwrap().contains(&w.herdr_socket().display().to_string()), "{herdr}");
    assert_eq!(herdr["details"]["socket"], w.herdr_socket().display().to_string());
}

#[test]
fn link_enrolled_but_edge_unreachable() {
    let mut w = World::new();
    w.start_runtime();
    w.install(&[]);
    // A port nobody listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let device = w.home().join("device.json");
    let body = json!({
        "edge_origin": format!("http://127.0.0.1:{port}"), "device_id": "dev_test", "workstation_id": "ws_test",
        "credential_id": "cred_test", "device_secret": "devsec_test", "name": "laptop", "enrolled_at_ms": 1
    });
    std::fs::write(&device, body.to_string()).unwrap();
    std::fs::set_permissions(&device, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (ok, report) = w.doctor(&[("HERDR_MCP_DEVICE_FILE", device.to_str().unwrap())]);
    assert!(!ok);
    let link = row(&report, "edge link");
    assert_eq!(link["status"], "fail", "{link}");
    assert_eq!(link["details"]["enrolled"], true);
    assert!(link["message"].as_str().unwrap().contains("cannot ask the edge"), "{link}");
}

#[test]
fn snap_chromium_cannot_run_native_hosts() {
    let w = World::new();
    let snap_bin = w.home().join("snap/bin");
    std::fs::create_dir_all(&snap_bin).unwrap();
    let chromium = snap_bin.join("chromium");
    std::fs::write(&chromium, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&chromium, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", snap_bin.display(), w.bin().display());
    // Without --user-data-dir: the browsers of this home.
    let out = w.command(BIN).args(["doctor", "--json"]).env("PATH", &path).output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let host = row(&report, "native host (chromium)");
    assert_eq!(host["status"], "warn", "{host}");
    assert_eq!(host["details"]["confined"], "snap", "{host}");
    assert!(host["message"].as_str().unwrap().contains("cannot reach herdr-nmhost"), "{host}");
}
