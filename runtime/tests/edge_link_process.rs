//! Everything as separate processes: `herdr-mcp edge serve`, two `herdr-mcp
//! serve` runtimes with different roots and two `herdr-mcp link`s. Devices are
//! enrolled by pairing through the edge's device registry (the same `edge.db`
//! the server uses), the connector is approved through the same store, and an
//! rmcp client with the resulting bearer calls each workstation by `device`.
//! Then the operator's `device suspend|resume|revoke` on the edge host, which
//! write the database from another process, reach a live link within seconds.

mod edge_support;
#[path = "edge_support/procs.rs"]
mod procs;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use edge_support::*;
use herdr_mcp::edge::clock::SystemClock;
use herdr_mcp::edge::devices::DeviceRegistry;
use herdr_mcp::edge::devices_local::{self, LocalDevice};
use herdr_mcp::edge::store::EdgeStore;
use procs::{DEADLINE, EdgeProcess, Proc, command, poll, spawn_logged};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

struct Workstation {
    device_id: String,
    secret: String,
    link_log: PathBuf,
    root: PathBuf,
    socket: PathBuf,
    _runtime: Proc,
    _link: Option<Proc>,
}

#[derive(PartialEq, Clone, Copy)]
enum Mode {
    /// `herdr-mcp link --edge --workstation-id --credential-file`.
    Flags,
    /// `herdr-mcp link` reading the `worker connect` credential. The device is
    /// paired without a name; its link offers the stored one.
    DeviceFile,
    /// `herdr-mcp serve --link`: the runtime holds the link itself.
    ServeLink,
}

async fn workstation(home: &Path, devices: &DeviceRegistry, issuer: &str, name: &str, file: &str, mode: Mode) -> Workstation {
    let pairing = devices.create_pairing(Some(120), None, "test").unwrap();
    let pairing_name = (mode != Mode::DeviceFile).then_some(name);
    let enrolled = devices.consume_pairing(&pairing.pairing_id, &pairing.code, pairing_name).unwrap();
    let root = home.join(format!("root-{name}"));
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join(file), format!("this is {name}\n")).unwrap();
    let socket = home.join(format!("{name}.sock"));
    let device_file = home.join(format!("{name}-device.json"));
    if mode != Mode::Flags {
        // As `worker connect` leaves it.
        let local = LocalDevice {
            edge_origin: issuer.to_string(),
            device_id: enrolled.device.device_id.clone(),
            workstation_id: enrolled.device.workstation_id.clone(),
            credential_id: enrolled.device.credential_id.clone().unwrap_or_default(),
            device_secret: enrolled.device_secret.clone(),
            name: name.to_string(),
            enrolled_at_ms: enrolled.device.enrolled_at_ms,
        };
        devices_local::save(&device_file, &local).unwrap();
    }
    let link_log = home.join(format!("{name}.link.log"));
    let mut serve = command(home);
    serve.args(["serve", "--socket"]).arg(&socket).arg("--root").arg(&root).arg("--state-dir").arg(home.join(format!("state-{name}")));
    if mode == Mode::ServeLink {
        serve.env(devices_local::PATH_ENV, &device_file).arg("--link");
    }
    let runtime = spawn_logged(&mut serve, &link_log);
    let secret_file = home.join(format!("{name}.secret"));
    std::fs::write(&secret_file, &enrolled.device_secret).unwrap();
    std::fs::set_permissions(&secret_file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let cli_log = home.join(format!("{name}.cli.log"));
    let mut cmd = command(home);
    let link = match mode {
        Mode::DeviceFile => Some(cmd.env(devices_local::PATH_ENV, &device_file).arg("link")),
        Mode::Flags => Some(
            cmd.args(["link", "--edge", issuer, "--workstation-id", &enrolled.device.workstation_id, "--credential-file"]).arg(&secret_file),
        ),
        Mode::ServeLink => None,
    }
    .map(|c| spawn_logged(c.arg("--socket").arg(&socket), &cli_log));
    let link_log = if mode == Mode::ServeLink { link_log } else { cli_log };
    Workstation { device_id: enrolled.device.device_id, secret: enrolled.device_secret, link_log, root: root.canonicalize().unwrap(), socket, _runtime: runtime, _link: link }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn separate_processes_edge_two_links_two_runtimes() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let edge = EdgeProcess::start(home);
    let (issuer, edge_dir) = (edge.base.clone(), edge.edge_dir.clone());
    let store = Arc::new(EdgeStore::open(&edge_dir, Arc::new(SystemClock)).unwrap());
    let devices = DeviceRegistry::new(Arc::clone(&store));
    let a = workstation(home, &devices, &issuer, "left", "left.txt", Mode::DeviceFile).await;
    let b = workstation(home, &devices, &issuer, "right", "right.txt", Mode::Flags).await;
    let m = workstation(home, &devices, &issuer, "middle", "middle.txt", Mode::ServeLink).await;

    let http = Http::new(&issuer);
    let access = http.approved_bearer(&store).await;
    let config = StreamableHttpClientTransportConfig::with_uri(format!("{issuer}/mcp")).auth_header(access.clone());
    let client = ().serve(StreamableHttpClientTransport::from_config(config)).await.unwrap();
    let call = |name: &'static str, args: Value| {
        let client = &client;
        async move {
            let mut p = CallToolRequestParams::new(name.to_string());
            p.arguments = args.as_object().cloned();
            serde_json::to_value(client.call_tool(p).await.unwrap()).unwrap()
        }
    };

    // Both links come up (as herdr_devices reports them).
    let start = Instant::now();
    loop {
        let listed = call("herdr_devices", json!({})).await;
        let rows = listed["structuredContent"]["devices"].as_array().cloned().unwrap_or_default();
        if rows.len() == 3 && rows.iter().all(|r| r["connection"] == "online") {
            break;
        }
        assert!(start.elapsed() < DEADLINE, "links never came online: {listed}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(client.list_all_tools().await.unwrap().len(), 19);

    for (w, file, text) in [(&a, "left.txt", "this is left"), (&b, "right.txt", "this is right"), (&m, "middle.txt", "this is middle")] {
        let inspect = call("herdr_inspect", json!({"device": w.device_id})).await;
        assert!(inspect["content"][0]["text"].as_str().unwrap().contains(w.root.to_str().unwrap()), "{inspect}");
        let read = call("herdr_fs_read", json!({"device": w.device_id, "path": w.root.join(file)})).await;
        assert_eq!(read["structuredContent"]["ok"], true, "{read}");
        assert!(read["structuredContent"]["content"].as_str().unwrap().contains(text), "{read}");
    }
    // The names chosen at pairing route too.
    let by_name = call("herdr_fs_read", json!({"device": "right", "path": b.root.join("right.txt")})).await;
    assert_eq!(by_name["structuredContent"]["ok"], true, "{by_name}");

    let info = http.get("/info").await.json();
    let runtime = herdr_mcp::link::local::LocalRuntime::new(a.socket.clone()).identity().await.unwrap();
    let tool_count = herdr_mcp::edge::forward::local_runtime_contract().0.len();
    assert_eq!(info["runtimeContract"], json!({"epoch": runtime.contract_epoch, "hash": runtime.contract_hash, "toolCount": tool_count}));

    // Revoking `right` from `left` (the device admin route) closes its link with
    // 4401 at once; the link stops for good and calls to it are refused.
    let revoke = http
        .client
        .post(format!("{issuer}/devices/revoke"))
        .bearer_auth(&a.secret)
        .header("x-herdr-workstation", &a.device_id)
        .json(&json!({"device_id": b.device_id, "confirm": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(revoke.status().as_u16(), 200);
    poll("the revoked link to say so", || {
        std::fs::read_to_string(&b.link_log).ok().filter(|l| l.contains("device revoked"))
    })
    .await;
    let refused = call("herdr_inspect", json!({"device": b.device_id})).await;
    assert_eq!(refused["structuredContent"]["code"], "device_revoked", "{refused}");
    let still = call("herdr_inspect", json!({})).await;
    assert_eq!(still["structuredContent"]["code"], "device_ambiguous", "left and middle remain: {still}");
    client.cancel().await.ok();
}

fn log_of(w: &Workstation) -> String {
    std::fs::read_to_string(&w.link_log).unwrap_or_default()
}

/// Successful links in a link log (lines of the "linked" event, not retries).
fn links_in(log: &str) -> usize {
    log.lines().filter(|l| l.contains("linked") && !l.contains("retrying")).count()
}

/// Runs `herdr-mcp device <verb> <id> [--confirm]` against the edge's state directory.
fn operator(home: &Path, edge_dir: &Path, verb: &str, device_id: &str, confirm: bool) -> std::process::Output {
    let mut c = command(home);
    c.args(["device", verb, device_id, "--edge-dir"]).arg(edge_dir).stdout(Stdio::piped()).stderr(Stdio::piped());
    if confirm {
        c.arg("--confirm");
    }
    c.output().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_switches_from_another_process_reach_the_live_link() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let edge = EdgeProcess::start(home);
    let edge_dir = edge.edge_dir.clone();
    let store = Arc::new(EdgeStore::open(&edge_dir, Arc::new(SystemClock)).unwrap());
    let devices = DeviceRegistry::new(Arc::clone(&store));
    let mut w = workstation(home, &devices, &edge.base, "solo", "solo.txt", Mode::DeviceFile).await;

    // Paired without a name, the device takes the one its link offers from device.json.
    let named = poll("the link to name its device", || {
        devices.device(&w.device_id).unwrap().filter(|d| d.name_source == "link" && links_in(&log_of(&w)) == 1)
    })
    .await;
    assert_eq!(named.name, "solo");

    let refused = operator(home, &edge_dir, "suspend", &w.device_id, false);
    assert!(!refused.status.success() && String::from_utf8_lossy(&refused.stderr).contains("--confirm"));
    assert_eq!(devices.device(&w.device_id).unwrap().unwrap().authorization, "active");

    // Suspended from the terminal: the edge closes the link within about a second.
    let start = Instant::now();
    let out = operator(home, &edge_dir, "suspend", &w.device_id, true);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("suspended"));
    poll("the link to be closed as suspended", || log_of(&w).contains("device suspended").then_some(())).await;
    let suspended_after = start.elapsed();
    assert!(suspended_after < Duration::from_secs(5), "took {suspended_after:?}; edge log:\n{}", edge.log_text());
    eprintln!("suspend reached the live link after {suspended_after:?}");

    // A suspended link keeps trying; resumed, it links again by itself.
    let out = operator(home, &edge_dir, "resume", &w.device_id, true);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    poll("the link to come back after resume", || (links_in(&log_of(&w)) == 2).then_some(())).await;

    // Revoked from the terminal: closed with 4401 within seconds, and the link stops for good.
    let start = Instant::now();
    let out = operator(home, &edge_dir, "revoke", &w.device_id, true);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    poll("the link to say device revoked", || log_of(&w).contains("device revoked").then_some(())).await;
    let revoked_after = start.elapsed();
    assert!(revoked_after < Duration::from_secs(5), "took {revoked_after:?}; edge log:\n{}", edge.log_text());
    eprintln!("revoke reached the live link after {revoked_after:?}");
    let link = w._link.as_mut().unwrap();
    poll("the revoked link process to exit", || link.0.try_wait().unwrap()).await;
    let again = operator(home, &edge_dir, "resume", &w.device_id, true);
    assert!(!again.status.success() && String::from_utf8_lossy(&again.stderr).contains("device_revoked"));
}
