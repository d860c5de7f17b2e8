//! The one persistent Native Messaging port to `dev.herdr.mcp`.
//!
//! Requests are multiplexed by id. When the port drops, every request already posted becomes
//! `Lost` (its effect is unknown and it is never re-sent); the port then reconnects with a
//! doubling backoff. Bodies above 1 MiB arrive as ordered `chunk` frames and are reassembled here.

use std::cell::RefCell;
use std::collections::HashMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use futures::channel::oneshot;
use serde_json::{Value, json};
use wasm_bindgen::prelude::*;

use super::io;

pub const HOST_NAME: &str = "dev.herdr.mcp";
pub const BACKOFF_START_MS: u64 = 500;
pub const BACKOFF_MAX_MS: u64 = 15_000;

/// Why a request has no answer.
#[derive(Debug, Clone, PartialEq)]
pub enum PortFailure {
    /// Never reached the host (not installed, refused origin): safe to report as a plain failure.
    NotSent { code: String, detail: String },
    /// Posted, then the port dropped: it may or may not have run.
    Lost { detail: String },
    /// The host answered with an error frame.
    Host { code: String, detail: String },
}

/// An HTTP answer relayed by the host.
#[derive(Debug, Clone)]
pub struct HttpAnswer {
    pub status: u16,
    pub body: String,
}

type Reply = oneshot::Sender<Result<Value, PortFailure>>;
/// Receives every frame of one open stream (`stream_open`, `stream_chunk`, `stream_end`,
/// `stream_error`); a dropped port is reported as a `stream_error` with `native-port-lost`.
pub type StreamSink = Box<dyn FnMut(Value)>;
/// onMessage and onDisconnect handlers, created once and kept for every reconnect.
type PortCallbacks = (Closure<dyn FnMut(JsValue)>, Closure<dyn FnMut(JsValue)>);

#[derive(Default)]
struct Inner {
    handle: Option<JsValue>,
    next_id: u64,
    pending: HashMap<String, Reply>,
    chunks: HashMap<String, Vec<(u64, String)>>,
    backoff_ms: u64,
    reconnect_at: Option<u64>,
    last_error: Option<String>,
    answered_since_connect: bool,
    connects: u64,
}

thread_local! {
    static PORT: RefCell<Inner> = RefCell::new(Inner { backoff_ms: BACKOFF_START_MS, ..Inner::default() });
    static CALLBACKS: RefCell<Option<PortCallbacks>> = const { RefCell::new(None) };
    static RECONNECT: RefCell<Option<Closure<dyn FnMut()>>> = const { RefCell::new(None) };
    static STREAMS: RefCell<HashMap<String, StreamSink>> = RefCell::new(HashMap::new());
}

/// Classifies `chrome.runtime.lastError` of a dropped port (spec §6.3 client normalization).
pub fn classify_disconnect(message: &str) -> Option<&'static str> {
    let lower = message.to_lowercase();
    if lower.contains("native messaging host") && lower.contains("not found") {
        Some("native-host-not-installed")
    } else if ["forbidden", "not allowed", "access denied", "permission denied"].iter().any(|p| lower.contains(p)) {
        Some("native-origin-not-active")
    } else {
        None
    }
}

/// Opens the port if it is closed (idempotent).
pub fn ensure_connected() {
    let needs = PORT.with(|p| p.borrow().handle.is_none());
    if !needs {
        return;
    }
    CALLBACKS.with(|c| {
        let mut c = c.borrow_mut();
        if c.is_none() {
            let on_message = Closure::<dyn FnMut(JsValue)>::new(|m: JsValue| on_frame(io::from_js(&m)));
            let on_disconnect = Closure::<dyn FnMut(JsValue)>::new(|e: JsValue| on_disconnect(e.as_string().unwrap_or_default()));
            *c = Some((on_message, on_disconnect));
        }
        let (m, d) = c.as_ref().expect("callbacks just set");
        let handle = io::native_connect(HOST_NAME, m.as_ref().unchecked_ref(), d.as_ref().unchecked_ref());
        PORT.with(|p| {
            let mut p = p.borrow_mut();
            p.handle = Some(handle);
            p.answered_since_connect = false;
            p.connects += 1;
        });
    });
}

fn on_disconnect(message: String) {
    let (pending, backoff) = PORT.with(|p| {
        let mut p = p.borrow_mut();
        p.handle = None;
        p.chunks.clear();
        p.last_error = Some(if message.is_empty() { "the native host closed the port".into() } else { message.clone() });
        if p.answered_since_connect {
            p.backoff_ms = BACKOFF_START_MS;
        }
        let backoff = p.backoff_ms;
        p.backoff_ms = (p.backoff_ms * 2).min(BACKOFF_MAX_MS);
        p.reconnect_at = Some(io::now() + backoff);
        (std::mem::take(&mut p.pending), backoff)
    });
    let never_started = classify_disconnect(&message);
    let streams = STREAMS.with(|s| std::mem::take(&mut *s.borrow_mut()));
    for (id, mut sink) in streams {
        sink(json!({ "type": "stream_error", "id": id, "ok": false, "error": never_started.unwrap_or("native-port-lost"), "message": message }));
    }
    for (_, reply) in pending {
        let failure = match never_started {
            Some(code) => PortFailure::NotSent { code: code.into(), detail: message.clone() },
            None => PortFailure::Lost { detail: format!("The native host connection dropped before the answer arrived ({message}).") },
        };
        let _ = reply.send(Err(failure));
    }
    io::log("warn", &format!("native port closed: {message}; reconnecting in {backoff} ms"));
    RECONNECT.with(|r| {
        let mut r = r.borrow_mut();
        let cb = r.get_or_insert_with(|| {
            Closure::<dyn FnMut()>::new(|| {
                PORT.with(|p| p.borrow_mut().reconnect_at = None);
                ensure_connected();
                // A probe makes a missing host show up as a disconnect (and so the next backoff).
                wasm_bindgen_futures::spawn_local(async {
                    let _ = identity().await;
                });
            })
        });
        io::set_timer(backoff as f64, cb.as_ref().unchecked_ref());
    });
}

fn on_frame(frame: Value) {
    let id = match frame.get("id") {
        Some(Value::String(s)) if STREAMS.with(|st| st.borrow().contains_key(s)) => {
            let id = s.clone();
            let ended = matches!(frame.get("type").and_then(Value::as_str), Some("stream_end" | "stream_error" | "cancelled"))
                || frame.get("ok") == Some(&Value::Bool(false));
            // Taken out while it runs, so the sink may open or cancel streams itself.
            let Some(mut sink) = STREAMS.with(|st| st.borrow_mut().remove(&id)) else { return };
            sink(frame);
            if !ended {
                STREAMS.with(|st| {
                    st.borrow_mut().entry(id).or_insert(sink);
                });
            }
            return;
        }
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => {
            if frame.get("ok") == Some(&Value::Bool(false)) {
                let detail = frame.get("message").and_then(Value::as_str).unwrap_or("").to_string();
                let code = frame.get("error").and_then(Value::as_str).unwrap_or("native-host-error").to_string();
                PORT.with(|p| p.borrow_mut().last_error = Some(format!("{code}: {detail}")));
            }
            return;
        }
    };
    PORT.with(|p| {
        let mut p = p.borrow_mut();
        p.answered_since_connect = true;
        p.last_error = None;
    });
    if frame.get("type").and_then(Value::as_str) == Some("chunk") {
        let seq = frame.get("seq").and_then(Value::as_u64).unwrap_or(u64::MAX);
        let data = frame.get("data_b64").and_then(Value::as_str).unwrap_or("").to_string();
        PORT.with(|p| p.borrow_mut().chunks.entry(id).or_default().push((seq, data)));
        return;
    }
    let chunks = PORT.with(|p| p.borrow_mut().chunks.remove(&id));
    let Some(reply) = PORT.with(|p| p.borrow_mut().pending.remove(&id)) else { return };
    let result = if frame.get("ok") == Some(&Value::Bool(false)) {
        Err(PortFailure::Host {
            code: frame.get("error").and_then(Value::as_str).unwrap_or("native-host-error").to_string(),
            detail: frame.get("message").and_then(Value::as_str).unwrap_or("").to_string(),
        })
    } else if let Some(info) = frame.get("chunked") {
        reassemble(frame.clone(), info, chunks.unwrap_or_default())
    } else {
        Ok(frame)
    };
    let _ = reply.send(result);
}

/// Joins chunk frames into `body` after checking their count, order and length.
fn reassemble(mut frame: Value, info: &Value, mut chunks: Vec<(u64, String)>) -> Result<Value, PortFailure> {
    let bad = |detail: String| PortFailure::Host { code: "native-chunked-body-invalid".into(), detail };
    chunks.sort_by_key(|(seq, _)| *seq);
    let count = info.get("count").and_then(Value::as_u64).unwrap_or(0);
    if chunks.len() as u64 != count || chunks.iter().enumerate().any(|(i, (seq, _))| *seq != i as u64) {
        return Err(bad(format!("expected {count} chunks in order, got {}", chunks.len())));
    }
    let mut bytes = Vec::new();
    for (seq, data) in chunks {
        bytes.extend(B64.decode(data).map_err(|e| bad(format!("chunk {seq} is not base64: {e}")))?);
    }
    if info.get("bytes").and_then(Value::as_u64) != Some(bytes.len() as u64) {
        return Err(bad(format!("chunked body has {} bytes, header says {}", bytes.len(), info["bytes"])));
    }
    let body = String::from_utf8(bytes).map_err(|_| bad("chunked body is not UTF-8".into()))?;
    frame["body"] = Value::String(body);
    Ok(frame)
}

/// Posts `message` (an `id` is added) and waits for the frame answering it.
pub async fn exchange(mut message: Value) -> Result<Value, PortFailure> {
    ensure_connected();
    let (tx, rx) = oneshot::channel();
    let (id, handle) = PORT.with(|p| {
        let mut p = p.borrow_mut();
        p.next_id += 1;
        let id = format!("sw-{}", p.next_id);
        p.pending.insert(id.clone(), tx);
        (id, p.handle.clone())
    });
    message["id"] = Value::String(id.clone());
    let posted = match handle {
        Some(h) => io::port_post(&h, &io::to_js(&message)).map_err(|e| format!("{e:?}")),
        None => Err("the native port is not open".to_string()),
    };
    if let Err(detail) = posted {
        PORT.with(|p| p.borrow_mut().pending.remove(&id));
        return Err(PortFailure::NotSent { code: "native-port-closed".into(), detail });
    }
    rx.await.unwrap_or_else(|_| Err(PortFailure::Lost { detail: "the request was dropped".into() }))
}

/// An HTTP request to the runtime through the host.
pub async fn http(method: &str, path: &str, headers: Value, body: Option<String>, timeout_ms: u64) -> Result<HttpAnswer, PortFailure> {
    request(json!({
        "type": "request", "method": method, "path": path, "headers": headers,
        "body": body, "timeout_ms": timeout_ms,
    }))
    .await
}

/// Posts a ready-made `request` message (e.g. `mcp::host_request`) and reads its HTTP answer.
pub async fn request(message: Value) -> Result<HttpAnswer, PortFailure> {
    let frame = exchange(message).await?;
    Ok(HttpAnswer {
        status: frame.get("status").and_then(Value::as_u64).unwrap_or(0) as u16,
        body: frame.get("body").and_then(Value::as_str).unwrap_or("").to_string(),
    })
}

/// Opens a stream (`{type:"stream", path, ...}`); every frame for it goes to `sink` until it
/// ends. Returns the stream id, or why it could not be posted.
pub fn open_stream(mut message: Value, sink: StreamSink) -> Result<String, PortFailure> {
    ensure_connected();
    let (id, handle) = PORT.with(|p| {
        let mut p = p.borrow_mut();
        p.next_id += 1;
        (format!("sw-stream-{}", p.next_id), p.handle.clone())
    });
    message["id"] = Value::String(id.clone());
    STREAMS.with(|s| s.borrow_mut().insert(id.clone(), sink));
    let posted = match handle {
        Some(h) => io::port_post(&h, &io::to_js(&message)).map_err(|e| format!("{e:?}")),
        None => Err("the native port is not open".to_string()),
    };
    match posted {
        Ok(()) => Ok(id),
        Err(detail) => {
            STREAMS.with(|s| s.borrow_mut().remove(&id));
            Err(PortFailure::NotSent { code: "native-port-closed".into(), detail })
        }
    }
}

pub async fn identity() -> Result<Value, PortFailure> {
    exchange(json!({ "type": "identity" })).await
}

/// Port facts for the status page.
pub fn status() -> Value {
    PORT.with(|p| {
        let p = p.borrow();
        json!({
            "connected": p.handle.is_some(),
            "answered": p.answered_since_connect,
            "pending": p.pending.len(),
            "connects": p.connects,
            "lastError": p.last_error,
            "lastErrorCode": p.last_error.as_deref().and_then(classify_disconnect),
        })
    })
}
