//! Not a test: the edge at fleet scale (issue 30). Starts a real `herdr-mcp edge
//! serve`, enrolls devices through its own pairing endpoints (`POST
//! /devices/pairings` with the first device's credential, then `POST
//! /devices/pairings/consume`), and holds one link per device with a small
//! protocol-exact client: hello with the runtime contract and the `status`
//! capability, a heartbeat every 30 s (spread over the period), answers to the
//! edge's status queries and pings. Device 0 is a real workstation instead: a
//! `herdr-mcp serve` runtime and a `herdr-mcp link`.
//!
//! For each N (default 1, 1000, 5000, 10000; `-- --links 1,1000`), growing one
//! fleet: the edge's CPU while idle (over one heartbeat period), its RSS,
//! `herdr_devices` latency, and `herdr_fs_read` of a 4 KiB file through the edge
//! to device 0 by 16 clients. Once, at N = 1: the same reads straight on the
//! runtime's socket, for the through-edge/direct ratio and the workstation's CPU
//! per call both ways (runtime + link against runtime alone).
//!
//! `cargo bench -p herdr-mcp --profile edge-bench --bench edge_fleet [-- --links 1,1000 --idle-seconds 30 --seconds 5]`

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use herdr_mcp::edge::forward::local_runtime_contract;
use herdr_mcp::edge::link_hub_auth::auth_subprotocol;
use herdr_mcp::edge::relay;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

const BIN: &str = env!("CARGO_BIN_EXE_herdr-mcp");
const CLIENTS: usize = 16;
const HEARTBEAT: Duration = Duration::from_secs(30);

struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn arg<T: std::str::FromStr>(name: &str) -> Option<T> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok())
}

fn command(home: &Path) -> Command {
    let mut c = Command::new(BIN);
    c.env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_STATE_HOME", home.join("state"))
        .env("HERDR_MCP_LOG", "warn")
        .env_remove("HERDR_MCP_TOKEN");
    c
}

/// (user + system CPU seconds, RSS KiB) of `pid`.
fn usage(pid: u32) -> (f64, u64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit_once(')').map(|(_, r)| r.split_whitespace().collect()).unwrap_or_default();
    let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let cpu = fields.get(11).and_then(|u| u.parse::<f64>().ok()).unwrap_or(0.0)
        + fields.get(12).and_then(|s| s.parse::<f64>().ok()).unwrap_or(0.0);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    (cpu / tick, rss)
}

fn cpu(pids: &[u32]) -> f64 {
    pids.iter().map(|p| usage(*p).0).sum()
}

struct Http {
    client: reqwest::Client,
    base: String,
}

impl Http {
    async fn post(&self, path: &str, body: &Value, headers: &[(&str, &str)]) -> (u16, Value) {
        let mut rb = self
            .client
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body.to_string());
        for (k, v) in headers {
            rb = rb.header(*k, *v);
        }
        let r = rb.send().await.expect("request");
        let status = r.status().as_u16();
        let text = r.text().await.unwrap_or_default();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    async fn form(&self, path: &str, pairs: &[(&str, &str)]) -> Value {
        let body = serde_urlencoded::to_string(pairs).unwrap();
        let r = self
            .client
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .expect("request");
        serde_json::from_str(&r.text().await.unwrap_or_default()).unwrap_or(Value::Null)
    }

    async fn tool(&self, token: &str, name: &str, args: Value) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": args}});
        let (status, v) = self.post("/mcp", &body, &[("authorization", &format!("Bearer {token}"))]).await;
        assert_eq!(status, 200, "{v}");
        v["result"].clone()
    }
}

#[derive(Clone)]
struct Device {
    id: String,
    secret: String,
}

/// Enrolls one device through the pairing endpoints, `admin` creating the pairing.
async fn enroll(http: &Http, admin: &Device, name: &str) -> Device {
    let auth = format!("Bearer {}", admin.secret);
    let (s, p) =
        http.post("/devices/pairings", &json!({"ttl_seconds": 600}), &[("authorization", &auth), ("x-herdr-workstation", &admin.id)]).await;
    assert_eq!(s, 200, "{p}");
    consume(http, p["pairing_id"].as_str().unwrap(), p["code"].as_str().unwrap(), name).await
}

async fn consume(http: &Http, pairing_id: &str, code: &str, name: &str) -> Device {
    let (s, d) = http.post("/devices/pairings/consume", &json!({"pairing_id": pairing_id, "code": code, "name": name}), &[]).await;
    assert_eq!(s, 200, "{d}");
    Device { id: d["workstation_id"].as_str().unwrap().into(), secret: d["device_secret"].as_str().unwrap().into() }
}

/// One held link, as the real link speaks it; returns once admitted, then runs
/// until the process ends.
async fn hold_link(
    base: String,
    d: Device,
    phase: Duration,
    up: Arc<AtomicUsize>,
    status_answers: Arc<AtomicU64>,
    permit: tokio::sync::OwnedSemaphorePermit,
) {
    let url = format!("{}/ws/{}", base.replace("http://", "ws://"), d.id);
    let mut req = url.into_client_request().unwrap();
    let offer = format!("{}, {}", relay::SUBPROTOCOL, auth_subprotocol(&d.secret));
    req.headers_mut().insert("sec-websocket-protocol", offer.parse().unwrap());
    // Small buffers, so the bench's own memory stays out of the way.
    let config = WebSocketConfig::default().read_buffer_size(4096).write_buffer_size(0);
    let (mut sock, _) = loop {
        match tokio_tungstenite::connect_async_with_config(req.clone(), Some(config), true).await {
            Ok(pair) => break pair,
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    };
    let (_, (epoch, hash)) = local_runtime_contract();
    let runtime = json!({"runtime_version": "bench", "runtime_generation": "g1", "contract_epoch": epoch, "contract_hash": hash});
    let hello = json!({"protocol_version": 1, "kind": "hello", "workstation_id": d.id, "boot_id": "bench", "link_version": "bench",
                       "capabilities": ["cancel", "status"], "runtime": runtime});
    sock.send(Message::Text(hello.to_string().into())).await.unwrap();
    match sock.next().await {
        Some(Ok(Message::Text(t))) if t.as_str().contains("\"ok\":true") => {}
        other => {
            eprintln!("link {} not admitted: {other:?}", d.id);
            return;
        }
    }
    up.fetch_add(1, Ordering::SeqCst);
    // At most 64 handshakes at once; this one is done.
    drop(permit);
    let started = Instant::now();
    let mut beat = tokio::time::interval_at(tokio::time::Instant::now() + phase, HEARTBEAT);
    loop {
        tokio::select! {
            _ = beat.tick() => {
                let hb = json!({"protocol_version": 1, "kind": "heartbeat", "workstation_id": d.id, "boot_id": "bench",
                                "sent_at_ms": 1, "link_uptime_ms": started.elapsed().as_millis() as u64, "active_requests": 0,
                                "runtime": runtime});
                if sock.send(Message::Text(hb.to_string().into())).await.is_err() { break; }
            }
            msg = sock.next() => match msg {
                Some(Ok(Message::Text(t))) => {
                    let f: Value = serde_json::from_str(t.as_str()).unwrap_or(Value::Null);
                    if f["kind"] == "status" && f["query"] == true {
                        let s = json!({"protocol_version": 1, "kind": "status", "workstation_id": d.id, "boot_id": "bench",
                                       "runtime": runtime, "healthy": true, "active_requests": 0,
                                       "link_uptime_ms": started.elapsed().as_millis() as u64, "sent_at_ms": 1});
                        if sock.send(Message::Text(s.to_string().into())).await.is_err() { break; }
                        status_answers.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Some(Ok(_)) => {}
                _ => break,
            },
        }
    }
    up.fetch_sub(1, Ordering::SeqCst);
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize].as_secs_f64() * 1000.0
}

/// `herdr_devices` `n` times, one after another: (p50, p99) in ms.
async fn devices_latency(http: &Http, token: &str, n: usize) -> (f64, f64, usize) {
    let mut times = Vec::with_capacity(n);
    let mut rows = 0;
    for _ in 0..n {
        let t = Instant::now();
        let v = http.tool(token, "herdr_devices", json!({})).await;
        times.push(t.elapsed());
        rows = v["structuredContent"]["devices"].as_array().map(Vec::len).unwrap_or(0);
    }
    times.sort();
    (pct(&times, 0.5), pct(&times, 0.99), rows)
}

/// `GET /devices` (the whole inventory, as `herdr_devices` for a connector
/// builds it) `n` times with `me`'s credential: (p50, p99) in ms and the rows.
async fn inventory_latency(http: &Http, me: &Device, n: usize) -> (f64, f64, usize) {
    let mut times = Vec::with_capacity(n);
    let mut rows = 0;
    for _ in 0..n {
        let t = Instant::now();
        let r = http
            .client
            .get(format!("{}/devices", http.base))
            .header("authorization", format!("Bearer {}", me.secret))
            .header("x-herdr-workstation", &me.id)
            .send()
            .await
            .expect("GET /devices");
        let text = r.text().await.unwrap_or_default();
        times.push(t.elapsed());
        rows = serde_json::from_str::<Value>(&text).ok().and_then(|v| v["devices"].as_array().map(Vec::len)).unwrap_or(0);
    }
    times.sort();
    (pct(&times, 0.5), pct(&times, 0.99), rows)
}

/// Runs `call` from [`CLIENTS`] tasks for `seconds`: (calls/s, p50 ms, errors).
async fn throughput<F, Fut>(seconds: f64, call: F) -> (f64, f64, usize)
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = bool> + Send,
{
    let call = Arc::new(call);
    let stop = Instant::now() + Duration::from_secs_f64(seconds);
    let start = Instant::now();
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let call = Arc::clone(&call);
            tokio::spawn(async move {
                let (mut times, mut errors) = (Vec::new(), 0);
                while Instant::now() < stop {
                    let t = Instant::now();
                    if call(i).await {
                        times.push(t.elapsed());
                    } else {
                        errors += 1;
                    }
                }
                (times, errors)
            })
        })
        .collect();
    let (mut all, mut errors) = (Vec::new(), 0);
    for t in tasks {
        let (times, e) = t.await.unwrap();
        all.extend(times);
        errors += e;
    }
    let elapsed = start.elapsed().as_secs_f64();
    all.sort();
    (all.len() as f64 / elapsed, pct(&all, 0.5), errors)
}

/// One keep-alive HTTP/1.1 connection to the runtime's Unix socket per client.
async fn unix_sender(socket: &Path) -> hyper::client::conn::http1::SendRequest<Full<Bytes>> {
    let stream = tokio::net::UnixStream::connect(socket).await.unwrap();
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
    tokio::spawn(conn);
    sender
}

fn call_body(name: &str, args: Value) -> Bytes {
    Bytes::from(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": args}}).to_string())
}

async fn direct_call(sender: &tokio::sync::Mutex<hyper::client::conn::http1::SendRequest<Full<Bytes>>>, body: Bytes) -> bool {
    let mut s = sender.lock().await;
    if s.ready().await.is_err() {
        return false;
    }
    let req = http::Request::post("/mcp")
        .header("host", "localhost")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(Full::new(body))
        .unwrap();
    match s.send_request(req).await {
        Ok(r) => {
            let ok = r.status() == 200;
            let b = r.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
            ok && memchr::memmem::find(&b, b"\"isError\":true").is_none()
        }
        Err(_) => false,
    }
}

fn main() {
    // One runtime thread per core, as the bench client; the edge is its own process.
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(bench());
}

async fn bench() {
    let levels: Vec<usize> = arg::<String>("--links")
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 1000, 5000, 10000]);
    let idle_seconds: f64 = arg("--idle-seconds").unwrap_or(30.0);
    let seconds: f64 = arg("--seconds").unwrap_or(5.0);
    let max = levels.iter().copied().max().unwrap_or(1);
    let home = tempfile::Builder::new().prefix("hef").tempdir_in("/tmp").unwrap();
    let h = home.path();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let base = format!("http://127.0.0.1:{port}");
    let edge_dir = h.join("edge");
    let init = command(h).args(["edge", "init", "--edge-dir"]).arg(&edge_dir).output().unwrap();
    assert!(init.status.success(), "{}", String::from_utf8_lossy(&init.stderr));
    let addr_file = h.join("edge.addr");
    let edge = Proc(
        command(h)
            .args(["edge", "serve", "--issuer", &base, "--listen", &format!("127.0.0.1:{port}"), "--edge-dir"])
            .arg(&edge_dir)
            .arg("--addr-file")
            .arg(&addr_file)
            .arg("--max-links")
            .arg((max + 16).to_string())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(h.join("edge.log")).unwrap())
            .spawn()
            .unwrap(),
    );
    let edge_pid = edge.0.id();
    while std::fs::read_to_string(&addr_file).is_err() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let http = Http { client: reqwest::Client::builder().pool_max_idle_per_host(64).build().unwrap(), base: base.clone() };

    // Device 0, from the operator's pairing on the edge host: the real workstation.
    let pair = command(h).args(["edge", "pair", "--issuer", &base, "--name", "ws-0", "--edge-dir"]).arg(&edge_dir).output().unwrap();
    let out = String::from_utf8_lossy(&pair.stdout).to_string();
    let line = |p: &str| out.lines().find_map(|l| l.strip_prefix(p)).map(|v| v.trim().to_string()).expect(p);
    let address = line("pairing address:");
    let pairing_id = address.split_once('#').unwrap().1.to_string();
    let ws0 = consume(&http, &pairing_id, &line("code:"), "ws-0").await;

    let root = h.join("root");
    std::fs::create_dir_all(&root).unwrap();
    let content: String = (0..4096).map(|i| (b'a' + (i % 26) as u8) as char).collect();
    std::fs::write(root.join("four_k.txt"), &content).unwrap();
    let socket = h.join("rt.sock");
    let runtime = Proc(
        command(h)
            .args(["serve", "--socket"])
            .arg(&socket)
            .arg("--root")
            .arg(&root)
            .arg("--state-dir")
            .arg(h.join("rt-state"))
            .current_dir(&root)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let secret_file = h.join("ws0.secret");
    std::fs::OpenOptions::new().write(true).create(true).mode(0o600).open(&secret_file).unwrap().write_all(ws0.secret.as_bytes()).unwrap();
    let link = Proc(
        command(h)
            .args(["link", "--edge", &base, "--workstation-id", &ws0.id, "--credential-file"])
            .arg(&secret_file)
            .arg("--socket")
            .arg(&socket)
            .arg("--state-dir")
            .arg(h.join("link-state"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(h.join("link.log")).unwrap())
            .spawn()
            .unwrap(),
    );
    let workstation = [runtime.0.id(), link.0.id()];

    // A bearer bound to device 0 (client_credentials).
    let created =
        command(h).args(["edge", "automation", "create", "--name", "bench", "--device", &ws0.id, "--edge-dir"]).arg(&edge_dir).output().unwrap();
    let out = String::from_utf8_lossy(&created.stdout).to_string();
    let field = |p: &str| out.lines().find_map(|l| l.strip_prefix(p)).map(|v| v.trim().to_string()).expect(p);
    let resource = format!("{base}/mcp");
    let tok = http
        .form(
            "/oauth/token",
            &[
                ("grant_type", "client_credentials"),
                ("client_id", &field("client_id:")),
                ("client_secret", &field("client_secret:")),
                ("resource", &resource),
            ],
        )
        .await;
    let token = tok["access_token"].as_str().expect("an automation token").to_string();
    let read_args = json!({"device": ws0.id, "path": root.join("four_k.txt")});
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let v = http.tool(&token, "herdr_fs_read", read_args.clone()).await;
        if v["isError"] != true {
            break;
        }
        assert!(Instant::now() < deadline, "device 0 never answered: {v}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    println!("edge fleet bench: {} (load {})", env!("CARGO_PKG_VERSION"), load());
    println!("links | enroll s | connect s | edge CPU idle | edge RSS MiB | RSS/link KiB | herdr_devices p50/p99 ms (rows) | GET /devices p50/p99 ms (rows) | fs_read via edge, {CLIENTS} clients");

    let up = Arc::new(AtomicUsize::new(1));
    let status_answers = Arc::new(AtomicU64::new(0));
    let mut fleet = 1;
    let mut last_rss: Option<(usize, u64)> = None;
    let mut one_link_rate = None;
    for &n in &levels {
        let t = Instant::now();
        let mut new = Vec::new();
        while fleet + new.len() < n {
            new.push(enroll(&http, &ws0, &format!("fleet-{}", fleet + new.len())).await);
        }
        let enroll_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let target = fleet + new.len();
        let sem = Arc::new(tokio::sync::Semaphore::new(64));
        for (i, d) in new.into_iter().enumerate() {
            let phase = Duration::from_millis((i as u64 * 7919) % HEARTBEAT.as_millis() as u64);
            let (base, up, answers, sem) = (base.clone(), Arc::clone(&up), Arc::clone(&status_answers), Arc::clone(&sem));
            tokio::spawn(async move {
                let permit = sem.acquire_owned().await.unwrap();
                hold_link(base, d, phase, up, answers, permit).await;
            });
        }
        let deadline = Instant::now() + Duration::from_secs(120);
        while up.load(Ordering::SeqCst) < target && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let held = up.load(Ordering::SeqCst);
        if held < target {
            println!("{n:>5} | only {held} of {target} links held after 120 s; stopping (see edge.log: a connection cap?)");
            let log = std::fs::read_to_string(h.join("edge.log")).unwrap_or_default();
            for l in log.lines().filter(|l| l.contains("WARN")).take(5) {
                println!("      edge: {l}");
            }
            break;
        }
        fleet = target;
        let connect_s = t.elapsed().as_secs_f64();
        // Let the handshake burst settle, then measure a quiet period.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let (c0, _) = usage(edge_pid);
        let t0 = Instant::now();
        tokio::time::sleep(Duration::from_secs_f64(idle_seconds)).await;
        let (c1, rss) = usage(edge_pid);
        let idle_pct = (c1 - c0) / t0.elapsed().as_secs_f64() * 100.0;
        let per_link = match last_rss {
            Some((m, r)) if n > m => format!("{:.1}", (rss as f64 - r as f64) / (n - m) as f64),
            _ => "-".into(),
        };
        last_rss = Some((n, rss));
        let (p50, p99, rows) = devices_latency(&http, &token, 50).await;
        let (ip50, ip99, irows) = inventory_latency(&http, &ws0, 20).await;
        let (h2, t2, a2) = (http.client.clone(), token.clone(), read_args.clone());
        let base2 = base.clone();
        let ws_before = cpu(&workstation);
        let rt_only_before = cpu(&workstation[..1]);
        let edge_before = usage(edge_pid).0;
        let (rate, rp50, errors) = throughput(seconds, move |_| {
            let (h2, t2, a2, base2) = (h2.clone(), t2.clone(), a2.clone(), base2.clone());
            async move {
                let http = Http { client: h2, base: base2 };
                let v = http.tool(&t2, "herdr_fs_read", a2).await;
                v["isError"] != true
            }
        })
        .await;
        let calls = (rate * seconds).max(1.0);
        let ws_per_call_us = (cpu(&workstation) - ws_before) / calls * 1e6;
        let rt_per_call_us = (cpu(&workstation[..1]) - rt_only_before) / calls * 1e6;
        let edge_per_call_us = (usage(edge_pid).0 - edge_before) / calls * 1e6;
        if n == 1 || one_link_rate.is_none() {
            one_link_rate = Some(rate);
        }
        println!(
            "{n:>5} | {enroll_s:>8.1} | {connect_s:>9.1} | {idle_pct:>12.2}% | {:>12.1} | {per_link:>12} | {p50:>6.2}/{p99:.2} ({rows}) | {ip50:>6.2}/{ip99:.2} ({irows}) | {rate:>7.0} calls/s, p50 {rp50:.2} ms, {errors} errors, workstation CPU {ws_per_call_us:.0} µs/call (runtime {rt_per_call_us:.0}, link {:.0}), edge CPU {edge_per_call_us:.0} µs/call ({:.2}× the 1-link rate)",
            rss as f64 / 1024.0,
            ws_per_call_us - rt_per_call_us,
            rate / one_link_rate.unwrap_or(rate),
        );
        if n == levels[0] {
            // Direct on the runtime's socket, same 16 clients, one connection each.
            let senders: Arc<Vec<tokio::sync::Mutex<_>>> =
                Arc::new(futures::future::join_all((0..CLIENTS).map(|_| unix_sender(&socket))).await.into_iter().map(tokio::sync::Mutex::new).collect());
            let body = call_body("herdr_fs_read", json!({"path": root.join("four_k.txt")}));
            let rt_before = cpu(&workstation[..1]);
            let (drate, dp50, derr) = throughput(seconds, move |i| {
                let (senders, body) = (Arc::clone(&senders), body.clone());
                async move { direct_call(&senders[i], body).await }
            })
            .await;
            let direct_us = (cpu(&workstation[..1]) - rt_before) / (drate * seconds).max(1.0) * 1e6;
            println!(
                "      direct on the runtime socket: {drate:.0} calls/s, p50 {dp50:.2} ms, {derr} errors, runtime CPU {direct_us:.0} µs/call; through the edge: {:.2}× the direct rate, workstation CPU {:.2}× direct",
                rate / drate,
                ws_per_call_us / direct_us
            );
        }
        std::io::stdout().flush().ok();
    }
    println!("status queries answered by the held links: {}", status_answers.load(Ordering::Relaxed));
    let log = std::fs::read_to_string(h.join("edge.log")).unwrap_or_default();
    let warnings = log.lines().filter(|l| l.contains("WARN") || l.contains("ERROR")).count();
    println!("edge log: {warnings} warning/error lines");
    for l in log.lines().filter(|l| l.contains("WARN") || l.contains("ERROR")).take(5) {
        println!("      {l}");
    }
    drop(link);
    drop(edge);
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg").map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" ")).unwrap_or_default()
}
