//! Edge idempotency (`idem_hit`, spec edge.md §8): a mutation retried with the
//! same `idempotency_key` never reaches the workstation twice. A real link
//! process serves a stand-in runtime that counts every `tools/call` it gets.

mod edge_support;
#[path = "edge_support/links.rs"]
mod links;
#[path = "edge_support/procs.rs"]
mod procs;

use std::sync::Arc;

use edge_support::*;
use herdr_mcp::edge::forward_pending;
use links::*;
use procs::poll;
use serde_json::{Value, json};

async fn call(edge: &InProc, access: &str, name: &str, arguments: Value) -> Value {
    let answer = edge.http.mcp(access, "tools/call", json!({"name": name, "arguments": arguments})).await.json();
    answer["result"].clone()
}

fn text_payload(result: &Value) -> Value {
    serde_json::from_str(result["content"][0]["text"].as_str().expect("a text block")).expect("JSON text")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_mutation_reaches_the_workstation_once() {
    let devices = Arc::new(TestDevices::default());
    devices.add("dev_idem", "idem", "devsec_idem");
    let (edge, hub) = InProc::start_linked(devices.clone()).await;
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let socket = home.join("recording.sock");
    let (calls, _server) = recording_runtime(&socket).await;
    let mut link_proc = link(home, &edge.issuer, "dev_idem", "devsec_idem", &socket);
    linked(&hub, "dev_idem").await;
    let (_, tokens, _) = edge.tokens().await;
    let access = tokens.access.as_str();
    let write = |content: &str, key: &str| json!({"path": "/tmp/x", "content": content, "idempotency_key": key});

    // First call runs; the retry with the same key and request is replayed, marked.
    let first = call(&edge, access, "herdr_fs_write", write("one", "k-1")).await;
    assert_eq!(first["structuredContent"], json!({"ok": true, "call": 1}), "{first}");
    let again = call(&edge, access, "herdr_fs_write", json!({"path": "/tmp/x", "content": "one", "idempotency_key": "k-1", "timeout_ms": 9000})).await;
    assert_eq!(again["structuredContent"], json!({"ok": true, "call": 1, "idempotent_replay": true}), "{again}");
    assert_eq!(text_payload(&again)["idempotent_replay"], true);
    assert_eq!(count(&calls, "herdr_fs_write"), 1, "the replay did not reach the runtime");

    // The same key for a different change is refused without sending anything.
    let other = call(&edge, access, "herdr_fs_write", write("two", "k-1")).await;
    let sc = &other["structuredContent"];
    assert_eq!((other["isError"].as_bool(), sc["code"].as_str(), sc["retryable"].as_bool()), (Some(true), Some("idempotency_key_conflict"), Some(false)), "{other}");
    assert_eq!(sc["delivery_state"], "not_delivered");
    assert_eq!(count(&calls, "herdr_fs_write"), 1);

    // Without a key, or with another key, every call is sent; reads never dedup.
    call(&edge, access, "herdr_fs_write", json!({"path": "/tmp/x", "content": "one"})).await;
    call(&edge, access, "herdr_fs_write", write("one", "k-2")).await;
    assert_eq!(count(&calls, "herdr_fs_write"), 3);
    for _ in 0..2 {
        let r = call(&edge, access, "herdr_fs_read", json!({"path": "/tmp/x", "idempotency_key": "k-read"})).await;
        assert!(r["structuredContent"].get("idempotent_replay").is_none(), "{r}");
    }
    assert_eq!(count(&calls, "herdr_fs_read"), 2);

    // A runtime refusal before running anything gives the key back, as the runtime
    // itself does: the repeat and the corrected call are both sent.
    let refused = json!({"path": "/tmp/z", "content": "z", "refuse": true, "idempotency_key": "k-4"});
    for expected_calls in [4, 5] {
        let r = call(&edge, access, "herdr_fs_write", refused.clone()).await;
        assert_eq!(r["structuredContent"]["reason"], "project_root_required", "{r}");
        assert_eq!(count(&calls, "herdr_fs_write"), expected_calls);
    }
    let fixed = call(&edge, access, "herdr_fs_write", json!({"path": "/tmp/z", "content": "z", "idempotency_key": "k-4"})).await;
    assert_eq!((fixed["structuredContent"]["ok"].as_bool(), count(&calls, "herdr_fs_write")), (Some(true), 6), "{fixed}");

    // A keyed change still running: the retry is told so and not sent.
    let (http, token) = (edge.http.clone(), access.to_string());
    let held = tokio::spawn(async move {
        http.mcp(&token, "tools/call", json!({"name": "herdr_fs_write", "arguments": {"path": "/tmp/y", "content": "slow", "hold": true, "idempotency_key": "k-3"}})).await.json()
    });
    poll("the held change to reach the runtime", || (count(&calls, "herdr_fs_write") == 7).then_some(())).await;
    let busy = call(&edge, access, "herdr_fs_write", json!({"path": "/tmp/y", "content": "slow", "hold": true, "idempotency_key": "k-3"})).await;
    let sc = &busy["structuredContent"];
    assert_eq!((sc["code"].as_str(), sc["retryable"].as_bool(), sc["delivery_state"].as_str()), (Some("idempotency_in_flight"), Some(false), Some("delivery_unknown")), "{busy}");
    let held_id = sc["request_id"].as_str().unwrap().to_string();

    // The link dies with the change in flight: uncertain, and it stays uncertain
    // for a retry (answered from the ledger even while the workstation is offline).
    link_proc.0.kill().unwrap();
    link_proc.0.wait().unwrap();
    let lost = held.await.unwrap();
    assert_eq!(lost["result"]["structuredContent"]["code"], "delivery_uncertain", "{lost}");
    assert_eq!(lost["result"]["structuredContent"]["request_id"], held_id.as_str());
    poll("the link to go", || hub.link("dev_idem").is_none().then_some(())).await;
    let retry = call(&edge, access, "herdr_fs_write", json!({"path": "/tmp/y", "content": "slow", "hold": true, "idempotency_key": "k-3"})).await;
    let sc = &retry["structuredContent"];
    assert_eq!((sc["code"].as_str(), sc["retryable"].as_bool(), sc["request_id"].as_str()), (Some("delivery_uncertain"), Some(false), Some(held_id.as_str())), "{retry}");
    // A replay needs no link either.
    let offline = call(&edge, access, "herdr_fs_write", write("one", "k-1")).await;
    assert_eq!(offline["structuredContent"]["idempotent_replay"], true, "{offline}");
    assert_eq!(count(&calls, "herdr_fs_write"), 7, "nothing was sent twice");
    let rows = forward_pending::rows_of(&edge.store, "dev_idem").unwrap();
    let states: Vec<&str> = rows.iter().map(|r| r.2.as_str()).collect();
    assert_eq!(states, ["settled", "settled", "settled", "not_delivered", "not_delivered", "settled", "uncertain"], "one row per change actually sent");
}
