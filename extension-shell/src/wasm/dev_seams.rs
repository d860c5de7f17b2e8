//! A fault point that lets the e2e tests stop the service worker at one exact step of a
//! delivery, where no outside event can be timed: after the wake was accepted and saved with
//! the decision that produced it, before `DeliveryGuard::begin` claims the tab (the
//! "accepted but never begun" case of ext-core's `recover_after_restart`).
//!
//! With `chrome.storage.local` `herdrDevHoldBeforeBegin` = `true`, an unpacked (development)
//! install halts every delivery at that point and never resumes it in this worker instance —
//! what a worker stopped there leaves behind. The test then clears the value (the halted
//! delivery stays halted) and stops the worker; the next instance finds the wake accepted and
//! delivers it. Any other install ignores the value, and nothing in the extension's pages or
//! messages writes it.
//!
//! The same holds for `herdrDevWholeSnapshots` (see [`whole_snapshots`]).

use std::cell::RefCell;

use serde_json::Value;

use super::{continuity_io as cio, io, store};

/// `chrome.storage.local` key of the development-only hold.
pub const HOLD_BEFORE_BEGIN_KEY: &str = "herdrDevHoldBeforeBegin";

thread_local! {
    static HELD: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// Returns at once unless the hold is set in a development install; then never returns.
pub async fn hold_before_begin(wake_id: &str) {
    if store::get(HOLD_BEFORE_BEGIN_KEY) != Some(Value::Bool(true)) {
        return;
    }
    let install = io::wait(cio::install_type()).await.ok().and_then(|v| v.as_string()).unwrap_or_default();
    if install != "development" {
        return;
    }
    io::log("warn", &format!("wake {wake_id}: delivery halted before begin ({HOLD_BEFORE_BEGIN_KEY}, development install)"));
    HELD.with(|h| h.borrow_mut().push(wake_id.to_string()));
    std::future::pending::<()>().await;
}

/// For the state view: whether the hold is set (as this worker's storage mirror has it) and
/// the wakes it halted in this worker instance, in order.
pub fn hold_view() -> Value {
    serde_json::json!({
        "set": store::get(HOLD_BEFORE_BEGIN_KEY) == Some(Value::Bool(true)),
        "held": HELD.with(|h| h.borrow().clone()),
    })
}

/// `chrome.storage.local` key of the development-only whole-snapshot reports.
pub const WHOLE_SNAPSHOTS_KEY: &str = "herdrDevWholeSnapshots";

/// With `herdrDevWholeSnapshots` = `true` in an unpacked install, content scripts that start
/// from now on send every report with the whole text of the page's last message, as before
/// deltas: the baseline of the streaming figures (e2e/bench). Any other install ignores it.
pub async fn whole_snapshots() -> bool {
    if store::get(WHOLE_SNAPSHOTS_KEY) != Some(Value::Bool(true)) {
        return false;
    }
    let install = io::wait(cio::install_type()).await.ok().and_then(|v| v.as_string()).unwrap_or_default();
    install == "development"
}
