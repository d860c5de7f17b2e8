//! Issue 30: what a frame or a call costs the edge does not grow with the fleet.
//! The edge's registry is wrapped in a [`Counting`] authenticator that counts
//! every read of the whole fleet (`list_devices`): heartbeats, status frames and
//! forwarded calls must not make any, yet still see changes (a suspension, a
//! rename); past its link cap the edge refuses a new link with close 1013 and a
//! log line while `/health`, `/mcp` and the links it holds go on.

mod edge_support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use edge_support::Http;
use futures::{SinkExt, StreamExt};
use herdr_mcp::edge::clock::ManualClock;
use herdr_mcp::edge::devices::{DeviceRegistry, Enrolled};
use herdr_mcp::edge::forward::{LinkRouter, local_runtime_contract};
use herdr_mcp::edge::link_hub::{LinkHub, live_fields};
use herdr_mcp::edge::link_hub_auth::{DeviceInfo, LinkAuthError, LinkAuthenticator, auth_subprotocol};
use herdr_mcp::edge::relay;
use herdr_mcp::edge::store::EdgeStore;
use herdr_mcp::edge::{EdgeConfig, EdgeState};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(15);

/// The edge's own registry, counting the reads of the whole fleet.
struct Counting {
    inner: Arc<DeviceRegistry>,
    lists: AtomicUsize,
}

impl Counting {
    fn lists(&self) -> usize {
        self.lists.load(Ordering::SeqCst)
    }
}

impl LinkAuthenticator for Counting {
    fn verify_link(&self, ws: &str, secret: &str) -> Result<DeviceInfo, LinkAuthError> {
        LinkAuthenticator::verify_link(self.inner.as_ref(), ws, secret)
    }
    fn list_devices(&self) -> Result<Vec<DeviceInfo>, String> {
        self.lists.fetch_add(1, Ordering::SeqCst);
        LinkAuthenticator::list_devices(self.inner.as_ref())
    }
    fn device_by_workstation(&self, ws: &str) -> Result<Option<DeviceInfo>, String> {
        LinkAuthenticator::device_by_workstation(self.inner.as_ref(), ws)
    }
    fn device_by_id(&self, id: &str) -> Result<Option<DeviceInfo>, String> {
        LinkAuthenticator::device_by_id(self.inner.as_ref(), id)
    }
    fn devices_named(&self, name: &str) -> Result<Vec<DeviceInfo>, String> {
        LinkAuthenticator::devices_named(self.inner.as_ref(), name)
    }
    fn devices_once_named(&self, name: &str) -> Result<Vec<DeviceInfo>, String> {
        LinkAuthenticator::devices_once_named(self.inner.as_ref(), name)
    }
    fn routable_devices(&self, limit: usize) -> Result<Vec<DeviceInfo>, String> {
        LinkAuthenticator::routable_devices(self.inner.as_ref(), limit)
    }
    fn registry_generation(&self) -> Result<Option<i64>, String> {
        LinkAuthenticator::registry_generation(self.inner.as_ref())
    }
    fn offer_name(&self, device: &DeviceInfo, name: &str) -> Result<String, String> {
        LinkAuthenticator::offer_name(self.inner.as_ref(), device, name)
    }
    fn record_seen(&self, ws: &str, at_ms: i64) -> Result<(), String> {
        LinkAuthenticator::record_seen(self.inner.as_ref(), ws, at_ms)
    }
}

struct Edge {
    http: Http,
    issuer: String,
    store: Arc<EdgeStore>,
    devices: Arc<DeviceRegistry>,
    counting: Arc<Counting>,
    hub: Arc<LinkHub>,
    shutdown: CancellationToken,
    _tmp: tempfile::TempDir,
}

impl Drop for Edge {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl Edge {
    /// An edge as `edge serve` builds it (registry-authenticated links, the
    /// real router), without the registry watcher: what a heartbeat sees is
    /// then its own doing.
    async fn start() -> Edge {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("edge");
        EdgeStore::init(&dir).unwrap();
        let store = Arc::new(EdgeStore::open(&dir, Arc::new(ManualClock::new(1_800_000_000_000))).unwrap());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let issuer = format!("http://{}", listener.local_addr().unwrap());
        let devices = Arc::new(DeviceRegistry::new(Arc::clone(&store)));
        let counting = Arc::new(Counting { inner: Arc::clone(&devices), lists: AtomicUsize::new(0) });
        let (catalog, contract) = local_runtime_contract();
        let hub = LinkHub::new(Arc::clone(&counting) as Arc<dyn LinkAuthenticator>, contract, Arc::clone(&store));
        let router = Arc::new(LinkRouter::new(Arc::clone(&hub), Arc::clone(&store), catalog));
        let state = Arc::new(EdgeState {
            config: EdgeConfig::new(&issuer).unwrap(),
            store: Arc::clone(&store),
            router,
            devices: Arc::clone(&devices),
            allow_loopback_cimd: false,
            limits: Default::default(),
        });
        let shutdown = CancellationToken::new();
        let stop = shutdown.clone();
        let app = herdr_mcp::edge::http::router_with_links(state, Some(Arc::clone(&hub)));
        tokio::spawn(async move {
            let app = app.into_make_service_with_connect_info::<herdr_mcp::edge::ratelimit::PeerAddr>();
            axum::serve(listener, app).with_graceful_shutdown(stop.cancelled_owned()).await.ok();
        });
        Edge { http: Http::new(&issuer), issuer, store, devices, counting, hub, shutdown, _tmp: tmp }
    }

    fn enroll(&self, name: &str) -> Enrolled {
        let p = self.devices.create_pairing(None, None, "test").unwrap();
        self.devices.consume_pairing(&p.pairing_id, &p.code, Some(name)).unwrap()
    }

    /// `n` more devices nobody links: the fleet a per-frame read would walk.
    fn enroll_fleet(&self, n: usize) {
        for i in 0..n {
            self.enroll(&format!("fleet-{i}"));
        }
    }

    async fn call(&self, token: &str, tool: &str, arguments: Value) -> Value {
        let r = self.http.mcp(token, "tools/call", json!({"name": tool, "arguments": arguments})).await;
        assert_eq!(r.status, 200, "{}", r.body);
        r.json()["result"]["structuredContent"].clone()
    }

    /// The `link_active_requests` the hub holds for `ws` (what its last
    /// heartbeat or status said), read without touching the registry.
    fn reported_active(&self, ws: &str) -> Option<u64> {
        let conn = self.hub.link(ws)?;
        live_fields(Some(&conn), None, self.hub.now_ms())["link_active_requests"].as_u64()
    }
}

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

/// A protocol-exact link held by the test: it answers every `tool_request`
/// with a result naming its workstation, sends what the test queues, and
/// reports how the edge closed it.
struct Link {
    ws: String,
    out: mpsc::UnboundedSender<Value>,
    closed: Arc<Mutex<Option<(u16, String)>>>,
    /// Dropping the link ends its task, and so its socket.
    task: tokio::task::AbortHandle,
}

impl Drop for Link {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Link {
    fn send(&self, frame: Value) {
        self.out.send(frame).unwrap();
    }
    fn heartbeat(&self, active: u32) {
        self.send(json!({"protocol_version": 1, "kind": "heartbeat", "workstation_id": self.ws, "boot_id": "b1",
                         "sent_at_ms": 1, "active_requests": active}));
    }
    fn status(&self, active: u32) {
        self.send(json!({"protocol_version": 1, "kind": "status", "workstation_id": self.ws, "healthy": true,
                         "active_requests": active}));
    }
    fn close_frame(&self) -> Option<(u16, String)> {
        self.closed.lock().unwrap().clone()
    }
}

/// Opens `/ws/<ws>`: the first frame the edge sends back (after an upgrade).
async fn open(
    edge: &Edge,
    ws: &str,
    secret: &str,
) -> tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>> {
    let url = format!("{}/ws/{ws}", edge.issuer.replace("http://", "ws://"));
    let mut req = url.into_client_request().unwrap();
    let offer = format!("{}, {}", relay::SUBPROTOCOL, auth_subprotocol(secret));
    req.headers_mut().insert("sec-websocket-protocol", offer.parse().unwrap());
    let (mut sock, _) = tokio_tungstenite::connect_async(req).await.expect("upgrade");
    let (_, (epoch, hash)) = local_runtime_contract();
    let hello = json!({
        "protocol_version": 1, "kind": "hello", "workstation_id": ws, "boot_id": "b1", "link_version": "test",
        "capabilities": ["cancel"],
        "runtime": {"runtime_version": "9.9.9", "contract_epoch": epoch, "contract_hash": hash},
    });
    sock.send(Message::Text(hello.to_string().into())).await.unwrap();
    sock
}

/// Links `ws` and serves it from a task until the edge closes it.
async fn link(edge: &Edge, ws: &str, secret: &str) -> Link {
    let mut sock = open(edge, ws, secret).await;
    match tokio::time::timeout(WAIT, sock.next()).await.expect("hello_ack in time") {
        Some(Ok(Message::Text(t))) => {
            let ack: Value = serde_json::from_str(t.as_str()).unwrap();
            assert_eq!((ack["kind"].as_str(), ack["ok"].as_bool()), (Some("hello_ack"), Some(true)), "{ack}");
        }
        other => panic!("expected hello_ack, got {other:?}"),
    }
    let (out, mut queued) = mpsc::unbounded_channel::<Value>();
    let closed = Arc::new(Mutex::new(None));
    let (ws_id, seen) = (ws.to_string(), Arc::clone(&closed));
    let task = tokio::spawn(async move {
        loop {
            tokio::select! {
                Some(frame) = queued.recv() => {
                    if sock.send(Message::Text(frame.to_string().into())).await.is_err() {
                        break;
                    }
                }
                msg = sock.next() => match msg {
                    Some(Ok(Message::Text(t))) => {
                        let f: Value = serde_json::from_str(t.as_str()).unwrap();
                        if f["kind"] == "tool_request" {
                            let text = json!({"ok": true, "served_by": ws_id, "operation": f["operation"]}).to_string();
                            let answer = json!({"protocol_version": 1, "kind": "tool_result", "workstation_id": ws_id,
                                "request_id": f["request_id"], "served_at_ms": 1,
                                "result": {"content": [{"type": "text", "text": text}]}});
                            if sock.send(Message::Text(answer.to_string().into())).await.is_err() {
                                break;
                            }
                        }
                    }
                    Some(Ok(Message::Close(f))) => {
                        *seen.lock().unwrap() = Some(f.map(|f| (u16::from(f.code), f.reason.to_string())).unwrap_or((0, String::new())));
                        break;
                    }
                    Some(Ok(_)) => {}
                    _ => break,
                },
            }
        }
    })
    .abort_handle();
    let hub = Arc::clone(&edge.hub);
    until("the link to register", || hub.link(ws).is_some()).await;
    Link { ws: ws.to_string(), out, closed, task }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_and_status_frames_read_one_device_only_when_the_registry_moved() {
    let edge = Edge::start().await;
    let alpha = edge.enroll("alpha");
    let other = edge.enroll("other");
    edge.enroll_fleet(40);
    let ws = alpha.device.workstation_id.clone();
    let l = link(&edge, &ws, &alpha.device_secret).await;
    let before = edge.counting.lists();

    // 20 heartbeats and 20 status frames: all observed, none reads the fleet.
    for n in 1..=20 {
        l.heartbeat(n);
    }
    until("20 heartbeats", || edge.reported_active(&ws) == Some(20)).await;
    for n in 21..=40 {
        l.status(n);
    }
    until("20 status frames", || edge.reported_active(&ws) == Some(40)).await;
    assert_eq!(edge.counting.lists() - before, 0, "heartbeats and status frames must not list the fleet");

    // Another device changes (the generation moves): the next heartbeat reads
    // alpha's own row, finds it still admitted, and the link stays.
    edge.devices.suspend(&other.device.device_id, "test").unwrap();
    l.heartbeat(41);
    until("the heartbeat after the change", || edge.reported_active(&ws) == Some(41)).await;
    assert!(edge.hub.link(&ws).is_some() && l.close_frame().is_none());

    // Alpha itself is suspended behind the hub's back (no watcher runs here):
    // its next heartbeat closes its link with 4401, still without a fleet read.
    edge.devices.suspend(&alpha.device.device_id, "test").unwrap();
    l.heartbeat(42);
    until("alpha's link to be closed", || l.close_frame().is_some()).await;
    let (code, reason) = l.close_frame().unwrap();
    assert_eq!((code, reason.as_str()), (relay::close::DEVICE_REVOKED, "device suspended"));
    assert!(edge.hub.link(&ws).is_none());
    assert_eq!(edge.counting.lists() - before, 0, "a change is seen through one indexed read");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarded_call_finds_its_device_by_id_name_or_earlier_name_without_listing_the_fleet() {
    let edge = Edge::start().await;
    let alpha = edge.enroll("alpha");
    let beta = edge.enroll("beta");
    let gone = edge.enroll("gone");
    let twin1 = edge.enroll("twin");
    let twin2 = edge.enroll("twin");
    edge.enroll_fleet(40);
    edge.devices.rename(&alpha.device.device_id, "alpha-2").unwrap();
    edge.devices.rename(&gone.device.device_id, "gone-2").unwrap();
    edge.devices.revoke(&gone.device.device_id, "test").unwrap();
    let ws = alpha.device.workstation_id.clone();
    let _alpha_link = link(&edge, &ws, &alpha.device_secret).await;
    let token = edge.http.approved_bearer(&edge.store).await;
    let before = edge.counting.lists();

    let served = |v: &Value| v["served_by"].as_str().map(str::to_string);
    for device in [json!(alpha.device.device_id), json!("alpha-2"), json!("alpha"), Value::Null] {
        let mut args = json!({"path": "README.md"});
        if !device.is_null() {
            args["device"] = device.clone();
        }
        let v = edge.call(&token, "herdr_fs_read", args).await;
        assert_eq!(served(&v).as_deref(), Some(ws.as_str()), "device {device}: {v}");
    }
    // The refusals are the same as ever.
    let code = |v: Value| v["code"].as_str().map(str::to_string);
    let v = edge.call(&token, "herdr_fs_read", json!({"device": "nobody", "path": "x"})).await;
    assert_eq!(code(v).as_deref(), Some("device_not_found"));
    let v = edge.call(&token, "herdr_fs_read", json!({"device": "twin", "path": "x"})).await;
    assert_eq!(code(v.clone()).as_deref(), Some("device_ambiguous"), "{v}");
    assert!(v.to_string().contains(&twin1.device.device_id) && v.to_string().contains(&twin2.device.device_id), "{v}");
    let v = edge.call(&token, "herdr_fs_read", json!({"device": gone.device.device_id, "path": "x"})).await;
    assert_eq!(code(v).as_deref(), Some("device_revoked"));
    // A revoked device's earlier name routes nowhere.
    let v = edge.call(&token, "herdr_fs_read", json!({"device": "gone", "path": "x"})).await;
    assert_eq!(code(v).as_deref(), Some("device_not_found"));
    // beta is enrolled but offline: named, it is offline.
    let v = edge.call(&token, "herdr_fs_read", json!({"device": "beta", "path": "x"})).await;
    assert_eq!(code(v).as_deref(), Some("workstation_offline"), "{}", beta.device.device_id);
    assert_eq!(edge.counting.lists() - before, 0, "forwarded calls must not list the fleet");

    // A token bound to alpha sees alpha's row only, read by id.
    let issued = herdr_mcp::edge::automation::create(&edge.store, "bench", &alpha.device.device_id).unwrap();
    let resource = format!("{}/mcp", edge.issuer);
    let tok = edge
        .http
        .post_form(
            "/oauth/token",
            &[
                ("grant_type", "client_credentials"),
                ("client_id", &issued.client.client_id),
                ("client_secret", &issued.client_secret),
                ("resource", &resource),
            ],
        )
        .await
        .json();
    let bound = tok["access_token"].as_str().expect("an automation token").to_string();
    let v = edge.call(&bound, "herdr_devices", json!({})).await;
    let rows = v["devices"].as_array().cloned().unwrap_or_default();
    assert_eq!(rows.len(), 1, "{v}");
    assert_eq!((rows[0]["device_id"].as_str(), rows[0]["connection"].as_str()), (Some(ws.as_str()), Some("online")));
    let v = edge.call(&bound, "herdr_fs_read", json!({"path": "x"})).await;
    assert_eq!(served(&v).as_deref(), Some(ws.as_str()), "{v}");
    assert_eq!(edge.counting.lists() - before, 0, "a bound token's calls and its herdr_devices must not list the fleet");

    // The inventory is the one place that reads it, once per answer.
    let before = edge.counting.lists();
    let v = edge.call(&token, "herdr_devices", json!({})).await;
    assert_eq!(v["devices"].as_array().map(Vec::len), Some(45));
    assert_eq!(edge.counting.lists() - before, 1);
}

/// The log lines of this test binary, for the one test that reads them.
fn captured_logs() -> Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&logs);
        let writer = move || Writer(Arc::clone(&sink));
        let _ = tracing_subscriber::fmt()
            .with_writer(writer)
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .try_init();
        logs
    })
    .clone()
}

struct Writer(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Writer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_its_link_cap_the_edge_refuses_new_links_and_keeps_serving_the_ones_it_has() {
    let logs = captured_logs();
    let edge = Edge::start().await;
    edge.hub.set_max_links(2);
    let (a, b, c) = (edge.enroll("a"), edge.enroll("b"), edge.enroll("c"));
    let (wa, wb, wc) =
        (a.device.workstation_id.clone(), b.device.workstation_id.clone(), c.device.workstation_id.clone());
    let _la = link(&edge, &wa, &a.device_secret).await;
    let lb = link(&edge, &wb, &b.device_secret).await;

    // A third workstation: upgraded, then closed with 1013 and why.
    let mut third = open(&edge, &wc, &c.device_secret).await;
    let first = tokio::time::timeout(WAIT, third.next()).await.expect("an answer in time");
    let Some(Ok(Message::Close(Some(f)))) = first else { panic!("expected a close, got {first:?}") };
    assert_eq!(u16::from(f.code), relay::close::TRY_AGAIN_LATER);
    assert!(f.reason.starts_with("edge_capacity_exceeded") && f.reason.contains("2 links"), "{}", f.reason);
    assert!(edge.hub.link(&wc).is_none());
    assert_eq!((edge.hub.link_count(), edge.hub.refused_at_cap()), (2, 1));
    let log = String::from_utf8_lossy(&logs.lock().unwrap()).to_string();
    assert!(log.contains("link refused") && log.contains(&wc) && log.contains("max_links=2"), "{log}");

    // The edge goes on: /health, and calls to the links it holds.
    assert_eq!(edge.http.get("/health").await.status, 200);
    let token = edge.http.approved_bearer(&edge.store).await;
    let v = edge.call(&token, "herdr_fs_read", json!({"device": "a", "path": "x"})).await;
    assert_eq!(v["served_by"].as_str(), Some(wa.as_str()), "{v}");

    // A held workstation may replace its own link at the cap.
    let _la2 = link(&edge, &wa, &a.device_secret).await;
    let v = edge.call(&token, "herdr_fs_read", json!({"device": "a", "path": "x"})).await;
    assert_eq!(v["served_by"].as_str(), Some(wa.as_str()), "{v}");

    // Room again once a link ends.
    drop(lb);
    let hub = Arc::clone(&edge.hub);
    until("b's slot to be given back", || hub.link(&wb).is_none()).await;
    let mut admitted = None;
    for _ in 0..200 {
        let mut s = open(&edge, &wc, &c.device_secret).await;
        if let Some(Ok(Message::Text(t))) = tokio::time::timeout(WAIT, s.next()).await.expect("an answer") {
            admitted = Some(serde_json::from_str::<Value>(t.as_str()).unwrap());
            break;
        }
        // The revoked link's socket task may not have ended yet.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let ack = admitted.expect("c admitted once there is room");
    assert_eq!((ack["kind"].as_str(), ack["ok"].as_bool()), (Some("hello_ack"), Some(true)), "{ack}");
}
