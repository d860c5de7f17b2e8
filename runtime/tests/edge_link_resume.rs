//! Resume after a blip (spec edge.md §8 `hello_ack.resume`): the TCP stream of a
//! real link is cut while a real runtime runs a keyed `herdr_exec`; the caller is
//! told `delivery_uncertain`, the command finishes while the link is down, and
//! after the link reconnects its kept answer settles the edge's row. A retry with
//! the same key then gets the real result, and the command ran exactly once.

mod edge_support;
#[path = "edge_support/links.rs"]
mod links;
#[path = "edge_support/procs.rs"]
mod procs;
#[path = "edge_support/cut_proxy.rs"]
mod cut_proxy;

use std::net::SocketAddr;
use std::sync::Arc;

use cut_proxy::CutProxy;
use edge_support::*;
use herdr_mcp::edge::forward_pending;
use links::*;
use procs::{plain, poll};
use serde_json::{Value, json};

async fn call(edge: &InProc, access: &str, arguments: &Value) -> Value {
    edge.http.mcp(access, "tools/call", json!({"name": "herdr_exec", "arguments": arguments})).await.json()["result"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_that_finishes_while_the_link_is_cut_is_resumed_and_replayed() {
    let devices = Arc::new(TestDevices::default());
    devices.add("dev_blip", "blip", "devsec_blip");
    let (edge, hub) = InProc::start_linked(devices.clone()).await;
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let rt = runtime(home, "blip", "README", "a project\n").await;
    let upstream: SocketAddr = edge.issuer.trim_start_matches("http://").parse().unwrap();
    let proxy = CutProxy::start(upstream).await;
    let _link = link(home, &proxy.url, "dev_blip", "devsec_blip", &rt.socket);
    linked(&hub, "dev_blip").await;
    let (_, tokens, _) = edge.tokens().await;
    let access = tokens.access.clone();

    // Marks that it started, waits for the test's go-ahead, then makes its change.
    let arguments = json!({
        "workspace": "root-blip",
        "command": "touch started; while [ ! -e go ]; do sleep 0.05; done; echo ran >> changes.log; echo finished",
        "intent": "non_idempotent_write",
        "idempotency_key": "blip-1",
        "timeout_ms": 25000,
    });
    let first = {
        let (edge_http, access, arguments) = (edge.http.clone(), access.clone(), arguments.clone());
        tokio::spawn(async move { edge_http.mcp(&access, "tools/call", json!({"name": "herdr_exec", "arguments": arguments})).await.json() })
    };
    poll("the command to start", || rt.root.join("started").exists().then_some(())).await;

    proxy.cut();
    let lost = first.await.unwrap()["result"].clone();
    let sc = &lost["structuredContent"];
    assert_eq!((sc["code"].as_str(), sc["retryable"].as_bool()), (Some("delivery_uncertain"), Some(false)), "{lost}");
    let request_id = sc["request_id"].as_str().unwrap().to_string();
    assert_eq!(forward_pending::state_of(&edge.store, &request_id).unwrap().unwrap().0, "uncertain");

    // The change completes while the link cannot reach the edge; the link keeps the answer.
    std::fs::write(rt.root.join("go"), "").unwrap();
    let log = home.join("link-dev_blip.log");
    poll("the link to keep the answer", || {
        std::fs::read_to_string(&log).ok().filter(|l| l.contains("answer kept for the next link")).map(|_| ())
    })
    .await;
    // Still uncertain, so a retry now is not sent again either.
    let early = call(&edge, &access, &arguments).await;
    assert_eq!(early["structuredContent"]["code"], "delivery_uncertain", "{early}");

    proxy.restore();
    poll("the resumed answer to settle the row", || {
        let state = forward_pending::state_of(&edge.store, &request_id).unwrap().map(|s| s.0);
        (state.as_deref() == Some("settled")).then_some(())
    })
    .await;

    // The retry with the same key gets the real outcome, replayed, not a second run.
    let replay = call(&edge, &access, &arguments).await;
    let sc = &replay["structuredContent"];
    assert_ne!(replay["isError"], json!(true), "{replay}");
    assert_eq!((sc["ok"].as_bool(), sc["exit_code"].as_i64(), sc["idempotent_replay"].as_bool()), (Some(true), Some(0), Some(true)), "{replay}");
    assert!(replay.to_string().contains("finished"), "{replay}");
    assert_eq!(std::fs::read_to_string(rt.root.join("changes.log")).unwrap(), "ran\n", "the change ran exactly once");
    assert_eq!(forward_pending::rows_of(&edge.store, "dev_blip").unwrap().len(), 1, "the retries were never sent");
    let link_log = plain(&std::fs::read_to_string(&log).unwrap());
    assert!(link_log.contains("resumed=1"), "the kept answer went out with the new hello: {link_log}");
}
