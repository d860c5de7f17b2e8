//! The one shared push stream: `/push/events` over the native port (a `stream` message),
//! parsed by ext-core's `SseParser`, events handed to `continuity::on_event` one at a time.
//! It reconnects after 2 s, doubling to 15 s (ext-core's `Backoff`), and the `h2w-keepalive`
//! alarm plus the worker's start reopen it if the worker was asleep: Chrome starts a stopped
//! worker for the alarm, whose period is ext-core's `keepalive::period_minutes`.

use std::cell::RefCell;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use ext_core::continuity::keepalive;
use ext_core::continuity::push_event::{Backoff, CONNECT_TIMEOUT_MS, SseParser};
use serde_json::{Value, json};
use wasm_bindgen::prelude::*;

use super::{continuity, continuity_io as cio, io, port, store};

pub const KEEPALIVE_ALARM: &str = "h2w-keepalive";
pub const PUSH_EVENTS_PATH: &str = "/push/events";
/// How often the core's next deadline (a settle wake's output wait, a progress tick) is
/// checked: the core's poll, so a wake waits at most one poll past its output wait.
pub const TICK_CHECK_MS: f64 = ext_core::continuity::OUTPUT_POLL_MS as f64;

#[derive(Default)]
struct Stream {
    id: Option<String>,
    parser: SseParser,
    backoff: Backoff,
    /// A reconnect timer is set; `ensure` must not open a second stream meanwhile.
    waiting: bool,
    opened: u64,
    events: u64,
    hellos: u64,
    last_error: Option<String>,
    connected_at: Option<u64>,
    refused: Option<String>,
    /// The keep-alive period this worker scheduled (None until the alarm is in place).
    keepalive_period_min: Option<f64>,
    /// Keep-alive alarms this worker instance received.
    keepalive_alarms: u64,
}

thread_local! {
    static STREAM: RefCell<Stream> = RefCell::new(Stream::default());
    static RECONNECT: RefCell<Option<Closure<dyn FnMut()>>> = const { RefCell::new(None) };
    static TICK: RefCell<Option<Closure<dyn FnMut()>>> = const { RefCell::new(None) };
}

/// Opens the stream unless it is open or a reconnect is already scheduled.
pub fn ensure() {
    start_ticks();
    let busy = STREAM.with(|s| {
        let s = s.borrow();
        s.id.is_some() || s.waiting
    });
    if !busy {
        open();
    }
}

/// Puts the keep-alive alarm in place at the period in force (worker start; the
/// development override changed).
pub async fn schedule_keepalive() {
    let install = io::wait(cio::install_type()).await.ok().and_then(|v| v.as_string()).unwrap_or_default();
    let period = keepalive::period_minutes(store::get(keepalive::PERIOD_OVERRIDE_KEY).as_ref(), install == "development");
    match io::wait(cio::alarm_ensure(KEEPALIVE_ALARM, period)).await {
        Ok(_) => STREAM.with(|s| s.borrow_mut().keepalive_period_min = Some(period)),
        Err(e) => io::log("error", &format!("the keep-alive alarm ({period} min) could not be set: {e:?}")),
    }
}

/// The keep-alive alarm fired. A worker Chrome started for it has opened the stream in its
/// start already; in a running one the stream is open or a reconnect is pending. Opening it
/// here too costs nothing and does not rest on either.
pub fn on_keepalive() {
    STREAM.with(|s| s.borrow_mut().keepalive_alarms += 1);
    ensure();
}

fn start_ticks() {
    TICK.with(|t| {
        let mut t = t.borrow_mut();
        if t.is_none() {
            let cb = Closure::<dyn FnMut()>::new(continuity::on_tick);
            cio::set_repeating(TICK_CHECK_MS, cb.as_ref().unchecked_ref());
            *t = Some(cb);
        }
    });
}

fn open() {
    STREAM.with(|s| {
        let mut s = s.borrow_mut();
        s.parser.reset();
        s.refused = None;
    });
    let message = json!({ "type": "stream", "path": PUSH_EVENTS_PATH, "timeout_ms": CONNECT_TIMEOUT_MS });
    match port::open_stream(message, Box::new(on_frame)) {
        Ok(id) => STREAM.with(|s| {
            let mut s = s.borrow_mut();
            s.id = Some(id);
            s.opened += 1;
        }),
        Err(e) => closed(format!("{e:?}")),
    }
}

fn on_frame(frame: Value) {
    match frame.get("type").and_then(Value::as_str) {
        Some("stream_open") => {
            let status = frame.get("status").and_then(Value::as_u64).unwrap_or(0);
            if status >= 400 {
                // The host ends the stream next; this is the reason to report then.
                STREAM.with(|s| s.borrow_mut().refused = Some(format!("/push/events answered {status}")));
            } else {
                STREAM.with(|s| s.borrow_mut().connected_at = Some(io::now()));
            }
        }
        Some("stream_chunk") => {
            let bytes = match frame.get("chunk_b64").and_then(Value::as_str).map(|c| B64.decode(c)) {
                Some(Ok(b)) => b,
                _ => {
                    io::log("warn", "push stream: a chunk was not base64; ignored");
                    return;
                }
            };
            let items = STREAM.with(|s| s.borrow_mut().parser.push(&bytes));
            for item in items {
                match item {
                    Ok(event) => {
                        STREAM.with(|s| {
                            let mut s = s.borrow_mut();
                            s.events += 1;
                            if matches!(event, ext_core::continuity::push_event::PushEvent::Hello(_)) {
                                s.hellos += 1;
                                s.backoff.on_success();
                            }
                        });
                        continuity::on_event(event);
                    }
                    Err(e) => io::log("warn", &format!("push stream: {e}")),
                }
            }
        }
        _ => {
            let why = frame
                .get("error")
                .and_then(Value::as_str)
                .map(|e| format!("{e}: {}", frame.get("message").and_then(Value::as_str).unwrap_or("")))
                .or_else(|| STREAM.with(|s| s.borrow_mut().refused.take()))
                .unwrap_or_else(|| "the stream ended".into());
            closed(why);
        }
    }
}

/// The stream is gone: schedule the next attempt.
fn closed(why: String) {
    let delay = STREAM.with(|s| {
        let mut s = s.borrow_mut();
        s.id = None;
        s.connected_at = None;
        s.last_error = Some(why.clone());
        s.waiting = true;
        s.backoff.on_failure()
    });
    io::log("info", &format!("push stream closed ({why}); reconnecting in {delay} ms"));
    RECONNECT.with(|r| {
        let mut r = r.borrow_mut();
        let cb = r.get_or_insert_with(|| {
            Closure::<dyn FnMut()>::new(|| {
                STREAM.with(|s| s.borrow_mut().waiting = false);
                ensure();
            })
        });
        io::set_timer(delay as f64, cb.as_ref().unchecked_ref());
    });
}

pub fn is_connected() -> bool {
    STREAM.with(|s| s.borrow().connected_at.is_some())
}

pub fn status() -> Value {
    STREAM.with(|s| {
        let s = s.borrow();
        json!({
            "open": s.id.is_some(), "connected": s.connected_at.is_some(), "reconnecting": s.waiting,
            "opened": s.opened, "events": s.events, "hellos": s.hellos, "failures": s.backoff.failures(),
            "lastError": s.last_error,
            "keepalivePeriodMin": s.keepalive_period_min, "keepaliveAlarms": s.keepalive_alarms,
        })
    })
}
