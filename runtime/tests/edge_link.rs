//! The workstation link end to end: real `herdr-mcp serve` runtimes and real
//! `herdr-mcp link` processes on loopback, linked to an edge served in this
//! process (so the test controls its device registry and reads its hub and
//! pending rows). An OAuth-authorised rmcp client drives the public `/mcp`.

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
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

type Client = RunningService<RoleClient, ()>;

async fn client(edge: &InProc, access: &str) -> Client {
    let config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", edge.issuer)).auth_header(access);
    ().serve(StreamableHttpClientTransport::from_config(config)).await.expect("rmcp client of the edge")
}

async fn call(c: &Client, name: &str, args: Value) -> Value {
    let mut params = CallToolRequestParams::new(name.to_string());
    params.arguments = args.as_object().cloned();
    let r = c.call_tool(params).await.unwrap_or_else(|e| panic!("tools/call {name}: {e}"));
    serde_json::to_value(&r).unwrap()
}

fn payload(result: &Value) -> Value {
    let text = result["content"][0]["text"].as_str().expect("a text block");
    serde_json::from_str(text).expect("JSON payload")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workstations_by_explicit_device_and_herdr_devices() {
    let devices = Arc::new(TestDevices::default());
    devices.add("dev_alpha", "alpha", "devsec_alpha_secret");
    devices.add("dev_beta", "beta", "devsec_beta_secret");
    let (edge, hub) = InProc::start_linked(devices.clone()).await;
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let (ra, rb) = tokio::join!(runtime(home, "a", "a.txt", "from workstation A\n"), runtime(home, "b", "b.txt", "from workstation B\n"));
    let _la = link(home, &edge.issuer, "dev_alpha", "devsec_alpha_secret", &ra.socket);
    let _lb = link(home, &edge.issuer, "dev_beta", "devsec_beta_secret", &rb.socket);
    linked(&hub, "dev_alpha").await;
    linked(&hub, "dev_beta").await;

    let (_, tokens, _) = edge.tokens().await;
    let c = client(&edge, &tokens.access).await;

    // 19 actions: the runtime's 18 plus herdr_devices; every forwarded one takes `device`.
    let tools = c.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), 19);
    for t in &tools {
        let has_device = t.input_schema.get("properties").and_then(|p| p.get("device")).is_some();
        assert_eq!(has_device, t.name != "herdr_devices", "{}", t.name);
    }

    let listed = call(&c, "herdr_devices", json!({})).await;
    let rows = listed["structuredContent"]["devices"].as_array().unwrap().clone();
    assert_eq!(rows.len(), 2, "{listed}");
    for row in &rows {
        assert_eq!((row["connection"].as_str(), row["authorization"].as_str()), (Some("online"), Some("active")), "{row}");
        assert!(row["runtime_version"].is_string() && row["runtime_generation"].is_string(), "{row}");
    }

    for (device, rt, file, text) in [("dev_alpha", &ra, "a.txt", "from workstation A"), ("beta", &rb, "b.txt", "from workstation B")] {
        let inspect = call(&c, "herdr_inspect", json!({"device": device})).await;
        assert_ne!(inspect["isError"], json!(true), "{inspect}");
        let text_of_inspect = inspect["content"][0]["text"].as_str().unwrap();
        assert!(text_of_inspect.contains(rt.root.to_str().unwrap()), "inspect on {device} should show its root: {text_of_inspect}");
        assert_eq!(inspect["structuredContent"], payload(&inspect));

        let read = call(&c, "herdr_fs_read", json!({"device": device, "path": rt.root.join(file).to_str().unwrap()})).await;
        let p = payload(&read);
        assert_eq!(p["ok"], true, "{p}");
        assert!(p["content"].as_str().unwrap().contains(text), "{p}");
    }
    // A file of one workstation is not on the other.
    let cross = payload(&call(&c, "herdr_fs_read", json!({"device": "alpha", "path": rb.root.join("b.txt").to_str().unwrap()})).await);
    assert_eq!(cross["ok"], false, "{cross}");

    // Without a selector two online devices are ambiguous; unknown names are refused.
    let amb = call(&c, "herdr_inspect", json!({})).await;
    assert_eq!((amb["isError"].as_bool(), amb["structuredContent"]["code"].as_str()), (Some(true), Some("device_ambiguous")), "{amb}");
    let unknown = call(&c, "herdr_inspect", json!({"device": "gamma"})).await;
    assert_eq!(unknown["structuredContent"]["code"], "device_not_found");

    // /info names the contracts the catalogs really hash to.
    let info = edge.http.get("/info").await.json();
    let health = herdr_mcp::link::local::LocalRuntime::new(ra.socket.clone()).identity().await.unwrap();
    let tool_count = herdr_mcp::edge::forward::local_runtime_contract().0.len();
    assert_eq!(info["runtimeContract"], json!({"epoch": health.contract_epoch, "hash": health.contract_hash, "toolCount": tool_count}));
    let listed_raw = edge.http.mcp(&tokens.access, "tools/list", json!({})).await.json();
    assert_eq!(info["publicContract"]["hash"], listed_raw["result"]["_meta"]["herdr"]["contract_hash"]);
    assert_eq!(listed_raw["result"]["_meta"]["herdr"]["tool_count"], 19);
    c.cancel().await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn link_drop_mid_mutation_is_uncertain_and_never_resent() {
    let devices = Arc::new(TestDevices::default());
    devices.add("dev_solo", "solo", "devsec_solo");
    let (edge, hub) = InProc::start_linked(devices.clone()).await;
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let socket = home.join("holding.sock");
    let (calls, _server) = recording_runtime(&socket).await;
    let mut first = link(home, &edge.issuer, "dev_solo", "devsec_solo", &socket);
    linked(&hub, "dev_solo").await;
    let (_, tokens, _) = edge.tokens().await;

    // The only linked device is chosen without a selector.
    let http = edge.http.clone();
    let access = tokens.access.clone();
    let write = tokio::spawn(async move {
        http.mcp(&access, "tools/call", json!({"name": "herdr_fs_write", "arguments": {"path": "/tmp/x", "content": "once", "hold": true}})).await
    });
    let c2 = Arc::clone(&calls);
    poll("the mutation to reach the runtime", || (!c2.lock().unwrap().is_empty()).then_some(())).await;
    let rows = forward_pending::rows_of(&edge.store, "dev_solo").unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!((rows[0].1.as_str(), rows[0].2.as_str()), ("herdr_fs_write", "sent"), "recorded before the answer");

    first.0.kill().unwrap();
    first.0.wait().unwrap();
    let answer = write.await.unwrap().json();
    let sc = &answer["result"]["structuredContent"];
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert_eq!(
        (sc["code"].as_str(), sc["retryable"].as_bool(), sc["delivery_state"].as_str()),
        (Some("delivery_uncertain"), Some(false), Some("delivery_unknown")),
        "{answer}"
    );
    assert_eq!(sc["workstation_id"], "dev_solo");
    let request_id = sc["request_id"].as_str().unwrap().to_string();
    assert_eq!(forward_pending::state_of(&edge.store, &request_id).unwrap().unwrap().0, "uncertain");

    // The link comes back; the edge does not send the change again.
    poll("the old link to go", || hub.link("dev_solo").is_none().then_some(())).await;
    let mut second = link(home, &edge.issuer, "dev_solo", "devsec_solo", &socket);
    linked(&hub, "dev_solo").await;
    let http = edge.http.clone();
    let access = tokens.access.clone();
    let read = tokio::spawn(async move { http.mcp(&access, "tools/call", json!({"name": "herdr_fs_read", "arguments": {"path": "/tmp/x", "hold": true}})).await });
    let c3 = Arc::clone(&calls);
    poll("the read to reach the runtime", || (c3.lock().unwrap().len() == 2).then_some(())).await;
    assert_eq!(count(&calls, "herdr_fs_write"), 1, "the mutation ran at most once");
    // Revoking the device settles the in-flight read as link_auth_failed and closes 4401.
    hub.revoke("dev_solo");
    let read = read.await.unwrap().json();
    assert_eq!(read["result"]["structuredContent"]["code"], "link_auth_failed", "{read}");
    // The link stops for good instead of retrying a revoked credential.
    let status = poll("the revoked link to exit", || second.0.try_wait().unwrap()).await;
    assert!(!status.success());
    let log = std::fs::read_to_string(home.join("link-dev_solo.log")).unwrap();
    assert!(log.contains("device revoked"), "{log}");
}
