//! A kept answer outlives the process that holds the link (spec edge.md §8
//! `resume`): a real `edge serve`, a real runtime, and its link either inside
//! the runtime (`serve --link`) or as a standalone `herdr-mcp link`. The link's
//! socket to the edge is cut while a keyed `herdr_exec` runs; the change
//! finishes while the link is down, then the process holding the link is killed
//! and started again. Its new link hands the edge the original answer from the
//! runtime's state database; a retry with the same key gets that result, and the
//! change ran once.

mod edge_support;
#[path = "edge_support/cut_proxy.rs"]
mod cut_proxy;
#[path = "edge_support/procs.rs"]
mod procs;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cut_proxy::CutProxy;
use edge_support::*;
use herdr_mcp::edge::clock::SystemClock;
use herdr_mcp::edge::devices::DeviceRegistry;
use herdr_mcp::edge::devices_local::{self, LocalDevice};
use herdr_mcp::edge::store::EdgeStore;
use herdr_mcp::edge::forward_pending;
use procs::{EdgeProcess, Proc, command, plain, poll, spawn_logged};
use serde_json::{Value, json};

/// Which process holds the link, and so is the one killed.
#[derive(Clone, Copy, PartialEq)]
enum Holder {
    /// `herdr-mcp serve --link`.
    Runtime,
    /// `herdr-mcp link` beside a `serve` that stays up.
    Standalone,
}

/// Where the runtime lives; the same for all of its processes. Nothing names a
/// state directory: runtime and link find the same one by default.
struct Host {
    home: PathBuf,
    root: PathBuf,
    socket: PathBuf,
    state_db: PathBuf,
    device_file: PathBuf,
}

impl Host {
    /// `serve` (with `--link` if `link`) logging to `log`, up once its socket answers.
    async fn serve(&self, link: bool, log: &Path) -> Proc {
        let mut serve = command(&self.home);
        serve.args(["serve", "--socket"]).arg(&self.socket).arg("--root").arg(&self.root).env(devices_local::PATH_ENV, &self.device_file);
        if link {
            serve.arg("--link");
        }
        let proc = spawn_logged(&mut serve, log);
        poll("the runtime socket", || std::os::unix::net::UnixStream::connect(&self.socket).ok()).await;
        proc
    }

    /// A standalone `link` to the runtime's socket, with the enrolled credential.
    fn link(&self, log: &Path) -> Proc {
        let mut link = command(&self.home);
        link.arg("link").arg("--socket").arg(&self.socket).env(devices_local::PATH_ENV, &self.device_file);
        spawn_logged(&mut link, log)
    }

    /// Starts whatever holds the link (and, for `Runtime`, serves).
    async fn start_link_holder(&self, holder: Holder, log: &Path) -> Proc {
        match holder {
            Holder::Runtime => self.serve(true, log).await,
            Holder::Standalone => self.link(log),
        }
    }

    fn kept_rows(&self) -> Option<i64> {
        let db = rusqlite::Connection::open(&self.state_db).ok()?;
        db.query_row("SELECT COUNT(*) FROM link_answers", [], |r| r.get(0)).ok()
    }
}

fn log_of(path: &Path) -> String {
    plain(&std::fs::read_to_string(path).unwrap_or_default())
}

async fn call(http: &Http, access: &str, arguments: &Value) -> Value {
    http.mcp(access, "tools/call", json!({"name": "herdr_exec", "arguments": arguments})).await.json()["result"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_kept_on_disk_reaches_the_edge_after_a_runtime_restart() {
    answer_survives_a_restart_of(Holder::Runtime).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_kept_on_disk_reaches_the_edge_after_a_standalone_link_restart() {
    answer_survives_a_restart_of(Holder::Standalone).await;
}

async fn answer_survives_a_restart_of(holder: Holder) {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let edge = EdgeProcess::start(home);
    let store = Arc::new(EdgeStore::open(&edge.edge_dir, Arc::new(SystemClock)).unwrap());
    let devices = DeviceRegistry::new(Arc::clone(&store));
    let upstream = edge.base.trim_start_matches("http://").parse().unwrap();
    let proxy = CutProxy::start(upstream).await;

    // Enrolled as `worker connect` leaves it, but reaching the edge through the proxy.
    let pairing = devices.create_pairing(Some(120), None, "test").unwrap();
    let enrolled = devices.consume_pairing(&pairing.pairing_id, &pairing.code, Some("phoenix")).unwrap();
    let device = LocalDevice {
        edge_origin: proxy.url.clone(),
        device_id: enrolled.device.device_id.clone(),
        workstation_id: enrolled.device.workstation_id.clone(),
        credential_id: enrolled.device.credential_id.clone().unwrap_or_default(),
        device_secret: enrolled.device_secret.clone(),
        name: "phoenix".into(),
        enrolled_at_ms: enrolled.device.enrolled_at_ms,
    };
    let host = Host {
        home: home.to_path_buf(),
        root: home.join("root-phoenix"),
        socket: home.join("phoenix.sock"),
        // `command` sets XDG_STATE_HOME to <home>/state.
        state_db: home.join("state/herdr-mcp/state.db"),
        device_file: home.join("phoenix-device.json"),
    };
    devices_local::save(&host.device_file, &device).unwrap();
    std::fs::create_dir_all(&host.root).unwrap();
    let (first_log, second_log) = (home.join("first.log"), home.join("second.log"));
    // Up for the whole test when the link is standalone: only the link restarts.
    let _runtime = match holder {
        Holder::Runtime => None,
        Holder::Standalone => Some(host.serve(false, &home.join("runtime.log")).await),
    };
    let first = host.start_link_holder(holder, &first_log).await;
    poll("the first link", || log_of(&first_log).contains("linked").then_some(())).await;

    let http = Http::new(&edge.base);
    let access = http.approved_bearer(&store).await;
    // Marks that it started, waits for the test's go-ahead, then makes its change.
    let arguments = json!({
        "workspace": "root-phoenix",
        "command": "touch started; while [ ! -e go ]; do sleep 0.05; done; echo ran >> changes.log; echo finished",
        "intent": "non_idempotent_write",
        "idempotency_key": "phoenix-1",
        "timeout_ms": 25000,
    });
    let pending = {
        let (http, access, arguments) = (http.clone(), access.clone(), arguments.clone());
        tokio::spawn(async move { call(&http, &access, &arguments).await })
    };
    poll("the command to start", || host.root.join("started").exists().then_some(())).await;

    proxy.cut();
    let lost = pending.await.unwrap();
    let sc = &lost["structuredContent"];
    assert_eq!((sc["code"].as_str(), sc["retryable"].as_bool()), (Some("delivery_uncertain"), Some(false)), "{lost}");
    let request_id = sc["request_id"].as_str().unwrap().to_string();

    // The change completes while the edge is out of reach: the answer is kept, on disk too.
    std::fs::write(host.root.join("go"), "").unwrap();
    poll("the first link to keep the answer", || log_of(&first_log).contains("answer kept for the next link").then_some(())).await;
    let on_disk = {
        let db = rusqlite::Connection::open(&host.state_db).unwrap();
        db.query_row("SELECT frame FROM link_answers WHERE request_id = ?1", [&request_id], |r| r.get::<_, String>(0)).unwrap()
    };
    assert!(on_disk.contains("finished") && on_disk.contains(r#""kind":"tool_result""#), "{on_disk}");

    // Killed (SIGKILL: nothing is flushed on the way out), then started again.
    drop(first);
    proxy.restore();
    let _second = host.start_link_holder(holder, &second_log).await;
    poll("the resumed answer to settle the edge's row", || {
        let state = forward_pending::state_of(&store, &request_id).unwrap().map(|s| s.0);
        (state.as_deref() == Some("settled")).then_some(())
    })
    .await;
    let second_text = log_of(&second_log);
    assert!(second_text.contains("resumed=1"), "the stored answer went out after hello_ack: {second_text}");

    // The retry with the same key gets the original outcome, not a second run.
    let replay = call(&http, &access, &arguments).await;
    let sc = &replay["structuredContent"];
    assert_ne!(replay["isError"], json!(true), "{replay}");
    assert_eq!((sc["ok"].as_bool(), sc["exit_code"].as_i64()), (Some(true), Some(0)), "{replay}");
    assert!(replay.to_string().contains("finished"), "{replay}");
    assert_eq!(std::fs::read_to_string(host.root.join("changes.log")).unwrap(), "ran\n", "the change ran exactly once");
    assert_eq!(forward_pending::rows_of(&store, &device.workstation_id).unwrap().len(), 1, "the retry was never sent");

    // The edge has settled it: the next hello_ack lists it as completed, and it leaves the disk.
    proxy.cut();
    proxy.restore();
    poll("the settled answer to leave the state database", || (host.kept_rows()? == 0).then_some(())).await;
}
