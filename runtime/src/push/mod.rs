//! The push bus: agent and exec events for the browser extension's continuity
//! (spec/extension.md §7.1), served as SSE at `/push/events` and as a JSON picture
//! at `/push/state`.
//!
//! Publishing never waits: each client has its own bounded queue, and when a client
//! falls behind its oldest events are dropped and it is told so with a `lagged`
//! marker. Every event carries a bus-wide, strictly increasing `seq`.

pub mod sse;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::runtime_info::rfc3339;

pub mod kinds {
    pub const HELLO: &str = "hello";
    pub const AGENT_WORKING: &str = "agent_working";
    pub const AGENT_SETTLED: &str = "agent_settled";
    pub const AGENT_OUTPUT: &str = "agent_output";
    pub const AGENT_GONE: &str = "agent_gone";
    pub const EXEC_COMPLETED: &str = "exec_completed";
    pub const LAGGED: &str = "lagged";
}

#[derive(Debug, Clone)]
pub struct PushConfig {
    /// Events a client may have waiting before the oldest are dropped.
    pub queue_capacity: usize,
    /// Interval of SSE keep-alive comments.
    pub keep_alive: Duration,
}

impl Default for PushConfig {
    fn default() -> Self {
        PushConfig { queue_capacity: 256, keep_alive: Duration::from_secs(15) }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct PushEvent {
    pub seq: u64,
    pub kind: String,
    pub workspace: Option<String>,
    pub pane: Option<String>,
    /// The event body; always carries `seq`.
    pub data: Value,
}

/// The current picture behind `hello` and `/push/state`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PushState {
    /// `{pane, status, workspace, name, seq, terminal_title, cwd}` per visible agent.
    pub agents: Vec<Value>,
    /// `{id, label, roots, panes}` per workspace.
    pub workspaces: Vec<Value>,
    /// Whether the picture comes from a live Herdr connection.
    pub live: bool,
}

/// Whatever knows the current agents and workspaces (the Herdr event cache).
pub trait PushStateSource: Send + Sync {
    fn push_state(&self) -> PushState;
}

/// Which events one client wants. An event naming no workspace (or no pane) passes
/// that part of the filter: an `exec_completed` without a workspace reaches everyone.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
pub struct Filter {
    pub workspace: Option<String>,
    pub pane: Option<String>,
}

impl Filter {
    pub fn matches(&self, workspace: Option<&str>, pane: Option<&str>) -> bool {
        let ok = |want: &Option<String>, have: Option<&str>| match (want.as_deref().filter(|w| !w.is_empty()), have) {
            (Some(w), Some(h)) => w == h,
            _ => true,
        };
        ok(&self.workspace, workspace) && ok(&self.pane, pane)
    }

    fn matches_record(&self, record: &Value, ws_key: &str, pane_key: &str) -> bool {
        self.matches(record.get(ws_key).and_then(Value::as_str), record.get(pane_key).and_then(Value::as_str))
    }
}

/// What a subscriber receives next.
#[derive(Debug, Clone, PartialEq)]
pub enum Delivery {
    Event(PushEvent),
    /// `dropped` events were discarded because this client read too slowly.
    Lagged {
        dropped: u64,
    },
}

struct Queue {
    events: VecDeque<PushEvent>,
    dropped: u64,
}

struct ClientQueue {
    filter: Filter,
    capacity: usize,
    queue: Mutex<Queue>,
    ready: Notify,
}

/// One client's view of the bus. Dropping it unsubscribes.
pub struct Subscription {
    client: Arc<ClientQueue>,
}

impl Subscription {
    /// The next delivery, waiting for one if none is queued.
    pub async fn next(&self) -> Delivery {
        loop {
            if let Some(d) = self.try_next() {
                return d;
            }
            self.client.ready.notified().await;
        }
    }

    /// The next delivery if one is queued. A pending `lagged` marker comes first.
    pub fn try_next(&self) -> Option<Delivery> {
        let mut q = self.client.queue.lock().unwrap_or_else(|e| e.into_inner());
        if q.dropped > 0 {
            let dropped = std::mem::take(&mut q.dropped);
            return Some(Delivery::Lagged { dropped });
        }
        q.events.pop_front().map(Delivery::Event)
    }
}

struct BusInner {
    seq: u64,
    clients: Vec<Weak<ClientQueue>>,
}

pub struct PushBus {
    config: PushConfig,
    inner: Mutex<BusInner>,
    source: RwLock<Option<Arc<dyn PushStateSource>>>,
    /// Cancelled when the server stops: every open push stream ends at once, so a
    /// graceful shutdown does not wait out its grace period on them.
    closed: tokio_util::sync::CancellationToken,
}

impl PushBus {
    pub fn new(config: PushConfig) -> Self {
        PushBus {
            config,
            inner: Mutex::new(BusInner { seq: 0, clients: vec![] }),
            source: RwLock::new(None),
            closed: tokio_util::sync::CancellationToken::new(),
        }
    }

    /// Ends every open push stream (and any opened later); for shutdown.
    pub fn close(&self) {
        self.closed.cancel();
    }

    /// Resolves once [`Self::close`] was called.
    pub fn closed(&self) -> tokio_util::sync::WaitForCancellationFutureOwned {
        self.closed.clone().cancelled_owned()
    }

    pub fn config(&self) -> &PushConfig {
        &self.config
    }

    /// Attaches the provider of `hello` and `/push/state` (the Herdr cache).
    pub fn set_source(&self, source: Arc<dyn PushStateSource>) {
        *self.source.write().unwrap_or_else(|e| e.into_inner()) = Some(source);
    }

    pub fn state(&self) -> PushState {
        let source = self.source.read().unwrap_or_else(|e| e.into_inner()).clone();
        source.map(|s| s.push_state()).unwrap_or_default()
    }

    /// The newest seq handed out.
    pub fn current_seq(&self) -> u64 {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).seq
    }

    pub fn subscriber_count(&self) -> usize {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.clients.retain(|c| c.strong_count() > 0);
        inner.clients.len()
    }

    pub fn subscribe(&self, filter: Filter) -> Subscription {
        let client = Arc::new(ClientQueue {
            filter,
            capacity: self.config.queue_capacity.max(1),
            queue: Mutex::new(Queue { events: VecDeque::new(), dropped: 0 }),
            ready: Notify::new(),
        });
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).clients.push(Arc::downgrade(&client));
        Subscription { client }
    }

    /// Publishes one event to every matching client and returns its seq. Never waits
    /// on a client.
    pub fn publish(&self, kind: &str, workspace: Option<&str>, pane: Option<&str>, mut data: Value) -> u64 {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.seq += 1;
        let seq = inner.seq;
        if let Value::Object(obj) = &mut data {
            obj.insert("seq".into(), json!(seq));
        }
        let event = PushEvent {
            seq,
            kind: kind.to_string(),
            workspace: workspace.map(str::to_string),
            pane: pane.map(str::to_string),
            data,
        };
        inner.clients.retain(|weak| {
            let Some(client) = weak.upgrade() else { return false };
            if client.filter.matches(workspace, pane) {
                let mut q = client.queue.lock().unwrap_or_else(|e| e.into_inner());
                if q.events.len() >= client.capacity {
                    q.events.pop_front();
                    q.dropped += 1;
                }
                q.events.push_back(event.clone());
                drop(q);
                client.ready.notify_one();
            }
            true
        });
        seq
    }

    /// A finished exec session, so that a bound chat can be woken without Herdr.
    /// `signal` names the signal that ended it, if any.
    pub fn publish_exec_completed(
        &self,
        session_id: &str,
        root: &str,
        exit_code: Option<i32>,
        signal: Option<&str>,
        workspace: Option<&str>,
    ) -> u64 {
        self.publish_exec_completed_with(session_id, root, exit_code, signal, workspace, None)
    }

    /// [`PushBus::publish_exec_completed`] that may also list the `workspaces` a root
    /// belongs to when it is not just one.
    pub fn publish_exec_completed_with(
        &self,
        session_id: &str,
        root: &str,
        exit_code: Option<i32>,
        signal: Option<&str>,
        workspace: Option<&str>,
        workspaces: Option<Vec<String>>,
    ) -> u64 {
        let mut data = json!({"session_id": session_id, "root": root, "exit_code": exit_code, "signal": signal, "at": now()});
        if let Some(ws) = workspace {
            data["workspace"] = json!(ws);
        }
        if let Some(list) = workspaces {
            data["workspaces"] = json!(list);
        }
        self.publish(kinds::EXEC_COMPLETED, workspace, None, data)
    }

    /// Turns every exec session that ends from now on into `exec_completed`. The
    /// event names the session's workspace: the one its caller named, else the one
    /// workspace whose projects include its root. When several do, it goes out without
    /// a workspace (so it reaches every filter) and lists them in `workspaces`.
    pub fn follow_exec(self: &Arc<Self>, registry: &Arc<crate::exec::ExecRegistry>) -> tokio::task::JoinHandle<()> {
        let bus = Arc::clone(self);
        crate::exec::on_completion(registry, move |done| {
            let root = done.root.display().to_string();
            let (workspace, candidates) = match done.workspace {
                Some(ws) => (Some(ws), vec![]),
                None => {
                    let candidates = bus.workspaces_with_root(&done.root);
                    let only = (candidates.len() == 1).then(|| candidates[0].clone());
                    (only, candidates)
                }
            };
            let seq = bus.publish_exec_completed_with(
                &done.session_id,
                &root,
                done.exit_code,
                done.signal.as_deref(),
                workspace.as_deref(),
                (candidates.len() > 1).then_some(candidates),
            );
            tracing::debug!(seq, session = %done.session_id, "exec_completed published");
        })
    }

    /// Ids of the workspaces (from the current picture) with `root` among their roots.
    fn workspaces_with_root(&self, root: &std::path::Path) -> Vec<String> {
        let canonical = |p: &std::path::Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
        let root = canonical(root);
        self.state()
            .workspaces
            .iter()
            .filter(|w| {
                w.get("roots")
                    .and_then(Value::as_array)
                    .is_some_and(|rs| rs.iter().filter_map(Value::as_str).any(|r| canonical(std::path::Path::new(r)) == root))
            })
            .filter_map(|w| w.get("id").and_then(Value::as_str).map(str::to_string))
            .collect()
    }

    /// The `hello` body for a client with `filter`.
    pub fn hello(&self, filter: &Filter) -> Value {
        let state = self.state();
        json!({
            "agents": state.agents.iter().filter(|a| filter.matches_record(a, "workspace", "pane")).collect::<Vec<_>>(),
            "workspaces": state.workspaces.iter().filter(|w| filter.matches(w.get("id").and_then(Value::as_str), None)).collect::<Vec<_>>(),
            "herdr_live": state.live,
            "seq": self.current_seq(),
        })
    }
}

pub fn now() -> String {
    rfc3339(SystemTime::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_pass_events_that_do_not_name_the_field() {
        let f = Filter { workspace: Some("w1".into()), pane: None };
        assert!(f.matches(Some("w1"), Some("w1:p1")));
        assert!(!f.matches(Some("w2"), None));
        assert!(f.matches(None, None));
        assert!(Filter::default().matches(Some("w2"), Some("x")));
    }

    #[test]
    fn queue_overflow_drops_oldest_and_reports_lag_first() {
        let bus = PushBus::new(PushConfig { queue_capacity: 2, ..Default::default() });
        let sub = bus.subscribe(Filter::default());
        for i in 0..5 {
            bus.publish(kinds::AGENT_WORKING, Some("w1"), Some("w1:p1"), json!({"i": i}));
        }
        assert_eq!(sub.try_next(), Some(Delivery::Lagged { dropped: 3 }));
        let Some(Delivery::Event(e)) = sub.try_next() else { panic!("event expected") };
        assert_eq!((e.seq, &e.data["i"]), (4, &json!(3)));
        assert!(matches!(sub.try_next(), Some(Delivery::Event(e)) if e.seq == 5));
        assert_eq!(sub.try_next(), None);
    }

    #[test]
    fn dropped_subscriptions_are_forgotten() {
        let bus = PushBus::new(PushConfig::default());
        let sub = bus.subscribe(Filter::default());
        assert_eq!(bus.subscriber_count(), 1);
        drop(sub);
        bus.publish(kinds::AGENT_GONE, None, None, json!({}));
        assert_eq!(bus.subscriber_count(), 0);
    }
}
