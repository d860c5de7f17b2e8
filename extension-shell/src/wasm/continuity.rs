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
//! - `{type:"h2w_set_auto", convKey, enabled}` → `{ok, auto}` (default off), or
//!   `conversation-unavailable` when `convKey` is no binding key of a supported page.
//! - `{type:"h2w_send_pending", id}` → `{ok, result}`: the user's "send now". Pending wakes
//!   are `{id, kind, conv_key, text, reason, uncertain, since_ms, ...}`; `reason` is the
//!   delivery code (`user-typing`, `generating`, `wake-in-flight`, `no_tab`, or why it failed;
//!   `worker-stopped` when Chrome stopped the worker mid-delivery). `uncertain` wakes may
//!   already be in the chat: only the user sends them again.
//! - `{type:"h2w_dismiss_pending", id}` → `{ok}`.
//! - `{type:"h2w_continuity_state"}` → every binding, pending wake, delivery and stream fact.
//! - `{type:"h2w_continuity_settings"}` → `{ok, progressTickSec, progressFallbackSec, defaults,
//!   maxSec, stored}` (the values in force; `stored` is the raw `herdrContinuitySettings`).
//! - `{type:"h2w_set_continuity_settings", progressTickSec, progressFallbackSec}` (form texts)
//!   → `{ok, settings}` or `{ok:false, error:"invalid-setting", field, problem, detail}`.

use std::cell::RefCell;

use ext_core::continuity::{
    Blocked, BindingView, Continuity, ContinuityAction, DeliveryGuard, DeliveryOutcome, Lang, PendingReason, ProgressSettings, PushEvent, Settings,
    TabRef, Wake, WorkspaceRef,
};
use ext_core::continuity::bindings::BindingScope;
use ext_core::continuity::delivery_guard::{STATE_NOT_SAVED, Trigger};
use ext_core::continuity::progress::{COOLDOWN_FIELD, DEFAULT_COOLDOWN_SEC, DEFAULT_TICK_SEC, MAX_SETTING_SEC, TICK_FIELD};
use serde_json::{Map, Value, json};

use super::{continuity_delivery as delivery, continuity_io as cio, continuity_stream as stream, io, store};
use crate::continuity_page::{chatgpt_probe_selectors, target_of};

pub const CONTINUITY_KEY: &str = "herdrContinuity";
pub const GUARD_KEY: &str = "herdrDeliveryGuard";
pub const SETTINGS_KEY: &str = "herdrContinuitySettings";
/// Deliveries kept for the state view (tests, diagnostics).
pub const DELIVERY_LOG_MAX: usize = 100;
/// A Project binding's tab no longer shows the chat its wakes go to (spec §7.5).
pub const PROJECT_TARGET_MOVED: &str = "project-target-moved";

#[derive(Default)]
struct State {
    core: Continuity,
    guard: DeliveryGuard,
    deliveries: Vec<Value>,
}

thread_local! {
    static STATE: RefCell<State> = RefCell::new(State::default());
}

/// Restores the stored state and opens the push stream (worker start, alarm, reload).
/// What the previous worker left of its deliveries is settled first (ext-core's
/// `recover_after_restart`): in flight → reported as uncertain, never begun → delivered now.
pub fn start() {
    let redo = STATE.with(|s| {
        let mut s = s.borrow_mut();
        s.core = store::get(CONTINUITY_KEY).and_then(|v| serde_json::from_value(v).ok()).unwrap_or_default();
        s.guard = store::get(GUARD_KEY).and_then(|v| serde_json::from_value(v).ok()).unwrap_or_default();
        if let Err(e) = s.core.set_settings(settings()) {
            io::log("warn", &format!("continuity settings ignored: {e}"));
        }
        s.guard.recover_after_restart(io::now())
    });
    persist();
    for wake in redo {
        io::log("info", &format!("wake {} was decided but not begun before the worker stopped; delivering it now", wake.id));
        wasm_bindgen_futures::spawn_local(async move {
            deliver_wake(wake, Trigger::Automatic).await;
        });
    }
    wasm_bindgen_futures::spawn_local(stream::schedule_keepalive());
    stream::ensure();
}

pub fn on_alarm(name: &str) {
    if name == stream::KEEPALIVE_ALARM {
        stream::on_keepalive();
    }
}

/// Writes the continuity state and the delivery bookkeeping (pending wakes) together, so they
/// never disagree after a restart. The future resolves once storage has them; writes are
/// issued in call order, so dropping it still saves (`persist`).
fn save() -> impl std::future::Future<Output = Result<(), String>> + use<> {
    let (core, guard) = STATE.with(|s| {
        let s = s.borrow();
        (serde_json::to_value(&s.core).unwrap_or(Value::Null), serde_json::to_value(&s.guard).unwrap_or(Value::Null))
    });
    let mut items = Map::new();
    items.insert(CONTINUITY_KEY.into(), core);
    items.insert(GUARD_KEY.into(), guard);
    store::set(items)
}

fn persist() {
    let write = save();
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
        STATE.with(|s| s.borrow_mut().core.on_unreconciled_hello(hello));
        wait_for_live_picture();
        return;
    }
    let actions = STATE.with(|s| s.borrow_mut().core.on_push_event(event, io::now()));
    carry_out(actions);
}

/// The clock: settle wakes whose output wait is over, progress ticks.
pub fn on_tick() {
    let now = io::now();
    let (due, progress_due) = STATE.with(|s| {
        let s = s.borrow();
        (s.core.next_deadline_ms().is_some_and(|d| d <= now), s.core.progress_due(now))
    });
    if !due {
        return;
    }
    if !progress_due {
        run_tick();
        return;
    }
    // A tick reports what the workstation shows now, but the stream carries no output while
    // agents work (only their terminal titles in the runtime's picture change): fetch a fresh
    // picture first (spec §7.3); it refreshes titles only, statuses stay the stream's.
    // One fetch at a time; the clock keeps calling meanwhile.
    if REFRESHING_FOR_TICK.with(|r| r.replace(true)) {
        return;
    }
    wasm_bindgen_futures::spawn_local(async {
        if let Some(picture) = delivery::push_state().await {
            STATE.with(|s| s.borrow_mut().core.refresh_activity(&picture));
        }
        run_tick();
        REFRESHING_FOR_TICK.with(|r| *r.borrow_mut() = false);
    });
}

fn run_tick() {
    let actions = STATE.with(|s| s.borrow_mut().core.on_tick(io::now()));
    carry_out(actions);
}

thread_local! {
    static WAITING_FOR_LIVE: RefCell<bool> = const { RefCell::new(false) };
    static REFRESHING_FOR_TICK: RefCell<bool> = const { RefCell::new(false) };
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
                carry_out(actions);
                break;
            }
        }
        WAITING_FOR_LIVE.with(|w| *w.borrow_mut() = false);
    });
}

/// Saves the state the actions came from together with the wakes they produce (accepted in
/// the guard: a worker stopped before their delivery began finds them), then carries them out.
fn carry_out(actions: Vec<ContinuityAction>) {
    let now = io::now();
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        for action in &actions {
            if let ContinuityAction::Wake(w) = action {
                s.guard.accept(w.clone(), now);
            }
        }
    });
    persist();
    for action in actions {
        match action {
            ContinuityAction::Wake(w) => {
                wasm_bindgen_futures::spawn_local(async move {
                    deliver_wake(w, Trigger::Automatic).await;
                });
            }
            // Auto is off: kept by the core for the popup, never sent.
            ContinuityAction::Suppressed(_) => {}
            ContinuityAction::Resync => wasm_bindgen_futures::spawn_local(async {
                if let Some(hello) = delivery::push_state().await {
                    let actions = STATE.with(|s| s.borrow_mut().core.on_state(hello, io::now()));
                    carry_out(actions);
                }
            }),
        }
    }
}

/// The options changed (`herdrContinuitySettings`): later wakes and ticks use them.
pub fn apply_settings() {
    if let Err(e) = STATE.with(|s| s.borrow_mut().core.set_settings(settings())) {
        io::log("warn", &format!("continuity settings ignored: {e}"));
    }
    persist();
}

/// Options' progress settings (`herdrContinuitySettings` {progressTickSec,
/// progressFallbackSec, roundTemplate, progressTemplate}) and the browser's language.
fn settings() -> Settings {
    let stored = store::get(SETTINGS_KEY).unwrap_or(Value::Null);
    let default = ProgressSettings::default();
    let tick = stored.get(TICK_FIELD).and_then(Value::as_u64).unwrap_or(u64::from(default.tick_sec));
    let cooldown = stored.get(COOLDOWN_FIELD).and_then(Value::as_u64).unwrap_or(u64::from(default.cooldown_sec));
    Settings {
        lang: Lang::from_tag(&cio::ui_language()),
        progress: ProgressSettings::new(tick, cooldown).unwrap_or(default),
        round_template: stored.get("roundTemplate").and_then(Value::as_str).map(str::to_string),
        progress_template: stored.get("progressTemplate").and_then(Value::as_str).map(str::to_string),
    }
}

/// `h2w_continuity_settings`: the stored progress settings (defaults when unset) and limits.
pub fn settings_view() -> Value {
    let current = settings().progress;
    let stored = store::get(SETTINGS_KEY).unwrap_or(Value::Null);
    json!({
        "ok": true,
        TICK_FIELD: current.tick_sec,
        COOLDOWN_FIELD: current.cooldown_sec,
        "defaults": { TICK_FIELD: DEFAULT_TICK_SEC, COOLDOWN_FIELD: DEFAULT_COOLDOWN_SEC },
        "maxSec": MAX_SETTING_SEC,
        "stored": stored,
    })
}

/// `h2w_set_continuity_settings {progressTickSec, progressFallbackSec}` from the options page:
/// the form's raw texts are validated here (ext-core) and only valid values are stored; other
/// keys of the stored object (templates) are kept. Refusals name the field.
pub async fn save_settings(message: &Value) -> Value {
    let raw = |k: &str| match message.get(k) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    };
    let progress = match ProgressSettings::from_form(&raw(TICK_FIELD), &raw(COOLDOWN_FIELD)) {
        Ok(p) => p,
        Err(e) => return json!({ "ok": false, "error": "invalid-setting", "field": e.field, "problem": e.problem, "detail": e.to_string() }),
    };
    let mut stored = match store::get(SETTINGS_KEY) {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    stored.insert(TICK_FIELD.into(), json!(progress.tick_sec));
    stored.insert(COOLDOWN_FIELD.into(), json!(progress.cooldown_sec));
    let mut items = Map::new();
    items.insert(SETTINGS_KEY.into(), Value::Object(stored.clone()));
    if let Err(e) = store::set(items).await {
        return json!({ "ok": false, "error": "storage-failed", "detail": e });
    }
    // onChanged does not fire in the writing context: apply here.
    apply_settings();
    json!({ "ok": true, "settings": stored })
}

fn auto_on(conv_key_of_binding: &str) -> bool {
    STATE.with(|s| s.borrow().core.bindings().auto(conv_key_of_binding))
}

/// Carries out one wake through the delivery guard: an undelivered one is parked as
/// pending (the guard decides whether it may be retried on its own).
async fn deliver_wake(wake: Wake, trigger: Trigger) -> Value {
    let forget = |id: &str| {
        STATE.with(|s| s.borrow_mut().guard.forget_accepted(id));
        persist();
    };
    let binding = STATE.with(|s| s.borrow().core.bindings().get(&wake.binding_key).cloned());
    let Some(binding) = binding else {
        forget(&wake.id);
        return json!({ "ok": false, "error": "not-found" });
    };
    if trigger.needs_auto() && !auto_on(&binding.conv_key) {
        // Nothing is ever sent automatically while Auto is off.
        forget(&wake.id);
        return json!({ "ok": false, "error": "disabled" });
    }
    let now = io::now();
    let park = |reason: PendingReason| STATE.with(|s| s.borrow_mut().guard.park(wake.clone(), reason, now));
    if super::handoff::blocks_wakes(&binding.conv_key) {
        // Being handed over to a new chat: kept as pending, never sent into the old one.
        park(PendingReason::Failed("handoff_active".into()));
        return finish_log(&wake, trigger, json!({ "ok": false, "error": "handoff_active" }));
    }
    if trigger.needs_runtime_gate() && !delivery::runtime_gate().await {
        park(PendingReason::Failed("local_runtime_unavailable".into()));
        return finish_log(&wake, trigger, json!({ "ok": false, "error": "local_runtime_unavailable" }));
    }
    let zai = binding.site == "z.ai";
    if !zai && binding.site != "chatgpt" {
        park(PendingReason::Failed("site-not-supported".into()));
        return finish_log(&wake, trigger, json!({ "ok": false, "error": "site-not-supported" }));
    }
    let project = binding.scope == BindingScope::Project;
    // A Project binding's wakes go to the chat it points at now (spec §7.5 target), which may
    // have changed since this wake was made (a wake sent again from the popup).
    let conv = if project { binding.target_conv_key().to_string() } else { wake.conv_key.clone() };
    let tab = match delivery::find_tab(binding.tab_id, &conv, project).await {
        delivery::TabFound::Tab(tab) => tab,
        delivery::TabFound::ProjectTargetMoved => {
            park(PendingReason::Failed(PROJECT_TARGET_MOVED.into()));
            return finish_log(&wake, trigger, json!({ "ok": false, "error": PROJECT_TARGET_MOVED }));
        }
        delivery::TabFound::None => {
            park(PendingReason::NoTab);
            return finish_log(&wake, trigger, json!({ "ok": false, "error": "no_tab" }));
        }
    };
    let tab64 = i64::from(tab);
    // Development installs only: the e2e test of a worker stopped between accept and begin.
    super::dev_seams::hold_before_begin(&wake.id).await;
    let begun = STATE.with(|s| s.borrow_mut().guard.begin(tab64, &wake, io::now()));
    match begun {
        // The same text just reached this tab: a duplicate, not a loss.
        Err(Blocked::Dedupe) => return finish_log(&wake, trigger, json!({ "ok": true, "skipped": "dedupe", "tab": tab })),
        // Parked as pending by the guard.
        Err(b) => return finish_log(&wake, trigger, json!({ "ok": false, "error": b.code(), "tab": tab })),
        Ok(()) => {}
    }
    // The claim must be on disk before the page is touched: a worker stopped from here on
    // leaves a record the next one reports as uncertain instead of forgetting the wake.
    if let Err(e) = save().await {
        let code = STATE_NOT_SAVED;
        STATE.with(|s| s.borrow_mut().guard.finish(tab64, &wake.id, DeliveryOutcome::NotDelivered(code.into()), io::now()));
        return finish_log(&wake, trigger, json!({ "ok": false, "error": code, "detail": e, "tab": tab }));
    }
    let last_failed = STATE.with(|s| s.borrow().guard.last_failed(tab64).map(str::to_string));
    let result = if zai {
        delivery::attempt_zai(tab, &conv, &wake.text, last_failed.as_deref()).await
    } else {
        delivery::attempt(tab, &conv, &wake.text, last_failed.as_deref()).await
    };
    let outcome = if result.get("ok") == Some(&Value::Bool(true)) {
        DeliveryOutcome::Delivered
    } else {
        DeliveryOutcome::NotDelivered(result.get("error").and_then(Value::as_str).unwrap_or("submit-failed").to_string())
    };
    STATE.with(|s| s.borrow_mut().guard.finish(tab64, &wake.id, outcome, io::now()));
    finish_log(&wake, trigger, result)
}

/// Logs a delivery attempt and saves the guard's new state.
fn finish_log(wake: &Wake, trigger: Trigger, result: Value) -> Value {
    let kind = serde_json::to_value(wake.kind).unwrap_or(Value::Null);
    let ok = result.get("ok") == Some(&Value::Bool(true));
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        if s.deliveries.len() >= DELIVERY_LOG_MAX {
            s.deliveries.remove(0);
        }
        s.deliveries.push(json!({
            "wake": wake.id, "binding": wake.binding_key, "conv": wake.conv_key, "kind": kind, "trigger": format!("{trigger:?}"),
            "ok": ok, "result": result, "at": io::now(),
        }));
    });
    persist();
    result
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

/// The delivery code a wake waits for (spec §7.5 names).
fn reason_code(reason: &PendingReason) -> &str {
    match reason {
        PendingReason::UserTyping => "user-typing",
        PendingReason::WakeInFlight => "wake-in-flight",
        PendingReason::Generating => "generating",
        PendingReason::NoTab => "no_tab",
        PendingReason::Uncertain(code) | PendingReason::Failed(code) => code,
    }
}

/// Pending wakes as the popup shows them: `{id, kind, conv_key, text, reason, since_ms, ...}`.
fn pending_json(guard: &mut DeliveryGuard) -> Value {
    let list: Vec<Value> = guard
        .pending(io::now())
        .iter()
        .map(|p| {
            let mut w = serde_json::to_value(&p.wake).unwrap_or(Value::Null);
            w["reason"] = json!(reason_code(&p.reason));
            w["uncertain"] = json!(matches!(p.reason, PendingReason::Uncertain(_)));
            w["since_ms"] = json!(p.since_ms);
            w
        })
        .collect();
    Value::from(list)
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
    // Only wakes of a conversation whose Auto is on are retried by themselves.
    let next = STATE.with(|s| {
        let mut s = s.borrow_mut();
        let State { core, guard, .. } = &mut *s;
        let now = io::now();
        let wake = guard.next_retry(&conv, now)?;
        let bindings = core.bindings();
        if bindings.get(&wake.binding_key).is_some_and(|b| bindings.auto(&b.conv_key)) {
            Some(wake)
        } else {
            guard.park(wake, PendingReason::Failed("disabled".into()), now);
            None
        }
    });
    let Some(wake) = next else { return json!({ "ok": true, "retried": false }) };
    let result = deliver_wake(wake, Trigger::Retry).await;
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
        let mut s = s.borrow_mut();
        let pending = pending_json(&mut s.guard);
        let bindings = target.as_ref().map(|t| views_json(s.core.bindings().for_page(t))).unwrap_or(Value::from(Vec::<Value>::new()));
        json!({
            "ok": true,
            "page": target.as_ref().ok().map(|t| json!({ "url": url, "tabId": tab.as_ref().and_then(|t| t.get("id")), "convKey": t.binding_conv_key(), "target": t,
                "auto": s.core.bindings().auto(t.binding_conv_key()) })),
            "pageError": target.as_ref().err(),
            "bindings": bindings,
            "all": views_json(s.core.list()),
            "pending": pending,
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
            // Their waiting wakes have nowhere to go any more.
            let ids: Vec<String> = s.guard.pending(io::now()).iter().filter(|p| list.iter().any(|b| b.key == p.wake.binding_key)).map(|p| p.wake.id.clone()).collect();
            for id in ids {
                s.guard.dismiss(&id);
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
    let claimed = message.get("convKey").and_then(Value::as_str).unwrap_or("");
    let conv = match crate::continuity_page::auto_key(claimed) {
        Ok(conv) => conv,
        Err(code) => return json!({ "ok": false, "error": code, "detail": format!("no conversation of a supported site has the key {claimed:?}") }),
    };
    let on = message.get("enabled") == Some(&Value::Bool(true));
    STATE.with(|s| s.borrow_mut().core.set_auto(&conv, on));
    persist();
    json!({ "ok": true, "convKey": conv, "auto": on })
}

pub async fn send_pending(message: &Value) -> Value {
    let id = message.get("id").and_then(Value::as_str).unwrap_or("");
    let Some(wake) = STATE.with(|s| s.borrow_mut().guard.take_pending(id, io::now())) else { return json!({ "ok": false, "error": "not-found" }) };
    let result = deliver_wake(wake, Trigger::Manual).await;
    json!({ "ok": result.get("ok") == Some(&Value::Bool(true)), "result": result })
}

pub fn dismiss_pending(message: &Value) -> Value {
    let id = message.get("id").and_then(Value::as_str).unwrap_or("");
    let removed = STATE.with(|s| s.borrow_mut().guard.dismiss(id));
    if removed {
        persist();
    }
    json!({ "ok": removed })
}

pub fn state() -> Value {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        let pending = pending_json(&mut s.guard);
        json!({
            "bindings": views_json(s.core.list()),
            "pending": pending,
            "suppressed": s.core.suppressed().collect::<Vec<_>>(),
            "deliveries": s.deliveries,
            "fleet": { "agents": s.core.fleet().agents, "workspaces": s.core.fleet().workspaces, "herdrLive": s.core.fleet().herdr_live },
            "stream": stream::status(),
            "guard": s.guard,
            // The progress settings in force (options changes must reach the core).
            "progress": s.core.settings().progress,
            // The development seam that halts deliveries before `begin` (e2e only).
            "holdBeforeBegin": super::dev_seams::hold_view(),
        })
    })
}

/// Runs `f` on the continuity state and saves it (the handoff's commit moves bindings).
pub fn with_core<R>(f: impl FnOnce(&mut Continuity) -> R) -> R {
    let result = STATE.with(|s| f(&mut s.borrow_mut().core));
    persist();
    result
}
