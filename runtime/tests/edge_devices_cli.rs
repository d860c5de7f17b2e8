//! Devices with real processes: `edge init --issuer` prints the first pairing,
//! `edge serve` runs, `worker connect` on a pty (the code typed at a no-echo
//! prompt) enrolls a first computer, which then `worker pair`s a second one;
//! `device list`, `worker rename`, `worker revoke --confirm`, and the revoked
//! computer's credential refused afterwards; last, `worker connect --recover`
//! re-keys the first computer's device. `device list` shows which devices are
//! linked. Every positional argument is explained in `--help`.

#[path = "edge_support/procs.rs"]
mod procs;
#[path = "edge_support/pty.rs"]
mod pty;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;

use herdr_mcp::edge::clock::SystemClock;
use herdr_mcp::edge::devices::DeviceRegistry;
use herdr_mcp::edge::devices_local::{self, LocalDevice};
use herdr_mcp::edge::store::EdgeStore;
use procs::{DEADLINE, EdgeProcess, command, line_after, spawn_logged, wait_until};
use pty::PtySession;
use serde_json::Value;

/// Runs `worker connect` on a fresh pty, typing `code` at the prompt. Returns
/// (exit ok, terminal transcript, stdout).
fn connect_on_pty(home: &Path, device_file: &Path, address: &str, name: &str, code: &str) -> (bool, String, String) {
    connect_with(home, device_file, address, &["--name", name], code)
}

/// [`connect_on_pty`] with any extra `worker connect` arguments.
fn connect_with(home: &Path, device_file: &Path, address: &str, extra: &[&str], code: &str) -> (bool, String, String) {
    let mut cmd = command(home);
    cmd.args(["worker", "connect", address]).args(extra).arg("--device-file").arg(device_file);
    let mut pty = PtySession::spawn(cmd, DEADLINE);
    pty.wait_for_prompt("Pairing code", 1);
    pty.type_line(code);
    pty.finish("worker connect")
}

fn run(home: &Path, args: &[&str], device_file: &Path) -> Output {
    command(home).args(args).arg("--device-file").arg(device_file).output().unwrap()
}

#[test]
fn pairing_enrollment_and_revocation_with_real_processes() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().to_path_buf();
    let edge = EdgeProcess::start(&home);
    let (base, edge_dir) = (edge.base.clone(), edge.edge_dir.clone());
    let (address, code) = edge.first_pairing.clone();
    assert!(address.starts_with(&format!("{base}/pair#pair_")), "{address}");
    assert_eq!(code.len(), 6);

    // First computer: a wrong code is refused and nothing is stored.
    let first: PathBuf = home.join("first").join("device.json");
    let wrong = format!("{:06}", (code.parse::<u32>().unwrap() + 1) % 1_000_000);
    let (ok, transcript, _) = connect_on_pty(&home, &first, &address, "first", &wrong);
    assert!(!ok && transcript.contains("pairing_rejected"), "{transcript}");
    assert!(!first.exists());
    // The right code enrolls it; the typed code is not echoed.
    let (ok, transcript, out) = connect_on_pty(&home, &first, &address, "first", &code);
    assert!(ok, "{transcript}");
    assert!(!transcript.contains(&code), "the code was echoed: {transcript}");
    assert!(out.contains("enrolled dev_"), "{out}");
    assert_eq!(std::fs::metadata(&first).unwrap().permissions().mode() & 0o777, 0o600);
    let cred: Value = serde_json::from_str(&std::fs::read_to_string(&first).unwrap()).unwrap();
    let first_id = cred["device_id"].as_str().unwrap().to_string();
    assert!(out.contains(cred["device_secret"].as_str().unwrap()), "the secret is shown once: {out}");
    // The pairing is spent.
    let again = home.join("again").join("device.json");
    let (ok, transcript, _) = connect_on_pty(&home, &again, &address, "again", &code);
    assert!(!ok && transcript.contains("pairing_rejected"), "{transcript}");

    // The first computer pairs a second.
    let pair = run(&home, &["worker", "pair", "--name", "second", "--ttl", "120"], &first);
    let pair_out = String::from_utf8_lossy(&pair.stdout).to_string();
    assert!(pair.status.success(), "worker pair: {}", String::from_utf8_lossy(&pair.stderr));
    let address2 = line_after(&pair_out, "pairing address:").to_string();
    let code2 = line_after(&pair_out, "code:").to_string();
    assert!(pair_out.contains(&format!("herdr-mcp worker connect \"{address2}\"")), "{pair_out}");
    let second = home.join("second").join("device.json");
    let (ok, transcript, _) = connect_on_pty(&home, &second, &address2, "second", &code2);
    assert!(ok, "{transcript}");
    let second_id = serde_json::from_str::<Value>(&std::fs::read_to_string(&second).unwrap()).unwrap()["device_id"].as_str().unwrap().to_string();

    let rename = run(&home, &["worker", "rename", "desk"], &second);
    assert!(rename.status.success(), "{}", String::from_utf8_lossy(&rename.stderr));
    // The local credential follows, since the link offers the name it holds.
    let stored: Value = serde_json::from_str(&std::fs::read_to_string(&second).unwrap()).unwrap();
    assert_eq!(stored["name"], "desk");
    assert_eq!(std::fs::metadata(&second).unwrap().permissions().mode() & 0o777, 0o600);
    let list = run(&home, &["device", "list", "--json"], &first);
    assert!(list.status.success(), "{}", String::from_utf8_lossy(&list.stderr));
    let v: Value = serde_json::from_slice(&list.stdout).unwrap();
    let names: Vec<(&str, &str)> =
        v["devices"].as_array().unwrap().iter().map(|d| (d["device_id"].as_str().unwrap(), d["name"].as_str().unwrap())).collect();
    assert_eq!(names, [(first_id.as_str(), "first"), (second_id.as_str(), "desk")]);
    assert!(!String::from_utf8_lossy(&list.stdout).contains("devsec_"));

    // Revocation needs --confirm, then the second computer is locked out for good.
    let no = run(&home, &["worker", "revoke", &second_id], &first);
    assert!(!no.status.success() && String::from_utf8_lossy(&no.stderr).contains("--confirm"));
    let yes = run(&home, &["worker", "revoke", &second_id, "--confirm"], &first);
    assert!(yes.status.success(), "{}", String::from_utf8_lossy(&yes.stderr));
    // Said in words, not as the route's JSON.
    let said = String::from_utf8_lossy(&yes.stdout).to_string();
    assert!(said.starts_with(&format!("revoked {second_id}: ")) && !said.contains('{'), "{said}");
    let after = run(&home, &["device", "list"], &second);
    assert!(!after.status.success());
    assert!(String::from_utf8_lossy(&after.stderr).contains("device_auth_required"), "{}", String::from_utf8_lossy(&after.stderr));

    // The operator can always pair from the edge host itself.
    let op = command(&home).args(["edge", "pair", "--issuer", &base, "--ttl", "60", "--edge-dir"]).arg(&edge_dir).output().unwrap();
    assert!(op.status.success(), "{}", String::from_utf8_lossy(&op.stderr));
    let bad_ttl = command(&home).args(["edge", "pair", "--issuer", &base, "--ttl", "59", "--edge-dir"]).arg(&edge_dir).output().unwrap();
    assert!(!bad_ttl.status.success() && String::from_utf8_lossy(&bad_ttl.stderr).contains("60"));

    // The first computer lost its credential: the operator's pairing recovers its
    // device, same id and name, new secret; the old secret is dead.
    let op_out = String::from_utf8_lossy(&op.stdout).to_string();
    let (op_address, op_code) = (line_after(&op_out, "pairing address:"), line_after(&op_out, "code:"));
    let recovered = home.join("first-again").join("device.json");
    let (ok, transcript, out) = connect_with(&home, &recovered, op_address, &["--recover", &first_id], op_code);
    assert!(ok, "{transcript}");
    assert!(out.contains(&format!("recovered {first_id} as \"first\"")), "{out}");
    let cred2: Value = serde_json::from_str(&std::fs::read_to_string(&recovered).unwrap()).unwrap();
    assert_eq!(cred2["device_id"], first_id.as_str());
    assert_ne!(cred2["device_secret"], cred["device_secret"]);
    let old = run(&home, &["device", "list"], &first);
    assert!(String::from_utf8_lossy(&old.stderr).contains("device_auth_required"), "{}", String::from_utf8_lossy(&old.stderr));
    let now = run(&home, &["device", "list", "--json"], &recovered);
    assert!(now.status.success(), "{}", String::from_utf8_lossy(&now.stderr));
    assert_eq!(serde_json::from_slice::<Value>(&now.stdout).unwrap()["devices"].as_array().unwrap().len(), 2);
}

/// Enrolls a device straight in the edge's registry and writes its credential as
/// `worker connect` leaves it (the pty enrollment is covered above).
fn enroll_direct(edge: &EdgeProcess, name: &str, device_file: &Path) -> String {
    let store = Arc::new(EdgeStore::open(&edge.edge_dir, Arc::new(SystemClock)).unwrap());
    let devices = DeviceRegistry::new(store);
    let p = devices.create_pairing(Some(120), None, "test").unwrap();
    let e = devices.consume_pairing(&p.pairing_id, &p.code, Some(name)).unwrap();
    let local = LocalDevice {
        edge_origin: edge.base.clone(),
        device_id: e.device.device_id.clone(),
        workstation_id: e.device.workstation_id.clone(),
        credential_id: e.device.credential_id.clone().unwrap_or_default(),
        device_secret: e.device_secret.clone(),
        name: name.to_string(),
        enrolled_at_ms: e.device.enrolled_at_ms,
    };
    devices_local::save(device_file, &local).unwrap();
    e.device.device_id
}

/// `device list` tells which devices are linked right now (spec §9 `connection`),
/// from the edge's live links: a real `serve --link` brings one online while the
/// other stays offline, and stopping it takes it offline again, last seen a
/// moment ago.
#[test]
fn device_list_shows_which_devices_are_linked() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().to_path_buf();
    let edge = EdgeProcess::start(&home);
    let (desk_file, laptop_file) = (home.join("desk").join("device.json"), home.join("laptop").join("device.json"));
    let desk = enroll_direct(&edge, "desk", &desk_file);
    let laptop = enroll_direct(&edge, "laptop", &laptop_file);
    let connection = |id: &str| {
        let out = run(&home, &["device", "list", "--json"], &laptop_file);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let row = v["devices"].as_array().unwrap().iter().find(|d| d["device_id"] == id).cloned().unwrap();
        row["connection"].as_str().unwrap_or("").to_string()
    };
    assert_eq!((connection(&desk).as_str(), connection(&laptop).as_str()), ("offline", "offline"));

    // The desk's runtime holds its link.
    let root = home.join("root-desk");
    std::fs::create_dir_all(&root).unwrap();
    let mut serve = command(&home);
    serve.env(devices_local::PATH_ENV, &desk_file).args(["serve", "--link", "--socket"]).arg(home.join("desk.sock"));
    serve.arg("--root").arg(&root).arg("--state-dir").arg(home.join("state-desk"));
    let runtime = spawn_logged(&mut serve, &home.join("desk.log"));
    wait_until("the desk's link", || (connection(&desk) == "online").then_some(()));
    // Its runtime answers, as the link reports when the edge asks.
    wait_until("the desk's runtime reported healthy", || {
        let out = run(&home, &["device", "list", "--json"], &laptop_file);
        let v: Value = serde_json::from_slice(&out.stdout).ok()?;
        v["devices"].as_array()?.iter().any(|d| d["device_id"] == desk.as_str() && d["health"] == "ok").then_some(())
    });

    let table = run(&home, &["device", "list"], &laptop_file);
    let text = String::from_utf8_lossy(&table.stdout).to_string();
    let header: Vec<&str> = text.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["DEVICE", "NAME", "STATUS", "CONNECTION", "LAST", "SEEN", "ACTIVE", "RUNNING", "THIS"], "{text}");
    let row = |id: &str| text.lines().find(|l| l.starts_with(id)).unwrap_or_else(|| panic!("{id} in {text}")).split_whitespace().map(str::to_string).collect::<Vec<_>>();
    assert_eq!(row(&desk)[..4], [desk.clone(), "desk".into(), "active".into(), "online".into()], "{text}");
    assert!(row(&desk)[5] == "ago", "{text}");
    // Idle: the edge awaits nothing from the desk, and its link (which reported its runtime's health
    // above) says it runs nothing. The laptop never linked, so nothing was reported.
    assert_eq!(row(&desk)[6..8], ["0", "0"], "{text}");
    assert_eq!(row(&laptop), [laptop.clone(), "laptop".into(), "active".into(), "offline".into(), "-".into(), "0".into(), "-".into(), "*".into()], "{text}");

    drop(runtime);
    wait_until("the desk to go offline", || (connection(&desk) == "offline").then_some(()));
    // Offline, it still says when it was last heard; the laptop never linked.
    let table = run(&home, &["device", "list"], &laptop_file);
    let text = String::from_utf8_lossy(&table.stdout).to_string();
    let row = |id: &str| text.lines().find(|l| l.starts_with(id)).unwrap_or_else(|| panic!("{id} in {text}")).split_whitespace().map(str::to_string).collect::<Vec<_>>();
    assert_eq!((row(&desk)[3].as_str(), row(&desk)[5].as_str()), ("offline", "ago"), "{text}");
    assert_eq!(row(&laptop)[4], "-", "{text}");
}

/// Every positional argument of the device and connector commands says in `--help`
/// what to pass (an id from which list, which name rule), not just its bare name.
#[test]
fn every_positional_argument_is_explained_in_help() {
    let home = tempfile::tempdir().unwrap();
    let commands: &[&[&str]] = &[
        &["worker", "connect"],
        &["worker", "rename"],
        &["worker", "revoke"],
        &["device", "rename"],
        &["device", "revoke"],
        &["device", "suspend"],
        &["device", "resume"],
        &["connector", "approve"],
        &["connector", "revoke"],
        &["connector", "revoke-client"],
        &["connector", "cancel"],
    ];
    for args in commands {
        let out = command(home.path()).args(*args).arg("--help").output().unwrap();
        assert!(out.status.success(), "{args:?}");
        let help = String::from_utf8_lossy(&out.stdout).to_string();
        let section = help.split("Arguments:\n").nth(1).unwrap_or_else(|| panic!("{args:?} has no Arguments:\n{help}"));
        for line in section.lines().take_while(|l| !l.trim().is_empty()) {
            let described = line.trim().split_once('>').is_some_and(|(_, rest)| !rest.trim().is_empty());
            assert!(described, "{args:?}: argument without a description: {line:?}\n{help}");
        }
    }
}
