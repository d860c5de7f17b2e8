//! Spec §9: every device row carries the state of its live link (`connection`
//! online|stale|offline, `last_seen_ago_ms`, `active_requests`, the runtime the
//! link reported), in `GET /devices` as in `herdr_devices`, taken from the link
//! hub rather than stored; an offline device's `last_seen_ago_ms` comes from the
//! time the registry recorded (spec §8); and an unreadable registry is an error,
//! never an empty list. A raw WebSocket client plays the link of an enrolled device.

mod edge_support;

use std::sync::Arc;
use std::time::Duration;

use edge_support::*;
use futures::{SinkExt, StreamExt};
use herdr_mcp::edge::forward::local_runtime_contract;
use herdr_mcp::edge::link_hub::{LinkHub, STALE_AFTER};
use herdr_mcp::edge::link_hub_auth::{DeviceInfo, LinkAuthError, LinkAuthenticator, auth_subprotocol};
use herdr_mcp::edge::relay;
use reqwest::Method;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;
const WAIT: Duration = Duration::from_secs(15);

/// Polls `f` until it holds, failing the test after [`WAIT`].
async fn until(what: &str, mut f: impl FnMut() -> bool) {
    tokio::time::timeout(WAIT, async {
        while !f() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("timed out waiting for {what}"));
}

/// A link for `ws` that said hello (runtime 9.9.9, generation `gen-b`) and was admitted.
async fn link(e: &InProc, hub: &LinkHub, ws: &str, secret: &str) -> Ws {
    link_with(e, hub, ws, secret, &[]).await
}

/// [`link`] offering `capabilities` in its hello.
async fn link_with(e: &InProc, hub: &LinkHub, ws: &str, secret: &str, capabilities: &[&str]) -> Ws {
    let url = format!("{}/ws/{ws}", e.issuer.replace("http://", "ws://"));
    let mut req = url.into_client_request().unwrap();
    let offer = format!("{}, {}", relay::SUBPROTOCOL, auth_subprotocol(secret));
    req.headers_mut().insert("sec-websocket-protocol", offer.parse().unwrap());
    let (mut sock, _) = tokio_tungstenite::connect_async(req).await.expect("upgrade");
    let (_, (epoch, hash)) = local_runtime_contract();
    let hello = json!({
        "protocol_version": 1, "kind": "hello", "workstation_id": ws, "boot_id": "boot-1", "link_version": "test",
        "capabilities": capabilities,
        "runtime": {"runtime_version": "9.9.9", "runtime_generation": "gen-b", "contract_epoch": epoch, "contract_hash": hash},
    });
    sock.send(Message::Text(hello.to_string().into())).await.unwrap();
    loop {
        match tokio::time::timeout(WAIT, sock.next()).await.expect("hello_ack in time") {
            Some(Ok(Message::Text(t))) => {
                let ack: Value = serde_json::from_str(t.as_str()).unwrap();
                assert_eq!((ack["kind"].as_str(), ack["ok"].as_bool()), (Some("hello_ack"), Some(true)), "{ack}");
                break;
            }
            Some(Ok(_)) => continue,
            other => panic!("expected hello_ack, got {other:?}"),
        }
    }
    until("the link to register", || hub.link(ws).is_some()).await;
    sock
}

fn row<'a>(answer: &'a Value, device_id: &str) -> &'a Value {
    answer["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["device_id"] == device_id)
        .unwrap_or_else(|| panic!("{device_id} listed: {answer}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_devices_route_shows_each_links_live_state() {
    let (e, hub) = InProc::start_registry_linked().await;
    let first = e.enroll("first");
    let second = e.enroll("second");
    let (ws1, id2) = (first.device.workstation_id.clone(), second.device.device_id.clone());
    let me = Some((ws1.as_str(), first.device_secret.as_str()));
    let list = || async { e.device_call(Method::GET, "/devices", me, None).await.json() };

    // Nobody linked yet: both offline, nothing seen, nothing running.
    let v = list().await;
    for id in [&ws1, &id2] {
        let d = row(&v, id);
        assert_eq!(
            (d["connection"].as_str(), &d["last_seen_ago_ms"], &d["active_requests"], &d["runtime_version"]),
            (Some("offline"), &Value::Null, &json!(0), &Value::Null),
            "{d}"
        );
    }

    // The first links: online, with the runtime its hello reported; the second stays offline.
    let sock = link(&e, &hub, &ws1, &first.device_secret).await;
    let v = list().await;
    let d = row(&v, &ws1);
    assert_eq!((d["connection"].as_str(), d["last_seen_ago_ms"].as_u64()), (Some("online"), Some(0)), "{d}");
    assert_eq!((d["runtime_version"].as_str(), d["runtime_generation"].as_str()), (Some("9.9.9"), Some("gen-b")), "{d}");
    // It does not answer status queries, so whether its runtime works is not known.
    assert_eq!((d["health"].as_str(), d["active_requests"].as_u64()), (Some("unknown"), Some(0)), "{d}");
    // The registry record is still all there, and no secret.
    assert_eq!((d["name"].as_str(), d["authorization"].as_str(), d["workstation_id"].as_str()), (Some("first"), Some("active"), Some(ws1.as_str())));
    assert!(!v.to_string().contains("devsec_"), "{v}");
    assert_eq!(row(&v, &id2)["connection"], "offline");

    // Silent past the stale limit (the edge's clock): stale, but still linked.
    e.clock.advance_ms(STALE_AFTER.as_millis() as i64 + 1);
    let v = list().await;
    assert_eq!((row(&v, &ws1)["connection"].as_str(), row(&v, &ws1)["last_seen_ago_ms"].as_u64()), (Some("stale"), Some(45_001)));

    // The same rows as herdr_devices gives a connector.
    let (_, tokens, _) = e.tokens().await;
    let tool = e.http.mcp(&tokens.access, "tools/call", json!({"name": "herdr_devices", "arguments": {}})).await.json();
    let tool = &tool["result"]["structuredContent"];
    for key in ["connection", "last_seen_ago_ms", "active_requests", "runtime_version", "runtime_generation", "health"] {
        assert_eq!(row(tool, &ws1)[key], row(&v, &ws1)[key], "{key}");
        assert_eq!(row(tool, &id2)[key], row(&v, &id2)[key], "{key}");
    }

    // The link goes away: offline again.
    drop(sock);
    until("the link to end", || hub.link(&ws1).is_none()).await;
    assert_eq!(row(&list().await, &ws1)["connection"], "offline");
}

/// A registry that cannot be read.
struct Unreadable;

impl LinkAuthenticator for Unreadable {
    fn verify_link(&self, _: &str, _: &str) -> Result<DeviceInfo, LinkAuthError> {
        Err(LinkAuthError::Unavailable("disk I/O error".into()))
    }
    fn list_devices(&self) -> Result<Vec<DeviceInfo>, String> {
        Err("disk I/O error".into())
    }
}

#[tokio::test]
async fn an_unreadable_registry_is_an_error_not_an_empty_list() {
    let (e, _hub) = InProc::start_linked(Arc::new(Unreadable)).await;
    let (_, tokens, _) = e.tokens().await;
    let r = e.http.mcp(&tokens.access, "tools/call", json!({"name": "herdr_devices", "arguments": {}})).await.json();
    let result = &r["result"];
    assert_eq!(result["isError"], true, "{r}");
    let payload = &result["structuredContent"];
    assert_eq!((payload["ok"].as_bool(), payload["code"].as_str()), (Some(false), Some("device_registry_unavailable")), "{r}");
    assert!(!r.to_string().contains("disk I/O"), "the cause stays in the edge's log: {r}");

    // The route, whose own registry reads fine, says so too instead of listing every device offline.
    let d = e.enroll("one");
    let r = e.device_call(Method::GET, "/devices", Some((&d.device.workstation_id, &d.device_secret)), None).await;
    assert_eq!((r.status, r.json()["code"].as_str()), (500, Some("device_registry_unavailable")), "{}", r.body);
}

async fn heartbeat(sock: &mut Ws, ws: &str) {
    let frame = json!({"protocol_version": 1, "kind": "heartbeat", "workstation_id": ws, "boot_id": "boot-1", "sent_at_ms": 1, "active_requests": 0});
    sock.send(Message::Text(frame.to_string().into())).await.unwrap();
}

/// Spec §8: the edge persists when a link was last heard, at most every 5
/// minutes while it is up and once more when it ends, so an offline device (also
/// after an edge restart, which loses the live links) still says how long it has
/// been away instead of null.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_offline_device_says_when_its_link_was_last_heard() {
    let (e, hub) = InProc::start_registry_linked().await;
    let d = e.enroll("laptop");
    let (ws, id) = (d.device.workstation_id.clone(), d.device.device_id.clone());
    let recorded = || e.devices.device(&id).unwrap().unwrap().last_seen_ms;
    assert_eq!(recorded(), None, "never linked");
    let mut sock = link(&e, &hub, &ws, &d.device_secret).await;
    assert_eq!(recorded(), Some(T0), "written when the link comes up");

    let every = herdr_mcp::edge::link_hub::PERSIST_SEEN_EVERY.as_millis() as i64;
    assert_eq!(every, 300_000);
    let heard_now = || hub.link(&ws).is_some_and(|c| c.silent_for(hub.now_ms()) == Duration::ZERO);
    // A heartbeat just under the period later is heard but not written …
    e.clock.advance_ms(every - 1);
    heartbeat(&mut sock, &ws).await;
    until("the heartbeat to be heard", heard_now).await;
    assert_eq!(recorded(), Some(T0));
    // … one at the period is written.
    e.clock.advance_ms(1);
    heartbeat(&mut sock, &ws).await;
    until("the heartbeat to be written", || recorded() == Some(T0 + every)).await;
    // The link is heard once more, then ends: its last frame is what stays.
    e.clock.advance_ms(10_000);
    heartbeat(&mut sock, &ws).await;
    until("the heartbeat to be heard", heard_now).await;
    assert_eq!(recorded(), Some(T0 + every));
    drop(sock);
    until("the link's end to be written", || recorded() == Some(T0 + every + 10_000)).await;

    e.clock.advance_ms(60_000);
    let me = Some((ws.as_str(), d.device_secret.as_str()));
    let v = e.device_call(Method::GET, "/devices", me, None).await.json();
    let r = row(&v, &id);
    assert_eq!((r["connection"].as_str(), r["last_seen_ago_ms"].as_u64()), (Some("offline"), Some(60_000)), "{r}");
    let (_, tokens, _) = e.tokens().await;
    let tool = e.http.mcp(&tokens.access, "tools/call", json!({"name": "herdr_devices", "arguments": {}})).await.json();
    assert_eq!(row(&tool["result"]["structuredContent"], &id)["last_seen_ago_ms"], 60_000);
}

async fn next_text(sock: &mut Ws) -> Value {
    loop {
        match tokio::time::timeout(WAIT, sock.next()).await.expect("a frame in time") {
            Some(Ok(Message::Text(t))) => return serde_json::from_str(t.as_str()).unwrap(),
            Some(Ok(_)) => continue,
            other => panic!("expected a text frame, got {other:?}"),
        }
    }
}

/// `health` is what the link last reported about its runtime, not a constant:
/// a link that answers status queries is asked as soon as it is admitted, and
/// its `healthy` answer shows as `ok` or `runtime_unavailable`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_is_the_runtime_state_the_link_reports() {
    let (e, hub) = InProc::start_registry_linked().await;
    let d = e.enroll("laptop");
    let (ws, id) = (d.device.workstation_id.clone(), d.device.device_id.clone());
    let me = Some((ws.as_str(), d.device_secret.as_str()));
    let health = || async { row(&e.device_call(Method::GET, "/devices", me, None).await.json(), &id)["health"].as_str().unwrap_or("").to_string() };
    let mut sock = link_with(&e, &hub, &ws, &d.device_secret, &["cancel", "status"]).await;
    let query = next_text(&mut sock).await;
    assert_eq!((query["kind"].as_str(), query["query"].as_bool(), query["workstation_id"].as_str()), (Some("status"), Some(true), Some(ws.as_str())), "{query}");
    assert_eq!(health().await, "unknown", "nothing reported yet");
    for (healthy, shown) in [(false, "runtime_unavailable"), (true, "ok")] {
        let report = json!({"protocol_version": 1, "kind": "status", "workstation_id": ws, "healthy": healthy, "active_requests": 0});
        sock.send(Message::Text(report.to_string().into())).await.unwrap();
        let deadline = tokio::time::Instant::now() + WAIT;
        while health().await != shown {
            assert!(tokio::time::Instant::now() < deadline, "health never became {shown}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    drop(sock);
    until("the link to end", || hub.link(&ws).is_none()).await;
    assert_eq!(health().await, "unknown");
}

/// A renamed device keeps its earlier names (spec §7 aliases), and a call that
/// selects it by one still reaches its link: a model may go on using the name
/// it saw before the rename.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_by_a_devices_earlier_name_reaches_it() {
    let (e, hub) = InProc::start_registry_linked().await;
    let d = e.enroll("laptop");
    let _other = e.enroll("tower");
    let ws = d.device.workstation_id.clone();
    e.devices.rename(&d.device.device_id, "desk").unwrap();
    let mut sock = link(&e, &hub, &ws, &d.device_secret).await;
    let (_, tokens, _) = e.tokens().await;
    let args = json!({"name": "herdr_inspect", "arguments": {"device": "laptop"}});
    let call = tokio::spawn({
        let http = e.http.clone();
        let access = tokens.access.clone();
        async move { http.mcp(&access, "tools/call", args).await.json() }
    });
    let req = next_text(&mut sock).await;
    assert_eq!((req["kind"].as_str(), req["operation"].as_str()), (Some("tool_request"), Some("herdr_inspect")), "{req}");
    let text = json!({"ok": true, "seen": "by its old name"}).to_string();
    let answer = json!({"protocol_version": 1, "kind": "tool_result", "workstation_id": ws, "request_id": req["request_id"], "served_at_ms": 1, "result": {"content": [{"type": "text", "text": text}]}});
    sock.send(Message::Text(answer.to_string().into())).await.unwrap();
    let r = tokio::time::timeout(WAIT, call).await.expect("answered").unwrap();
    assert_eq!(r["result"]["structuredContent"]["seen"], "by its old name", "{r}");
}

/// A pairing may recover (re-key) only a device whose link is down, as it is
/// on a computer that lost its credential: a device linked right now keeps its
/// credential and its calls, and the pairing stays usable for when it is down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pairing_cannot_take_over_a_device_that_is_linked() {
    let (e, hub) = InProc::start_registry_linked().await;
    let d = e.enroll("laptop");
    let (ws, id) = (d.device.workstation_id.clone(), d.device.device_id.clone());
    let sock = link(&e, &hub, &ws, &d.device_secret).await;
    let p = e.devices.create_pairing(None, None, "test").unwrap();
    let recover = json!({"pairing_id": p.pairing_id, "code": p.code, "recover_device_id": id});
    let r = e.device_call(Method::POST, "/devices/pairings/consume", None, Some(recover.clone())).await;
    assert_eq!((r.status, r.json()["code"].as_str()), (409, Some("device_online")), "{}", r.body);
    assert!(!r.body.contains("devsec_"), "{}", r.body);
    assert!(e.devices.verify_link(&ws, &d.device_secret).is_ok(), "the linked device keeps its credential");
    assert!(hub.link(&ws).is_some(), "and its link");

    drop(sock);
    until("the link to end", || hub.link(&ws).is_none()).await;
    let r = e.device_call(Method::POST, "/devices/pairings/consume", None, Some(recover)).await;
    assert_eq!((r.status, r.json()["recovered_existing"].as_bool()), (200, Some(true)), "{}", r.body);
    assert_eq!(e.devices.verify_link(&ws, &d.device_secret).unwrap_err().code(), "link_auth_failed");
}

/// Spec §2: `GET /status/<workstation_id>` gives a monitor holding an MCP bearer
/// one workstation's presence, as its `herdr_devices` row says it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_route_reports_one_workstations_presence_to_a_bearer() {
    let (e, hub) = InProc::start_registry_linked().await;
    let d = e.enroll("laptop");
    let ws = d.device.workstation_id.clone();
    let (_, tokens, _) = e.tokens().await;
    let get = |path: String, bearer: Option<String>| {
        let mut rb = e.http.client.get(format!("{}{path}", e.http.base));
        if let Some(b) = bearer {
            rb = rb.header("authorization", format!("Bearer {b}"));
        }
        async move {
            let r = rb.send().await.unwrap();
            let status = r.status().as_u16();
            let challenge = r.headers().get("www-authenticate").is_some();
            (status, challenge, r.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    let (status, _, v) = get(format!("/status/{ws}"), Some(tokens.access.clone())).await;
    assert_eq!((status, v["ok"].as_bool(), v["connection"].as_str(), v["workstation_id"].as_str()), (200, Some(true), Some("offline"), Some(ws.as_str())), "{v}");
    let _sock = link(&e, &hub, &ws, &d.device_secret).await;
    let (_, _, v) = get(format!("/status/{ws}"), Some(tokens.access.clone())).await;
    assert_eq!((v["connection"].as_str(), v["name"].as_str(), v["runtime_version"].as_str()), (Some("online"), Some("laptop"), Some("9.9.9")), "{v}");

    let (status, _, v) = get("/status/dev_00000000000000000000000000".into(), Some(tokens.access.clone())).await;
    assert_eq!((status, v["code"].as_str()), (404, Some("device_not_found")), "{v}");
    // No bearer, or a device secret instead of one: the MCP 401 with its challenge.
    for bearer in [None, Some(d.device_secret.clone())] {
        let (status, challenge, _) = get(format!("/status/{ws}"), bearer).await;
        assert_eq!((status, challenge), (401, true));
    }
}
