//! Conversations: one `ext_core::engine::Engine` per chat, fed from page reports and driving
//! the page, the native port and storage through the commands it returns.
//!
//! A conversation lives under a stable numeric handle so that work in flight keeps its target
//! when the chat's URL moves from a site's new-chat root to its own address. A page load
//! (new `pageId`) rebuilds the engine from the stored journal: anything that was in flight may
//! have run and is reported, never re-sent; anything answered is replayed from the journal.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use ext_core::engine::{CallReply, Command, Engine, EngineConfig, Event, ExecCall, Status, StopReason};
use ext_adapters::reply_text::{Applied, HistoryTexts, ReplyText};
use ext_adapters::{PageSnapshot, interpret};
use ext_core::journal::{CallJournal, TranscriptEntry, has_pending_tool_reply};
use serde_json::{Map, Value, json};
use wasm_bindgen::prelude::*;

use super::port::{self, PortFailure};
use super::{io, store};
use crate::catalog::{CatalogCache, Lookup, Ticket, submit_answer};
use crate::conversation_state::{AUTOMATION_KEY, BINDINGS_KEY, migrate};
use crate::mcp;
use crate::sender::VerifiedSender;
use crate::sites::{BridgeSite, is_root_key};

pub const JOURNAL_PREFIX: &str = "herdrJournal:";
pub const CONFIG_KEY: &str = "herdrBridgeConfig";
/// A reply whose text has not changed for this long (and looks finished) is done.
/// 2 s is the reference's four unchanged polls 500 ms apart (spec §1.10 `waitForReply`): models
/// stop for a second or so mid-reply, and a reply taken then runs only its first calls.
pub const REPLY_STABLE_MS: u64 = 2_000;
/// Calls kept in the diagnostics log (start/end times for the status page and the figures).
pub const CALL_LOG_MAX: usize = 200;

/// Which text a reply had: the streamed one by (epoch, length), within which it only grows;
/// an older message by its (bounded) text.
#[derive(PartialEq)]
enum Seen {
    Stream(u64, usize),
    Text(String),
}

struct Conv {
    key: String,
    site: BridgeSite,
    /// The key the engine was created under; call fingerprints use it, so it never changes.
    identity: String,
    engine: Engine,
    tab: (i32, i32),
    page_id: String,
    /// Last assistant reply seen: id, which text, when the text last changed.
    reply: Option<(String, Seen, u64)>,
    /// The page's last message as rebuilt from the content script's deltas.
    stream: ReplyText,
    /// The older messages' texts as last reported.
    history: HistoryTexts,
    /// Replies already acted on in this page load (finished, resumed or ignored).
    handled: HashSet<String>,
    /// The finished reply last considered for resuming, as (id, text): spec §5.4's
    /// fingerprint. A reply rewritten in place (DeepSeek's regenerate keeps the message, so
    /// its id) is a new reply to resume from, though its id was handled.
    resume_seen: Option<(String, String)>,
    status: String,
    generation: u64,
}

#[derive(Default)]
struct Convs {
    next: u64,
    by_id: HashMap<u64, Conv>,
    by_key: HashMap<String, u64>,
    /// tab id → (conversation key, page id) last reported by that tab.
    tabs: HashMap<i32, (String, String)>,
}

thread_local! {
    static CONVS: RefCell<Convs> = RefCell::new(Convs::default());
    static CALL_LOG: RefCell<Vec<Value>> = const { RefCell::new(Vec::new()) };
    static CATALOG: RefCell<CatalogCache> = RefCell::new(CatalogCache::new());
    /// Worker time of each page report (ms) with the streamed text's length then, for the
    /// streaming figures (e2e/bench); the newest `REPORT_TIMES_MAX`.
    static REPORT_TIMES: RefCell<Vec<(f64, usize)>> = const { RefCell::new(Vec::new()) };
    static LAST_STREAM_LEN: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

const REPORT_TIMES_MAX: usize = 4_096;

/// Notes how long one report took in the worker (from the message's arrival in WASM to its answer).
pub fn record_report_time(ms: f64) {
    let len = LAST_STREAM_LEN.with(|l| l.replace(0));
    REPORT_TIMES.with(|t| {
        let mut t = t.borrow_mut();
        if t.len() >= REPORT_TIMES_MAX {
            t.remove(0);
        }
        t.push((ms, len));
    });
}

/// The streamed length of the newest report noted (0: none), cheap to poll.
pub fn last_report_len() -> usize {
    REPORT_TIMES.with(|t| t.borrow().last().map_or(0, |(_, len)| *len))
}

/// The report times noted so far as `[[ms, streamed bytes], ...]`; `clear` starts afresh.
pub fn report_times(clear: bool) -> Value {
    REPORT_TIMES.with(|t| {
        let list: Vec<Value> = t.borrow().iter().map(|(ms, len)| json!([ms, len])).collect();
        if clear {
            t.borrow_mut().clear();
        }
        Value::from(list)
    })
}

/// `h2w_bridge_settings`: the round limit in force and its default (options page).
pub fn settings_view() -> Value {
    let stored = store::get(CONFIG_KEY).unwrap_or(Value::Null);
    json!({ "ok": true, "maxRounds": config().0.max_rounds, "defaultMaxRounds": ext_core::engine::DEFAULT_MAX_ROUNDS,
        "limit": ext_core::engine::MAX_ROUNDS_LIMIT, "stored": stored })
}

/// `h2w_set_bridge_settings {maxRounds}` (the form's text): validated in ext-core, stored in
/// `herdrBridgeConfig` beside its other keys; the next task uses it.
pub async fn save_settings(message: &Value) -> Value {
    let raw = match message.get("maxRounds") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    };
    let rounds = match ext_core::engine::parse_max_rounds(&raw) {
        Ok(n) => n,
        Err(detail) => return json!({ "ok": false, "error": "invalid-setting", "field": "maxRounds", "detail": detail }),
    };
    let mut stored = match store::get(CONFIG_KEY) {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    stored.insert("maxRounds".into(), Value::from(rounds));
    let mut items = Map::new();
    items.insert(CONFIG_KEY.into(), Value::Object(stored));
    match store::set(items).await {
        Ok(()) => json!({ "ok": true, "maxRounds": rounds }),
        Err(e) => json!({ "ok": false, "error": "storage-failed", "detail": e }),
    }
}

fn config() -> (EngineConfig, u64) {
    let stored = store::get(CONFIG_KEY).unwrap_or(Value::Null);
    let mut config = EngineConfig::default();
    if let Some(ms) = stored.get("resultSendDelayMs").and_then(Value::as_u64) {
        config.result_send_delay_ms = ms;
    }
    if let Some(ms) = stored.get("replyIdleTimeoutMs").and_then(Value::as_u64) {
        config.reply_idle_timeout_ms = ms;
    }
    // The round limit of the options page (1–1000).
    if let Some(n) = stored.get("maxRounds").and_then(Value::as_u64) {
        config.max_rounds = n.clamp(1, 1000) as u32;
    }
    let stable = stored.get("replyStableMs").and_then(Value::as_u64).unwrap_or(REPLY_STABLE_MS);
    (config, stable)
}

fn stored_journal(key: &str) -> Option<(String, CallJournal)> {
    let record = store::get(&format!("{JOURNAL_PREFIX}{key}"))?;
    let identity = record.get("identity")?.as_str()?.to_string();
    let journal = serde_json::from_value(record.get("journal")?.clone()).ok()?;
    Some((identity, journal))
}

/// Binds the reporting tab to its conversation; returns the conversation handle.
fn attach(v: &VerifiedSender, page_id: &str) -> u64 {
    let now = io::now();
    let mut migrate_bindings = false;
    let mut journal_moves: Option<(String, String)> = None;
    let id = CONVS.with(|c| {
        let mut c = c.borrow_mut();
        let previous = c.tabs.get(&v.tab_id).cloned();
        if let Some((prev_key, prev_page)) = previous.clone().filter(|(k, _)| *k != v.conv_key) {
            let prev_id = c.by_key.get(&prev_key).copied();
            let followed = is_root_key(&prev_key) && prev_page == page_id && !c.by_key.contains_key(&v.conv_key);
            match prev_id {
                // The new chat got its address: the running work follows it.
                Some(pid) if followed => {
                    c.by_key.remove(&prev_key);
                    c.by_key.insert(v.conv_key.clone(), pid);
                    if let Some(conv) = c.by_id.get_mut(&pid) {
                        conv.key = v.conv_key.clone();
                    }
                    journal_moves = Some((prev_key.clone(), v.conv_key.clone()));
                }
                // The tab left that chat: its work must not drive this page.
                Some(pid) if c.by_id.get(&pid).is_some_and(|conv| conv.tab.0 == v.tab_id) => {
                    c.by_id.remove(&pid);
                    c.by_key.remove(&prev_key);
                }
                _ => {}
            }
        }
        if v.site == BridgeSite::Zai && previous.as_ref().map(|(k, _)| k) != Some(&v.conv_key) {
            migrate_bindings = true;
        }
        c.tabs.insert(v.tab_id, (v.conv_key.clone(), page_id.to_string()));
        let (config, _) = config();
        if let Some(&id) = c.by_key.get(&v.conv_key) {
            let conv = c.by_id.get_mut(&id).expect("indexed conversation exists");
            if conv.page_id != page_id {
                let journal = conv.engine.journal().clone();
                conv.engine = Engine::restore(&conv.identity, conv.site.core_site(), config, journal);
                conv.handled.clear();
                conv.resume_seen = None;
                conv.reply = None;
                conv.stream = ReplyText::new();
                conv.history = HistoryTexts::new();
                conv.generation += 1;
                conv.page_id = page_id.to_string();
                conv.status = "idle".into();
            }
            conv.tab = (v.tab_id, v.frame_id);
            return id;
        }
        let (identity, engine) = match stored_journal(&v.conv_key) {
            Some((identity, journal)) => (identity.clone(), Engine::restore(&identity, v.site.core_site(), config, journal)),
            None => (v.conv_key.clone(), Engine::new(&v.conv_key, v.site.core_site(), config)),
        };
        c.next += 1;
        let id = c.next;
        c.by_id.insert(
            id,
            Conv {
                key: v.conv_key.clone(),
                site: v.site,
                identity,
                engine,
                tab: (v.tab_id, v.frame_id),
                page_id: page_id.to_string(),
                reply: None,
                stream: ReplyText::new(),
                history: HistoryTexts::new(),
                handled: HashSet::new(),
                resume_seen: None,
                status: "idle".into(),
                generation: 0,
            },
        );
        c.by_key.insert(v.conv_key.clone(), id);
        id
    });
    if let Some((from, to)) = journal_moves {
        move_journal(&from, &to);
    }
    if migrate_bindings {
        migrate_conversation_state(&v.conv_key, v.tab_id, now);
    }
    id
}

fn move_journal(from: &str, to: &str) {
    let Some(record) = store::get(&format!("{JOURNAL_PREFIX}{from}")) else { return };
    let mut items = Map::new();
    items.insert(format!("{JOURNAL_PREFIX}{to}"), record);
    let write = store::set(items);
    let remove = store::remove(&[format!("{JOURNAL_PREFIX}{from}")]);
    let (from, to) = (from.to_string(), to.to_string());
    wasm_bindgen_futures::spawn_local(async move {
        if let Err(e) = write.await.and(remove.await) {
            io::log("error", &format!("moving the journal {from} → {to}: {e}"));
        }
    });
}

fn migrate_conversation_state(target: &str, tab_id: i32, now: u64) {
    let as_map = |v: Option<Value>| v.and_then(|v| v.as_object().cloned()).unwrap_or_default();
    let bindings = as_map(store::get(BINDINGS_KEY));
    let automation = as_map(store::get(AUTOMATION_KEY));
    // The reported key, not the tab's URL: Chrome may not have seen the page's pushState yet.
    let Some(m) = migrate(&bindings, &automation, target, tab_id, now) else { return };
    io::log("info", &format!("moved {} binding(s) and the Auto setting from the z.ai root to {target}", m.moved_rows));
    let mut items = Map::new();
    items.insert(BINDINGS_KEY.into(), Value::Object(m.bindings));
    items.insert(AUTOMATION_KEY.into(), Value::Object(m.automation));
    let write = store::set(items);
    wasm_bindgen_futures::spawn_local(async move {
        if let Err(e) = write.await {
            io::log("error", &format!("saving migrated bindings: {e}"));
        }
    });
}

/// A page report: track the reply, feed the engine, resume after a reload, decide folding.
/// The snapshot is read by the site adapter (`ext_adapters::interpret`); the page's last
/// message may come as a delta of the text this conversation holds (`ext_adapters::reply_text`).
pub async fn report(v: VerifiedSender, page_id: String, mut snapshot: PageSnapshot) -> Value {
    match ext_adapters::identify(&snapshot.url) {
        Ok(identity) if identity.conv_key != v.conv_key => {
            return json!({ "ok": false, "error": crate::sender::ERR_SENDER_MISMATCH, "detail": "the snapshot is of another conversation" });
        }
        Ok(_) => {}
        Err(e) => return json!({ "ok": false, "error": "snapshot-unreadable", "detail": format!("{e:?}") }),
    }
    let id = attach(&v, &page_id);
    // The page's last root carries its whole text or a delta: rebuild it, and lend it to the
    // snapshot while the report is read (moved, not copied).
    let last = snapshot.roots.last().is_some_and(|r| r.index.saturating_add(1) == snapshot.total_roots);
    let history_len = snapshot.roots.len() - usize::from(last);
    // Older messages sent as `held` get the text this conversation kept of them.
    let filled = CONVS.with(|c| {
        let mut c = c.borrow_mut();
        let conv = c.by_id.get_mut(&id).expect("attached conversation exists");
        conv.history.fill(&mut snapshot.roots[..history_len])
    });
    if !filled {
        return json!({ "ok": true, "resync": true, "fold": [], "watch": true });
    }
    let mut stream_epoch = None;
    if last {
        let root = snapshot.roots.last_mut().expect("a last root");
        let key = (root.index, root.dom_id.clone());
        let applied = CONVS.with(|c| {
            let mut c = c.borrow_mut();
            let conv = c.by_id.get_mut(&id).expect("attached conversation exists");
            let applied = match (root.delta.take(), root.rev) {
                (Some(delta), Some(rev)) => conv.stream.apply_delta(key, rev, &delta),
                (Some(_), None) => Applied::Resync,
                (None, rev) => conv.stream.apply_full(key, rev, std::mem::take(&mut root.text)),
            };
            if !applied.dropped() {
                root.text = conv.stream.lend();
                stream_epoch = Some(conv.stream.epoch());
            }
            applied
        });
        match applied {
            // The content script sends the whole text at once (its next report).
            Applied::Resync => return json!({ "ok": true, "resync": true, "fold": [], "watch": true }),
            // An older report than the text held: dropped, and the next one comes whole (what
            // the content script holds as sent may no longer be what this side holds).
            Applied::Stale => return json!({ "ok": true, "resync": true, "fold": [], "watch": true }),
            _ => {}
        }
    }
    let answer = read_report(id, &snapshot, stream_epoch);
    CONVS.with(|c| {
        if let Some(conv) = c.borrow_mut().by_id.get_mut(&id) {
            conv.history.keep(&mut snapshot.roots[..history_len]);
        }
    });
    if stream_epoch.is_some() {
        let text = std::mem::take(&mut snapshot.roots.last_mut().expect("a last root").text);
        LAST_STREAM_LEN.with(|l| l.set(text.len()));
        CONVS.with(|c| {
            if let Some(conv) = c.borrow_mut().by_id.get_mut(&id) {
                conv.stream.give_back(text);
            }
        });
    }
    answer
}

fn read_report(id: u64, snapshot: &PageSnapshot, stream_epoch: Option<u64>) -> Value {
    let view = match interpret(snapshot) {
        Ok(view) => view,
        Err(e) => return json!({ "ok": false, "error": "snapshot-unreadable", "detail": format!("{e:?}") }),
    };
    let now = io::now();
    let (_, stable_ms) = config();
    let mut resume: Option<(Vec<TranscriptEntry>, String, u64)> = None;
    let latest = view.latest_reply.as_ref().filter(|_| !view.awaiting_reply);
    let last_index = snapshot.total_roots.saturating_sub(1);
    let mut latest_done = view.latest_reply.as_ref().is_some_and(|r| r.finished());
    let (commands, generation, watch) = CONVS.with(|c| {
        let mut c = c.borrow_mut();
        let conv = c.by_id.get_mut(&id).expect("attached conversation exists");
        let mut commands = Vec::new();
        let mut settled = true;
        if let Some(reply) = latest {
            let (message_id, text) = (reply.entry.message_id(), reply.entry.text);
            // The streamed text is known by its epoch and length; only an older, bounded
            // message is compared by its text.
            let streamed = stream_epoch.filter(|_| reply.entry.root_index == last_index);
            let fingerprint = match streamed {
                Some(epoch) => Seen::Stream(epoch, text.len()),
                None => Seen::Text(text.to_string()),
            };
            let changed_at = match &conv.reply {
                Some((rid, seen, at)) if *rid == message_id && *seen == fingerprint => *at,
                _ => now,
            };
            conv.reply = Some((message_id.clone(), fingerprint, changed_at));
            // The adapter says whether the page shows it finished; the text must also have settled.
            let done = reply.finished() && now.saturating_sub(changed_at) >= stable_ms;
            latest_done = done;
            let resumed_from = |seen: &Option<(String, String)>| seen.as_ref().is_some_and(|(rid, t)| *rid == message_id && t == text);
            // Watched until it settles, also when a reply already acted on changes again.
            settled = done || resumed_from(&conv.resume_seen) || (conv.engine.is_running() && conv.handled.contains(&message_id));
            if conv.engine.is_running() {
                if !conv.handled.contains(&message_id) {
                    commands = match streamed {
                        Some(epoch) => conv.engine.reply_stream(&message_id, text, epoch, done, now),
                        None => conv.engine.handle(Event::ReplySnapshot { message_id: message_id.clone(), text: text.to_string(), done, now_ms: now }),
                    };
                    if done {
                        conv.handled.insert(message_id.clone());
                        conv.resume_seen = Some((message_id, text.to_string()));
                    }
                }
            } else if done && !resumed_from(&conv.resume_seen) {
                conv.handled.insert(message_id.clone());
                conv.resume_seen = Some((message_id.clone(), text.to_string()));
                let transcript = view.transcript();
                if has_pending_tool_reply(&transcript) {
                    resume = Some((transcript, message_id, conv.generation));
                }
            }
        }
        (commands, conv.generation, conv.engine.is_running() || !settled || view.awaiting_reply)
    });
    apply(id, generation, commands);
    if let Some((transcript, message_id, generation)) = resume {
        wasm_bindgen_futures::spawn_local(async move {
            match refresh_catalog().await {
                Ok(catalog) => feed(id, generation, Event::Resume { transcript, message_id, catalog, now_ms: io::now() }),
                Err(e) => io::log("warn", &format!("cannot resume after reload, catalog unavailable: {}", e.detail)),
            }
        });
    }
    // A reply still streaming (or settling) is not parsed for folding at every poll.
    let folds = view.pending_folds_when(latest_done);
    let lang = if folds.is_empty() { ext_core::continuity::Lang::En } else { crate::notices::browser_lang() };
    let fold: Vec<Value> = folds
        .into_iter()
        .map(|(index, _, label)| json!({ "index": index, "key": label, "label": ext_core::ui_text::fold_label(lang, label) }))
        .collect();
    json!({ "ok": true, "fold": fold, "watch": watch })
}

/// The user pressed send: start a bridged task (or send unbridged when no catalog).
pub async fn submit(v: VerifiedSender, page_id: String, text: String, snapshot: PageSnapshot) -> Value {
    // The page shows the conversation it claims, or nothing is bridged for it (as in report()).
    if interpret(&snapshot).is_ok_and(|view| view.identity.conv_key != v.conv_key) {
        return json!({ "ok": false, "error": crate::sender::ERR_SENDER_MISMATCH, "detail": "the snapshot is of another conversation" });
    }
    let id = attach(&v, &page_id);
    // One task at a time (spec §1.10): the running task goes on and the page keeps the text.
    let busy = json!({ "ok": false, "blocked": crate::notices::BLOCKED_BUSY });
    if CONVS.with(|c| c.borrow().by_id.get(&id).is_some_and(|conv| conv.engine.is_running())) {
        return busy;
    }
    // A new task reloads the catalog: the runtime may have been restarted with other tools.
    let catalog = refresh_catalog().await;
    let answer = submit_answer(catalog.as_deref());
    // The reply already on the page must not be taken for the answer to this task.
    let previous = interpret(&snapshot).ok().and_then(|view| view.latest_reply.map(|r| r.entry.message_id()));
    // Checked again: another submit may have started a task while the catalog was fetched.
    let generation = CONVS.with(|c| {
        let mut c = c.borrow_mut();
        let conv = c.by_id.get_mut(&id)?;
        if conv.engine.is_running() {
            return Some(None);
        }
        if let Some(p) = &previous {
            conv.handled.insert(p.clone());
        }
        Some(Some(conv.generation))
    });
    let generation = match generation {
        None => return json!({ "ok": false, "error": crate::notices::ERR_CONVERSATION_UNAVAILABLE }),
        Some(None) => return busy,
        Some(Some(generation)) => generation,
    };
    feed(id, generation, Event::Submit { text, catalog: catalog.ok(), previous_reply_id: previous, now_ms: io::now() });
    answer
}

/// Feeds an event to a conversation's engine if it is still the same engine generation.
fn feed(id: u64, generation: u64, event: Event) {
    let commands = CONVS.with(|c| {
        let mut c = c.borrow_mut();
        match c.by_id.get_mut(&id) {
            Some(conv) if conv.generation == generation => conv.engine.handle(event),
            _ => Vec::new(),
        }
    });
    apply(id, generation, commands);
}

/// Applies commands in order; a journal save completes before the calls it protects start.
fn apply(id: u64, generation: u64, commands: Vec<Command>) {
    if commands.is_empty() {
        return;
    }
    wasm_bindgen_futures::spawn_local(async move {
        for command in commands {
            apply_one(id, generation, command).await;
        }
    });
}

fn conv_facts(id: u64) -> Option<(String, String, (i32, i32), u64)> {
    CONVS.with(|c| c.borrow().by_id.get(&id).map(|conv| (conv.key.clone(), conv.identity.clone(), conv.tab, conv.generation)))
}

async fn apply_one(id: u64, generation: u64, command: Command) {
    let Some((key, identity, (tab, frame), current)) = conv_facts(id) else { return };
    if current != generation {
        return;
    }
    match command {
        Command::SendMessage { text, kind, .. } => {
            // The kind lets the page keep a draft the user typed meanwhile (see bridge.js sendText).
            let message = json!({ "type": "h2w_send", "text": text, "kind": kind });
            let answer = io::wait(io::tab_send(tab, frame, &io::to_js(&message))).await;
            let answer = answer.map(|a| io::from_js(&a)).unwrap_or(Value::Null);
            if answer.get("ok") != Some(&Value::Bool(true)) {
                let detail = answer.get("detail").or(answer.get("error")).and_then(Value::as_str).unwrap_or("no answer from the page").to_string();
                feed(id, generation, Event::SendFailed { detail, now_ms: io::now() });
            }
        }
        Command::SaveJournal { journal } => {
            let mut items = Map::new();
            items.insert(format!("{JOURNAL_PREFIX}{key}"), json!({ "identity": identity, "journal": journal }));
            if let Err(e) = store::set(items).await {
                io::log("error", &format!("journal not saved for {key}: {e}"));
            }
        }
        Command::ExecuteCalls { calls, .. } => {
            for call in calls {
                wasm_bindgen_futures::spawn_local(run_call(id, generation, key.clone(), call));
            }
        }
        Command::Fold => notify(tab, frame, json!({ "type": "h2w_fold_now" })),
        Command::Status { status, .. } => {
            let text = describe(&status);
            set_status(id, &text);
            let shown = ext_core::ui_text::status(crate::notices::browser_lang(), &status);
            notify(tab, frame, json!({ "type": "h2w_indicator", "text": format!("Herdr: {shown}") }));
        }
        Command::WakeAt { at_ms } => {
            let delay = at_ms.saturating_sub(io::now()) as f64;
            let tick = Closure::once_into_js(move || feed(id, generation, Event::Tick { now_ms: io::now() }));
            io::set_timer(delay, tick.unchecked_ref());
        }
        // submit() refuses before feeding a running engine, so this is only a safety net.
        Command::Busy { .. } => io::log("warn", &format!("a submit reached the running task of {key} and was refused")),
        Command::Stop { reason, message, .. } => {
            let label = stop_label(reason);
            set_status(id, &if message.is_empty() { label.to_string() } else { format!("{label}: {message}") });
            let (cfg, _) = config();
            let numbers = ext_core::ui_text::StopNumbers {
                repairs: cfg.max_repairs + 1,
                reply_timeout_sec: cfg.reply_idle_timeout_ms / 1000,
                max_rounds: cfg.max_rounds,
            };
            let lang = crate::notices::browser_lang();
            let text = (reason != StopReason::Finished).then(|| ext_core::ui_text::stopped(lang, reason, &message, numbers));
            notify(tab, frame, json!({ "type": "h2w_indicator", "text": text, "final": true }));
        }
    }
}

fn notify(tab: i32, frame: i32, message: Value) {
    let promise = io::tab_send(tab, frame, &io::to_js(&message));
    wasm_bindgen_futures::spawn_local(async move {
        let _ = io::wait(promise).await;
    });
}

fn set_status(id: u64, text: &str) {
    CONVS.with(|c| {
        if let Some(conv) = c.borrow_mut().by_id.get_mut(&id) {
            conv.status = text.to_string();
        }
    });
}

/// The conversation's state as the options page and tests read it (English; the page's
/// badge shows the browser's language, both from ext-core `ui_text`).
fn describe(status: &Status) -> String {
    ext_core::ui_text::status(ext_core::continuity::Lang::En, status)
}

fn stop_label(reason: StopReason) -> &'static str {
    ext_core::ui_text::stop_label(ext_core::continuity::Lang::En, reason)
}

async fn run_call(id: u64, generation: u64, conv_key: String, call: ExecCall) {
    let started = io::now_ms();
    let reply = call_tool(&call.tool, call.args.clone()).await;
    let ended = io::now_ms();
    CALL_LOG.with(|l| {
        let mut l = l.borrow_mut();
        if l.len() >= CALL_LOG_MAX {
            l.remove(0);
        }
        let outcome = match &reply {
            CallReply::Ok { .. } => "ok".to_string(),
            CallReply::Failed { error, .. } => error.clone(),
            CallReply::Lost { .. } => "delivery_unknown".to_string(),
        };
        l.push(json!({ "conv": conv_key, "tool": call.tool, "startedAt": started, "endedAt": ended, "outcome": outcome }));
    });
    feed(id, generation, Event::CallResult { call_id: call.call_id, reply, now_ms: io::now() });
}

/// One `tools/call` through the port, mapped to how the engine must treat it.
pub async fn call_tool(tool: &str, arguments: Value) -> CallReply {
    let message = mcp::host_request(&format!("browser-json-{}", io::now()), "tools/call", json!({ "name": tool, "arguments": arguments }));
    match port::request(message).await {
        Ok(answer) => match mcp::read_result(answer.status, &answer.body) {
            Ok(result) => CallReply::Ok { result },
            Err(e) => CallReply::Failed { error: e.code, detail: e.detail },
        },
        Err(PortFailure::Lost { detail }) => CallReply::Lost { detail },
        // The host sent the request but its answer never came back complete: unknown outcome.
        Err(PortFailure::Host { code, detail })
            if matches!(code.as_str(), "native_request_timeout" | "native_response_failed" | "native_response_too_large") =>
        {
            CallReply::Lost { detail: format!("{code}: {detail}") }
        }
        Err(PortFailure::Host { code, detail }) | Err(PortFailure::NotSent { code, detail }) => CallReply::Failed { error: code, detail },
    }
}

/// The catalog as cached (see `crate::catalog` for when it is loaded).
pub async fn catalog() -> Result<Vec<Value>, mcp::McpError> {
    match CATALOG.with(|c| c.borrow_mut().lookup(io::now())) {
        Lookup::Ready(tools) => Ok(tools),
        Lookup::Unavailable(e) => Err(e),
        Lookup::Load(ticket) => load_catalog(ticket).await,
    }
}

/// The live `tools/list`, fetched now whatever is cached.
pub async fn refresh_catalog() -> Result<Vec<Value>, mcp::McpError> {
    let ticket = CATALOG.with(|c| c.borrow_mut().refresh());
    load_catalog(ticket).await
}

async fn load_catalog(ticket: Ticket) -> Result<Vec<Value>, mcp::McpError> {
    let message = mcp::host_request(&format!("browser-json-{}", io::now()), "tools/list", json!({}));
    let failure = |code: String, detail: String| mcp::McpError { code, detail };
    let result = match port::request(message).await {
        Ok(answer) => mcp::read_result(answer.status, &answer.body),
        Err(PortFailure::Lost { detail }) => Err(failure("native-port-lost".into(), detail)),
        Err(PortFailure::Host { code, detail }) | Err(PortFailure::NotSent { code, detail }) => Err(failure(code, detail)),
    };
    CATALOG.with(|c| c.borrow_mut().finish(ticket, result, io::now()))
}

pub fn last_catalog() -> Value {
    CATALOG.with(|c| c.borrow().describe())
}

pub fn call_log() -> Value {
    CALL_LOG.with(|l| Value::from(l.borrow().clone()))
}

/// Conversation states for the status page (and the tests' assertions).
pub fn conversations() -> Value {
    CONVS.with(|c| {
        let c = c.borrow();
        let mut list: Vec<Value> = c
            .by_id
            .values()
            .map(|conv| {
                json!({
                    "key": conv.key, "site": conv.site.name(), "tab": conv.tab.0, "state": conv.status,
                    "running": conv.engine.is_running(), "journalEntries": conv.engine.journal().entries().len(),
                })
            })
            .collect();
        list.sort_by(|a, b| a["key"].as_str().cmp(&b["key"].as_str()));
        Value::from(list)
    })
}
