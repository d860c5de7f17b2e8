//! The pure rules of delivering a wake into a page (spec/extension.md §7.5): one wake in
//! flight per tab, the same text twice within 8 s is dropped, the user's draft is never
//! overwritten, and a wake that could not be delivered is kept for the popup's "send now"
//! instead of being lost or resent behind the user's back.
//!
//! The shell calls [`DeliveryGuard::begin`] before touching the page, decides what to do
//! with a non-empty composer with [`composer_decision`], and reports the end with
//! [`DeliveryGuard::finish`].
//!
//! # A worker stopped mid-delivery
//!
//! Chrome may stop the service worker at any moment. The guard is the write-ahead record
//! that tells the next worker what the last one left undone, so the shell saves it
//! together with the decision that produced a wake ([`DeliveryGuard::accept`]) and again,
//! waiting for the write, between [`DeliveryGuard::begin`] and the first touch of the page.
//! [`DeliveryGuard::recover_after_restart`] then sorts what it finds: a wake accepted but
//! never begun certainly did not reach the page and is delivered again; a wake in flight
//! may or may not have reached it, so it is reported as pending with
//! [`WORKER_STOPPED`] (the user decides) and never resent on its own.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use super::render::is_wake_text;
use super::state::Wake;

/// Identical text delivered to a tab within this window is dropped.
pub const DEDUPE_WINDOW_MS: u64 = 8_000;
/// A delivery not finished within this time is taken as abandoned (a service worker that
/// died mid-delivery must not block the tab forever).
pub const IN_FLIGHT_MAX_MS: u64 = 120_000;
/// Undelivered wakes kept for the popup.
pub const MAX_PENDING_WAKES: usize = 20;
/// How long an undelivered wake stays offered.
pub const PENDING_MAX_AGE_MS: u64 = 24 * 60 * 60 * 1_000;
/// Wakes accepted for delivery but not begun yet; older ones beyond this are parked.
pub const MAX_ACCEPTED_WAKES: usize = 20;
/// Code of a delivery a stopped service worker left unfinished (its fate is unknown).
pub const WORKER_STOPPED: &str = "worker-stopped";
/// Code of an accepted wake pushed out of the full accepted list (it never reached the page).
pub const BACKLOG: &str = "backlog";
/// Code of a delivery stopped because its claim could not be written before the page was
/// touched. The page certainly did not get the text, yet the wake is not retried on its own:
/// without a record on disk a stopped worker could not tell the next one about a second
/// attempt, so sending it again is left to the user ("send now").
pub const STATE_NOT_SAVED: &str = "state-not-saved";

/// Text compared for duplicates: zero-width spaces removed, white space collapsed.
pub fn normalise(text: &str) -> String {
    text.replace('\u{200b}', "").split_whitespace().collect::<Vec<_>>().join(" ")
}

/// ChatGPT's editor takes a moment to take in an inserted text before Send picks it up, the
/// longer the text the longer (spec §7.5): 350 ms plus 50 ms per 40 characters, at most
/// 1200 ms. Characters are UTF-16 units, as the page counts them.
pub fn chatgpt_settle_before_send_ms(text: &str) -> u64 {
    let units = text.encode_utf16().count() as u64;
    (350 + units / 40 * 50).min(1_200)
}

/// What set a delivery off; it decides which gates of spec §7.5 apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    /// Decided from an event or a tick.
    Automatic,
    /// A held-back wake tried again because the composer became free.
    Retry,
    /// The user pressed "send now".
    Manual,
}

impl Trigger {
    /// Auto off means the extension sends nothing by itself; the user's own "send now" is
    /// not automation.
    pub fn needs_auto(self) -> bool {
        self != Trigger::Manual
    }

    /// Every wake the extension sends by itself first needs a fresh OK `/push/state`
    /// (`automationRuntimeGate`, spec §7.1): with the runtime gone, automation pauses, also
    /// for a wake decided while it still answered.
    pub fn needs_runtime_gate(self) -> bool {
        self != Trigger::Manual
    }
}

/// Why a delivery does not start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Blocked {
    /// Another wake is being delivered to this tab; this one was parked as pending.
    WakeInFlight,
    /// The same text reached this tab moments ago; this one was dropped.
    Dedupe,
    EmptyTemplate,
}

impl Blocked {
    pub fn code(self) -> &'static str {
        match self {
            Blocked::WakeInFlight => "wake-in-flight",
            Blocked::Dedupe => "dedupe",
            Blocked::EmptyTemplate => "empty-template",
        }
    }
}

/// What to do with the composer before sending a wake.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ComposerAction {
    /// The composer is empty: insert the wake.
    Insert,
    /// The composer already holds exactly this wake: just submit it.
    SubmitOnly,
    /// The composer holds an earlier wake of ours: clear it and insert this one.
    Replace,
    /// The composer holds the user's draft: touch nothing (`user-typing`).
    UserTyping,
}

/// The composer rule. `last_failed` is the text of the last wake that failed on this tab
/// (it may have been left in the composer).
pub fn composer_decision(composer_text: &str, wake_text: &str, last_failed: Option<&str>) -> ComposerAction {
    let present = normalise(composer_text);
    if present.is_empty() {
        ComposerAction::Insert
    } else if present == normalise(wake_text) {
        ComposerAction::SubmitOnly
    } else if is_wake_text(&present) || last_failed.is_some_and(|f| normalise(f) == present) {
        ComposerAction::Replace
    } else {
        ComposerAction::UserTyping
    }
}

/// Why a wake is waiting in the pending list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", content = "detail", rename_all = "snake_case")]
pub enum PendingReason {
    /// The user was typing; nothing was inserted.
    UserTyping,
    /// Another wake was being delivered; nothing was inserted.
    WakeInFlight,
    /// A reply was being generated; nothing was inserted.
    Generating,
    /// No tab shows the conversation.
    NoTab,
    /// The page may or may not have received it (insert/submit unconfirmed, abandoned).
    Uncertain(String),
    /// It failed before reaching the page for another reason.
    Failed(String),
}

impl PendingReason {
    /// True when the page certainly did not get the text, so trying again once the
    /// obstacle is gone cannot double-send it.
    pub fn nothing_reached_the_page(&self) -> bool {
        matches!(self, PendingReason::UserTyping | PendingReason::WakeInFlight | PendingReason::Generating | PendingReason::NoTab)
    }

    /// The reason as the delivery reports it (`user-typing`, `generating`, …).
    pub fn from_code(code: &str) -> PendingReason {
        match code {
            "user-typing" => PendingReason::UserTyping,
            "wake-in-flight" => PendingReason::WakeInFlight,
            "generating" | "composer-busy" => PendingReason::Generating,
            "no_tab" | "no-tab" => PendingReason::NoTab,
            "insert-failed" | "submit-failed" | "no-response" | "context-invalidated" | "abandoned" | WORKER_STOPPED => {
                PendingReason::Uncertain(code.to_owned())
            }
            other => PendingReason::Failed(other.to_owned()),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingWake {
    pub wake: Wake,
    pub reason: PendingReason,
    pub since_ms: u64,
}

/// How a delivery ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", content = "reason", rename_all = "snake_case")]
pub enum DeliveryOutcome {
    /// The page accepted it (composer cleared / new user turn).
    Delivered,
    /// Not delivered; the code as the content script reported it.
    NotDelivered(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct InFlight {
    wake: Wake,
    started_at_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Sent {
    normalised: String,
    at_ms: u64,
}

/// Delivery bookkeeping of all tabs; plain serde data.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryGuard {
    in_flight: BTreeMap<i64, InFlight>,
    last_sent: BTreeMap<i64, Sent>,
    last_failed: BTreeMap<i64, String>,
    pending: Vec<PendingWake>,
    /// Wakes decided and saved, whose delivery has not begun (oldest first).
    #[serde(default)]
    accepted: Vec<Wake>,
}

impl DeliveryGuard {
    /// Claims the tab for `wake`. A wake blocked by another in flight is parked as pending
    /// (it is not lost); a duplicate is dropped.
    pub fn begin(&mut self, tab: i64, wake: &Wake, now_ms: u64) -> Result<(), Blocked> {
        self.expire(now_ms);
        // From here on the wake is in flight, parked or dropped: no longer merely accepted.
        self.forget_accepted(&wake.id);
        let text = normalise(&wake.text);
        if text.is_empty() {
            return Err(Blocked::EmptyTemplate);
        }
        if self.in_flight.contains_key(&tab) {
            self.park(wake.clone(), PendingReason::WakeInFlight, now_ms);
            return Err(Blocked::WakeInFlight);
        }
        if self.last_sent.get(&tab).is_some_and(|s| s.normalised == text && now_ms.saturating_sub(s.at_ms) < DEDUPE_WINDOW_MS) {
            return Err(Blocked::Dedupe);
        }
        self.in_flight.insert(tab, InFlight { wake: wake.clone(), started_at_ms: now_ms });
        Ok(())
    }

    /// The text of the last wake that failed on `tab`, for [`composer_decision`].
    pub fn last_failed(&self, tab: i64) -> Option<&str> {
        self.last_failed.get(&tab).map(String::as_str)
    }

    /// Whether a wake is being delivered to `tab`.
    pub fn in_flight(&self, tab: i64) -> Option<&Wake> {
        self.in_flight.get(&tab).map(|f| &f.wake)
    }

    /// Ends the delivery of `wake_id` on `tab`. Returns false when that wake was not in
    /// flight there (a late or unknown report changes nothing).
    pub fn finish(&mut self, tab: i64, wake_id: &str, outcome: DeliveryOutcome, now_ms: u64) -> bool {
        if self.in_flight.get(&tab).is_none_or(|f| f.wake.id != wake_id) {
            return false;
        }
        let Some(flight) = self.in_flight.remove(&tab) else { return false };
        match outcome {
            DeliveryOutcome::Delivered => {
                self.last_sent.insert(tab, Sent { normalised: normalise(&flight.wake.text), at_ms: now_ms });
                self.last_failed.remove(&tab);
                self.pending.retain(|p| p.wake.id != wake_id);
            }
            DeliveryOutcome::NotDelivered(code) => {
                let reason = PendingReason::from_code(&code);
                if !reason.nothing_reached_the_page() {
                    self.last_failed.insert(tab, flight.wake.text.clone());
                }
                self.park(flight.wake, reason, now_ms);
            }
        }
        true
    }

    /// Records a wake about to be delivered, to be saved with the decision that produced it:
    /// if the worker stops before [`DeliveryGuard::begin`], the next one delivers it.
    /// Beyond [`MAX_ACCEPTED_WAKES`] the oldest is parked as pending ([`BACKLOG`]).
    pub fn accept(&mut self, wake: Wake, now_ms: u64) {
        self.forget_accepted(&wake.id);
        self.accepted.push(wake);
        if self.accepted.len() > MAX_ACCEPTED_WAKES {
            let oldest = self.accepted.remove(0);
            self.park(oldest, PendingReason::Failed(BACKLOG.into()), now_ms);
        }
    }

    /// The accepted wake `wake_id` will not be delivered (its binding is gone, Auto is off).
    pub fn forget_accepted(&mut self, wake_id: &str) {
        self.accepted.retain(|w| w.id != wake_id);
    }

    /// Wakes accepted and not begun yet, oldest first.
    pub fn accepted(&self) -> &[Wake] {
        &self.accepted
    }

    /// Call once when a new service worker has loaded the saved guard, before it delivers
    /// anything. Deliveries the stopped worker left in flight become pending
    /// ([`WORKER_STOPPED`], uncertain: the page may have taken the text, so only the user may
    /// send it again) and free their tabs. Returns the accepted wakes that never began:
    /// nothing of them reached a page, so delivering them now cannot double-send.
    pub fn recover_after_restart(&mut self, now_ms: u64) -> Vec<Wake> {
        for (tab, flight) in std::mem::take(&mut self.in_flight) {
            self.last_failed.insert(tab, flight.wake.text.clone());
            self.park(flight.wake, PendingReason::Uncertain(WORKER_STOPPED.into()), now_ms);
        }
        let pending = &self.pending;
        let mut redo = std::mem::take(&mut self.accepted);
        // A wake already waiting in the list is the user's to send.
        redo.retain(|w| !pending.iter().any(|p| p.wake.id == w.id));
        redo
    }

    /// Keeps an undelivered wake for the popup (replacing an older entry of the same wake).
    pub fn park(&mut self, wake: Wake, reason: PendingReason, now_ms: u64) {
        self.forget_accepted(&wake.id);
        self.pending.retain(|p| p.wake.id != wake.id);
        self.pending.push(PendingWake { wake, reason, since_ms: now_ms });
        self.expire(now_ms);
    }

    /// Undelivered wakes, oldest first.
    pub fn pending(&mut self, now_ms: u64) -> &[PendingWake] {
        self.expire(now_ms);
        &self.pending
    }

    /// "Send now" from the popup: removes the wake from the list and hands it back for an
    /// explicit delivery.
    pub fn take_pending(&mut self, wake_id: &str, now_ms: u64) -> Option<Wake> {
        self.expire(now_ms);
        let i = self.pending.iter().position(|p| p.wake.id == wake_id)?;
        Some(self.pending.remove(i).wake)
    }

    pub fn dismiss(&mut self, wake_id: &str) -> bool {
        let before = self.pending.len();
        self.pending.retain(|p| p.wake.id != wake_id);
        before != self.pending.len()
    }

    /// The oldest pending wake for `conv_key` that certainly never reached the page, to try
    /// again now that the composer is free. Wakes whose fate is uncertain are only ever
    /// sent again by the user.
    pub fn next_retry(&mut self, conv_key: &str, now_ms: u64) -> Option<Wake> {
        self.expire(now_ms);
        let i = self.pending.iter().position(|p| p.wake.conv_key == conv_key && p.reason.nothing_reached_the_page())?;
        Some(self.pending.remove(i).wake)
    }

    fn expire(&mut self, now_ms: u64) {
        let abandoned: Vec<i64> = self
            .in_flight
            .iter()
            .filter(|(_, f)| now_ms.saturating_sub(f.started_at_ms) >= IN_FLIGHT_MAX_MS)
            .map(|(tab, _)| *tab)
            .collect();
        for tab in abandoned {
            if let Some(f) = self.in_flight.remove(&tab) {
                self.last_failed.insert(tab, f.wake.text.clone());
                self.pending.retain(|p| p.wake.id != f.wake.id);
                self.pending.push(PendingWake { wake: f.wake, reason: PendingReason::Uncertain("abandoned".into()), since_ms: now_ms });
            }
        }
        self.pending.retain(|p| now_ms.saturating_sub(p.since_ms) < PENDING_MAX_AGE_MS);
        if self.pending.len() > MAX_PENDING_WAKES {
            let excess = self.pending.len() - MAX_PENDING_WAKES;
            self.pending.drain(..excess);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::continuity::render::WakeKind;

    fn wake(id: &str, text: &str) -> Wake {
        Wake {
            id: id.into(),
            binding_key: "k::w1".into(),
            conv_key: "k".into(),
            site: "chatgpt".into(),
            tab_id: Some(1),
            kind: WakeKind::Round,
            workspace_id: "w1".into(),
            agent: "a".into(),
            pane: "p".into(),
            status: "done".into(),
            working_count: 0,
            output: String::new(),
            text: text.into(),
            created_at_ms: 0,
        }
    }

    const TEXT: &str = "[Herdr update] all done";

    #[test]
    fn one_wake_in_flight_per_tab_and_the_second_is_parked_not_lost() {
        let mut g = DeliveryGuard::default();
        g.begin(1, &wake("a", TEXT), 0).unwrap();
        assert_eq!(g.begin(1, &wake("b", "[Herdr update] other"), 1), Err(Blocked::WakeInFlight));
        g.begin(2, &wake("c", "[Herdr update] other"), 1).expect("another tab is independent");
        assert_eq!(g.pending(2).len(), 1);
        assert_eq!(g.pending(2)[0].reason, PendingReason::WakeInFlight);
        assert!(g.finish(1, "a", DeliveryOutcome::Delivered, 5));
        assert_eq!(g.next_retry("k", 6).map(|w| w.id), Some("b".into()), "retried once the tab is free");
        assert!(g.next_retry("k", 6).is_none());
    }

    #[test]
    fn identical_text_within_8s_is_dropped_and_allowed_at_8s() {
        let mut g = DeliveryGuard::default();
        g.begin(1, &wake("a", TEXT), 0).unwrap();
        g.finish(1, "a", DeliveryOutcome::Delivered, 1_000);
        let same = wake("b", "  [Herdr update]\u{200b}   all done ");
        assert_eq!(g.begin(1, &same, 1_000 + DEDUPE_WINDOW_MS - 1), Err(Blocked::Dedupe));
        assert!(g.pending(9_000).is_empty(), "a duplicate is dropped, not parked");
        g.begin(1, &same, 1_000 + DEDUPE_WINDOW_MS).unwrap();
        assert_eq!(g.begin(2, &wake("c", " \u{200b} "), 0), Err(Blocked::EmptyTemplate));
        assert_eq!(Blocked::Dedupe.code(), "dedupe");
    }

    #[test]
    fn chatgpt_waits_longer_before_send_for_longer_wakes_up_to_1200_ms() {
        let wait = |units: usize| chatgpt_settle_before_send_ms(&"x".repeat(units));
        assert_eq!((wait(0), wait(39)), (350, 350));
        assert_eq!((wait(40), wait(79), wait(80)), (400, 400, 450));
        assert_eq!((wait(679), wait(680), wait(4_000)), (1_150, 1_200, 1_200));
        // Counted as the page counts text (UTF-16 units): 20 emoji are 40 units.
        assert_eq!(chatgpt_settle_before_send_ms(&"😀".repeat(20)), 400);
        assert_eq!(chatgpt_settle_before_send_ms(&"日".repeat(40)), 400);
    }

    #[test]
    fn only_the_users_send_now_skips_the_auto_and_runtime_gates() {
        for t in [Trigger::Automatic, Trigger::Retry] {
            assert!(t.needs_auto() && t.needs_runtime_gate(), "{t:?}: the extension sends it on its own");
        }
        assert!(!Trigger::Manual.needs_auto() && !Trigger::Manual.needs_runtime_gate());
    }

    #[test]
    fn composer_rule_never_overwrites_the_user() {
        assert_eq!(composer_decision("", TEXT, None), ComposerAction::Insert);
        assert_eq!(composer_decision("\u{200b}\n", TEXT, None), ComposerAction::Insert);
        assert_eq!(composer_decision(" [Herdr update]  all done\n", TEXT, None), ComposerAction::SubmitOnly);
        assert_eq!(composer_decision("[Herdr 进展] 旧的通知", TEXT, None), ComposerAction::Replace);
        assert_eq!(composer_decision("old failed text", TEXT, Some("old  failed text")), ComposerAction::Replace);
        assert_eq!(composer_decision("my draft", TEXT, None), ComposerAction::UserTyping);
        assert_eq!(composer_decision("my draft [Herdr update]", TEXT, Some("x")), ComposerAction::UserTyping);
    }

    #[test]
    fn failures_are_kept_and_uncertain_ones_are_never_retried_automatically() {
        let mut g = DeliveryGuard::default();
        g.begin(1, &wake("a", TEXT), 0).unwrap();
        g.finish(1, "a", DeliveryOutcome::NotDelivered("submit-failed".into()), 1);
        assert_eq!(g.last_failed(1), Some(TEXT));
        assert_eq!(g.pending(2)[0].reason, PendingReason::Uncertain("submit-failed".into()));
        assert!(g.next_retry("k", 2).is_none(), "uncertain: only the user may resend");
        assert_eq!(g.take_pending("a", 3).map(|w| w.id), Some("a".into()), "send now");
        assert!(g.pending(3).is_empty());
        g.begin(1, &wake("b", "[Herdr update] b"), 4).unwrap();
        g.finish(1, "b", DeliveryOutcome::NotDelivered("user-typing".into()), 5);
        assert_eq!(g.last_failed(1), Some(TEXT), "user-typing inserted nothing");
        assert_eq!(g.next_retry("k", 6).map(|w| w.id), Some("b".into()));
    }

    #[test]
    fn late_or_foreign_reports_change_nothing() {
        let mut g = DeliveryGuard::default();
        g.begin(1, &wake("a", TEXT), 0).unwrap();
        assert!(!g.finish(1, "zzz", DeliveryOutcome::Delivered, 1));
        assert!(!g.finish(7, "a", DeliveryOutcome::Delivered, 1));
        assert!(g.in_flight(1).is_some());
    }

    #[test]
    fn an_abandoned_delivery_frees_the_tab_and_becomes_uncertain() {
        let mut g = DeliveryGuard::default();
        g.begin(1, &wake("a", TEXT), 0).unwrap();
        assert_eq!(g.begin(1, &wake("b", "[Herdr update] b"), IN_FLIGHT_MAX_MS - 1), Err(Blocked::WakeInFlight));
        g.begin(1, &wake("c", "[Herdr update] c"), IN_FLIGHT_MAX_MS).unwrap();
        let pending = g.pending(IN_FLIGHT_MAX_MS);
        assert!(pending.iter().any(|p| p.wake.id == "a" && p.reason == PendingReason::Uncertain("abandoned".into())));
        assert!(!g.finish(1, "a", DeliveryOutcome::Delivered, IN_FLIGHT_MAX_MS + 1), "too late");
    }

    #[test]
    fn pending_list_is_bounded_by_count_and_age() {
        let mut g = DeliveryGuard::default();
        for i in 0..MAX_PENDING_WAKES + 3 {
            g.park(wake(&format!("w{i}"), TEXT), PendingReason::NoTab, i as u64);
        }
        let ids: Vec<String> = g.pending(100).iter().map(|p| p.wake.id.clone()).collect();
        assert_eq!(ids.len(), MAX_PENDING_WAKES);
        assert_eq!(ids[0], "w3", "the oldest went first");
        g.park(wake("w3", TEXT), PendingReason::NoTab, 50);
        assert_eq!(g.pending(100).len(), MAX_PENDING_WAKES, "re-parking replaces");
        assert_eq!(g.pending(PENDING_MAX_AGE_MS + 49).len(), 1, "only the re-parked one is young enough");
        assert!(g.pending(PENDING_MAX_AGE_MS + 50).is_empty());
        assert!(!g.dismiss("w3"));
    }

    #[test]
    fn reason_codes_map_to_certainty() {
        for code in ["user-typing", "wake-in-flight", "generating", "composer-busy", "no_tab"] {
            assert!(PendingReason::from_code(code).nothing_reached_the_page(), "{code}");
        }
        assert_eq!(PendingReason::from_code(WORKER_STOPPED), PendingReason::Uncertain(WORKER_STOPPED.into()));
        for code in ["insert-failed", "submit-failed", "no-response", "context-invalidated", WORKER_STOPPED, "weird"] {
            assert!(!PendingReason::from_code(code).nothing_reached_the_page(), "{code}");
        }
    }

    #[test]
    fn a_wake_whose_claim_could_not_be_saved_waits_for_the_user_and_is_sent_once() {
        let mut g = DeliveryGuard::default();
        g.accept(wake("a", TEXT), 0);
        g.begin(1, &wake("a", TEXT), 1).unwrap();
        // The write-ahead save failed: the shell reports it before touching the page.
        assert!(g.finish(1, "a", DeliveryOutcome::NotDelivered(STATE_NOT_SAVED.into()), 2));
        assert!(g.in_flight(1).is_none(), "the tab is free");
        assert!(g.accepted().is_empty());
        let pending = g.pending(3);
        assert_eq!(pending.len(), 1, "kept, not lost");
        assert_eq!((pending[0].wake.id.as_str(), &pending[0].reason), ("a", &PendingReason::Failed(STATE_NOT_SAVED.into())));
        assert!(g.next_retry("k", 4).is_none(), "a free composer does not resend it on its own");
        assert!(reloaded(&g).recover_after_restart(5).is_empty(), "nor does the next worker, once the list was saved");
        let again = g.take_pending("a", 6).expect("send now hands it back");
        g.begin(1, &again, 7).expect("the tab takes it; no dedupe, the first attempt sent nothing");
        assert!(g.finish(1, "a", DeliveryOutcome::Delivered, 8));
        assert!(g.pending(9).is_empty(), "delivered once, offered no more");
        assert_eq!(g.begin(1, &wake("b", TEXT), 10), Err(Blocked::Dedupe), "the same text right after is a duplicate");
    }

    /// The guard as the next worker reads it from storage.
    fn reloaded(g: &DeliveryGuard) -> DeliveryGuard {
        serde_json::from_value(serde_json::to_value(g).unwrap()).unwrap()
    }

    #[test]
    fn a_delivery_left_in_flight_by_a_stopped_worker_is_reported_never_resent() {
        let mut g = DeliveryGuard::default();
        g.accept(wake("a", TEXT), 0);
        g.begin(1, &wake("a", TEXT), 1).unwrap();
        // The worker stops here, after the page may have taken the text.
        let mut next = reloaded(&g);
        assert!(next.recover_after_restart(50).is_empty(), "nothing to deliver again");
        let pending = next.pending(50);
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].wake.id, "a");
        assert_eq!(pending[0].reason, PendingReason::Uncertain(WORKER_STOPPED.into()));
        assert!(next.in_flight(1).is_none(), "the tab is free at once, not after IN_FLIGHT_MAX_MS");
        assert!(next.next_retry("k", 60).is_none(), "a free composer does not resend it");
        assert_eq!(next.last_failed(1), Some(TEXT), "a copy left in the composer may be replaced");
        assert!(!next.finish(1, "a", DeliveryOutcome::Delivered, 70), "the old worker's report cannot land");
        assert!(next.recover_after_restart(80).is_empty(), "recovering twice changes nothing");
        assert_eq!(next.pending(80).len(), 1);
        assert_eq!(next.take_pending("a", 90).map(|w| w.id), Some("a".into()), "the user may send it");
    }

    #[test]
    fn an_accepted_wake_that_never_began_is_delivered_by_the_next_worker() {
        let mut g = DeliveryGuard::default();
        g.accept(wake("a", TEXT), 0);
        g.accept(wake("b", "[Herdr update] b"), 0);
        g.begin(1, &wake("b", "[Herdr update] b"), 1).unwrap();
        let mut next = reloaded(&g);
        let redo: Vec<String> = next.recover_after_restart(5).into_iter().map(|w| w.id).collect();
        assert_eq!(redo, ["a"], "only the one that never touched a page");
        assert!(next.accepted().is_empty());
        assert!(next.recover_after_restart(6).is_empty(), "handed out once");
        assert_eq!(next.pending(6).iter().map(|p| p.wake.id.as_str()).collect::<Vec<_>>(), ["b"]);
    }

    #[test]
    fn accepted_wakes_leave_the_list_when_begun_parked_or_forgotten() {
        let mut g = DeliveryGuard::default();
        for id in ["a", "b", "c", "d"] {
            g.accept(wake(id, &format!("[Herdr update] {id}")), 0);
        }
        g.accept(wake("a", "[Herdr update] a"), 0);
        assert_eq!(g.accepted().len(), 4, "accepting again replaces");
        g.begin(1, &wake("a", "[Herdr update] a"), 1).unwrap();
        g.begin(1, &wake("b", "[Herdr update] b"), 1).unwrap_err();
        g.park(wake("c", "[Herdr update] c"), PendingReason::NoTab, 1);
        g.forget_accepted("d");
        assert!(g.accepted().is_empty());
        let old = DeliveryGuard::default();
        let stored_before = serde_json::json!({ "in_flight": {}, "last_sent": {}, "last_failed": {}, "pending": [] });
        assert_eq!(serde_json::from_value::<DeliveryGuard>(stored_before).unwrap(), old, "a guard saved before this field loads");
    }

    #[test]
    fn the_accepted_list_is_bounded_and_its_overflow_is_parked_not_lost() {
        let mut g = DeliveryGuard::default();
        for i in 0..MAX_ACCEPTED_WAKES {
            g.accept(wake(&format!("w{i}"), TEXT), 0);
        }
        assert_eq!(g.accepted().len(), MAX_ACCEPTED_WAKES);
        assert!(g.pending(1).is_empty(), "at the limit nothing is pushed out");
        g.accept(wake("last", TEXT), 1);
        assert_eq!(g.accepted().len(), MAX_ACCEPTED_WAKES);
        assert_eq!(g.accepted()[0].id, "w1");
        let pending = g.pending(2);
        assert_eq!(pending.len(), 1);
        assert_eq!((pending[0].wake.id.as_str(), &pending[0].reason), ("w0", &PendingReason::Failed(BACKLOG.into())));
    }
}
