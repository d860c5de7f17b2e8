//! A stand-in for `herdr-mcp serve` on a Unix socket, for behaviour the real runtime does not
//! have yet or cannot be asked for (slow answers, huge bodies, a scripted push stream), and that
//! records what reached it.
//!
//! Routes (all honour `?delay_ms=N` before answering and `?status=N`):
//!   GET  /health            → `{"ok":true}`
//!   POST /mcp               → `{"echo":<request body>,"query":<query>}` or, with `?reps=N`,
//!                             N copies of `PATTERN` as text/plain
//!   GET  /push/state        → like /mcp
//!   GET  /push/events       → SSE: `?events=N` events, then with `?hold=1` a comment line
//!                             every 50 ms until the client goes away (counted in
//!                             `stream_drops`), else the end of the stream.

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::net::UnixListener;
use tokio::sync::mpsc;

pub const PATTERN: &str = "héllo wörld ✓ 0123456789\n";

pub fn pattern(reps: usize) -> String {
    PATTERN.repeat(reps)
}

#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path_and_query: String,
    pub headers: Vec<(String, String)>,
}

#[derive(Default)]
pub struct State {
    pub seen: Mutex<Vec<Seen>>,
    pub stream_drops: AtomicUsize,
}

pub struct FakeRuntime {
    pub socket: PathBuf,
    pub state: Arc<State>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for FakeRuntime {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl FakeRuntime {
    pub async fn start(socket: &Path) -> FakeRuntime {
        let listener = UnixListener::bind(socket).expect("bind the fake runtime socket");
        let state = Arc::new(State::default());
        let server_state = state.clone();
        let server = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { return };
                let state = server_state.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| handle(state.clone(), req));
                    let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
                });
            }
        });
        FakeRuntime { socket: socket.to_owned(), state, server }
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.state.seen.lock().unwrap().clone()
    }

    pub fn stream_drops(&self) -> usize {
        self.state.stream_drops.load(Ordering::SeqCst)
    }
}

fn query_value(query: &str, key: &str) -> Option<u64> {
    query.split('&').find_map(|kv| kv.strip_prefix(key)?.strip_prefix('=')?.parse().ok())
}

type Reply = Response<BoxBody<Bytes, Infallible>>;

fn full(status: u16, content_type: &str, body: impl Into<Bytes>) -> Reply {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .header("cache-control", "no-store")
        .header("x-internal", "not for the browser")
        .body(Full::new(body.into()).boxed())
        .unwrap()
}

async fn handle(state: Arc<State>, req: Request<Incoming>) -> Result<Reply, Infallible> {
    let path_and_query = req.uri().path_and_query().map(|p| p.as_str().to_owned()).unwrap_or_default();
    let query = req.uri().query().unwrap_or("").to_owned();
    state.seen.lock().unwrap().push(Seen {
        method: req.method().to_string(),
        path_and_query: path_and_query.clone(),
        headers: req
            .headers()
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_owned()))
            .collect(),
    });
    // Simulated server latency (what is being tested is the host's handling of slow answers).
    if let Some(ms) = query_value(&query, "delay_ms") {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    let status = query_value(&query, "status").unwrap_or(200) as u16;
    let path = req.uri().path().to_owned();
    let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let reply = match path.as_str() {
        "/health" => full(status, "application/json", r#"{"ok":true}"#),
        "/mcp" | "/push/state" => match query_value(&query, "reps") {
            Some(reps) => full(status, "text/plain; charset=utf-8", pattern(reps as usize)),
            None => {
                let echo = serde_json::json!({"echo": String::from_utf8_lossy(&body), "query": query});
                full(status, "application/json", echo.to_string())
            }
        },
        "/push/events" if status >= 400 => full(status, "text/plain", "push is unavailable"),
        "/push/events" => sse(state, query_value(&query, "events").unwrap_or(0), query_value(&query, "hold") == Some(1)),
        _ => full(404, "text/plain", "no such route"),
    };
    Ok(reply)
}

fn sse(state: Arc<State>, events: u64, hold: bool) -> Reply {
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(async move {
        for n in 0..events {
            let event = format!("id: {n}\nevent: agent\ndata: {{\"n\":{n}}}\n\n");
            if tx.send(Bytes::from(event)).await.is_err() {
                return;
            }
        }
        if !hold {
            return;
        }
        loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
            if tx.send(Bytes::from_static(b": keep-alive\n\n")).await.is_err() {
                return;
            }
        }
    });
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(SseBody { rx, state }.boxed())
        .unwrap()
}

/// Streams what the producer sends; dropping it (hyper does when the client disconnects) is
/// counted, which is how tests see that a cancelled stream really closed its connection.
struct SseBody {
    rx: mpsc::Receiver<Bytes>,
    state: Arc<State>,
}

impl Drop for SseBody {
    fn drop(&mut self) {
        self.state.stream_drops.fetch_add(1, Ordering::SeqCst);
    }
}

impl Body for SseBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.rx.poll_recv(cx).map(|o| o.map(|b| Ok(Frame::data(b))))
    }
}
