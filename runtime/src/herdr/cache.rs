//! The event cache: a background loop that snapshots Herdr, follows
//! `events.subscribe`, and keeps the topology, the `herdr_since` history and the
//! push bus current. Reconnects with backoff; renews the subscription and re-takes
//! the snapshot periodically. Tool calls only ever take a short read lock.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::agent_names;
use super::client::HerdrClient;
use super::error::{HerdrError, codes};
use super::history::{History, Page};
use super::snapshot::fetch_topology;
use super::topology::{AgentState, SETTLED, Topology, split_event};
use super::visibility::AgentVisibility;
use crate::push::{PushBus, kinds};
use crate::runtime_info::rfc3339;

/// Lifecycle events the cache follows (Herdr takes the dotted names and answers
/// with underscored ones).
pub const LIFECYCLE_SUBSCRIPTIONS: &[&str] = &[
    "workspace.created",
    "workspace.updated",
    "workspace.metadata_updated",
    "workspace.renamed",
    "workspace.moved",
    "workspace.reordered",
    "workspace.closed",
    "workspace.focused",
    "worktree.created",
    "worktree.opened",
    "worktree.removed",
    "tab.created",
    "tab.closed",
    "tab.focused",
    "tab.renamed",
    "tab.moved",
    "pane.created",
    "pane.closed",
    "pane.updated",
    "pane.focused",
    "pane.moved",
    "pane.exited",
    "pane.agent_detected",
];

/// Extra subscription rounds a cycle opens at once for panes that appeared meanwhile.
const MAX_CATCH_UPS: usize = 2;

/// Characters of pane text carried by one `agent_output` event.
pub const OUTPUT_TAIL_CHARS: usize = 4000;

#[derive(Default)]
struct CacheState {
    topology: Option<Topology>,
    /// Snapshot taken and subscription acknowledged: the topology is current.
    live: bool,
    warnings: Vec<String>,
    last_error: Option<HerdrError>,
    history: History,
    /// Time of the last event per pane (`last_activity_at` in `herdr_since`).
    last_activity: HashMap<String, String>,
    /// Names learnt from answers, which a snapshot requested before them must not undo.
    adopted: agent_names::AdoptedNames,
}

pub struct EventCache {
    client: Arc<HerdrClient>,
    visibility: AgentVisibility,
    push: Option<Arc<PushBus>>,
    state: RwLock<CacheState>,
    changes: watch::Sender<u64>,
}

/// A consistent read of the cache for tools.
#[derive(Debug, Clone)]
pub struct CacheView {
    pub topology: Topology,
    pub warnings: Vec<String>,
}

fn now() -> String {
    rfc3339(SystemTime::now())
}

/// Agent status classes: a change of class is what the push stream reports.
fn class(status: &str) -> &'static str {
    match status {
        "working" => "working",
        "idle" | "done" => "finished",
        "blocked" => "blocked",
        _ => "unknown",
    }
}

impl EventCache {
    pub fn new(client: Arc<HerdrClient>, visibility: AgentVisibility, push: Option<Arc<PushBus>>) -> Arc<Self> {
        let (changes, _) = watch::channel(0);
        Arc::new(EventCache { client, visibility, push, state: RwLock::new(CacheState::default()), changes })
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, CacheState> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, CacheState> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }

    fn bump(&self) {
        self.changes.send_modify(|g| *g += 1);
    }

    /// Changes whenever the cache's state changes; tests and waiters await it.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    pub fn visibility(&self) -> &AgentVisibility {
        &self.visibility
    }

    pub fn is_live(&self) -> bool {
        self.read().live
    }

    /// The topology, but only while the cache is live and reconciled.
    pub fn live_view(&self) -> Option<CacheView> {
        let s = self.read();
        if !s.live {
            return None;
        }
        s.topology.clone().map(|topology| CacheView { topology, warnings: s.warnings.clone() })
    }

    /// The last known topology, live or not.
    pub fn last_topology(&self) -> Option<Topology> {
        self.read().topology.clone()
    }

    pub fn last_error(&self) -> Option<HerdrError> {
        self.read().last_error.clone()
    }

    pub fn history_page(&self, cursor: u64, keep: impl Fn(&super::history::EventRecord) -> bool) -> Page {
        self.read().history.since(cursor, keep)
    }

    pub fn last_activity(&self, pane_id: &str) -> Option<String> {
        self.read().last_activity.get(pane_id).cloned()
    }

    /// Starts the background loop; it ends when `cancel` fires.
    pub fn spawn(self: &Arc<Self>, cancel: CancellationToken) -> tokio::task::JoinHandle<()> {
        let cache = Arc::clone(self);
        tokio::spawn(async move { cache.run(cancel).await })
    }

    async fn run(self: Arc<Self>, cancel: CancellationToken) {
        let timeouts = self.client.timeouts().clone();
        let mut backoff = timeouts.backoff_initial;
        while !cancel.is_cancelled() {
            match self.cycle(&cancel).await {
                Ok(()) => backoff = timeouts.backoff_initial,
                Err(e) => {
                    tracing::debug!(code = %e.code, "herdr event cache: {}", e.message);
                    {
                        let mut s = self.write();
                        s.live = false;
                        s.last_error = Some(e);
                    }
                    self.bump();
                    tokio::select! {
                        _ = cancel.cancelled() => break,
                        _ = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(timeouts.backoff_max);
                }
            }
        }
        self.write().live = false;
        self.bump();
    }

    fn subscriptions(&self) -> Vec<Value> {
        let mut subs: Vec<Value> = LIFECYCLE_SUBSCRIPTIONS.iter().map(|t| json!({"type": t})).collect();
        if let Some(t) = &self.read().topology {
            for pane in t.pane_ids() {
                subs.push(json!({"type": "pane.agent_status_changed", "pane_id": pane}));
            }
        }
        subs
    }

    /// Takes a fresh picture of Herdr and installs it.
    async fn refresh(&self) -> Result<(), HerdrError> {
        let mark = self.read().adopted.mark();
        let (topology, warnings) = fetch_topology(&self.client).await?;
        self.install(topology, warnings, mark);
        Ok(())
    }

    /// Subscription rounds, each opened and then followed by a fresh picture, until a
    /// re-snapshot is due, an event asks for one, or the stream fails.
    async fn cycle(&self, cancel: &CancellationToken) -> Result<(), HerdrError> {
        let timeouts = self.client.timeouts().clone();
        // A picture first, to know which panes to follow: Herdr refuses the whole
        // subscription when one of its panes is gone (it probes each), so a stale list
        // (a pane that exited, the reason for many a new cycle) would fail every retry.
        self.refresh().await?;
        let resnapshot_at = Instant::now() + timeouts.resnapshot;
        let mut catch_ups = 0;
        loop {
            let followed = self.read().topology.as_ref().map(Topology::pane_ids).unwrap_or_default();
            let mut sub = self.client.subscribe(self.subscriptions()).await?;
            // Herdr sends a subscription only what happens after it is open, so a change
            // made since the last picture (while no stream was open: a reconnect, a
            // renewal, the re-snapshot an event asked for) would be lost for good.
            // Looking again now that the stream is open closes that gap.
            self.refresh().await?;
            // Panes the picture shows for the first time get their status subscription
            // now rather than at the next renewal (bounded, should panes keep coming).
            let unfollowed = self.read().topology.as_ref().is_some_and(|t| t.pane_ids().iter().any(|p| !followed.contains(p)));
            if unfollowed && catch_ups < MAX_CATCH_UPS {
                catch_ups += 1;
                continue;
            }
            {
                let mut s = self.write();
                s.live = true;
                s.last_error = None;
            }
            self.bump();
            let renew_at = (Instant::now() + timeouts.resubscribe).min(resnapshot_at);
            loop {
                tokio::select! {
                    _ = cancel.cancelled() => return Ok(()),
                    _ = tokio::time::sleep_until(renew_at) => break,
                    line = sub.next_event() => match line? {
                        Some(line) => if self.handle_line(&line) { return Ok(()) },
                        None => return Err(HerdrError::local(codes::UNEXPECTED_EOF, "herdr closed the event subscription")),
                    },
                }
            }
            if Instant::now() >= resnapshot_at {
                return Ok(());
            }
        }
    }

    fn visible_states(&self, t: &Topology) -> BTreeMap<String, AgentState> {
        let hidden: Vec<String> = t
            .agents
            .iter()
            .filter(|a| !self.visibility.allows_agent(a))
            .filter_map(|a| a.get("pane_id").and_then(Value::as_str).map(str::to_string))
            .collect();
        t.agent_states().into_iter().filter(|(pane, _)| !hidden.contains(pane)).collect()
    }

    /// Replaces the topology with a fresh snapshot, requested when adoptions stood at
    /// `mark`, and reports agent changes the cache missed (none on the very first
    /// snapshot: that is `hello`'s job).
    fn install(&self, mut topology: Topology, warnings: Vec<String>, mark: u64) {
        let (old_states, new_states) = {
            let mut s = self.write();
            s.adopted.reconcile(&mut topology, mark);
            let old = s.topology.as_ref().map(|t| self.visible_states(t));
            let new = self.visible_states(&topology);
            s.topology = Some(topology);
            s.warnings = warnings;
            (old, new)
        };
        if let Some(old) = old_states {
            self.publish_changes(&old, &new_states);
        }
        self.bump();
    }

    /// Applies one event line; returns true when a fresh snapshot is needed.
    fn handle_line(&self, line: &Value) -> bool {
        let Some((name, data)) = split_event(line) else { return true };
        let at = now();
        let (old, new, resnapshot) = {
            let mut s = self.write();
            s.history.push(&name, data.clone(), at.clone());
            let pane = data
                .get("pane_id")
                .and_then(Value::as_str)
                .or_else(|| data.get("pane").and_then(|p| p.get("pane_id")).and_then(Value::as_str))
                .map(str::to_string);
            if let Some(pane) = pane {
                s.last_activity.insert(pane, at);
            }
            let Some(topology) = s.topology.as_mut() else { return true };
            let old = self.visible_states(topology);
            let applied = topology.apply(&name, &data);
            let new = self.visible_states(topology);
            (old, new, applied.resnapshot)
        };
        self.publish_changes(&old, &new);
        self.bump();
        resnapshot
    }

    fn publish_changes(&self, old: &BTreeMap<String, AgentState>, new: &BTreeMap<String, AgentState>) {
        let Some(bus) = &self.push else { return };
        let label = |a: &AgentState| a.name.clone().or_else(|| a.kind.clone());
        for (pane, now_state) in new {
            let before = old.get(pane);
            let (was, is) = (before.map(|b| class(&b.status)), class(&now_state.status));
            if was == Some(is) {
                continue;
            }
            let ws = now_state.workspace.as_deref();
            if is == "working" {
                bus.publish(
                    kinds::AGENT_WORKING,
                    ws,
                    Some(pane),
                    json!({"workspace": ws, "pane": pane, "agent": label(now_state)}),
                );
            } else if SETTLED.contains(&now_state.status.as_str()) && before.is_some() {
                bus.publish(
                    kinds::AGENT_SETTLED,
                    ws,
                    Some(pane),
                    json!({"workspace": ws, "pane": pane, "agent": label(now_state), "status": now_state.status, "at": now()}),
                );
                self.spawn_output_read(ws.map(str::to_string), pane.clone(), label(now_state));
            }
        }
        for (pane, gone) in old.iter().filter(|(p, _)| !new.contains_key(*p)) {
            let ws = gone.workspace.as_deref();
            bus.publish(kinds::AGENT_GONE, ws, Some(pane), json!({"workspace": ws, "pane": pane, "agent": label(gone)}));
        }
    }

    /// After an agent settles, its latest screen text goes out as `agent_output`
    /// (best effort, off the event loop).
    fn spawn_output_read(&self, workspace: Option<String>, pane: String, agent: Option<String>) {
        let (Some(bus), Ok(handle)) = (self.push.clone(), tokio::runtime::Handle::try_current()) else { return };
        let client = Arc::clone(&self.client);
        let budget = client.timeouts().agent_get;
        handle.spawn(async move {
            let read =
                client.call_with_timeout("pane.read", json!({"pane_id": pane, "source": "recent_unwrapped"}), budget).await;
            let Ok(read) = read else { return };
            let Some(text) = read.get("read").and_then(|r| r.get("text")).and_then(Value::as_str) else { return };
            let text = text.trim_end();
            let skip = text.chars().count().saturating_sub(OUTPUT_TAIL_CHARS);
            let output: String = text.chars().skip(skip).collect();
            bus.publish(
                kinds::AGENT_OUTPUT,
                workspace.as_deref(),
                Some(&pane),
                json!({"workspace": workspace, "pane": pane, "agent": agent, "output": output}),
            );
        });
    }

    /// Learns what a call's answer says about an agent's name (see
    /// [`super::agent_names`]): Herdr emits no event for a rename, so without this the
    /// cache would show the old name until its next re-snapshot.
    pub fn adopt_answer(&self, answer: &Value) {
        let changed = {
            let mut s = self.write();
            let CacheState { topology, adopted, .. } = &mut *s;
            topology.as_mut().is_some_and(|t| adopted.adopt(t, answer))
        };
        if changed {
            self.bump();
        }
    }

    /// Waits (event-driven, bounded) until `pred` holds for the cache.
    pub async fn wait_for(&self, timeout: Duration, pred: impl Fn(&EventCache) -> bool) -> bool {
        let mut rx = self.changes();
        let deadline = Instant::now() + timeout;
        loop {
            if pred(self) {
                return true;
            }
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => {}
                _ => return pred(self),
            }
        }
    }
}
