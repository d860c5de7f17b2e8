//! Herdr's event hub and its subscriptions, as spec/herdr.md section E describes
//! real Herdr 0.8.2 (which overrides §5 where they differ):
//!
//! - E.1: one hub holds the last [`RING_CAPACITY`] (512) events since the server
//!   started, each with an internal sequence number that is never sent. Every
//!   lifecycle subscription starts at sequence 0, so a new `events.subscribe` first
//!   replays every buffered event of its type, oldest first.
//! - E.2: the server polls each subscription every [`POLL_INTERVAL`] (100 ms, §5); a
//!   poll scans the hub from that subscription's own cursor and returns at most one
//!   matching event. Types therefore replay at their own pace, and the order across
//!   types is not the order things happened.
//! - E.3: `pane.agent_status_changed {pane_id, agent_status?}` starts at the hub's
//!   current sequence (no replay), probes the pane once and emits an initial event
//!   only if `agent_status` was given and already matches; then it reports changes of
//!   that pane only.
//!
//! Assumptions where the spec says nothing (so the simulator picks one and says so):
//! - status changes are hub events too, so they take ring slots like lifecycle events;
//! - a poll that finds no match moves the cursor to the hub's end (nothing to rescan);
//! - `agent_status` on a status subscription also narrows its later events to that
//!   status (the behaviour the simulator had before section E);
//! - a cursor whose events fell off the ring continues at the oldest retained event.

use std::collections::VecDeque;
use std::time::Duration;

use serde_json::Value;

/// Events the hub keeps (E.1).
pub const RING_CAPACITY: usize = 512;
/// How often Herdr polls each subscription (§5, E.2).
pub const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// The event name status subscriptions emit (dotted, §5 naming quirk).
pub const STATUS_EVENT: &str = "pane.agent_status_changed";

#[derive(Debug, Clone)]
struct HubEvent {
    seq: u64,
    /// As sent: underscored lifecycle names, or [`STATUS_EVENT`].
    name: String,
    pane_id: Option<String>,
    agent_status: Option<String>,
    /// The whole frame, `{"data":..,"event":..}`.
    line: String,
}

#[derive(Debug, Default)]
pub struct Hub {
    ring: VecDeque<HubEvent>,
    /// The sequence number the next event gets (the first event is 0).
    next_seq: u64,
    /// Every event ever pushed (tests compare it with what a client saw).
    pushed: u64,
}

/// One entry of a subscribe request, with its own cursor.
#[derive(Debug, Clone)]
pub struct Cursor {
    kind: Kind,
    at: u64,
}

#[derive(Debug, Clone)]
enum Kind {
    /// `pane.created` etc.: matches the underscored name `pane_created`.
    Lifecycle(String),
    Status {
        pane_id: String,
        agent_status: Option<String>,
    },
    /// A type the simulator does not stream (`pane.output_matched`, `pane.scroll_changed`).
    Silent,
}

/// The underscored event name of a dotted lifecycle subscription type.
fn underscored(kind: &str) -> String {
    kind.replacen('.', "_", 1)
}

impl Hub {
    pub fn push(&mut self, name: &str, data: &Value, line: String) {
        let field = |k: &str| data.get(k).and_then(Value::as_str).map(str::to_string);
        let pane_id = field("pane_id")
            .or_else(|| data.get("pane").and_then(|p| p.get("pane_id")).and_then(Value::as_str).map(str::to_string));
        if self.ring.len() == RING_CAPACITY {
            self.ring.pop_front();
        }
        self.ring.push_back(HubEvent {
            seq: self.next_seq,
            name: name.to_string(),
            pane_id,
            agent_status: field("agent_status"),
            line,
        });
        self.next_seq += 1;
        self.pushed += 1;
    }

    pub fn len(&self) -> usize {
        self.ring.len()
    }

    pub fn pushed(&self) -> u64 {
        self.pushed
    }

    /// Cursors for one subscribe request: lifecycle types at 0, status types at the
    /// current sequence (E.1, E.3).
    pub fn cursors(&self, subscriptions: &[Value]) -> Vec<Cursor> {
        subscriptions
            .iter()
            .map(|s| {
                let ty = s.get("type").and_then(Value::as_str).unwrap_or_default();
                if ty == STATUS_EVENT {
                    let pane_id = s.get("pane_id").and_then(Value::as_str).unwrap_or_default().to_string();
                    let agent_status = s.get("agent_status").and_then(Value::as_str).map(str::to_string);
                    Cursor { kind: Kind::Status { pane_id, agent_status }, at: self.next_seq }
                } else if super::params::PLAIN_SUBSCRIPTIONS.contains(&ty) {
                    Cursor { kind: Kind::Lifecycle(underscored(ty)), at: 0 }
                } else {
                    Cursor { kind: Kind::Silent, at: self.next_seq }
                }
            })
            .collect()
    }

    /// One poll of every cursor: at most one frame per subscription (E.2).
    pub fn poll(&self, cursors: &mut [Cursor]) -> Vec<String> {
        let mut out = vec![];
        for cursor in cursors.iter_mut() {
            let found = self.ring.iter().filter(|e| e.seq >= cursor.at).find(|e| match &cursor.kind {
                Kind::Lifecycle(name) => &e.name == name,
                Kind::Status { pane_id, agent_status } => {
                    e.name == STATUS_EVENT
                        && e.pane_id.as_deref() == Some(pane_id.as_str())
                        && agent_status.as_ref().is_none_or(|want| e.agent_status.as_ref() == Some(want))
                }
                Kind::Silent => false,
            });
            match found {
                Some(e) => {
                    out.push(e.line.clone());
                    cursor.at = e.seq + 1;
                }
                None => cursor.at = self.next_seq,
            }
        }
        out
    }
}
