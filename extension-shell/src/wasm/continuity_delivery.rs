//! Delivering one wake into the bound ChatGPT conversation (spec §7.5), the page half.
//!
//! The caller (`continuity`) finds the tab and claims it through ext-core's `DeliveryGuard`
//! (one wake in flight per tab, no identical text within 8 s). Then, here: ask the page
//! (content script) about its composer — never while a reply is generating, never over the
//! user's draft (ext-core's `composer_decision`) → insert in the page's MAIN world (so
//! ProseMirror's own state changes) → check the text is there → Send (or Enter) → the page
//! confirms it took it (composer cleared or a new user turn). Any refusal comes back as
//! `{ok:false, error}` and the guard parks the wake as pending.

use ext_core::continuity::delivery_guard::{ComposerAction, chatgpt_settle_before_send_ms, composer_decision, normalise as norm};
use ext_core::continuity::push_event::Hello;
use serde_json::{Value, json};

use super::{bridge, continuity_io as cio, io, port};
use crate::continuity_page::{RememberedTab, chatgpt_composer_selector, remembered_tab, shown_conversation};

/// An insert the composer does not show is tried again, up to this many times (spec §7.5).
pub const INSERT_ATTEMPTS: u32 = 3;
/// Checks that the inserted text is in the composer: polls × interval, per insert attempt.
pub const VERIFY_POLLS: u32 = 10;
pub const VERIFY_INTERVAL_MS: u64 = 200;
pub const PUSH_STATE_TIMEOUT_MS: u64 = 4_000;

pub async fn sleep(ms: u64) {
    let promise = js_sys::Promise::new(&mut |resolve, _| io::set_timer(ms as f64, &resolve));
    let _ = io::wait(promise).await;
}

/// `GET /push/state`, fresh; None when the runtime does not answer OK.
pub async fn push_state() -> Option<Hello> {
    let answer = port::http("GET", "/push/state", json!({ "accept": "application/json" }), None, PUSH_STATE_TIMEOUT_MS).await.ok()?;
    if answer.status != 200 {
        return None;
    }
    let body: Value = serde_json::from_str(&answer.body).ok()?;
    if body.get("ok") != Some(&Value::Bool(true)) {
        return None;
    }
    serde_json::from_value(body).ok()
}

/// An automatic wake goes out only while the runtime answers (spec §7.1 `automationRuntimeGate`).
pub async fn runtime_gate() -> bool {
    push_state().await.is_some()
}

/// The runtime's managed roots (`herdr_inspect`), offered for binding when Herdr is absent.
pub async fn managed_roots() -> Vec<String> {
    match bridge::call_tool("herdr_inspect", json!({})).await {
        ext_core::engine::CallReply::Ok { result } => result
            .pointer("/structuredContent/workstation_info/managed_git_roots")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

async fn ask_tab(tab: i32, message: Value) -> Value {
    match io::wait(io::tab_send(tab, 0, &io::to_js(&message))).await {
        Ok(v) => io::from_js(&v),
        Err(e) => json!({ "ok": false, "error": "tab-unreachable", "detail": format!("{e:?}") }),
    }
}

async fn probe(tab: i32) -> Value {
    ask_tab(tab, json!({ "type": "h2w_composer_probe" })).await
}

/// Where a wake goes (spec §7.5 target).
pub enum TabFound {
    Tab(i32),
    /// A Project binding's tab shows another chat now (`project-target-moved`).
    ProjectTargetMoved,
    None,
}

/// The tab showing `conv`: the binding's own tab if it still shows it, else any that does and
/// whose content script answers. A Project binding's own tab that moved on ends the search.
pub async fn find_tab(remembered: Option<i64>, conv: &str, project: bool) -> TabFound {
    if let Some(id) = remembered {
        let tab = io::wait(cio::tab_get(id as i32)).await.map(|t| io::from_js(&t)).unwrap_or(Value::Null);
        match remembered_tab(project, tab.get("url").and_then(Value::as_str), conv) {
            RememberedTab::Shows => return TabFound::Tab(id as i32),
            RememberedTab::ProjectTargetMoved => return TabFound::ProjectTargetMoved,
            RememberedTab::Search => {}
        }
    }
    let tabs = io::wait(cio::tabs_with_prefix(conv)).await.map(|t| io::from_js(&t)).unwrap_or(Value::Null);
    for tab in tabs.as_array().into_iter().flatten() {
        let Some(id) = tab.get("id").and_then(Value::as_i64) else { continue };
        if tab.get("url").and_then(Value::as_str).and_then(shown_conversation).as_deref() != Some(conv) {
            continue;
        }
        if probe(id as i32).await.get("ok") == Some(&Value::Bool(true)) {
            return TabFound::Tab(id as i32);
        }
    }
    TabFound::None
}

fn refusal(code: &str) -> Value {
    json!({ "ok": false, "error": code })
}

/// Did the composer take `text`? Looked at `VERIFY_POLLS` times, `VERIFY_INTERVAL_MS` apart.
async fn composer_holds(tab: i32, text: &str) -> bool {
    let wanted = norm(text);
    for _ in 0..VERIFY_POLLS {
        if norm(probe(tab).await.get("text").and_then(Value::as_str).unwrap_or("")).contains(&wanted) {
            return true;
        }
        sleep(VERIFY_INTERVAL_MS).await;
    }
    false
}

/// Inserts `text` over `expected` (what the probe saw) until the composer shows it, at most
/// `INSERT_ATTEMPTS` times: an editor busy re-rendering can drop an insert or keep only part
/// of it. What an attempt left of the wake is taken out before the next one and after the
/// last, so a failed wake never sits half-typed in the user's composer.
pub async fn insert_verified(tab: i32, text: &str, expected: &str) -> Result<(), Value> {
    let selector = chatgpt_composer_selector();
    let mut expected = expected.to_string();
    let mut last_strip = Value::Null;
    for attempt in 1..=INSERT_ATTEMPTS {
        let inserted = io::wait(cio::insert_main(tab, text, &selector, &expected)).await.map(|v| io::from_js(&v)).unwrap_or(Value::Null);
        if inserted.get("ok") != Some(&Value::Bool(true)) {
            let code = inserted.get("error").and_then(Value::as_str).unwrap_or("insert-failed");
            return Err(json!({ "ok": false, "error": code, "detail": inserted.get("detail"), "insert_attempts": attempt }));
        }
        if composer_holds(tab, text).await {
            return Ok(());
        }
        let stripped = io::wait(cio::strip_main(tab, text, &selector)).await.map(|v| io::from_js(&v)).unwrap_or(Value::Null);
        if stripped.get("ok") != Some(&Value::Bool(true)) {
            // A piece of the wake may still be there: a further insert would take it for the
            // user's draft, and nobody can say whether it will be sent.
            return Err(json!({ "ok": false, "error": "insert-failed", "insert_attempts": attempt, "strip": stripped }));
        }
        if stripped.get("stripped") == Some(&Value::Bool(true)) {
            expected.clear();
        }
        last_strip = stripped;
    }
    Err(json!({ "ok": false, "error": "insert-failed", "insert_attempts": INSERT_ATTEMPTS, "strip": last_strip }))
}

/// Puts `text` into the composer of `tab` (which must still show `conv`) and sends it;
/// `{ok:true, ack}` once the page took it.
pub async fn attempt(tab: i32, conv: &str, text: &str, last_failed: Option<&str>) -> Value {
    let page = probe(tab).await;
    if page.get("ok") != Some(&Value::Bool(true)) {
        return json!({ "ok": false, "error": "tab-unreachable", "detail": page.get("error") });
    }
    if page.get("convKey").and_then(Value::as_str).and_then(shown_conversation).as_deref() != Some(conv) {
        return refusal("conversation-changed");
    }
    if page.get("generating") == Some(&Value::Bool(true)) {
        return refusal("generating");
    }
    if page.get("composer") != Some(&Value::Bool(true)) {
        return refusal("composer-missing");
    }
    let current = page.get("text").and_then(Value::as_str).unwrap_or("").to_string();
    let action = composer_decision(&current, text, last_failed);
    if action == ComposerAction::UserTyping {
        return refusal("user-typing");
    }
    if action != ComposerAction::SubmitOnly {
        // The page re-checks that the composer still holds what was probed, in the same task
        // as the insert, so a keystroke in between is never overwritten.
        if let Err(failed) = insert_verified(tab, text, &current).await {
            return failed;
        }
        // The editor's state catches up between insert and Send, longer for a longer text.
        sleep(chatgpt_settle_before_send_ms(text)).await;
    }
    let sent = ask_tab(tab, json!({ "type": "h2w_wake_submit", "text": text })).await;
    if sent.get("ok") == Some(&Value::Bool(true)) {
        json!({ "ok": true, "tab": tab, "ack": sent.get("ack"), "via": sent.get("via") })
    } else {
        json!({ "ok": false, "error": sent.get("error").and_then(Value::as_str).unwrap_or("submit-unconfirmed"), "tab": tab })
    }
}

/// The same wake on z.ai: read the page through the bridge's snapshot (the site adapter says
/// whether a reply is still coming), apply the same composer rule, then send through the
/// bridge's raw path (`h2w_send`), so the wake is not wrapped as a new bridged task.
pub async fn attempt_zai(tab: i32, conv: &str, text: &str, last_failed: Option<&str>) -> Value {
    let answer = ask_tab(tab, json!({ "type": "h2w_snapshot" })).await;
    let Some(snapshot) = answer.get("snapshot").cloned().and_then(|s| serde_json::from_value::<ext_adapters::PageSnapshot>(s).ok()) else {
        return json!({ "ok": false, "error": "tab-unreachable", "detail": answer.get("error") });
    };
    if shown_conversation(&snapshot.url).as_deref() != Some(conv) {
        return refusal("conversation-changed");
    }
    let Some(page) = crate::continuity_handoff::PageRead::from_snapshot(&snapshot) else { return refusal("tab-unreachable") };
    if page.busy {
        return refusal("generating");
    }
    if !page.composer {
        return refusal("composer-missing");
    }
    if composer_decision(&snapshot.composer.text, text, last_failed) == ComposerAction::UserTyping {
        return refusal("user-typing");
    }
    let sent = ask_tab(tab, json!({ "type": "h2w_send", "text": text })).await;
    if sent.get("ok") == Some(&Value::Bool(true)) {
        json!({ "ok": true, "tab": tab, "via": "bridge-raw" })
    } else {
        json!({ "ok": false, "error": "submit-failed", "detail": sent.get("detail"), "tab": tab })
    }
}
