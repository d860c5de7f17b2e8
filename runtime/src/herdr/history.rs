//! The cursor-addressed ring of recent Herdr events behind `herdr_since`.

use std::collections::VecDeque;

use serde_json::{Map, Value, json};

use super::topology::str_of;

/// Events kept; older ones fall off the front.
pub const RING_CAPACITY: usize = 2048;
/// Events returned for cursor 0 (a client that has seen nothing yet).
pub const TAIL_FOR_CURSOR_ZERO: usize = 64;

#[derive(Debug, Clone, PartialEq)]
pub struct EventRecord {
    pub cursor: u64,
    /// RFC 3339.
    pub at: String,
    /// The raw Herdr event name.
    pub kind: String,
    pub data: Value,
}

impl EventRecord {
    pub fn workspace_id(&self) -> Option<&str> {
        str_of(&self.data, "workspace_id")
            .or_else(|| self.data.get("pane").and_then(|p| str_of(p, "workspace_id")))
            .or_else(|| self.data.get("workspace").and_then(|w| str_of(w, "workspace_id")))
            .or_else(|| self.data.get("tab").and_then(|t| str_of(t, "workspace_id")))
    }

    pub fn pane_id(&self) -> Option<&str> {
        str_of(&self.data, "pane_id").or_else(|| self.data.get("pane").and_then(|p| str_of(p, "pane_id")))
    }

    /// The identity used for coalescing: the most specific id the event names.
    fn subject(&self) -> Option<&str> {
        self.pane_id()
            .or_else(|| str_of(&self.data, "tab_id"))
            .or_else(|| self.data.get("tab").and_then(|t| str_of(t, "tab_id")))
            .or_else(|| self.workspace_id())
    }

    pub fn to_json(&self) -> Value {
        let mut obj = Map::new();
        obj.insert("cursor".into(), json!(self.cursor));
        obj.insert("at".into(), json!(self.at));
        obj.insert("type".into(), json!(self.kind));
        if let Some(w) = self.workspace_id() {
            obj.insert("workspace_id".into(), json!(w));
        }
        if let Some(p) = self.pane_id() {
            obj.insert("pane_id".into(), json!(p));
        }
        for key in ["pane", "workspace", "tab", "agent_status", "agent", "label"] {
            if let Some(v) = self.data.get(key) {
                obj.insert(key.into(), v.clone());
            }
        }
        Value::Object(obj)
    }
}

/// A bounded, cursor-numbered event log. Cursors start at 1 and never repeat within
/// one process.
#[derive(Debug)]
pub struct History {
    ring: VecDeque<EventRecord>,
    last_cursor: u64,
    capacity: usize,
}

/// One page of history for a requested cursor.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    pub events: Vec<EventRecord>,
    /// The newest cursor handed out so far.
    pub cursor: u64,
    /// The requested cursor is beyond anything handed out (another process, or a restart).
    pub cursor_reset: bool,
}

impl Default for History {
    fn default() -> Self {
        Self::with_capacity(RING_CAPACITY)
    }
}

impl History {
    pub fn with_capacity(capacity: usize) -> Self {
        History { ring: VecDeque::with_capacity(capacity.min(RING_CAPACITY)), last_cursor: 0, capacity: capacity.max(1) }
    }

    /// Appends an event; returns false when it repeats the previous one (same kind,
    /// same subject, same body) and was coalesced away.
    pub fn push(&mut self, kind: &str, data: Value, at: String) -> bool {
        if let Some(last) = self.ring.back() {
            let candidate = EventRecord { cursor: 0, at: String::new(), kind: kind.to_string(), data };
            if last.kind == candidate.kind && last.subject() == candidate.subject() && last.data == candidate.data {
                return false;
            }
            return self.append(candidate.kind, candidate.data, at);
        }
        self.append(kind.to_string(), data, at)
    }

    fn append(&mut self, kind: String, data: Value, at: String) -> bool {
        self.last_cursor += 1;
        if self.ring.len() == self.capacity {
            self.ring.pop_front();
        }
        self.ring.push_back(EventRecord { cursor: self.last_cursor, at, kind, data });
        true
    }

    pub fn last_cursor(&self) -> u64 {
        self.last_cursor
    }

    pub fn len(&self) -> usize {
        self.ring.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }

    /// Cursor 0: the newest 64 events. Otherwise every retained event after `cursor`.
    pub fn since(&self, cursor: u64, keep: impl Fn(&EventRecord) -> bool) -> Page {
        let cursor_reset = cursor > self.last_cursor;
        let events: Vec<EventRecord> = if cursor == 0 {
            let matching: Vec<&EventRecord> = self.ring.iter().filter(|e| keep(e)).collect();
            let skip = matching.len().saturating_sub(TAIL_FOR_CURSOR_ZERO);
            matching.into_iter().skip(skip).cloned().collect()
        } else {
            self.ring.iter().filter(|e| e.cursor > cursor && keep(e)).cloned().collect()
        };
        Page { events, cursor: self.last_cursor, cursor_reset }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(h: &mut History, pane: &str, status: &str) -> bool {
        h.push("pane.agent_status_changed", json!({"pane_id": pane, "agent_status": status}), "t".into())
    }

    #[test]
    fn ring_keeps_exactly_capacity_and_cursors_keep_counting() {
        let mut h = History::default();
        for i in 0..(RING_CAPACITY + 10) {
            ev(&mut h, &format!("w1:p{i}"), "working");
        }
        assert_eq!(h.len(), RING_CAPACITY);
        assert_eq!(h.last_cursor(), (RING_CAPACITY + 10) as u64);
        let page = h.since(1, |_| true);
        assert_eq!(page.events.len(), RING_CAPACITY);
        assert_eq!(page.events[0].cursor, 11);
    }

    #[test]
    fn cursor_zero_gives_the_tail_and_reset_is_flagged() {
        let mut h = History::default();
        for i in 0..100 {
            ev(&mut h, &format!("w1:p{i}"), "idle");
        }
        let page = h.since(0, |_| true);
        assert_eq!(page.events.len(), TAIL_FOR_CURSOR_ZERO);
        assert_eq!(page.events.last().unwrap().cursor, 100);
        assert!(!page.cursor_reset);
        assert!(h.since(100, |_| true).events.is_empty());
        assert!(!h.since(100, |_| true).cursor_reset);
        assert!(h.since(101, |_| true).cursor_reset);
    }

    #[test]
    fn back_to_back_duplicates_coalesce_but_changes_do_not() {
        let mut h = History::default();
        assert!(ev(&mut h, "w1:p1", "working"));
        assert!(!ev(&mut h, "w1:p1", "working"));
        assert!(ev(&mut h, "w1:p2", "working"));
        assert!(ev(&mut h, "w1:p1", "working"), "not back-to-back any more");
        assert!(ev(&mut h, "w1:p1", "idle"));
        assert_eq!(h.last_cursor(), 4);
    }
}
