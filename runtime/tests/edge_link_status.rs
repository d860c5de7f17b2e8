//! The edge asks each link for a status report (spec §8 `status` with
//! `query:true`) and shows its `healthy` answer as the device's `health`. A real
//! link process answers from a task: checking a runtime that hangs takes up to
//! its 5 s health timeout, and a tool call arriving meanwhile must not wait for it.

mod edge_support;
#[path = "edge_support/links.rs"]
mod links;
#[path = "edge_support/procs.rs"]
mod procs;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use edge_support::*;
use links::*;
use serde_json::{Value, json};

/// A stand-in runtime whose `/health` answers once (so the link can say hello)
/// and then never again, while `tools/call` answers at once.
async fn runtime_that_stops_answering_health(socket: &std::path::Path) -> tokio::task::JoinHandle<()> {
    use axum::routing::{get, post};
    let (_, (epoch, hash)) = herdr_mcp::edge::forward::local_runtime_contract();
    let checks = Arc::new(AtomicUsize::new(0));
    let app = axum::Router::new()
        .route(
            "/health",
            get(move || async move {
                if checks.fetch_add(1, Ordering::SeqCst) > 0 {
                    std::future::pending::<()>().await;
                }
                axum::Json(json!({"ok": true, "version": "0.0.0-test", "build": {"commit": "t", "boot_id": "b"}, "contract": {"epoch": epoch, "hash": hash}}))
            }),
        )
        .route(
            "/mcp",
            post(|| async {
                let text = json!({"ok": true, "answered": "at once"}).to_string();
                axum::Json(json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": text}]}}))
            }),
        );
    let listener = tokio::net::UnixListener::bind(socket).unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.ok();
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_runtime_check_delays_no_call_and_shows_as_runtime_unavailable() {
    let devices = Arc::new(TestDevices::default());
    devices.add("dev_st", "st", "devsec_st");
    let (edge, hub) = InProc::start_linked(devices.clone()).await;
    let tmp = tempfile::tempdir().unwrap();
    let socket = tmp.path().join("rt.sock");
    let _runtime = runtime_that_stops_answering_health(&socket).await;
    let _link = link(tmp.path(), &edge.issuer, "dev_st", "devsec_st", &socket);
    linked(&hub, "dev_st").await;
    // The edge has just asked for a status report; the link's runtime check now hangs.
    let (_, tokens, _) = edge.tokens().await;
    let started = Instant::now();
    let r = edge.http.mcp(&tokens.access, "tools/call", json!({"name": "herdr_fs_read", "arguments": {"path": "/x"}})).await.json();
    let took = started.elapsed();
    assert_eq!(r["result"]["structuredContent"]["answered"], "at once", "{r}");
    assert!(took < Duration::from_millis(2500), "the call waited {took:?} for the link's runtime check");

    // Once the check gives up, the report says the runtime does not answer.
    let health = || async {
        let v = edge.http.mcp(&tokens.access, "tools/call", json!({"name": "herdr_devices", "arguments": {}})).await.json();
        v["result"]["structuredContent"]["devices"][0]["health"].as_str().unwrap_or("").to_string()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let now: Value = json!(health().await);
        if now == "runtime_unavailable" {
            break;
        }
        assert!(Instant::now() < deadline, "health stayed {now}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
