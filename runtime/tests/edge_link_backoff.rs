//! The link's pace: a link whose every attempt fails waits 0.5 s, 1 s, 2 s, 4 s …
//! between attempts (never hammering the edge or the runtime), and a stop during a
//! wait ends it at once; an edge that stalls the WebSocket upgrade or never
//! answers the hello is given up after 10 s and tried again, and a stop ends a
//! stalled attempt at once. Once linked, the link heartbeats at once and then at
//! its pace (30 s by default), and drops an edge that stays silent past its limit
//! (90 s by default) to link again.

#[path = "edge_support/links.rs"]
mod links;
#[path = "edge_support/procs.rs"]
mod procs;

use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use herdr_mcp::edge::relay;
use herdr_mcp::link::session::{EDGE_SILENCE, HANDSHAKE_TIMEOUT, HEARTBEAT_EVERY};
use herdr_mcp::link::{LinkConfig, LinkTimings, MAX_BACKOFF, MIN_BACKOFF, run};
use tokio::net::TcpListener;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};
use tokio_util::sync::CancellationToken;

fn config(edge: String, socket: std::path::PathBuf) -> LinkConfig {
    LinkConfig { edge, workstation_id: "dev_pace".into(), secret: "devsec_pace".into(), socket, name: None, ca_file: None, timings: LinkTimings::default() }
}

const WAIT: Duration = Duration::from_secs(20);
/// Room for one failed attempt plus scheduling on a loaded 2-core machine.
const SLACK: Duration = Duration::from_millis(1500);
/// The stalled-handshake test waits 10.5 s between attempts, long enough for a loaded
/// machine to add more than [`SLACK`] (seen once at load average 9). 4 s still tells a
/// 10 s handshake limit from any longer one a slip could leave.
const STALL_SLACK: Duration = Duration::from_secs(4);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_attempts_back_off_exponentially_and_stop_ends_the_wait() {
    assert_eq!((MIN_BACKOFF, MAX_BACKOFF), (Duration::from_millis(500), Duration::from_secs(30)));
    let tmp = tempfile::tempdir().unwrap();
    let socket = tmp.path().join("rt.sock");
    let listener = tokio::net::UnixListener::bind(&socket).unwrap();
    // Each attempt starts by asking the local runtime for its identity, so a Unix
    // socket that hangs up on every connection both fails each attempt and
    // timestamps it. The edge is never reached.
    let cfg = config("http://127.0.0.1:9".into(), socket);
    let stop = CancellationToken::new();
    let link = tokio::spawn(run(cfg, stop.clone()));

    let mut attempts = Vec::new();
    for i in 0..5 {
        let (conn, _) = tokio::time::timeout(WAIT, listener.accept()).await.unwrap_or_else(|_| panic!("attempt {i} never came")).unwrap();
        attempts.push(Instant::now());
        drop(conn);
    }
    let gaps: Vec<Duration> = attempts.windows(2).map(|w| w[1] - w[0]).collect();
    for (i, gap) in gaps.iter().enumerate() {
        let backoff = MIN_BACKOFF * 2u32.pow(i as u32);
        assert!(*gap >= backoff && *gap < backoff + SLACK, "gap {i} was {gap:?}, expected {backoff:?} (+ up to {SLACK:?}); all: {gaps:?}");
    }

    // Now inside an 8 s wait: a stop must not sit it out.
    let stopped_at = Instant::now();
    stop.cancel();
    let ended = tokio::time::timeout(Duration::from_secs(2), link).await.expect("the link kept waiting after stop").unwrap();
    assert_eq!(ended, Ok(()));
    assert!(stopped_at.elapsed() < Duration::from_secs(2));
}

/// Plays the edge's side of the upgrade (choosing `herdr-link.v1`) and reads the hello.
// The callback's `Result<Response, ErrorResponse>` is tungstenite's signature, not ours.
#[allow(clippy::result_large_err)]
async fn accept_hello(tcp: tokio::net::TcpStream) -> tokio_tungstenite::WebSocketStream<tokio::net::TcpStream> {
    let choose = |_: &Request, mut resp: Response| {
        resp.headers_mut().insert("sec-websocket-protocol", relay::SUBPROTOCOL.parse().unwrap());
        Ok(resp)
    };
    let mut ws = tokio_tungstenite::accept_hdr_async(tcp, choose).await.unwrap();
    let hello = tokio::time::timeout(WAIT, ws.next()).await.expect("no hello").unwrap().unwrap();
    assert!(hello.to_text().unwrap().contains("\"kind\":\"hello\""), "{hello:?}");
    ws
}

/// How an edge stalls a link.
#[derive(Clone, Copy, Debug)]
enum Stall {
    /// TCP accepted, the HTTP upgrade never answered.
    Upgrade,
    /// Upgraded with `herdr-link.v1`, the hello read, no hello_ack ever sent.
    HelloAck,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_upgrade_or_hello_is_given_up_after_10_s_and_retried() {
    assert_eq!(HANDSHAKE_TIMEOUT, Duration::from_secs(10));
    let tmp = tempfile::tempdir().unwrap();
    let socket = tmp.path().join("rt.sock");
    let (_calls, _runtime) = links::recording_runtime(&socket).await;
    for stall in [Stall::Upgrade, Stall::HelloAck] {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let edge = format!("http://{}", listener.local_addr().unwrap());
        let stop = CancellationToken::new();
        let link = tokio::spawn(run(config(edge, socket.clone()), stop.clone()));
        let mut held = Vec::new();
        let mut attempts = Vec::new();
        for _ in 0..2 {
            let (tcp, _) = tokio::time::timeout(HANDSHAKE_TIMEOUT + WAIT, listener.accept()).await.expect("no attempt").unwrap();
            attempts.push(Instant::now());
            match stall {
                Stall::Upgrade => held.push(tokio::spawn(async move {
                    let _tcp = tcp;
                    std::future::pending::<()>().await
                })),
                Stall::HelloAck => {
                    let mut ws = accept_hello(tcp).await;
                    held.push(tokio::spawn(async move {
                        // Read (and ignore) until the link gives up on this socket.
                        while ws.next().await.is_some() {}
                        std::future::pending::<()>().await
                    }));
                }
            }
        }
        let gap = attempts[1] - attempts[0];
        let least = HANDSHAKE_TIMEOUT + MIN_BACKOFF;
        assert!(gap >= least && gap < least + STALL_SLACK, "{stall:?}: retried after {gap:?}, expected {least:?}");
        // The second attempt is stalled too: a stop ends it at once.
        stop.cancel();
        let stopped = tokio::time::timeout(Duration::from_secs(2), link).await;
        assert_eq!(stopped.unwrap_or_else(|_| panic!("{stall:?}: the link ignored stop")).unwrap(), Ok(()));
        held.iter().for_each(|h| h.abort());
    }
}

/// Short timings so the test runs in about a second; the defaults are spec §8's.
const FAST: LinkTimings = LinkTimings { heartbeat_every: Duration::from_millis(400), edge_silence: Duration::from_millis(1000) };

/// A fake edge that accepted one link and acknowledged its hello.
async fn linked_fake_edge(timings: LinkTimings) -> (TcpListener, tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>, CancellationToken, tokio::task::JoinHandle<Result<(), String>>, Instant, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    let socket = tmp.path().join("rt.sock");
    let (_calls, runtime) = links::recording_runtime(&socket).await;
    drop(runtime); // detached: the task keeps serving until the test ends
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let stop = CancellationToken::new();
    let mut cfg = config(format!("http://{}", listener.local_addr().unwrap()), socket);
    cfg.timings = timings;
    let link = tokio::spawn(run(cfg, stop.clone()));
    let (tcp, _) = tokio::time::timeout(WAIT, listener.accept()).await.expect("no attempt").unwrap();
    let mut ws = accept_hello(tcp).await;
    let ack = json!({"protocol_version": 1, "kind": "hello_ack", "workstation_id": "dev_pace", "ok": true});
    ws.send(Message::Text(ack.to_string().into())).await.unwrap();
    (listener, ws, stop, link, Instant::now(), tmp)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_linked_session_heartbeats_at_once_and_then_at_its_pace() {
    assert_eq!(LinkTimings::default(), LinkTimings { heartbeat_every: Duration::from_secs(30), edge_silence: Duration::from_secs(90) });
    assert_eq!((HEARTBEAT_EVERY, EDGE_SILENCE), (Duration::from_secs(30), Duration::from_secs(90)));
    let (_listener, mut ws, stop, link, acked, _tmp) = linked_fake_edge(FAST).await;
    let mut beats = Vec::new();
    while beats.len() < 2 {
        let frame = tokio::time::timeout(WAIT, ws.next()).await.expect("no heartbeat").unwrap().unwrap();
        let Message::Text(text) = frame else { continue }; // the pongs to our pings
        let v: Value = serde_json::from_str(text.as_str()).unwrap();
        if v["kind"] == "heartbeat" {
            assert_eq!((v["workstation_id"].as_str(), v["active_requests"].as_u64()), (Some("dev_pace"), Some(0)), "{v}");
            beats.push(acked.elapsed());
            // An answer from the edge keeps it from counting as silent.
            ws.send(Message::Ping(Vec::new().into())).await.unwrap();
        }
    }
    let pace = FAST.heartbeat_every;
    assert!(beats[0] < SLACK, "first heartbeat after {:?}", beats[0]);
    assert!(beats[1] >= pace && beats[1] < pace + SLACK, "second heartbeat after {:?}", beats[1]);
    stop.cancel();
    assert_eq!(tokio::time::timeout(WAIT, link).await.expect("the link ignored stop").unwrap(), Ok(()));
}

/// Spec §8: the link recycles after the edge has been silent past the limit — it
/// closes with 4408 and links again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_edge_is_dropped_after_the_limit_and_linked_again() {
    let (listener, mut ws, stop, link, acked, _tmp) = linked_fake_edge(FAST).await;
    // The edge reads what the link sends but says nothing back.
    let close = loop {
        match tokio::time::timeout(WAIT, ws.next()).await.expect("the link never gave up on the silent edge") {
            Some(Ok(Message::Close(frame))) => break frame,
            Some(Ok(_)) => continue,
            other => panic!("expected a close frame, got {other:?}"),
        }
    };
    let gave_up = acked.elapsed();
    let frame = close.expect("a close frame with a code");
    assert_eq!(u16::from(frame.code), relay::close::STALE, "{frame:?}");
    assert!(frame.reason.contains("silent"), "{frame:?}");
    let limit = FAST.edge_silence;
    assert!(gave_up > limit && gave_up < limit + FAST.heartbeat_every + SLACK, "gave up after {gave_up:?}; limit {limit:?}");
    // … and comes back on its own.
    let (tcp, _) = tokio::time::timeout(WAIT, listener.accept()).await.expect("the link never linked again").unwrap();
    let _again = accept_hello(tcp).await;
    stop.cancel();
    assert_eq!(tokio::time::timeout(WAIT, link).await.expect("the link ignored stop").unwrap(), Ok(()));
}
