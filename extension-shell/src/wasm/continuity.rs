//! Browser continuity in the service worker: bindings, the push stream's events, wakes.
//!
//! The decisions (SSE parsing, binding rules, wake kinds, progress, rendering) are ext-core's
//! `continuity`; this module keeps their state in memory and in `chrome.storage.local`
//! (so a worker restart or a browser reload loses nothing), feeds them the stream's events and
//! carries out the wakes they produce (`continuity_delivery`).
//!
//! # Messages (`chrome.runtime.sendMessage`, answered by `handle_message`)
//!
//! From the ChatGPT content script (sender = its tab):
//! - `{type:"h2w_register", convKey, url}` → `{ok, selectors, bindings}`: the tab shows this
//!   page now (pending/Project bindings follow it).
//! - `{type:"h2w_composer_free", convKey}` → `{ok}`: the composer is empty and no reply is
//!   generating; wakes held back for this conversation are retried.
//!
//! From the extension's own pages (popup, options; e2e may call `shell.handle_message` with a
//! sender `{url: "chrome-extension://<id>/popup/popup.html"}` to act as the popup):
//! - `{type:"h2w_continuity_page", tabId?}` → `{ok, page:{url, convKey, target}|null,
//!   pageError?, bindings:[view], all:[view], pending:[wake], workspaces:[{workspace, label}],
//!   herdrLive, stream}` for the given tab (default: the active tab).
//! - `{type:"h2w_bind", tabId, workspace:{kind:"herdr",id}|{kind:"root",path}, label?}` →
//!   `{ok, binding}` or `{ok:false, error:"already-bound"|"workspace_required"|
//!   "conversation-unavailable"|"tab-unavailable"}`.
//! - `{type:"h2w_unbind", convKey, workspace?}` → `{ok, removed}` or `not-found`.
//! - `{type:"h2w_set_auto", convKey, enabled}` → `{ok, auto}` (default off).
//! - `{type:"h2w_send_pending", id}` → `{ok, result}`: the user's "send now".
//! - `{type:"h2w_dismiss_pending", id}` → `{ok}`.
//! - `{type:"h2w_continuity_state"}` → every binding, pending wake, delivery and stream fact.

use std::cell::RefCell;

use ext_core::continuity::{BindingView, Continuity, ContinuityAction, Lang, ProgressSettings, PushEvent, Settings, TabRef, Wake, WorkspaceRef};
use serde_json::{Map, Value, json};

use super::{continuity_delivery as delivery, continuity_io as cio, continuity_stream as stream, io, store};
use crate::continuity_page::{chatgpt_probe_selectors, target_of};
use crate::continuity_pending::{PendingWake, PendingWakes};

pub const CONTINUITY_KEY: &str = "herdrContinuity";
pub const PENDING_KEY: &str = "herdrPendingWakes";
pub const SETTINGS_KEY: &str = "herdrContinuitySettings";
/// Deliveries kept for the state view (tests, diagnostics).
pub const DELIVERY_LOG_MAX: usize = 100;

#[derive(Default)]
struct State {
    core: Continuity,
    pending: PendingWakes,
    deliveries: Vec<Value>,
}

/// A wake to carry out; `pending_id` when it is a retry of a pending one.
#[derive(Debug, Clone)]
struct WakeOrder {
    binding_key: String,
    conv_key: String,
    kind: String,
    text: String,
    pending_id: Option<String>,
}

impl WakeOrder {
    fn from_wake(w: &Wake) -> Self {
        let kind = serde_json::to_value(w.kind).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
        WakeOrder { binding_key: w.binding_key.clone(), conv_key: w.conv_key.clone(), kind, text: w.text.clone(), pending_id: None }
    }

    fn from_pending(w: PendingWake) -> Self {
        WakeOrder { binding_key: w.binding_key, conv_key: w.conv_key, kind: w.kind, text: w.text, pending_id: Some(w.id) }
    }
}

thread_local! {
    static STATE: RefCell<State> = RefCell::new(State::default());
}

/// Restores the stored state and opens the push stream (worker start, alarm, reload).
pub fn start() {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        s.core = store::get(CONTINUITY_KEY).and_then(|v| serde_json::from_value(v).ok()).unwrap_or_default();
        s.pending = store::get(PENDING_KEY).and_then(|v| serde_json::from_value(v).ok()).unwrap_or_default();
        if let Err(e) = s.core.set_settings(settings()) {
            io::log("warn", &format!("continuity settings ignored: {e}"));
        }
    });
    cio::alarm_create(stream::KEEPALIVE_ALARM, 1.0);
    stream::ensure();
}

pub fn on_alarm(name: &str) {
    if name == stream::KEEPALIVE_ALARM {
        stream::ensure();
    }
}

/// Writes the continuity state and pending wakes together, so they never disagree after a
/// restart.
fn persist() {
    let (core, pending) = STATE.with(|s| {
        let s = s.borrow();
        (serde_json::to_value(&s.core).unwrap_or(Value::Null), serde_json::to_value(&s.pending).unwrap_or(Value::Null))
    });
    let mut items = Map::new();
    items.insert(CONTINUITY_KEY.into(), core);
    items.insert(PENDING_KEY.into(), pending);
    let write = store::set(items);
    wasm_bindgen_futures::spawn_local(async move {
        if let Err(e) = write.await {
            io::log("error", &format!("continuity state not saved: {e}"));
        }
    });
}

/// How often `/push/state` is asked while the runtime's Herdr picture is not live yet.
pub const LIVE_POLL_MS: u64 = 1_000;

/// One event of the push stream, handled to the end before the next (the stream is serial).
pub fn on_event(event: PushEvent) {
    if let PushEvent::Hello(hello) = &event
        && !hello.herdr_live
    {
        // A runtime that has not reached Herdr yet shows no agents; taken as the truth, that
        // would look like every working agent stopped. Wait for a live picture instead.
        wait_for_live_picture();
        return;
    }
    let actions = STATE.with(|s| s.borrow_mut().core.on_push_event(event, io::now()));
    persist();
    carry_out(actions);
}

/// The clock: settle wakes whose output wait is over, progress ticks.
pub fn on_tick() {
    let now = io::now();
    let due = STATE.with(|s| s.borrow().core.next_deadline_ms().is_some_and(|d| d <= now));
    if !due {
        return;
    }
    let actions = STATE.with(|s| s.borrow_mut().core.on_tick(now));
    persist();
    carry_out(actions);
}

thread_local! {
    static WAITING_FOR_LIVE: RefCell<bool> = const { RefCell::new(false) };
}

fn wait_for_live_picture() {
    if WAITING_FOR_LIVE.with(|w| w.replace(true)) {
        return;
    }
    wasm_bindgen_futures::spawn_local(async {
        while stream::is_connected() {
            delivery::sleep(LIVE_POLL_MS).await;
            // Without a Herdr binding nothing depends on the picture: no need to ask.
            let any_herdr = STATE.with(|s| s.borrow().core.bindings().iter().any(|b| b.workspace.herdr_id().is_some()));
            if !any_herdr {
                continue;
            }
            if let Some(hello) = delivery::push_state().await.filter(|h| h.herdr_live) {
                let actions = STATE.with(|s| s.borrow_mut().core.on_state(hello, io::now()));
                persist();
                carry_out(actions);
                break;
            }
        }
        WAITING_FOR_LIVE.with(|w| *w.borrow_mut() = false);
    });
}

fn carry_out(actions: Vec<ContinuityAction>) {
    for action in actions {
        match action {
            ContinuityAction::Wake(w) => {
                wasm_bindgen_futures::spawn_local(async move {
                    deliver_order(WakeOrder::from_wake(&w), Trigger::Automatic).await;
                });
            }
            // Auto is off: kept by the core for the popup, never sent.
            ContinuityAction::Suppressed(_) => {}
            ContinuityAction::Resync => wasm_bindgen_futures::spawn_local(async {
                if let Some(hello) = delivery::push_state().await {
                    let actions = STATE.with(|s| s.borrow_mut().core.on_state(hello, io::now()));
                    persist();
                    carry_out(actions);
                }
            }),
        }
    }
}

/// Options' progress settings (stored by the options page) and the browser's language.
fn settings() -> Settings {
    let stored = store::get(SETTINGS_KEY).unwrap_or(Value::Null);
    let default = ProgressSettings::default();
    let tick = stored.get("progressTickSec").and_then(Value::as_u64).unwrap_or(u64::from(default.tick_sec));
    let cooldown = stored.get("progressFallbackSec").and_then(Value::as_u64).unwrap_or(u64::from(default.cooldown_sec));
    Settings {
        lang: Lang::from_tag(&cio::ui_language()),
        progress: ProgressSettings::new(tick, cooldown).unwrap_or(default),
        round_template: stored.get("roundTemplate").and_then(Value::as_str).map(str::to_string),
        progress_template: stored.get("progressTemplate").and_then(Value::as_str).map(str::to_string),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// Produced by an event; needs Auto and a fresh runtime check.
    Automatic,
    /// A held-back wake retried because the composer became free; needs Auto.
    Retry,
    /// The user pressed "send now".
    Manual,
}

fn auto_on(conv_key_of_binding: &str) -> bool {
    STATE.with(|s| s.borrow().core.bindings().auto(conv_key_of_binding))
}

/// Carries out one wake; an undelivered one becomes (or stays) pending.
async fn deliver_order(order: WakeOrder, trigger: Trigger) -> Value {
    let binding = STATE.with(|s| s.borrow().core.bindings().get(&order.binding_key).cloned());
    let Some(binding) = binding else { return json!({ "ok": false, "error": "not-found" }) };
    if super::handoff::blocks_wakes(&binding.conv_key) {
        return json!({ "ok": false, "error": "handoff_active" });
    }
    if trigger != Trigger::Manual && !auto_on(&binding.conv_key) {
        // Nothing is ever sent automatically while Auto is off.
        return json!({ "ok": false, "error": "disabled" });
    }
    let result = if trigger == Trigger::Automatic && !delivery::runtime_gate().await {
        json!({ "ok": false, "error": "local_runtime_unavailable" })
    } else {
        delivery::deliver(&binding, &order.text).await
    };
    record(&order, trigger, &result);
    result
}

fn record(order: &WakeOrder, trigger: Trigger, result: &Value) {
    let now = io::now();
    let ok = result.get("ok") == Some(&Value::Bool(true));
    let reason = result.get("error").and_then(Value::as_str).unwrap_or("undelivered").to_string();
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        if s.deliveries.len() >= DELIVERY_LOG_MAX {
            s.deliveries.remove(0);
        }
        s.deliveries.push(json!({
            "binding": order.binding_key, "conv": order.conv_key, "kind": order.kind, "trigger": format!("{trigger:?}"),
            "ok": ok, "result": result, "at": now, "text": order.text,
        }));
        match (&order.pending_id, ok) {
            (Some(id), true) => {
                s.pending.remove(id);
            }
            (Some(id), false) => s.pending.failed_again(id, &reason),
            (None, true) => {}
            (None, false) => {
                s.pending.add(PendingWake {
                    id: String::new(),
                    binding_key: order.binding_key.clone(),
                    conv_key: order.conv_key.clone(),
                    kind: order.kind.clone(),
                    text: order.text.clone(),
                    reason,
                    created_at_ms: now,
                    attempts: 1,
                });
            }
        }
    });
    persist();
}

fn tab_ref(tab: &Value) -> Option<TabRef> {
    Some(TabRef { id: tab.get("id")?.as_i64()?, url: tab.get("url")?.as_str()?.to_string() })
}

/// A tab shows `url` now: bindings follow it (pending → conversation, Project → active chat).
pub fn page_seen(tab_id: i32, url: &str) {
    let Ok(target) = target_of(url) else { return };
    let tab = TabRef { id: i64::from(tab_id), url: url.to_string() };
    let changed = STATE.with(|s| {
        let mut s = s.borrow_mut();
        let before = serde_json::to_value(s.core.bindings()).ok();
        let moved = s.core.register_page(&target, &tab, io::now());
        if !moved.is_empty() {
            io::log("info", &format!("{} binding(s) followed tab {tab_id} to {url}", moved.len()));
        }
        before != serde_json::to_value(s.core.bindings()).ok()
    });
    if changed {
        persist();
    }
}

fn views_json(views: Vec<BindingView>) -> Value {
    serde_json::to_value(views).unwrap_or(Value::Null)
}

/// `h2w_register` from the ChatGPT content script.
pub fn register(tab_id: Option<i32>, tab_url: Option<&str>, claimed_key: &str) -> Value {
    let (Some(tab_id), Some(url)) = (tab_id, tab_url) else { return json!({ "ok": false, "error": "tab-unavailable" }) };
    // The content script's key and the tab's URL may disagree for a moment after pushState;
    // the tab's own URL decides, so a page cannot claim another conversation.
    if crate::continuity_page::shown_conversation(url).is_none() {
        return json!({ "ok": false, "error": "conversation-unavailable" });
    }
    let url = if crate::continuity_page::shown_conversation(claimed_key) == crate::continuity_page::shown_conversation(url) { claimed_key } else { url };
    page_seen(tab_id, url);
    let bindings = target_of(url).map(|t| STATE.with(|s| views_json(s.borrow().core.bindings().for_page(&t)))).unwrap_or(Value::Null);
    json!({ "ok": true, "selectors": chatgpt_probe_selectors(), "bindings": bindings })
}

/// `h2w_composer_free`: retries one held-back wake of the tab's conversation.
pub async fn composer_free(tab_url: Option<&str>) -> Value {
    let Some(conv) = tab_url.and_then(crate::continuity_page::shown_conversation) else { return json!({ "ok": false }) };
    let next = STATE.with(|s| s.borrow().pending.next_retry(&conv).cloned());
    let Some(wake) = next else { return json!({ "ok": true, "retried": false }) };
    let result = deliver_order(WakeOrder::from_pending(wake), Trigger::Retry).await;
    json!({ "ok": true, "retried": true, "result": result })
}

async fn tab_for(message: &Value) -> Option<Value> {
    let tab = match message.get("tabId").and_then(Value::as_i64) {
        Some(id) => io::wait(cio::tab_get(id as i32)).await,
        None => io::wait(cio::active_tab()).await,
    };
    tab.ok().map(|t| io::from_js(&t)).filter(|t| !t.is_null())
}

/// Workspaces to offer: Herdr's, else the runtime's managed roots.
async fn workspace_choices() -> (Vec<Value>, bool) {
    let fleet_ws = STATE.with(|s| {
        let s = s.borrow();
        (s.core.fleet().workspaces.values().cloned().collect::<Vec<_>>(), s.core.fleet().herdr_live)
    });
    let (workspaces, live) = match delivery::push_state().await {
        Some(state) => (state.workspaces, state.herdr_live),
        None => fleet_ws,
    };
    if !workspaces.is_empty() {
        let list = workspaces
            .into_iter()
            .map(|w| json!({ "workspace": { "kind": "herdr", "id": w.id }, "label": w.label.clone().unwrap_or_else(|| w.id.clone()), "roots": w.roots }))
            .collect();
        return (list, live);
    }
    let roots = delivery::managed_roots().await;
    (roots.into_iter().map(|r| json!({ "workspace": { "kind": "root", "path": r }, "label": r })).collect(), live)
}

pub async fn page_info(message: &Value) -> Value {
    let tab = tab_for(message).await;
    let url = tab.as_ref().and_then(|t| t.get("url")).and_then(Value::as_str).unwrap_or("").to_string();
    let target = target_of(&url);
    let (workspaces, herdr_live) = workspace_choices().await;
    STATE.with(|s| {
        let s = s.borrow();
        let bindings = target.as_ref().map(|t| views_json(s.core.bindings().for_page(t))).unwrap_or(Value::from(Vec::<Value>::new()));
        json!({
            "ok": true,
            "page": target.as_ref().ok().map(|t| json!({ "url": url, "tabId": tab.as_ref().and_then(|t| t.get("id")), "convKey": t.binding_conv_key(), "target": t,
                "auto": s.core.bindings().auto(t.binding_conv_key()) })),
            "pageError": target.as_ref().err(),
            "bindings": bindings,
            "all": views_json(s.core.list()),
            "pending": s.pending.list(),
            "suppressed": s.core.suppressed().filter(|w| target.as_ref().is_ok_and(|t| w.conv_key.starts_with(t.binding_conv_key()))).collect::<Vec<_>>(),
            "workspaces": workspaces,
            "herdrLive": herdr_live,
            "stream": stream::status(),
        })
    })
}

pub async fn bind(message: &Value) -> Value {
    let Some(tab) = tab_for(message).await.as_ref().and_then(tab_ref) else { return json!({ "ok": false, "error": "tab-unavailable" }) };
    let target = match target_of(&tab.url) {
        Ok(t) => t,
        Err(code) => return json!({ "ok": false, "error": code }),
    };
    let workspace: WorkspaceRef = match message.get("workspace").cloned().map(serde_json::from_value) {
        Some(Ok(w)) => w,
        _ => return json!({ "ok": false, "error": "workspace_required" }),
    };
    let label = message.get("label").and_then(Value::as_str).map(str::to_string);
    let now = io::now();
    let tab_id = tab.id as i32;
    let result = STATE.with(|s| s.borrow_mut().core.bind(&target, workspace, label, Some(tab), now));
    match result {
        Ok(b) => {
            persist();
            wasm_bindgen_futures::spawn_local(async move {
                let _ = io::wait(cio::keep_tab(tab_id)).await;
            });
            json!({ "ok": true, "binding": b })
        }
        Err(e) => json!({ "ok": false, "error": e.code(), "detail": e.to_string() }),
    }
}

pub fn unbind(message: &Value) -> Value {
    let conv = message.get("convKey").and_then(Value::as_str).unwrap_or("");
    let workspace: Option<WorkspaceRef> = message.get("workspace").cloned().and_then(|w| serde_json::from_value(w).ok());
    let result = STATE.with(|s| {
        let mut s = s.borrow_mut();
        let removed = s.core.unbind(conv, workspace.as_ref());
        if let Ok(list) = &removed {
            for b in list {
                s.pending.forget_binding(&b.key);
            }
        }
        removed
    });
    match result {
        Ok(removed) => {
            persist();
            json!({ "ok": true, "removed": removed.iter().map(|b| b.key.clone()).collect::<Vec<_>>() })
        }
        Err(e) => json!({ "ok": false, "error": e.code(), "detail": e.to_string() }),
    }
}

pub fn set_auto(message: &Value) -> Value {
    let conv = message.get("convKey").and_then(Value::as_str).unwrap_or("").to_string();
    if conv.is_empty() {
        return json!({ "ok": false, "error": "conversation-unavailable" });
    }
    let on = message.get("enabled") == Some(&Value::Bool(true));
    STATE.with(|s| s.borrow_mut().core.set_auto(&conv, on));
    persist();
    json!({ "ok": true, "convKey": conv, "auto": on })
}

pub async fn send_pending(message: &Value) -> Value {
    let id = message.get("id").and_then(Value::as_str).unwrap_or("");
    let Some(wake) = STATE.with(|s| s.borrow().pending.get(id).cloned()) else { return json!({ "ok": false, "error": "not-found" }) };
    let result = deliver_order(WakeOrder::from_pending(wake), Trigger::Manual).await;
    json!({ "ok": result.get("ok") == Some(&Value::Bool(true)), "result": result })
}

pub fn dismiss_pending(message: &Value) -> Value {
    let id = message.get("id").and_then(Value::as_str).unwrap_or("");
    let removed = STATE.with(|s| s.borrow_mut().pending.remove(id));
    if removed.is_some() {
        persist();
    }
    json!({ "ok": removed.is_some() })
}

pub fn state() -> Value {
    STATE.with(|s| {
        let s = s.borrow();
        json!({
            "bindings": views_json(s.core.list()),
            "pending": s.pending.list(),
            "suppressed": s.core.suppressed().collect::<Vec<_>>(),
            "deliveries": s.deliveries,
            "fleet": { "agents": s.core.fleet().agents, "workspaces": s.core.fleet().workspaces, "herdrLive": s.core.fleet().herdr_live },
            "stream": stream::status(),
            "guard": delivery::guard_state(),
        })
    })
}

/// Runs `f` on the continuity state and saves it (the handoff's commit moves bindings).
pub fn with_core<R>(f: impl FnOnce(&mut Continuity) -> R) -> R {
    let result = STATE.with(|s| f(&mut s.borrow_mut().core));
    persist();
    result
}
