//! Wakes that could not be delivered, kept for the popup (spec §7.5: "not silently lost, not
//! blindly resent"). A wake held back for a reason that clears by itself (the user was typing,
//! a reply was generating, another wake was in flight) is retried when the page reports its
//! composer free; every other failure waits for the user's "send now".

use serde::{Deserialize, Serialize};

/// At most this many undelivered wakes are kept; the oldest go first.
pub const MAX_PENDING: usize = 20;

/// Refusals that clear by themselves, so an automatic retry cannot surprise anyone.
pub const RETRYABLE: [&str; 3] = ["user-typing", "generating", "wake-in-flight"];

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingWake {
    pub id: String,
    pub binding_key: String,
    /// The conversation the wake is for.
    pub conv_key: String,
    pub kind: String,
    pub text: String,
    /// Why it was not delivered (the delivery refusal code).
    pub reason: String,
    pub created_at_ms: u64,
    pub attempts: u32,
}

impl PendingWake {
    /// Whether the worker may retry it on its own (Auto still has to be on then).
    pub fn retries_by_itself(&self) -> bool {
        RETRYABLE.contains(&self.reason.as_str())
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingWakes {
    items: Vec<PendingWake>,
    next: u64,
}

impl PendingWakes {
    /// Keeps `wake` (a fresh id is assigned); an identical text for the same conversation
    /// replaces the older entry instead of piling up. Returns the id.
    pub fn add(&mut self, mut wake: PendingWake) -> String {
        self.items.retain(|w| !(w.conv_key == wake.conv_key && w.text == wake.text));
        self.next += 1;
        wake.id = format!("pw-{}", self.next);
        let id = wake.id.clone();
        self.items.push(wake);
        if self.items.len() > MAX_PENDING {
            let excess = self.items.len() - MAX_PENDING;
            self.items.drain(..excess);
        }
        id
    }

    pub fn get(&self, id: &str) -> Option<&PendingWake> {
        self.items.iter().find(|w| w.id == id)
    }

    pub fn remove(&mut self, id: &str) -> Option<PendingWake> {
        let i = self.items.iter().position(|w| w.id == id)?;
        Some(self.items.remove(i))
    }

    /// Records another failed attempt with its (new) reason.
    pub fn failed_again(&mut self, id: &str, reason: &str) {
        if let Some(w) = self.items.iter_mut().find(|w| w.id == id) {
            w.attempts += 1;
            w.reason = reason.to_string();
        }
    }

    /// Drops every wake of a binding (it was unbound).
    pub fn forget_binding(&mut self, binding_key: &str) {
        self.items.retain(|w| w.binding_key != binding_key);
    }

    /// The oldest wake for `conv_key` the worker may retry on its own.
    pub fn next_retry(&self, conv_key: &str) -> Option<&PendingWake> {
        self.items.iter().find(|w| w.conv_key == conv_key && w.retries_by_itself())
    }

    pub fn list(&self) -> &[PendingWake] {
        &self.items
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wake(conv: &str, text: &str, reason: &str) -> PendingWake {
        PendingWake {
            id: String::new(),
            binding_key: format!("{conv}::ws"),
            conv_key: conv.into(),
            kind: "round".into(),
            text: text.into(),
            reason: reason.into(),
            created_at_ms: 1,
            attempts: 1,
        }
    }

    #[test]
    fn only_self_clearing_refusals_retry_by_themselves() {
        let mut p = PendingWakes::default();
        p.add(wake("c1", "a", "submit-unconfirmed"));
        assert_eq!(p.next_retry("c1"), None);
        let id = p.add(wake("c1", "b", "user-typing"));
        assert_eq!(p.next_retry("c1").map(|w| w.id.as_str()), Some(id.as_str()));
        assert_eq!(p.next_retry("c2"), None);
        p.failed_again(&id, "insert-failed");
        assert_eq!(p.next_retry("c1"), None);
        assert_eq!(p.get(&id).unwrap().attempts, 2);
    }

    #[test]
    fn same_text_replaces_and_the_list_is_bounded_at_its_limit() {
        let mut p = PendingWakes::default();
        p.add(wake("c1", "same", "generating"));
        p.add(wake("c1", "same", "user-typing"));
        assert_eq!(p.list().len(), 1);
        for i in 0..MAX_PENDING {
            p.add(wake("c2", &format!("t{i}"), "no_tab"));
        }
        assert_eq!(p.list().len(), MAX_PENDING);
        assert!(p.list().iter().all(|w| w.conv_key == "c2"), "the oldest entry went first");
        p.add(wake("c3", "x", "no_tab"));
        assert_eq!(p.list().len(), MAX_PENDING);
        assert_eq!(p.list()[0].text, "t1");
    }

    #[test]
    fn removing_and_unbinding() {
        let mut p = PendingWakes::default();
        let a = p.add(wake("c1", "a", "no_tab"));
        p.add(wake("c2", "b", "no_tab"));
        assert_eq!(p.remove(&a).map(|w| w.text), Some("a".into()));
        assert_eq!(p.remove(&a), None);
        p.forget_binding("c2::ws");
        assert!(p.list().is_empty());
    }
}
