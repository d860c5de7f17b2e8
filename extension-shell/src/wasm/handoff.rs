//! The handoff flow in the service worker (spec/extension.md §7.7), for z.ai conversations
//! and ChatGPT Project conversations: ask the source conversation for its packet, open a new
//! chat (z.ai: a new tab at the launcher; ChatGPT: the Project's launcher in a new tab), seed
//! it, and move the bindings only once the target page shows the seed in a conversation of
//! its own.
//!
//! On z.ai every control message (the packet request, the seed) goes through the bridge
//! content script's raw send (`h2w_send`: the page's own send, inside the bridge's self-send
//! window), never through `h2w_submit`, so it is not wrapped as a new tool task. On ChatGPT
//! (no bridge) it is the wakes' path: MAIN-world insert, then the content script's Send. The
//! transfer's steps
//! are ext-core's `continuity::handoff` state machine, persisted in
//! `chrome.storage.local["herdrConversationTransfers"]` before each step acts: the seed is
//! handed out once, and a seed whose fate is unknown is never sent again.
//!
//! # Messages (from the extension's own pages)
//! - `{type:"h2w_handoff_start", tabId}` → `{ok, transferId}` or `{ok:false, error}`
//!   (`binding_required`, `workspace_busy`, `handoff_active`, `handoff-unsupported`,
//!   `tab-unavailable`, `page-unreadable`, `request-not-sent`).
//! - `{type:"h2w_handoff_cancel", id}` → `{ok}`: gives up a transfer that is not finished
//!   (e.g. an uncertain seed the user checked by hand); the source's wakes resume.
//! - `{type:"h2w_handoff_state"}` → `{ok, transfers:[Transfer]}`.

use std::cell::RefCell;

use ext_adapters::PageSnapshot;
use ext_core::continuity::handoff::{packet_request, transfer_id};
use ext_core::continuity::{Lang, SeedOutcome, TabRef, Transfer, TransferStatus, Transfers};
use js_sys::Promise;
use serde_json::{Map, Value, json};
use wasm_bindgen::prelude::*;

use super::continuity_delivery::sleep;
use super::{continuity, continuity_io as cio, io, store};
use crate::continuity_handoff::{PageRead, launch_url, seed_outcome};
use crate::continuity_page::target_of;

pub const TRANSFERS_KEY: &str = "herdrConversationTransfers";
/// How long the source conversation has to write its packet.
pub const PACKET_WAIT_MS: u64 = 180_000;
/// How long the new chat's page has to load and its bridge to answer.
pub const TARGET_READY_MS: u64 = 30_000;
/// How long after the seed went out the target has to show it in its own conversation.
pub const CONFIRM_WAIT_MS: u64 = 30_000;
pub const POLL_MS: u64 = 400;

#[wasm_bindgen(raw_module = "./handoff_io.js")]
extern "C" {
    /// Resolves to `{id, url}` of a new active tab at `url`, or `{error}`.
    #[wasm_bindgen(js_name = openTab)]
    fn open_tab(url: &str) -> Promise;
}

thread_local! {
    static TRANSFERS: RefCell<Transfers> = RefCell::new(Transfers::default());
}

/// Restores the records. A transfer whose worker went away mid-flight cannot be resumed
/// safely: before the seed it simply failed; with the seed out it becomes uncertain.
pub fn start() {
    let mut transfers: Transfers = store::get(TRANSFERS_KEY).and_then(|v| serde_json::from_value(v).ok()).unwrap_or_default();
    let now = io::now();
    transfers.prune(now);
    for id in record_ids(&transfers) {
        let Some(t) = transfers.get_mut(&id) else { continue };
        match t.status {
            TransferStatus::SeedSubmitting => {
                let _ = t.on_seed_outcome(SeedOutcome::Uncertain("context-invalidated".into()), now);
            }
            TransferStatus::SummaryRequested | TransferStatus::SummaryReady | TransferStatus::TargetOpening => {
                t.fail("interrupted", now)
            }
            _ => {}
        }
    }
    TRANSFERS.with(|t| *t.borrow_mut() = transfers);
    persist();
}

/// The ids of all records (`Transfers` is plain serde data; its map is `records`).
fn record_ids(transfers: &Transfers) -> Vec<String> {
    serde_json::to_value(transfers)
        .ok()
        .and_then(|v| v.get("records").and_then(Value::as_object).map(|m| m.keys().cloned().collect()))
        .unwrap_or_default()
}

/// Writes the records; the future resolves once storage has them (writes keep their order,
/// so `persist` may drop it).
fn save() -> impl std::future::Future<Output = Result<(), String>> + use<> {
    let value = TRANSFERS.with(|t| serde_json::to_value(&*t.borrow()).unwrap_or(Value::Null));
    let mut items = Map::new();
    items.insert(TRANSFERS_KEY.into(), value);
    store::set(items)
}

fn persist() {
    let write = save();
    wasm_bindgen_futures::spawn_local(async move {
        if let Err(e) = write.await {
            io::log("error", &format!("handoff records not saved: {e}"));
        }
    });
}

/// Whether wakes of this binding conversation are paused by a transfer (`handoff_active`).
pub fn blocks_wakes(conv_key: &str) -> bool {
    TRANSFERS.with(|t| t.borrow().blocks_wakes(conv_key))
}

fn with_transfer<R>(id: &str, f: impl FnOnce(&mut Transfer) -> R) -> Option<R> {
    let r = TRANSFERS.with(|t| t.borrow_mut().get_mut(id).map(f));
    persist();
    r
}

fn refused(code: &str, detail: impl Into<String>) -> Value {
    json!({ "ok": false, "error": code, "detail": detail.into() })
}

async fn ask_tab(tab: i32, message: Value) -> Value {
    match io::wait(io::tab_send(tab, 0, &io::to_js(&message))).await {
        Ok(v) => io::from_js(&v),
        Err(e) => json!({ "ok": false, "error": "tab-unreachable", "detail": format!("{e:?}") }),
    }
}

/// Which content script speaks for the page: z.ai's bridge or ChatGPT's continuity script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PageKind {
    Zai,
    ChatGpt,
}

impl PageKind {
    fn of(site: &str) -> Option<PageKind> {
        match site {
            "z.ai" => Some(PageKind::Zai),
            "chatgpt" => Some(PageKind::ChatGpt),
            _ => None,
        }
    }
}

/// The page as its content script reads it.
async fn read_page(kind: PageKind, tab: i32) -> Option<PageRead> {
    match kind {
        PageKind::Zai => {
            let answer = ask_tab(tab, json!({ "type": "h2w_snapshot" })).await;
            if answer.get("ok") != Some(&Value::Bool(true)) {
                return None;
            }
            let snapshot: PageSnapshot = serde_json::from_value(answer.get("snapshot")?.clone()).ok()?;
            PageRead::from_snapshot(&snapshot)
        }
        PageKind::ChatGpt => PageRead::from_chatgpt_turns(&ask_tab(tab, json!({ "type": "h2w_turns" })).await),
    }
}

/// Sends `text` exactly as given: on z.ai through the bridge's raw send (not wrapped as a
/// task), on ChatGPT inserted in the MAIN world (never over the user's draft) and sent.
async fn send_raw(kind: PageKind, tab: i32, text: &str) -> Value {
    match kind {
        PageKind::Zai => ask_tab(tab, json!({ "type": "h2w_send", "text": text })).await,
        PageKind::ChatGpt => {
            if read_page(kind, tab).await.is_some_and(|p| p.busy) {
                return json!({ "ok": false, "error": "generating" });
            }
            // Inserted, checked and tried again as a wake is (spec §7.5), over an empty composer only.
            if let Err(failed) = super::continuity_delivery::insert_verified(tab, text, "").await {
                return failed;
            }
            ask_tab(tab, json!({ "type": "h2w_wake_submit", "text": text })).await
        }
    }
}

fn lang() -> Lang {
    Lang::from_tag(&cio::ui_language())
}

pub async fn start_handoff(message: &Value) -> Value {
    let tab = match message.get("tabId").and_then(Value::as_i64) {
        Some(id) => io::wait(cio::tab_get(id as i32)).await.map(|t| io::from_js(&t)).unwrap_or(Value::Null),
        None => Value::Null,
    };
    let (Some(tab_id), Some(url)) = (tab.get("id").and_then(Value::as_i64), tab.get("url").and_then(Value::as_str)) else {
        return refused("tab-unavailable", "no such tab");
    };
    let tab_id = tab_id as i32;
    let source = match target_of(url) {
        Ok(t) => t,
        Err(code) => return refused(code, url),
    };
    let (launch, kind) = match (launch_url(&source), PageKind::of(source.site())) {
        (Ok(l), Some(kind)) => (l, kind),
        _ => return refused("handoff-unsupported", format!("no handoff from {url}")),
    };
    let Some(page) = read_page(kind, tab_id).await else {
        return refused("page-unreadable", "the content script in the source tab did not answer");
    };
    let source_page_key = crate::continuity_page::shown_conversation(url).unwrap_or_default();
    let now = io::now();
    let id = transfer_id(now, (js_sys::Math::random() * 1e12) as u64);
    let started = continuity::with_core(|core| {
        TRANSFERS.with(|t| {
            t.borrow_mut().start(core.bindings(), &source, &source_page_key, page.current_reply(), id.clone(), now).map(|t| t.id.clone())
        })
    });
    let id = match started {
        Ok(id) => id,
        Err(e) => return refused(e.code(), e.to_string()),
    };
    persist();
    let sent = send_raw(kind, tab_id, &packet_request(&id, lang())).await;
    if sent.get("ok") != Some(&Value::Bool(true)) {
        with_transfer(&id, |t| t.fail("request-not-sent", io::now()));
        let why = sent.get("detail").or(sent.get("error")).and_then(Value::as_str).unwrap_or("the page did not take it");
        return refused("request-not-sent", why.to_string());
    }
    let flow_id = id.clone();
    wasm_bindgen_futures::spawn_local(async move { run(flow_id, kind, tab_id, launch).await });
    json!({ "ok": true, "transferId": id })
}

fn status_of(id: &str) -> Option<TransferStatus> {
    TRANSFERS.with(|t| t.borrow().get(id).map(|t| t.status))
}

/// The rest of a transfer, once the packet request is out.
async fn run(id: String, kind: PageKind, source_tab: i32, launch: String) {
    if !await_packet(&id, kind, source_tab).await {
        return;
    }
    if with_transfer(&id, |t| t.open_target(io::now())).and_then(Result::ok).is_none() {
        return;
    }
    let opened = io::wait(open_tab(&launch)).await.map(|v| io::from_js(&v)).unwrap_or(Value::Null);
    let Some(target_tab) = opened.get("id").and_then(Value::as_i64).map(|t| t as i32) else {
        with_transfer(&id, |t| t.fail("target-not-opened", io::now()));
        return;
    };
    if !target_ready(kind, target_tab).await {
        with_transfer(&id, |t| t.fail("target-not-ready", io::now()));
        return;
    }
    // Recorded as submitting, and on disk, before it goes out: a worker stopped after sending
    // finds the record and reports the seed as uncertain (`start`) instead of sending it again.
    let Some(Ok(seed)) = with_transfer(&id, |t| t.begin_seed(lang(), io::now())) else { return };
    if let Err(e) = save().await {
        io::log("error", &format!("handoff {id}: the seed was not sent, its record could not be saved: {e}"));
        with_transfer(&id, |t| t.fail(ext_core::continuity::delivery_guard::STATE_NOT_SAVED, io::now()));
        return;
    }
    let outcome = seed_outcome(&send_raw(kind, target_tab, &seed).await);
    let failed = matches!(outcome, SeedOutcome::Failed(_));
    with_transfer(&id, |t| t.on_seed_outcome(outcome, io::now()));
    if failed {
        return;
    }
    confirm_and_commit(&id, kind, target_tab).await;
}

/// Polls the source for the first new finished reply carrying the packet.
async fn await_packet(id: &str, kind: PageKind, source_tab: i32) -> bool {
    let deadline = io::now() + PACKET_WAIT_MS;
    loop {
        if status_of(id) != Some(TransferStatus::SummaryRequested) {
            return false; // cancelled meanwhile
        }
        if let Some(page) = read_page(kind, source_tab).await
            && let Some(reply) = page.finished_reply()
        {
            match with_transfer(id, |t| t.on_source_reply(reply, io::now())) {
                Some(Ok(true)) => return true,
                Some(Ok(false)) => {}
                Some(Err(e)) => {
                    with_transfer(id, |t| t.fail(e.code(), io::now()));
                    return false;
                }
                None => return false,
            }
        }
        if io::now() >= deadline {
            with_transfer(id, |t| t.fail("no-packet", io::now()));
            return false;
        }
        sleep(POLL_MS).await;
    }
}

async fn target_ready(kind: PageKind, tab: i32) -> bool {
    let deadline = io::now() + TARGET_READY_MS;
    while io::now() < deadline {
        if read_page(kind, tab).await.is_some_and(|p| p.composer) {
            return true;
        }
        sleep(POLL_MS).await;
    }
    false
}

/// Moves the bindings once the target shows the seed in its own conversation; otherwise the
/// transfer ends uncertain and nothing is sent again.
async fn confirm_and_commit(id: &str, kind: PageKind, target_tab: i32) {
    let Some(source_page) = TRANSFERS.with(|t| t.borrow().get(id).map(|t| t.source_page_key.clone())) else { return };
    let deadline = io::now() + CONFIRM_WAIT_MS;
    while io::now() < deadline {
        if !matches!(status_of(id), Some(TransferStatus::SeedSubmitting | TransferStatus::SeedUncertain)) {
            return;
        }
        let page = read_page(kind, target_tab).await;
        if let Some((page, target)) = page.as_ref().and_then(|p| p.confirmed_target(id, &source_page).map(|t| (p, t))) {
            let now = io::now();
            let committed = continuity::with_core(|core| {
                let result = TRANSFERS.with(|t| t.borrow_mut().get_mut(id).map(|t| t.commit(core.bindings_mut(), true, &target, now)));
                if matches!(result, Some(Ok(_))) {
                    core.register_page(&target, &TabRef { id: i64::from(target_tab), url: page.url.clone() }, now);
                }
                result
            });
            persist();
            match committed {
                Some(Ok(_)) => io::log("info", &format!("handoff {id}: bindings moved to {}", page.url)),
                Some(Err(e)) => io::log("warn", &format!("handoff {id}: not committed: {e}")),
                None => {}
            }
            return;
        }
        sleep(POLL_MS).await;
    }
    with_transfer(id, |t| {
        if t.status == TransferStatus::SeedSubmitting {
            let _ = t.on_seed_outcome(SeedOutcome::Uncertain("no-response".into()), io::now());
        }
    });
}

pub fn cancel(message: &Value) -> Value {
    let id = message.get("id").and_then(Value::as_str).unwrap_or("");
    match with_transfer(id, |t| {
        let was = t.status;
        t.fail("cancelled", io::now());
        was
    }) {
        Some(was) if !was.finished() => json!({ "ok": true }),
        Some(_) => refused("wrong_status", "the transfer already ended"),
        None => refused("not-found", id),
    }
}

pub fn state() -> Value {
    let transfers = TRANSFERS.with(|t| serde_json::to_value(&*t.borrow()).unwrap_or(Value::Null));
    let list: Vec<Value> = transfers.get("records").and_then(Value::as_object).map(|m| m.values().cloned().collect()).unwrap_or_default();
    json!({ "ok": true, "transfers": list })
}
