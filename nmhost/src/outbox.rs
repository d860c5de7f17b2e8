//! The single path to stdout. Tasks hand finished frames to one writer task through a bounded
//! channel; a table of live calls decides, under one lock, whether a task may still speak.
//! Cancelling removes the call from the table under that lock, so once `cancelled` is queued no
//! later frame of that call can be — whatever thread the task happens to be running on.

use crate::messages::{ErrorCode, HostError, MessageId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

/// Most calls (requests, streams, identity checks) alive at once on one port.
pub const MAX_IN_FLIGHT: usize = 64;
/// Frames queued towards stdout before producers wait (at most 64 MiB at 1 MiB per frame).
pub const OUTBOX_CAPACITY: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallKind {
    Request,
    Stream,
    Identity,
}

/// Internal handle of one live call (client ids may be absent or reused after completion).
pub type CallKey = u64;

struct Live {
    kind: CallKind,
    client_id: Option<MessageId>,
    abort: Option<AbortHandle>,
}

#[derive(Default)]
struct LiveTable {
    entries: HashMap<CallKey, Live>,
    by_id: HashMap<MessageId, CallKey>,
    next_key: CallKey,
}

impl LiveTable {
    fn remove(&mut self, key: CallKey) -> Option<Live> {
        let live = self.entries.remove(&key)?;
        if let Some(id) = &live.client_id {
            self.by_id.remove(id);
        }
        Some(live)
    }
}

#[derive(Clone)]
pub struct Outbox {
    tx: mpsc::Sender<Vec<u8>>,
    live: Arc<Mutex<LiveTable>>,
}

/// What a cancel found.
#[derive(Debug, PartialEq, Eq)]
pub enum CancelOutcome {
    Cancelled,
    NotLive,
}

impl Outbox {
    pub fn new() -> (Self, mpsc::Receiver<Vec<u8>>) {
        let (tx, rx) = mpsc::channel(OUTBOX_CAPACITY);
        (Self { tx, live: Arc::default() }, rx)
    }

    fn table(&self) -> MutexGuard<'_, LiveTable> {
        // A panic while holding this lock cannot leave the table half-updated in a way that
        // matters more than losing the port, so poisoning is ignored.
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records a new call; refuses a client id that is still live and calls beyond the cap.
    pub fn register(&self, kind: CallKind, client_id: Option<&MessageId>) -> Result<CallKey, HostError> {
        let mut table = self.table();
        if let Some(id) = client_id
            && table.by_id.contains_key(id)
        {
            return Err(HostError::new(
                ErrorCode::DuplicateRequestId,
                format!("id {} is still in flight", serde_json::to_string(id).unwrap_or_default()),
            ));
        }
        if table.entries.len() >= MAX_IN_FLIGHT {
            return Err(HostError::new(
                ErrorCode::TooManyInFlight,
                format!("{MAX_IN_FLIGHT} calls are already in flight on this port"),
            ));
        }
        let key = table.next_key;
        table.next_key += 1;
        table.entries.insert(key, Live { kind, client_id: client_id.cloned(), abort: None });
        if let Some(id) = client_id {
            table.by_id.insert(id.clone(), key);
        }
        Ok(key)
    }

    /// Attaches the task running a call so a cancel can stop its I/O.
    pub fn attach(&self, key: CallKey, abort: AbortHandle) {
        if let Some(live) = self.table().entries.get_mut(&key) {
            live.abort = Some(abort);
        }
    }

    /// Queues a frame of a live call; `last` ends the call. Returns false when the call was
    /// cancelled or the writer is gone — the task should then stop.
    pub async fn send(&self, key: CallKey, frame: Vec<u8>, last: bool) -> bool {
        let Ok(permit) = self.tx.reserve().await else { return false };
        let mut table = self.table();
        if !table.entries.contains_key(&key) {
            return false;
        }
        permit.send(frame);
        if last {
            table.remove(key);
        }
        true
    }

    /// Queues a frame that belongs to no live call (refusals, `cancelled`).
    pub async fn send_unattached(&self, frame: Vec<u8>) -> bool {
        self.tx.send(frame).await.is_ok()
    }

    /// Ends a live call by client id and stops its task; the caller then reports it.
    pub fn cancel(&self, id: &MessageId) -> CancelOutcome {
        let mut table = self.table();
        let Some(key) = table.by_id.get(id).copied() else { return CancelOutcome::NotLive };
        if let Some(Live { abort: Some(abort), .. }) = table.remove(key) {
            abort.abort();
        }
        CancelOutcome::Cancelled
    }

    /// Stops every live call of `kind` without reporting (used when the port goes away).
    pub fn abort_all(&self, kind: Option<CallKind>) {
        let mut table = self.table();
        let keys: Vec<CallKey> =
            table.entries.iter().filter(|(_, l)| kind.is_none_or(|k| l.kind == k)).map(|(k, _)| *k).collect();
        for key in keys {
            if let Some(Live { abort: Some(abort), .. }) = table.remove(key) {
                abort.abort();
            }
        }
    }

    pub fn live_count(&self) -> usize {
        self.table().entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_after_cancel_are_dropped_and_the_id_is_reusable() {
        let (outbox, mut rx) = Outbox::new();
        let id = MessageId::Text("a".into());
        let key = outbox.register(CallKind::Request, Some(&id)).unwrap();
        assert_eq!(outbox.register(CallKind::Request, Some(&id)).unwrap_err().code, ErrorCode::DuplicateRequestId);
        assert!(outbox.send(key, b"first".to_vec(), false).await);
        assert_eq!(outbox.cancel(&id), CancelOutcome::Cancelled);
        assert!(!outbox.send(key, b"late".to_vec(), true).await);
        assert_eq!(outbox.cancel(&id), CancelOutcome::NotLive);
        assert_eq!(rx.recv().await.unwrap(), b"first");
        assert!(rx.try_recv().is_err());
        assert!(outbox.register(CallKind::Request, Some(&id)).is_ok());
    }

    #[tokio::test]
    async fn the_in_flight_cap_is_exact_and_last_frames_free_slots() {
        let (outbox, _rx) = Outbox::new();
        let keys: Vec<CallKey> = (0..MAX_IN_FLIGHT).map(|_| outbox.register(CallKind::Request, None).unwrap()).collect();
        assert_eq!(outbox.register(CallKind::Stream, None).unwrap_err().code, ErrorCode::TooManyInFlight);
        assert!(outbox.send(keys[0], b"done".to_vec(), true).await);
        assert_eq!(outbox.live_count(), MAX_IN_FLIGHT - 1);
        assert!(outbox.register(CallKind::Stream, None).is_ok());
    }
}
