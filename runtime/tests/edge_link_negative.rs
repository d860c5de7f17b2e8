//! The link's refusals, each with its exact answer: HTTP codes before the
//! upgrade, hello_ack failures and WebSocket close codes after it. A raw
//! WebSocket client plays the link so every malformed frame can be sent; it
//! also plays a workstation answering (or not) forwarded requests.

mod edge_support;

use std::sync::Arc;
use std::time::Duration;

use edge_support::*;
use futures::{SinkExt, StreamExt};
use herdr_mcp::edge::forward::local_runtime_contract;
use herdr_mcp::edge::link_hub::LinkHub;
use herdr_mcp::edge::link_hub_auth::auth_subprotocol;
use herdr_mcp::edge::relay;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;
const WAIT: Duration = Duration::from_secs(15);

struct Fixture {
    edge: InProc,
    hub: Arc<LinkHub>,
    devices: Arc<TestDevices>,
}

async fn fixture() -> Fixture {
    let devices = Arc::new(TestDevices::default());
    devices.add("dev_one", "one", "devsec_one");
    devices.add("dev_two", "two", "devsec_two");
    devices.add("dev_susp", "susp", "devsec_susp");
    devices.set_authorization("dev_susp", "suspended");
    devices.add("dev_gone", "gone", "devsec_gone");
    devices.set_authorization("dev_gone", "revoked");
    let (edge, hub) = InProc::start_linked(devices.clone()).await;
    Fixture { edge, hub, devices }
}

/// Opens `/ws/<ws>` with the given subprotocol header and bearer; the socket or
/// the refusal's (status, JSON body).
async fn open(f: &Fixture, ws: &str, protocols: Option<&str>, bearer: Option<&str>) -> Result<Ws, (u16, Value)> {
    open_with(f, ws, protocols, bearer, &[]).await
}

/// [`open`] with extra request headers.
async fn open_with(f: &Fixture, ws: &str, protocols: Option<&str>, bearer: Option<&str>, extra: &[(&'static str, &str)]) -> Result<Ws, (u16, Value)> {
    let url = format!("{}/ws/{ws}", f.edge.issuer.replace("http://", "ws://"));
    let mut req = url.into_client_request().unwrap();
    for (k, v) in extra {
        req.headers_mut().insert(*k, v.parse().unwrap());
    }
    if let Some(p) = protocols {
        req.headers_mut().insert("sec-websocket-protocol", p.parse().unwrap());
    }
    if let Some(b) = bearer {
        req.headers_mut().insert("authorization", format!("Bearer {b}").parse().unwrap());
    }
    match tokio_tungstenite::connect_async(req).await {
        Ok((ws, resp)) => {
            assert_eq!(resp.headers().get("sec-websocket-protocol").unwrap(), relay::SUBPROTOCOL);
            Ok(ws)
        }
        Err(WsError::Http(resp)) => {
            let body = resp.body().as_deref().map(|b| serde_json::from_slice(b).unwrap_or(Value::Null)).unwrap_or(Value::Null);
            Err((resp.status().as_u16(), body))
        }
        Err(e) => panic!("unexpected WebSocket error: {e}"),
    }
}

fn offer(secret: &str) -> String {
    format!("{}, {}", relay::SUBPROTOCOL, auth_subprotocol(secret))
}

fn hello(ws: &str) -> Value {
    let (_, (epoch, hash)) = local_runtime_contract();
    json!({
        "protocol_version": 1, "kind": "hello", "workstation_id": ws, "boot_id": "boot-1", "link_version": "test",
        "capabilities": [], "runtime": {"runtime_version": "0.1.0", "contract_epoch": epoch, "contract_hash": hash},
    })
}

async fn next_text(ws: &mut Ws) -> Value {
    loop {
        match tokio::time::timeout(WAIT, ws.next()).await.expect("a frame in time") {
            Some(Ok(Message::Text(t))) => return serde_json::from_str(t.as_str()).unwrap(),
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
            other => panic!("expected a text frame, got {other:?}"),
        }
    }
}

/// Reads until the edge closes; its (code, reason).
async fn close_of(ws: &mut Ws) -> (u16, String) {
    loop {
        match tokio::time::timeout(WAIT, ws.next()).await.expect("a close in time") {
            Some(Ok(Message::Close(Some(f)))) => return (u16::from(f.code), f.reason.to_string()),
            Some(Ok(Message::Close(None))) | None => panic!("closed without a code"),
            Some(Err(e)) => panic!("socket error instead of a close: {e}"),
            Some(Ok(_)) => continue,
        }
    }
}

async fn send(ws: &mut Ws, v: &Value) {
    ws.send(Message::Text(v.to_string().into())).await.unwrap();
}

/// A link on `ws` that said hello and got a successful hello_ack.
async fn linked(f: &Fixture, ws: &str, secret: &str) -> Ws {
    let mut sock = open(f, ws, Some(&offer(secret)), None).await.expect("upgrade");
    send(&mut sock, &hello(ws)).await;
    let ack = next_text(&mut sock).await;
    assert_eq!((ack["kind"].as_str(), ack["ok"].as_bool()), (Some("hello_ack"), Some(true)), "{ack}");
    let hub = Arc::clone(&f.hub);
    let id = ws.to_string();
    tokio::time::timeout(WAIT, async move {
        while hub.link(&id).is_none() {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("registered");
    sock
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrade_refusals() {
    let f = fixture().await;
    type Case<'a> = (&'a str, Option<String>, Option<&'a str>, u16, &'a str);
    let cases: Vec<Case> = vec![
        ("dev_one", None, None, 400, "bad_request"),
        ("dev_one", Some(auth_subprotocol("devsec_one")), None, 400, "bad_request"),
        ("dev_one", Some(format!("{}, {}", offer("devsec_one"), auth_subprotocol("devsec_one"))), None, 400, "bad_request"),
        ("dev_one", Some(format!("{}, herdr-auth.zz", relay::SUBPROTOCOL)), None, 400, "bad_request"),
        ("bad!id", Some(offer("devsec_one")), None, 400, "bad_request"),
        ("dev_one", Some(relay::SUBPROTOCOL.to_string()), None, 401, "link_auth_failed"),
        ("dev_one", Some(offer("devsec_wrong")), None, 401, "link_auth_failed"),
        ("dev_one", Some(offer("devsec_two")), None, 401, "link_auth_failed"),
        ("dev_nobody", Some(offer("devsec_one")), None, 401, "device_not_found"),
        ("dev_susp", Some(offer("devsec_susp")), None, 401, "device_suspended"),
        ("dev_gone", Some(offer("devsec_gone")), None, 401, "device_revoked"),
    ];
    for (ws, protocols, bearer, status, code) in cases {
        let (got, body) = open(&f, ws, protocols.as_deref(), bearer).await.err().unwrap_or_else(|| panic!("{ws} {protocols:?} was accepted"));
        assert_eq!((got, body["code"].as_str()), (status, Some(code)), "{ws} {protocols:?}: {body}");
        assert_eq!(body["retryable"], false);
    }
    // The bearer header works in place of the herdr-auth entry.
    let sock = open(&f, "dev_one", Some(relay::SUBPROTOCOL), Some("devsec_one")).await;
    assert!(sock.is_ok());
    // A plain GET with the right offer is not an upgrade.
    let r = f.edge.http.get_with("/ws/dev_one", &[("sec-websocket-protocol", &offer("devsec_one"))]).await;
    assert_eq!((r.status, r.json()["code"].as_str()), (400, Some("bad_request")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hello_refusals() {
    let f = fixture().await;
    let first_frames: Vec<(Message, u16)> = vec![
        (Message::Text(json!({"protocol_version": 1, "kind": "heartbeat", "workstation_id": "dev_one", "boot_id": "b", "sent_at_ms": 1, "active_requests": 0}).to_string().into()), relay::close::POLICY),
        (Message::Binary(vec![1, 2, 3].into()), relay::close::UNSUPPORTED_DATA),
        (Message::Text("{not json".into()), relay::close::POLICY),
        (Message::Text(json!({"protocol_version": 2, "kind": "hello"}).to_string().into()), relay::close::POLICY),
        (Message::Text(format!("{{\"pad\":\"{}\"}}", "x".repeat(relay::MAX_EDGE_INBOUND)).into()), relay::close::TOO_BIG),
    ];
    for (msg, code) in first_frames {
        let mut sock = open(&f, "dev_one", Some(&offer("devsec_one")), None).await.unwrap();
        sock.send(msg).await.unwrap();
        assert_eq!(close_of(&mut sock).await.0, code);
    }
    let mut wrong_contract = hello("dev_one");
    wrong_contract["runtime"]["contract_hash"] = json!(format!("sha256:{}", "0".repeat(64)));
    let mut no_runtime = hello("dev_one");
    no_runtime.as_object_mut().unwrap().remove("runtime");
    for (h, code) in [(hello("dev_two"), "workstation_mismatch"), (wrong_contract, "contract_mismatch"), (no_runtime, "contract_mismatch")] {
        let mut sock = open(&f, "dev_one", Some(&offer("devsec_one")), None).await.unwrap();
        send(&mut sock, &h).await;
        let ack = next_text(&mut sock).await;
        assert_eq!((ack["kind"].as_str(), ack["ok"].as_bool(), ack["code"].as_str()), (Some("hello_ack"), Some(false), Some(code)), "{ack}");
        assert_eq!(close_of(&mut sock).await.0, relay::close::POLICY);
        assert!(f.hub.link("dev_one").is_none());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frames_after_hello_are_strict() {
    let f = fixture().await;
    let base = json!({"protocol_version": 1, "workstation_id": "dev_one"});
    let with = |extra: Value| {
        let mut v = base.clone();
        for (k, val) in extra.as_object().unwrap() {
            v[k] = val.clone();
        }
        v
    };
    let heartbeat = with(json!({"kind": "heartbeat", "boot_id": "b", "sent_at_ms": 1, "active_requests": 0}));
    let mut unknown_field = heartbeat.clone();
    unknown_field["mood"] = json!("fine");
    let mut other_ws = heartbeat.clone();
    other_ws["workstation_id"] = json!("dev_two");
    let mut v2 = heartbeat.clone();
    v2["protocol_version"] = json!(2);
    let cases: Vec<(&str, Value, &str)> = vec![
        ("unknown kind", with(json!({"kind": "gossip"})), "unknown"),
        ("retired kind", with(json!({"kind": "response", "request_id": "r"})), "retired"),
        ("unknown field", unknown_field, "unknown field"),
        ("edge-only kind", with(json!({"kind": "tool_request", "request_id": "r", "operation": "herdr_inspect"})), "direction"),
        ("second hello", hello("dev_one"), "already"),
        ("other workstation", other_ws, "dev_two"),
        ("version 2", v2, "protocol_version"),
        ("bad request id", with(json!({"kind": "tool_result", "request_id": "no spaces", "served_at_ms": 1})), "valid id"),
    ];
    for (name, frame, reason) in cases {
        let mut sock = linked(&f, "dev_one", "devsec_one").await;
        send(&mut sock, &heartbeat).await;
        send(&mut sock, &frame).await;
        let (code, why) = close_of(&mut sock).await;
        assert_eq!(code, relay::close::POLICY, "{name}: {why}");
        assert!(why.contains(reason), "{name}: {why}");
    }
    let mut sock = linked(&f, "dev_one", "devsec_one").await;
    let huge = with(json!({"kind": "tool_result", "request_id": "r1", "served_at_ms": 1, "result": {"text": "x".repeat(relay::MAX_EDGE_INBOUND)}}));
    send(&mut sock, &huge).await;
    assert_eq!(close_of(&mut sock).await.0, relay::close::TOO_BIG);
    let mut sock = linked(&f, "dev_one", "devsec_one").await;
    sock.send(Message::Binary(vec![0].into())).await.unwrap();
    assert_eq!(close_of(&mut sock).await.0, relay::close::UNSUPPORTED_DATA);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_link_per_workstation_and_revocation() {
    let f = fixture().await;
    let mut old = linked(&f, "dev_one", "devsec_one").await;
    let first_id = f.hub.link("dev_one").unwrap().conn_id;
    let mut new = linked(&f, "dev_one", "devsec_one").await;
    assert_eq!(close_of(&mut old).await.0, relay::close::SUPERSEDED);
    assert_ne!(f.hub.link("dev_one").unwrap().conn_id, first_id);

    // A revocation seen by the registry reaches a live link at its next heartbeat.
    f.devices.set_authorization("dev_one", "revoked");
    send(&mut new, &json!({"protocol_version": 1, "kind": "heartbeat", "workstation_id": "dev_one", "boot_id": "b", "sent_at_ms": 1, "active_requests": 0})).await;
    assert_eq!(close_of(&mut new).await, (relay::close::DEVICE_REVOKED, "device revoked".to_string()));
    // Even if the registry flips back, the tombstone holds.
    f.devices.set_authorization("dev_one", "active");
    let (status, body) = open(&f, "dev_one", Some(&offer("devsec_one")), None).await.err().unwrap();
    assert_eq!((status, body["code"].as_str()), (401, Some("device_revoked")));

    // A direct revocation notice closes at once.
    let mut two = linked(&f, "dev_two", "devsec_two").await;
    f.hub.revoke("dev_two");
    assert_eq!(close_of(&mut two).await.0, relay::close::DEVICE_REVOKED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspension_and_rekey_close_live_links_but_leave_no_tombstone() {
    let f = fixture().await;
    let (_, tokens, _) = f.edge.tokens().await;
    let mut sock = linked(&f, "dev_one", "devsec_one").await;
    // Nothing changed: a re-check closes nothing.
    assert_eq!(f.hub.recheck(), Ok(0));

    f.devices.set_authorization("dev_one", "suspended");
    assert_eq!(f.hub.recheck(), Ok(1));
    assert_eq!(close_of(&mut sock).await, (relay::close::DEVICE_REVOKED, "device suspended".to_string()));
    let (status, body) = open(&f, "dev_one", Some(&offer("devsec_one")), None).await.err().unwrap();
    assert_eq!((status, body["code"].as_str()), (401, Some("device_suspended")));
    let routed = f.edge.http.mcp(&tokens.access, "tools/call", json!({"name": "herdr_inspect", "arguments": {"device": "dev_one"}})).await.json();
    assert_eq!(routed["result"]["structuredContent"]["code"], "device_suspended", "{routed}");

    // Resumed, the same credential links again: a suspension is not a tombstone.
    f.devices.set_authorization("dev_one", "active");
    let mut sock = linked(&f, "dev_one", "devsec_one").await;
    // Re-keyed (a pairing recovered the device): the link holding the old credential goes.
    f.devices.set_credential("dev_one", Some("cred_new"));
    assert_eq!(f.hub.recheck(), Ok(1));
    assert_eq!(close_of(&mut sock).await, (relay::close::DEVICE_REVOKED, "device credential replaced".to_string()));
    assert!(f.hub.link("dev_one").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offered_device_names_are_checked_before_the_upgrade() {
    use base64::Engine;
    let f = fixture().await;
    let b64 = |s: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
    let header = herdr_mcp::edge::link_hub_auth::NAME_HEADER;
    let too_long = b64("n".repeat(65).as_bytes());
    for (why, value) in [("not base64url", "%%%".to_string()), ("not UTF-8", b64(&[0xff, 0xfe])), ("65 characters", too_long), ("empty", String::new())] {
        let (status, body) = open_with(&f, "dev_one", Some(&offer("devsec_one")), None, &[(header, &value)]).await.err().unwrap();
        assert_eq!((status, body["code"].as_str()), (400, Some("invalid_device_name")), "{why}: {body}");
    }
    // 64 characters is the longest name and links.
    let longest = b64("n".repeat(64).as_bytes());
    let mut sock = open_with(&f, "dev_one", Some(&offer("devsec_one")), None, &[(header, &longest)]).await.expect("upgrade");
    send(&mut sock, &hello("dev_one")).await;
    assert_eq!(next_text(&mut sock).await["ok"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarded_answers_errors_timeouts_and_limits() {
    let f = fixture().await;
    let (_, tokens, _) = f.edge.tokens().await;
    let call = |args: Value| {
        let http = f.edge.http.clone();
        let access = tokens.access.clone();
        async move { http.mcp(&access, "tools/call", args).await.json() }
    };

    // Enrolled but not linked: offline after the reconnect grace, safe to retry.
    let off = call(json!({"name": "herdr_inspect", "arguments": {"device": "one"}})).await;
    let sc = &off["result"]["structuredContent"];
    assert_eq!((sc["code"].as_str(), sc["retryable"].as_bool(), sc["delivery_state"].as_str()), (Some("workstation_offline"), Some(true), Some("not_delivered")), "{off}");
    assert_eq!(sc["recovery"]["probe_tool"], "herdr_inspect");

    let mut sock = linked(&f, "dev_one", "devsec_one").await;
    // The device selector is stripped; refs are unwrapped; the workstation answers.
    let pending = tokio::spawn(call(json!({"name": "herdr_fs_list", "arguments": {"device": "dev_one", "path": "/r"}})));
    let req = next_text(&mut sock).await;
    assert_eq!((req["kind"].as_str(), req["operation"].as_str()), (Some("tool_request"), Some("herdr_fs_list")));
    assert_eq!(req["arguments"], json!({"path": "/r"}));
    assert_eq!(req["trace"], "explicit_device");
    let text = json!({"ok": true, "entries": []}).to_string();
    send(&mut sock, &json!({"protocol_version": 1, "kind": "tool_result", "workstation_id": "dev_one", "request_id": req["request_id"], "served_at_ms": 1, "result": {"content": [{"type": "text", "text": text}]}})).await;
    let ok = pending.await.unwrap();
    assert_eq!(ok["result"]["structuredContent"], json!({"ok": true, "entries": []}), "{ok}");

    // A workstation-side error keeps its code, retryability and delivery state.
    let pending = tokio::spawn(call(json!({"name": "herdr_inspect", "arguments": {}})));
    let req = next_text(&mut sock).await;
    assert_eq!(req["trace"], "single_available_device");
    send(&mut sock, &json!({"protocol_version": 1, "kind": "tool_error", "workstation_id": "dev_one", "request_id": req["request_id"], "code": "runtime_unavailable", "message": "down", "retryable": true, "delivery_state": "not_delivered"})).await;
    let err = pending.await.unwrap();
    let sc = &err["result"]["structuredContent"];
    assert_eq!((sc["code"].as_str(), sc["retryable"].as_bool(), sc["delivery_state"].as_str()), (Some("runtime_unavailable"), Some(true), Some("not_delivered")), "{err}");

    // No answer: request_timeout after the clamped 1 s (+ slack), a cancel follows;
    // for a mutation it is not retryable and its durable row is uncertain.
    let pending = tokio::spawn(call(json!({"name": "herdr_fs_write", "arguments": {"path": "/r/x", "content": "y", "timeout_ms": 1}})));
    let req = next_text(&mut sock).await;
    assert_eq!(req["timeout_ms"], 1000);
    let cancel = next_text(&mut sock).await;
    assert_eq!((cancel["kind"].as_str(), cancel["request_id"].as_str()), (Some("cancel"), req["request_id"].as_str()));
    let late = pending.await.unwrap();
    let sc = &late["result"]["structuredContent"];
    assert_eq!((sc["code"].as_str(), sc["retryable"].as_bool(), sc["delivery_state"].as_str()), (Some("request_timeout"), Some(false), Some("delivery_unknown")), "{late}");
    let (state, outcome) = herdr_mcp::edge::forward_pending::state_of(&f.edge.store, req["request_id"].as_str().unwrap()).unwrap().unwrap();
    assert_eq!((state.as_str(), outcome.as_deref()), ("uncertain", Some("request_timeout")));

    // Arguments that cannot fit a link frame are refused before sending.
    let big = call(json!({"name": "herdr_fs_write", "arguments": {"path": "/r/x", "content": "z".repeat(relay::MAX_LINK_INBOUND)}})).await;
    let sc = &big["result"]["structuredContent"];
    assert_eq!((sc["code"].as_str(), sc["delivery_state"].as_str()), (Some("payload_too_large"), Some("not_delivered")), "{big}");
    // Bad selectors and refs.
    let bad = call(json!({"name": "herdr_inspect", "arguments": {"device": 5}})).await;
    assert_eq!(bad["result"]["structuredContent"]["code"], "invalid_params");
    let r1 = herdr_mcp::edge::forward_route::make_ref("dev_one", Some("w1"), None);
    let r2 = herdr_mcp::edge::forward_route::make_ref("dev_two", Some("w2"), None);
    let conflict = call(json!({"name": "herdr_call", "arguments": {"workspace": r1, "target": r2}})).await;
    assert_eq!(conflict["result"]["structuredContent"]["code"], "device_ref_conflict");
    let revoked = call(json!({"name": "herdr_inspect", "arguments": {"device": "gone"}})).await;
    assert_eq!(revoked["result"]["structuredContent"]["code"], "device_not_found", "revoked devices are not matched by name");
    let revoked = call(json!({"name": "herdr_inspect", "arguments": {"device": "dev_gone"}})).await;
    assert_eq!(revoked["result"]["structuredContent"]["code"], "device_revoked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_link_process_stops_on_a_wrong_credential() {
    let f = fixture().await;
    let tmp = tempfile::tempdir().unwrap();
    let secret = tmp.path().join("secret");
    std::fs::write(&secret, "devsec_wrong").unwrap();
    std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    // A stand-in runtime /health so the link gets as far as the edge.
    let socket = tmp.path().join("rt.sock");
    let (_, (epoch, hash)) = local_runtime_contract();
    let app = axum::Router::new().route(
        "/health",
        axum::routing::get(move || async move { axum::Json(json!({"version": "t", "contract": {"epoch": epoch, "hash": hash}})) }),
    );
    let listener = tokio::net::UnixListener::bind(&socket).unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.ok() });
    let issuer = f.edge.issuer.clone();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_herdr-mcp"))
            .args(["link", "--edge", &issuer, "--workstation-id", "dev_one", "--credential-file"])
            .arg(&secret)
            .arg("--socket")
            .arg(&socket)
            .env_remove("HERDR_LINK_SECRET")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("401 link_auth_failed"), "{err}");

    // A credential file others can read is refused before connecting.
    let loose = tempfile::tempdir().unwrap();
    let file = loose.path().join("secret");
    std::fs::write(&file, "devsec_one").unwrap();
    std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_herdr-mcp"))
        .args(["link", "--edge", &f.edge.issuer, "--workstation-id", "dev_one", "--credential-file"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("0600"));

    // An edge address that is not https (http only on loopback: the secret rides in
    // the upgrade) is refused at once, even with no runtime to wait for (it used to
    // wait for the runtime, retrying, before it looked).
    std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    for edge in ["ftp://edge.example", "http://edge.example"] {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_herdr-mcp"))
            .args(["link", "--edge", edge, "--workstation-id", "dev_one", "--credential-file"])
            .arg(&file)
            .arg("--socket")
            .arg(loose.path().join("no-runtime.sock"))
            .arg("--state-dir")
            .arg(loose.path().join("state"))
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("link with the edge {edge} kept running");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        assert_eq!(status.code(), Some(1), "{err}");
        assert!(err.contains(edge) && err.contains("https://"), "{err}");
    }

    // Without flags, a computer that never ran `worker connect` is told so.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_herdr-mcp"))
        .arg("link")
        .env("HERDR_MCP_DEVICE_FILE", loose.path().join("device.json"))
        .env_remove("HERDR_LINK_SECRET")
        .env_remove("HERDR_LINK_EDGE")
        .env_remove("HERDR_LINK_WORKSTATION_ID")
        .env_remove("HERDR_LINK_CREDENTIAL_FILE")
        .output()
        .unwrap();
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("worker connect"), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Late answers and resume, frame by frame: an answer after `request_timeout`
/// and one after a reconnect settle their rows (a retry with the key replays
/// them), `hello_ack` lists what is still unanswered, and a `not_delivered`
/// error frees its key so the retry is really sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_answers_resume_and_free_keys() {
    let f = fixture().await;
    let (_, tokens, _) = f.edge.tokens().await;
    let call = |args: Value| {
        let http = f.edge.http.clone();
        let access = tokens.access.clone();
        async move { http.mcp(&access, "tools/call", json!({"name": "herdr_fs_write", "arguments": args})).await.json() }
    };
    let result = |id: &Value, text: &str| {
        json!({"protocol_version": 1, "kind": "tool_result", "workstation_id": "dev_one", "request_id": id, "served_at_ms": 1,
               "result": {"content": [{"type": "text", "text": json!({"ok": true, "wrote": text}).to_string()}]}})
    };
    let state = |id: &Value| herdr_mcp::edge::forward_pending::state_of(&f.edge.store, id.as_str().unwrap()).unwrap().unwrap().0;
    let mut sock = linked(&f, "dev_one", "devsec_one").await;

    // Answered after the caller's timeout (and the cancel): the row settles late.
    let timed = json!({"path": "/r/a", "content": "a", "idempotency_key": "k-late", "timeout_ms": 1});
    let pending = tokio::spawn(call(timed.clone()));
    let first = next_text(&mut sock).await;
    assert_eq!(next_text(&mut sock).await["kind"], "cancel");
    assert_eq!(pending.await.unwrap()["result"]["structuredContent"]["code"], "request_timeout");
    send(&mut sock, &result(&first["request_id"], "a")).await;
    let settled = tokio::time::timeout(WAIT, async {
        while state(&first["request_id"]) != "settled" {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(settled.is_ok(), "the late answer settled the row");
    let replay = call(timed).await;
    assert_eq!(replay["result"]["structuredContent"], json!({"ok": true, "wrote": "a", "idempotent_replay": true}), "{replay}");

    // Sent, then the socket drops: uncertain; the next hello_ack lists it as unanswered
    // and the settled one as completed.
    let dropped = json!({"path": "/r/b", "content": "b", "idempotency_key": "k-drop"});
    let pending = tokio::spawn(call(dropped.clone()));
    let second = next_text(&mut sock).await;
    drop(sock);
    assert_eq!(pending.await.unwrap()["result"]["structuredContent"]["code"], "delivery_uncertain");
    let hub = Arc::clone(&f.hub);
    tokio::time::timeout(WAIT, async move {
        while hub.link("dev_one").is_some() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the dropped link unregistered");
    let mut sock = open(&f, "dev_one", Some(&offer("devsec_one")), None).await.expect("upgrade");
    send(&mut sock, &hello("dev_one")).await;
    let ack = next_text(&mut sock).await;
    let resume = ack["resume"].as_array().expect("resume").clone();
    assert_eq!(resume.len(), 1, "{ack}");
    assert_eq!((resume[0]["request_id"].clone(), resume[0]["operation"].as_str(), resume[0]["state"].as_str()), (second["request_id"].clone(), Some("herdr_fs_write"), Some("sent")));
    assert!(resume[0]["deadline_ms"].as_u64().unwrap() > 0);
    assert_eq!(ack["completed"], json!([first["request_id"]]));
    send(&mut sock, &result(&second["request_id"], "b")).await;
    let replay = tokio::time::timeout(WAIT, async {
        loop {
            let r = call(dropped.clone()).await;
            if r["result"]["structuredContent"]["idempotent_replay"] == true {
                return r;
            }
            assert_eq!(r["result"]["structuredContent"]["code"], "delivery_uncertain", "{r}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the resumed answer settled the row");
    assert_eq!(replay["result"]["structuredContent"]["wrote"], "b");

    // The workstation never got it: the key is free, and the retry is sent anew.
    let refused = json!({"path": "/r/c", "content": "c", "idempotency_key": "k-free"});
    let pending = tokio::spawn(call(refused.clone()));
    let third = next_text(&mut sock).await;
    send(&mut sock, &json!({"protocol_version": 1, "kind": "tool_error", "workstation_id": "dev_one", "request_id": third["request_id"], "code": "runtime_unavailable", "retryable": true, "delivery_state": "not_delivered"})).await;
    assert_eq!(pending.await.unwrap()["result"]["structuredContent"]["code"], "runtime_unavailable");
    let pending = tokio::spawn(call(refused));
    let again = next_text(&mut sock).await;
    assert_eq!(again["kind"], "tool_request");
    assert_ne!(again["request_id"], third["request_id"]);
    send(&mut sock, &result(&again["request_id"], "c")).await;
    assert_eq!(pending.await.unwrap()["result"]["structuredContent"]["wrote"], "c");
    assert_eq!(state(&third["request_id"]), "not_delivered");
}

/// Spec §8: a link silent for more than 45 s is shown `stale` in herdr_devices,
/// and its next frame makes it `online` again. Silence is measured on the edge's
/// clock, which this edge runs by hand.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_link_turns_stale_after_45_s_and_a_heartbeat_revives_it() {
    let f = fixture().await;
    let (_, t, _) = f.edge.tokens().await;
    let mut sock = linked(&f, "dev_one", "devsec_one").await;
    let device = || async {
        let r = f.edge.http.mcp(&t.access, "tools/call", json!({"name": "herdr_devices", "arguments": {}})).await.json();
        let rows = r["result"]["structuredContent"]["devices"].as_array().cloned().unwrap_or_default();
        rows.into_iter().find(|d| d["device_id"] == "dev_one").expect("dev_one listed")
    };
    assert_eq!(device().await["connection"], "online");
    let stale_after = herdr_mcp::edge::link_hub::STALE_AFTER;
    assert_eq!(stale_after, Duration::from_secs(45));
    // Still online at exactly the limit …
    f.edge.clock.advance_ms(stale_after.as_millis() as i64);
    let at_limit = device().await;
    assert_eq!((at_limit["connection"].as_str(), at_limit["last_seen_ago_ms"].as_u64()), (Some("online"), Some(45_000)), "{at_limit}");
    // … stale one millisecond past it (the socket stays open: stale is not offline).
    f.edge.clock.advance_ms(1);
    assert_eq!(device().await["connection"], "stale");
    send(&mut sock, &json!({"protocol_version": 1, "kind": "heartbeat", "workstation_id": "dev_one", "boot_id": "boot-1", "sent_at_ms": 1, "active_requests": 0})).await;
    let hub = Arc::clone(&f.hub);
    tokio::time::timeout(WAIT, async {
        while hub.link("dev_one").is_some_and(|c| c.silent_for(hub.now_ms()) > Duration::ZERO) {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the heartbeat was heard");
    assert_eq!(device().await["connection"], "online");
}
