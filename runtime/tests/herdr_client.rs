//! The Herdr socket client against the protocol simulator: framing, ids, error
//! codes, caps and time budgets.

mod herdr_sim;

use std::time::{Duration, Instant};

use herdr_mcp::herdr::HerdrClient;
use herdr_sim::harness::fast_timeouts;
use herdr_sim::{Fault, HerdrSim};
use serde_json::json;

fn client(sim: &HerdrSim) -> HerdrClient {
    HerdrClient::new(sim.socket.clone(), fast_timeouts())
}

#[tokio::test]
async fn ping_reads_version_and_protocol() {
    let sim = HerdrSim::start().await;
    let pong = client(&sim).ping().await.unwrap();
    assert_eq!(pong.version.as_deref(), Some("0.8.2"));
    assert_eq!(pong.protocol, Some(20));
}

#[tokio::test]
async fn ids_are_rust_n_and_params_are_always_sent() {
    let sim = HerdrSim::start().await;
    let c = client(&sim);
    c.ping().await.unwrap();
    c.call("workspace.list", json!({})).await.unwrap();
    let reqs = sim.requests();
    assert_eq!(reqs.len(), 2, "one request per connection");
    assert_eq!(reqs[0]["id"], "rust-1");
    assert_eq!(reqs[1]["id"], "rust-2");
    assert!(reqs.iter().all(|r| r["params"].is_object()));
}

#[tokio::test]
async fn missing_socket_is_socket_missing_and_fast() {
    let dir = tempfile::tempdir().unwrap();
    let c = HerdrClient::new(dir.path().join("absent.sock"), fast_timeouts());
    let started = Instant::now();
    let e = c.ping().await.unwrap_err();
    assert_eq!(e.code, "socket_missing");
    assert!(e.is_unavailable());
    assert!(started.elapsed() < Duration::from_millis(200));
}

#[tokio::test]
async fn stale_socket_is_connection_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    let e = HerdrClient::new(path, fast_timeouts()).ping().await.unwrap_err();
    assert_eq!(e.code, "connection_refused");
    assert!(e.is_unavailable());
}

#[tokio::test]
async fn silent_socket_hits_the_timeout_without_hanging() {
    let sim = HerdrSim::start().await;
    sim.set_fault(Some(Fault::Silent));
    let started = Instant::now();
    let e = client(&sim).call_with_timeout("workspace.list", json!({}), Duration::from_millis(300)).await.unwrap_err();
    let took = started.elapsed();
    assert_eq!(e.code, "timeout");
    assert!(!e.is_unavailable());
    assert!(took >= Duration::from_millis(300) && took < Duration::from_secs(2), "{took:?}");
}

#[tokio::test]
async fn requested_timeouts_are_capped_at_the_maximum() {
    let sim = HerdrSim::start().await;
    sim.set_fault(Some(Fault::Silent));
    let started = Instant::now();
    let e = client(&sim).call_with_timeout("workspace.list", json!({}), Duration::from_secs(600)).await.unwrap_err();
    assert_eq!(e.code, "timeout");
    let took = started.elapsed();
    assert!(took >= fast_timeouts().max && took < fast_timeouts().max + Duration::from_secs(1), "{took:?}");
}

#[tokio::test]
async fn garbage_reply_is_a_parse_error() {
    let sim = HerdrSim::start().await;
    sim.set_fault(Some(Fault::Garbage));
    let e = client(&sim).ping().await.unwrap_err();
    assert_eq!(e.code, "parse_error");
    assert!(e.message.contains("not JSON"), "{}", e.message);
}

#[tokio::test]
async fn oversized_reply_is_response_too_large() {
    let sim = HerdrSim::start().await;
    sim.set_fault(Some(Fault::Oversized));
    let e = client(&sim).ping().await.unwrap_err();
    assert_eq!(e.code, "response_too_large");
}

#[tokio::test]
async fn hangup_is_unexpected_eof() {
    let sim = HerdrSim::start().await;
    sim.set_fault(Some(Fault::Hangup));
    let e = client(&sim).ping().await.unwrap_err();
    assert_eq!(e.code, "unexpected_eof");
}

#[tokio::test]
async fn daemon_errors_pass_through() {
    let sim = HerdrSim::start().await;
    let e = client(&sim).call("agent.get", json!({"target": "w9:p9"})).await.unwrap_err();
    assert_eq!(e.code, "agent_not_found");
    assert!(e.from_daemon);
    let e = client(&sim).call("no.such.method", json!({})).await.unwrap_err();
    assert_eq!(e.code, "invalid_request");
}

#[tokio::test]
async fn subscription_streams_status_changes() {
    let sim = HerdrSim::start().await;
    sim.add_workspace("w1", "repo");
    sim.add_pane("w1", "w1:p1", "/tmp");
    sim.add_agent("w1:p1", "pi", "idle");
    let mut sub = client(&sim).subscribe(vec![json!({"type": "pane.agent_status_changed", "pane_id": "w1:p1"})]).await.unwrap();
    sim.set_agent_status("w1:p1", "working");
    let ev = tokio::time::timeout(Duration::from_secs(2), sub.next_event()).await.unwrap().unwrap().unwrap();
    assert_eq!(ev["event"], "pane.agent_status_changed");
    assert_eq!(ev["data"]["agent_status"], "working");
    assert_eq!(ev["data"]["agent"], "pi");
    sim.drop_subscribers();
    let end = tokio::time::timeout(Duration::from_secs(2), sub.next_event()).await.unwrap().unwrap();
    assert!(end.is_none(), "a closed stream ends cleanly");
}
