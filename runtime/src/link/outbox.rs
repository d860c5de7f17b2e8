//! The link's requests and answers across reconnects. A request keeps running
//! when the socket drops (the runtime may be halfway through a change; aborting
//! the local call would not undo it), and the answers of mutations are kept for a
//! while, so that after the next `hello_ack` the link can send the ones the edge
//! still lists in `resume` (spec edge.md §8). The edge then learns the real
//! outcome of a change it had to report as `delivery_uncertain`.
//!
//! Answers are kept whether or not they were written to a socket: one written
//! just before a drop may never have arrived. The edge's `hello_ack` decides:
//! listed in `resume` → sent again; otherwise (settled, `completed`, or unknown)
//! → forgotten. Reads are never kept: the edge does not wait for a late read.
//!
//! With an [`AnswerStore`] (the runtime's state database, open in `serve --link`
//! and in a standalone `link` alike) each kept answer is also written to disk before it goes to the socket, and
//! the next process [`Outbox::restore`]s them, so a restart between a change and
//! its delivery does not lose the answer either. The same `hello_ack` rule
//! removes them from disk.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio::task::AbortHandle;

use super::answer_store::AnswerStore;
use crate::edge::relay::{HelloAck, ResumeState};

/// Most mutation answers kept for a later resume.
pub const MAX_KEPT: usize = 64;
/// Most bytes of kept answers (each is at most one 1 MiB frame).
pub const MAX_KEPT_BYTES: usize = 8 * 1024 * 1024;
/// How long an answer is kept: the edge forgets its request after 10 minutes.
pub const KEEP_FOR: Duration = Duration::from_secs(10 * 60);

struct Kept {
    request_id: String,
    text: String,
    at: Instant,
}

#[derive(Default)]
struct Inner {
    /// The current session's outbound frames; `None` while no socket is up.
    live: Option<mpsc::UnboundedSender<String>>,
    running: HashMap<String, AbortHandle>,
    kept: VecDeque<Kept>,
    kept_bytes: usize,
}

#[derive(Default)]
pub struct Outbox {
    inner: Mutex<Inner>,
    store: Option<AnswerStore>,
}

impl Outbox {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // Plain maps and queues: a panic elsewhere cannot leave them half-changed.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An outbox whose kept answers also go to `store`.
    pub fn with_store(store: AnswerStore) -> Outbox {
        Outbox { inner: Mutex::default(), store: Some(store) }
    }

    /// Takes over the answers an earlier process kept on disk (within the TTL
    /// and caps); the next `hello_ack` decides which are sent. Returns how many.
    pub async fn restore(&self) -> usize {
        let Some(store) = &self.store else { return 0 };
        let stored = match store.load().await {
            Ok(stored) => stored,
            Err(e) => {
                tracing::warn!("kept link answers not restored: {e}");
                return 0;
            }
        };
        let (now, now_ms) = (Instant::now(), crate::state::now_ms());
        let mut inner = self.lock();
        for a in &stored {
            let age = Duration::from_millis(now_ms.saturating_sub(a.kept_at_ms).max(0) as u64);
            // Right after a host boot the monotonic clock may not reach back that far.
            let at = now.checked_sub(age).unwrap_or(now);
            keep(&mut inner, Kept { request_id: a.request_id.clone(), text: a.frame.clone(), at });
        }
        inner.kept.len()
    }

    /// Makes `live` the session's sender after a successful `hello_ack` and
    /// queues on it, first, the kept answers the edge asks for, then removes
    /// the others from disk too. Returns how many answers were resumed.
    pub async fn attach(&self, live: mpsc::UnboundedSender<String>, ack: &HelloAck) -> usize {
        let (resumed, dropped) = self.attach_in_memory(live, ack);
        if let Some(store) = &self.store
            && !dropped.is_empty()
            && let Err(e) = store.forget(dropped).await
        {
            // Harmless beyond disk use: the next hello_ack drops them again.
            tracing::warn!("link answers the edge no longer wants stay on disk: {e}");
        }
        resumed
    }

    /// The in-memory part of [`Outbox::attach`]. Done under one lock, so an
    /// answer finishing meanwhile is either resumed or sent live. Returns the
    /// number resumed and the ids forgotten.
    /// `deadline_ms` is not checked: it is on the edge's clock, and the edge
    /// lists only rows it still keeps.
    fn attach_in_memory(&self, live: mpsc::UnboundedSender<String>, ack: &HelloAck) -> (usize, Vec<String>) {
        let wanted: HashSet<&str> = ack
            .resume
            .iter()
            .flatten()
            .filter(|r| r.state == ResumeState::Sent)
            .map(|r| r.request_id.as_str())
            .collect();
        let mut inner = self.lock();
        expire(&mut inner, Instant::now());
        // Everything else is settled or unknown to the edge: nobody will want it.
        let (resend, drop): (VecDeque<Kept>, VecDeque<Kept>) = inner.kept.drain(..).partition(|k| wanted.contains(k.request_id.as_str()));
        inner.kept_bytes -= drop.iter().map(|k| k.text.len()).sum::<usize>();
        for k in &resend {
            let _ = live.send(k.text.clone());
        }
        let resumed = resend.len();
        // Kept until the next hello: this socket may die before they arrive.
        inner.kept = resend;
        inner.live = Some(live);
        (resumed, drop.into_iter().map(|k| k.request_id).collect())
    }

    /// The session ended: answers from now on are only kept.
    pub fn detach(&self) {
        self.lock().live = None;
    }

    /// Registers a request's task; `spawn` runs under the lock, so the task
    /// cannot finish (and unregister) before it is registered.
    pub fn start(&self, request_id: String, spawn: impl FnOnce() -> AbortHandle) {
        let mut inner = self.lock();
        let task = spawn();
        inner.running.insert(request_id, task);
    }

    /// A request finished: a mutation's answer is written to disk first (so a
    /// crash right after the send cannot lose it), then [`Outbox::record`]ed.
    pub async fn finished(&self, request_id: &str, is_mutation: bool, text: String) {
        if let Some(store) = &self.store
            && is_mutation
            && let Err(e) = store.keep(request_id, &text).await
        {
            // Delivery matters more: the answer still goes out and is kept in memory.
            tracing::warn!(request = %request_id, "answer not kept on disk, only until this process ends: {e}");
        }
        self.record(request_id, is_mutation, text);
    }

    /// The answer goes to the live socket if there is one, and a mutation's is
    /// kept in memory for a resume.
    fn record(&self, request_id: &str, is_mutation: bool, text: String) {
        let mut inner = self.lock();
        inner.running.remove(request_id);
        match &inner.live {
            Some(live) => {
                let _ = live.send(text.clone());
            }
            None if is_mutation => tracing::info!(request = %request_id, "answer kept for the next link: the edge is not connected"),
            None => tracing::info!(request = %request_id, "answer of a read dropped: the edge is not connected"),
        }
        if is_mutation {
            keep(&mut inner, Kept { request_id: request_id.to_string(), text, at: Instant::now() });
        }
    }

    /// Aborts a running request (edge `cancel`); false when it is not running.
    pub fn cancel(&self, request_id: &str) -> bool {
        self.lock().running.remove(request_id).map(|h| h.abort()).is_some()
    }

    pub fn running(&self) -> usize {
        self.lock().running.len()
    }

    /// This process's link stops: nothing in it could deliver these answers.
    /// Those on disk stay for the next process.
    pub fn abort_all(&self) {
        let mut inner = self.lock();
        for (_, h) in inner.running.drain() {
            h.abort();
        }
        inner.kept.clear();
        inner.kept_bytes = 0;
        inner.live = None;
    }

    #[cfg(test)]
    fn kept_ids(&self) -> Vec<String> {
        self.lock().kept.iter().map(|k| k.request_id.clone()).collect()
    }
}

fn keep(inner: &mut Inner, k: Kept) {
    expire(inner, k.at);
    inner.kept_bytes += k.text.len();
    inner.kept.push_back(k);
    while inner.kept.len() > MAX_KEPT || inner.kept_bytes > MAX_KEPT_BYTES {
        let Some(old) = inner.kept.pop_front() else { break };
        inner.kept_bytes -= old.text.len();
    }
}

fn expire(inner: &mut Inner, now: Instant) {
    while inner.kept.front().is_some_and(|k| now.duration_since(k.at) > KEEP_FOR) {
        if let Some(old) = inner.kept.pop_front() {
            inner.kept_bytes -= old.text.len();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edge::relay::ResumeEntry;

    fn ack(resume: &[(&str, ResumeState)], completed: &[&str]) -> HelloAck {
        HelloAck {
            workstation_id: "ws".into(),
            ok: true,
            server_version: None,
            edge_deployment_id: None,
            capabilities: None,
            reconnect: None,
            resume: Some(
                resume
                    .iter()
                    .map(|(id, state)| ResumeEntry { request_id: id.to_string(), operation: "herdr_exec".into(), state: *state, deadline_ms: 0 })
                    .collect(),
            ),
            completed: Some(completed.iter().map(|c| c.to_string()).collect()),
            code: None,
            message: None,
        }
    }

    fn drain(rx: &mut mpsc::UnboundedReceiver<String>) -> Vec<String> {
        std::iter::from_fn(|| rx.try_recv().ok()).collect()
    }

    #[test]
    fn answers_finished_while_down_are_resumed_only_when_listed() {
        let out = Outbox::default();
        out.record("m1", true, "answer-m1".into());
        out.record("m2", true, "answer-m2".into());
        out.record("m3", true, "answer-m3".into());
        out.record("r1", false, "answer-r1".into());
        assert_eq!(out.kept_ids(), ["m1", "m2", "m3"], "reads are not kept");
        let (tx, mut rx) = mpsc::unbounded_channel();
        let (n, dropped) =
            out.attach_in_memory(tx, &ack(&[("m1", ResumeState::Sent), ("m3", ResumeState::Settled), ("gone", ResumeState::Sent)], &["m2"]));
        assert_eq!((n, dropped), (1, vec!["m2".to_string(), "m3".to_string()]));
        assert_eq!(drain(&mut rx), ["answer-m1"]);
        assert_eq!(out.kept_ids(), ["m1"], "kept until the next hello in case this socket dies too");
        // Live answers go straight out, and mutations are kept as well.
        out.record("m4", true, "answer-m4".into());
        assert_eq!(drain(&mut rx), ["answer-m4"]);
        out.detach();
        out.record("m5", true, "answer-m5".into());
        assert!(drain(&mut rx).is_empty());
        let (tx, mut rx) = mpsc::unbounded_channel();
        assert_eq!(out.attach_in_memory(tx, &ack(&[], &["m1", "m4", "m5"])).0, 0);
        assert!(drain(&mut rx).is_empty());
        assert!(out.kept_ids().is_empty());
    }

    #[test]
    fn kept_answers_are_bounded_by_count_and_bytes() {
        let out = Outbox::default();
        for i in 0..=MAX_KEPT {
            out.record(&format!("m{i}"), true, "x".into());
        }
        let ids = out.kept_ids();
        assert_eq!(ids.len(), MAX_KEPT);
        assert_eq!(ids[0], "m1", "the oldest went first");
        let big = "y".repeat(MAX_KEPT_BYTES / 2);
        out.record("big1", true, big.clone());
        assert!(out.kept_ids().contains(&"big1".to_string()));
        out.record("big2", true, big);
        // The one-byte answers go until the two halves fill the budget exactly.
        assert_eq!(out.kept_ids().first().map(String::as_str), Some("big1"));
        assert_eq!(out.lock().kept_bytes, MAX_KEPT_BYTES);
    }

    #[test]
    fn kept_answers_expire_after_ten_minutes() {
        let out = Outbox::default();
        out.record("m1", true, "x".into());
        let at = out.lock().kept[0].at;
        expire(&mut out.lock(), at + KEEP_FOR);
        assert_eq!(out.kept_ids(), ["m1"], "still kept at exactly 10 minutes");
        expire(&mut out.lock(), at + KEEP_FOR + Duration::from_millis(1));
        assert!(out.kept_ids().is_empty());
        assert_eq!(out.lock().kept_bytes, 0);
    }

    fn stored(db: &std::sync::Arc<crate::state::StateDb>) -> Vec<String> {
        db.with(|c| c.prepare("SELECT request_id FROM link_answers ORDER BY seq")?.query_map([], |r| r.get(0))?.collect()).unwrap()
    }

    #[tokio::test]
    async fn answers_on_disk_survive_the_outbox_and_follow_the_hello_ack() {
        let tmp = tempfile::tempdir().unwrap();
        let db = std::sync::Arc::new(crate::state::StateDb::open(tmp.path(), "b1").unwrap());
        let out = Outbox::with_store(AnswerStore::new(db.clone(), "ws"));
        out.finished("m1", true, "answer-m1".into()).await;
        out.finished("m2", true, "answer-m2".into()).await;
        out.finished("r1", false, "answer-r1".into()).await;
        assert_eq!(stored(&db), ["m1", "m2"], "reads never reach the disk");
        out.abort_all();
        assert_eq!(Outbox::default().restore().await, 0, "without a database nothing is restored");
        drop(out);

        // The next process: the edge still wants m1 and has settled m2.
        let next = Outbox::with_store(AnswerStore::new(db.clone(), "ws"));
        assert_eq!(next.restore().await, 2);
        let (tx, mut rx) = mpsc::unbounded_channel();
        assert_eq!(next.attach(tx, &ack(&[("m1", ResumeState::Sent)], &["m2"])).await, 1);
        assert_eq!(drain(&mut rx), ["answer-m1"], "the exact frame text, once");
        assert_eq!(stored(&db), ["m1"], "kept on disk until a hello_ack no longer lists it");
        next.detach();
        let (tx, mut rx) = mpsc::unbounded_channel();
        assert_eq!(next.attach(tx, &ack(&[], &["m1"])).await, 0);
        assert!(drain(&mut rx).is_empty());
        assert!(stored(&db).is_empty());
    }

    #[tokio::test]
    async fn a_restored_answer_keeps_its_age() {
        let tmp = tempfile::tempdir().unwrap();
        let db = std::sync::Arc::new(crate::state::StateDb::open(tmp.path(), "b1").unwrap());
        // Kept by an earlier process one second short of KEEP_FOR ago.
        let kept_at = crate::state::now_ms() - KEEP_FOR.as_millis() as i64 + 1000;
        db.with(|c| crate::state::link_answers::keep(c, "ws", "m1", "answer-m1", kept_at)).unwrap();
        let out = Outbox::with_store(AnswerStore::new(db.clone(), "ws"));
        assert_eq!(out.restore().await, 1);
        let now = Instant::now();
        expire(&mut out.lock(), now);
        assert_eq!(out.kept_ids(), ["m1"]);
        // Not a fresh ten minutes: it expires about a second from now.
        expire(&mut out.lock(), now + Duration::from_secs(2));
        assert!(out.kept_ids().is_empty());
    }

    #[tokio::test]
    async fn an_answer_is_on_disk_before_it_reaches_the_socket() {
        let tmp = tempfile::tempdir().unwrap();
        let db = std::sync::Arc::new(crate::state::StateDb::open(tmp.path(), "b1").unwrap());
        let out = std::sync::Arc::new(Outbox::with_store(AnswerStore::new(db.clone(), "ws")));
        let (tx, mut rx) = mpsc::unbounded_channel();
        out.attach(tx, &ack(&[], &[])).await;
        let finishing = {
            let out = out.clone();
            tokio::spawn(async move { out.finished("m1", true, "answer-m1".into()).await })
        };
        assert_eq!(rx.recv().await.as_deref(), Some("answer-m1"));
        assert_eq!(stored(&db), ["m1"], "stored by the time the socket could send it");
        finishing.await.unwrap();
    }

    #[tokio::test]
    async fn running_requests_outlive_a_session_and_can_be_cancelled() {
        let out = Outbox::default();
        let task = tokio::spawn(std::future::pending::<()>());
        out.start("m1".into(), || task.abort_handle());
        out.detach();
        assert_eq!(out.running(), 1);
        assert!(out.cancel("m1"));
        assert!(!out.cancel("m1"));
        assert!(task.await.unwrap_err().is_cancelled());
    }
}
