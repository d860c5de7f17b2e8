//! The idempotency registry of `herdr_prompt`: one record per idempotency key, so
//! that a retried prompt is answered from the record instead of typed twice.
//! Kept behind [`PromptStore`] so a durable store can replace the in-memory one.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;
use sha2::{Digest, Sha256};

/// How long a record is honoured.
pub const RECORD_TTL: Duration = Duration::from_secs(600);
/// Records kept at most; the oldest go first.
pub const MAX_RECORDS: usize = 512;

#[derive(Debug, Clone, PartialEq)]
pub enum Reservation {
    /// The key is new (or expired): this call delivers.
    Fresh,
    /// Same key, same request, finished: answer with this result.
    Replay(Value),
    /// Same key, different request.
    Conflict,
    /// Same key, same request, still being delivered by another call.
    InFlight,
    /// The store holds only undelivered records and cannot drop one safely.
    Full,
}

pub trait PromptStore: Send + Sync {
    fn reserve(&self, key: &str, fingerprint: &str) -> Reservation;
    /// Records the final result of a reserved key.
    fn complete(&self, key: &str, result: &Value);
    /// Forgets a reserved key because nothing was delivered (a retry may deliver).
    fn release(&self, key: &str);
}

/// Hash of the request a key stands for: target, text and wait options.
pub fn fingerprint(target: &str, text: &str, wait: &Value) -> String {
    let canonical = serde_json::to_string(&serde_json::json!([target, text, wait])).unwrap_or_default();
    hex::encode(Sha256::digest(canonical.as_bytes()))
}

struct Record {
    fingerprint: String,
    created: Instant,
    result: Option<Value>,
}

pub struct MemoryPromptStore {
    ttl: Duration,
    max: usize,
    records: Mutex<HashMap<String, Record>>,
}

impl Default for MemoryPromptStore {
    fn default() -> Self {
        Self::with_limits(RECORD_TTL, MAX_RECORDS)
    }
}

impl MemoryPromptStore {
    pub fn with_limits(ttl: Duration, max: usize) -> Self {
        MemoryPromptStore { ttl, max: max.max(1), records: Mutex::new(HashMap::new()) }
    }

    pub fn len(&self) -> usize {
        self.records.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl PromptStore for MemoryPromptStore {
    fn reserve(&self, key: &str, fingerprint: &str) -> Reservation {
        let mut records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        let ttl = self.ttl;
        records.retain(|_, r| r.created.elapsed() < ttl);
        if let Some(r) = records.get(key) {
            return match (&r.result, r.fingerprint == fingerprint) {
                (_, false) => Reservation::Conflict,
                (Some(result), true) => Reservation::Replay(result.clone()),
                (None, true) => Reservation::InFlight,
            };
        }
        while records.len() >= self.max {
            let Some(oldest) = records.iter().min_by_key(|(_, r)| r.created).map(|(k, _)| k.clone()) else { break };
            records.remove(&oldest);
        }
        records.insert(key.to_string(), Record { fingerprint: fingerprint.to_string(), created: Instant::now(), result: None });
        Reservation::Fresh
    }

    fn complete(&self, key: &str, result: &Value) {
        if let Some(r) = self.records.lock().unwrap_or_else(|e| e.into_inner()).get_mut(key) {
            r.result = Some(result.clone());
        }
    }

    fn release(&self, key: &str) {
        self.records.lock().unwrap_or_else(|e| e.into_inner()).remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn replay_conflict_in_flight() {
        let s = MemoryPromptStore::default();
        let f = fingerprint("w1:p1", "hi", &Value::Null);
        assert_eq!(s.reserve("k", &f), Reservation::Fresh);
        assert_eq!(s.reserve("k", &f), Reservation::InFlight);
        assert_eq!(s.reserve("k", &fingerprint("w1:p1", "other", &Value::Null)), Reservation::Conflict);
        s.complete("k", &json!({"ok": true}));
        assert_eq!(s.reserve("k", &f), Reservation::Replay(json!({"ok": true})));
        s.release("k");
        assert_eq!(s.reserve("k", &f), Reservation::Fresh);
    }

    #[test]
    fn capacity_evicts_the_oldest_at_the_edge() {
        let s = MemoryPromptStore::with_limits(RECORD_TTL, 3);
        for k in ["a", "b", "c"] {
            assert_eq!(s.reserve(k, "f"), Reservation::Fresh);
        }
        assert_eq!(s.len(), 3);
        assert_eq!(s.reserve("d", "f"), Reservation::Fresh);
        assert_eq!(s.len(), 3);
        assert_eq!(s.reserve("a", "f"), Reservation::Fresh, "a was the oldest and is gone");
        assert_eq!(MemoryPromptStore::default().max, MAX_RECORDS);
    }

    #[test]
    fn records_expire_after_the_ttl() {
        let s = MemoryPromptStore::with_limits(Duration::ZERO, 10);
        assert_eq!(s.reserve("k", "f"), Reservation::Fresh);
        s.complete("k", &json!({}));
        assert_eq!(s.reserve("k", "g"), Reservation::Fresh, "expired records do not conflict");
    }
}
