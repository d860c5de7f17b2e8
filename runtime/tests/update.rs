//! `herdr-mcp update check|status` and doctor's "edge contract" row, as processes:
//! no drift against a real `edge serve` (its `/info`), with and without a running
//! runtime; drift against an edge stand-in whose `/info` names another runtime
//! contract (an edge of another version), in text, JSON and `doctor --json`.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_herdr-mcp"))
}

/// A fresh user: HOME, XDG folders and no inherited herdr settings.
fn command(home: &Path) -> Command {
    let mut c = Command::new(bin());
    c.env_clear()
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_STATE_HOME", home.join("state"))
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("NO_COLOR", "1");
    c
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ready() {
        assert!(Instant::now() < deadline, "{what} within 30 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn json_of(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!("not JSON ({e}): {}\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
    })
}

fn own_contract() -> Value {
    let (catalog, (epoch, hash)) = herdr_mcp::edge::forward::local_runtime_contract();
    json!({"epoch": epoch, "hash": hash, "toolCount": catalog.len()})
}

/// A real edge on a loopback port (`edge init` then `edge serve`); its base URL.
fn start_edge(home: &Path) -> (String, Killed) {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let base = format!("http://127.0.0.1:{port}");
    let edge_dir = home.join("edge");
    let init = command(home).args(["edge", "init", "--issuer", &base, "--edge-dir"]).arg(&edge_dir).output().unwrap();
    assert!(init.status.success(), "edge init: {}", String::from_utf8_lossy(&init.stderr));
    let addr_file = home.join("edge.addr");
    let child = command(home)
        .args(["edge", "serve", "--issuer", &base, "--listen", &format!("127.0.0.1:{port}"), "--edge-dir"])
        .arg(&edge_dir)
        .arg("--addr-file")
        .arg(&addr_file)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let edge = Killed(child);
    wait_for("the edge's address file", || addr_file.exists());
    (base, edge)
}

/// An edge stand-in: answers `/info` with `info` and `/devices` with this device
/// online, for as long as the test runs.
fn fake_edge(info: Value, device_id: &'static str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut buf = [0u8; 8192];
            let n = stream.read(&mut buf).unwrap_or(0);
            let head = String::from_utf8_lossy(&buf[..n]);
            let body = if head.starts_with("GET /info ") {
                info.to_string()
            } else {
                json!({"devices": [{"device_id": device_id, "connection": "online", "last_seen_ago_ms": 1000}]})
                    .to_string()
            };
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    base
}

#[test]
fn no_drift_against_a_real_edge_with_and_without_a_running_runtime() {
    let home = tempfile::tempdir().unwrap();
    let (base, _edge) = start_edge(home.path());

    // No runtime runs: this program's contract is the workstation's.
    let o = command(home.path()).args(["update", "check", "--json", "--edge", &base]).output().unwrap();
    let r = json_of(&o);
    assert_eq!(o.status.code(), Some(0), "{r}");
    assert_eq!((r["ok"].as_bool(), r["drift"].as_bool()), (Some(true), Some(false)), "{r}");
    assert_eq!(r["edge"]["runtimeContract"], own_contract(), "{r}");
    assert_eq!(r["edge"]["publicContract"]["toolCount"], own_contract()["toolCount"].as_u64().unwrap() + 1, "{r}");
    assert_eq!((r["local"]["source"].as_str(), &r["local"]["contract"]), (Some("binary"), &own_contract()), "{r}");
    assert!(r["meaning"].as_str().unwrap().contains("until the app's actions are refreshed"), "{r}");

    // A running runtime: its own /health contract is compared, and `status` agrees with it.
    let project = home.path().join("project");
    std::fs::create_dir(&project).unwrap();
    assert!(Command::new("git").arg("init").arg("-q").arg(&project).status().unwrap().success());
    let socket = home.path().join("config/herdr-mcp/extension.sock");
    let _serve = Killed(
        command(home.path())
            .arg("serve")
            .arg("--root")
            .arg(&project)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for("the runtime's socket", || socket.exists());
    let o = command(home.path()).args(["update", "check", "--edge", &base]).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(
        text.starts_with("no drift: the edge ") && text.contains("which this workstation's running runtime serves"),
        "{text}"
    );
    assert!(!text.contains("What to do"), "{text}");
    let o = command(home.path()).args(["update", "status", "--json"]).output().unwrap();
    let s = json_of(&o);
    assert_eq!(o.status.code(), Some(0), "{s}");
    assert_eq!(
        (s["runtime"]["running"].as_bool(), s["runtime"]["same_as_program"].as_bool()),
        (Some(true), Some(true)),
        "{s}"
    );
    assert_eq!(s["program"]["contract"], own_contract());
}

#[test]
fn drift_against_an_edge_of_another_contract_is_said_with_what_to_do() {
    let home = tempfile::tempdir().unwrap();
    let old = json!({"epoch": 1, "hash": format!("sha256:{}", "0".repeat(64)), "toolCount": 17});
    let info = json!({"ok": true, "edgeVersion": "0.0.9",
        "publicContract": {"epoch": 2, "hash": format!("sha256:{}", "1".repeat(64)), "toolCount": 18},
        "runtimeContract": old});
    let base = fake_edge(info, "dev_test");

    let o = command(home.path()).args(["update", "check", "--json", "--edge", &base]).output().unwrap();
    let r = json_of(&o);
    assert_eq!(o.status.code(), Some(1), "{r}");
    assert_eq!((r["ok"].as_bool(), r["drift"].as_bool()), (Some(false), Some(true)), "{r}");
    assert_eq!((&r["edge"]["runtimeContract"], &r["local"]["contract"]), (&old, &own_contract()), "{r}");
    let meaning = r["meaning"].as_str().unwrap();
    assert!(
        meaning.contains("contract_mismatch")
            && meaning.contains("snapshot stays frozen until the app's actions are refreshed"),
        "{meaning}"
    );
    assert!(meaning.contains("Never delete and re-add the connector"), "{meaning}");
    let action = r["action"].as_str().unwrap();
    assert!(
        action.contains("edge 0.0.9, here 0.1.0") && action.contains("refresh the ChatGPT app's actions"),
        "{action}"
    );

    let o = command(home.path()).args(["update", "check", "--edge", &base]).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        text.starts_with("drift: the edge ") && text.contains("\nWhat it means: ") && text.contains("\nWhat to do: "),
        "{text}"
    );

    // Enrolled with that edge: doctor's "edge contract" row fails with the same verdict.
    let device_file = home.path().join("device.json");
    let device = json!({"edge_origin": base, "device_id": "dev_test", "workstation_id": "ws_test", "credential_id": "cred_test",
        "device_secret": "devsec_test", "name": "test", "enrolled_at_ms": 0});
    std::fs::write(&device_file, device.to_string()).unwrap();
    std::fs::set_permissions(&device_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let o =
        command(home.path()).args(["doctor", "--json"]).env("HERDR_MCP_DEVICE_FILE", &device_file).output().unwrap();
    let d = json_of(&o);
    let row = d["checks"].as_array().unwrap().iter().find(|c| c["layer"] == "edge contract").cloned();
    let row = row.unwrap_or_else(|| panic!("no edge contract row: {d}"));
    assert_eq!((row["status"].as_str(), row["details"]["drift"].as_bool()), (Some("fail"), Some(true)), "{row}");
    let fix = row["fix"].as_str().unwrap();
    assert!(fix.contains("refresh the ChatGPT app's actions"), "{row}");
    // This workstation's commands by absolute path, as every doctor fix names them.
    let me = bin().canonicalize().unwrap().display().to_string();
    assert!(fix.contains(&format!("restart `{me} serve`")) && fix.contains(&format!("`{me} update check`")), "{fix}");
    assert_eq!(o.status.code(), Some(1), "{d}");

    // `update check` without --edge asks the enrolled one.
    let o = command(home.path())
        .args(["update", "check", "--json"])
        .env("HERDR_MCP_DEVICE_FILE", &device_file)
        .output()
        .unwrap();
    assert_eq!(json_of(&o)["edge"]["origin"], base.as_str());
}
