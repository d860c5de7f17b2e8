//! Spec §8: a link reports in each `heartbeat` (and `status` answer) how many
//! requests its workstation is running. The edge shows that report, as
//! `link_active_requests`, wherever a device's live state is shown: `GET /devices`
//! (what `device list --json` prints), `GET /status/<workstation_id>` and
//! `herdr_devices`. It sits beside `active_requests`, the calls the edge itself
//! awaits, because the two can differ: a request keeps running on its
//! workstation after the edge stopped waiting for it (a dropped socket, a
//! timeout). A real link runs in this process with a fast heartbeat, in front of
//! a stand-in runtime that holds each `tools/call` until the test lets it go.

mod edge_support;
#[path = "edge_support/links.rs"]
mod links;
#[path = "edge_support/procs.rs"]
mod procs;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use edge_support::*;
use herdr_mcp::link::{LinkConfig, LinkTimings, run};
use links::linked;
use reqwest::Method;
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// A heartbeat every 200 ms so a changed count shows at once; an edge silence
/// limit far past the test's length, since the edge only pings every 30 s.
const FAST: LinkTimings = LinkTimings { heartbeat_every: Duration::from_millis(200), edge_silence: Duration::from_secs(600) };

/// A stand-in runtime whose every `tools/call` waits for a permit of `gate`.
async fn gated_runtime(socket: &Path, gate: Arc<Semaphore>) {
    use axum::routing::{get, post};
    let (_, (epoch, hash)) = herdr_mcp::edge::forward::local_runtime_contract();
    let app = axum::Router::new()
        .route(
            "/health",
            get(move || async move {
                axum::Json(json!({"ok": true, "version": "0.0.0-test", "build": {"commit": "t", "boot_id": "gated-1"}, "contract": {"epoch": epoch, "hash": hash}}))
            }),
        )
        .route(
            "/mcp",
            post(move || async move {
                gate.acquire().await.expect("the gate stays open").forget();
                let text = json!({"ok": true, "released": true}).to_string();
                axum::Json(json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": text}]}}))
            }),
        );
    let listener = tokio::net::UnixListener::bind(socket).unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.ok();
    });
}

fn row(answer: &Value, device_id: &str) -> Value {
    answer["devices"].as_array().and_then(|ds| ds.iter().find(|d| d["device_id"] == device_id)).cloned().unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_requests_a_link_reports_running_are_shown_for_its_device() {
    let (e, hub) = InProc::start_registry_linked().await;
    let desk = e.enroll("desk");
    let idle = e.enroll("idle");
    let (ws, id) = (desk.device.workstation_id.clone(), desk.device.device_id.clone());
    let me = Some((ws.as_str(), desk.device_secret.as_str()));
    let (_, tokens, _) = e.tokens().await;

    let tmp = tempfile::tempdir().unwrap();
    let socket = tmp.path().join("rt.sock");
    let gate = Arc::new(Semaphore::new(0));
    gated_runtime(&socket, Arc::clone(&gate)).await;
    let cfg = LinkConfig {
        edge: e.issuer.clone(),
        workstation_id: ws.clone(),
        secret: desk.device_secret.clone(),
        socket,
        name: None,
        ca_file: None,
        timings: FAST,
    };
    let stop = CancellationToken::new();
    let link = tokio::spawn(run(cfg, stop.clone()));
    linked(&hub, &ws).await;

    // The three places a device's live state is read, each giving the desk's row.
    let devices = || async { row(&e.device_call(Method::GET, "/devices", me, None).await.json(), &id) };
    let status = || async {
        let r = e.http.client.get(format!("{}/status/{ws}", e.http.base)).bearer_auth(&tokens.access).send().await.unwrap();
        r.json::<Value>().await.unwrap()
    };
    let tool = || async {
        let v = e.http.mcp(&tokens.access, "tools/call", json!({"name": "herdr_devices", "arguments": {}})).await.json();
        row(&v["result"]["structuredContent"], &id)
    };
    // Polls every view until each shows `(active_requests, link_active_requests)`.
    let shows = |want: (u64, u64)| async move {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let rows = [devices().await, status().await, tool().await];
            let seen: Vec<(Option<u64>, Option<u64>)> =
                rows.iter().map(|r| (r["active_requests"].as_u64(), r["link_active_requests"].as_u64())).collect();
            if seen.iter().all(|s| *s == (Some(want.0), Some(want.1))) {
                return;
            }
            assert!(Instant::now() < deadline, "never showed {want:?}; rows: {rows:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };

    // Linked and idle: the link says it runs nothing.
    shows((0, 0)).await;
    // A device that never linked has no report: null, not a made-up 0.
    let v = e.device_call(Method::GET, "/devices", me, None).await.json();
    let never = row(&v, &idle.device.device_id);
    assert_eq!((&never["link_active_requests"], &never["active_requests"]), (&Value::Null, &json!(0)), "{never}");

    // A call held by the runtime: the edge awaits one, and the link reports one running.
    let call = tokio::spawn({
        let (http, access) = (e.http.clone(), tokens.access.clone());
        async move { http.mcp(&access, "tools/call", json!({"name": "herdr_fs_read", "arguments": {"path": "a.txt"}})).await.json() }
    });
    shows((1, 1)).await;

    // Let go: the call is answered and the link's next report is back to none.
    gate.add_permits(1);
    let answer = tokio::time::timeout(Duration::from_secs(20), call).await.expect("the call is answered").unwrap();
    assert_eq!(answer["result"]["structuredContent"]["released"], true, "{answer}");
    shows((0, 0)).await;

    // Once the link is gone, so is its report.
    stop.cancel();
    assert_eq!(tokio::time::timeout(Duration::from_secs(20), link).await.expect("the link stops").unwrap(), Ok(()));
    let deadline = Instant::now() + Duration::from_secs(20);
    while hub.link(&ws).is_some() {
        assert!(Instant::now() < deadline, "the link never ended");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let gone = devices().await;
    assert_eq!((gone["connection"].as_str(), &gone["link_active_requests"]), (Some("offline"), &Value::Null), "{gone}");
}
