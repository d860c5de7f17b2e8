//! The event cache: a background loop that keeps a picture of Herdr (topology), the
//! `herdr_since` history and the push bus current.
//!
//! Herdr 0.8.2 replays its event ring on every new lifecycle subscription, one event
//! per type per 100 ms poll, each type at its own pace, and sends no sequence number
//! (spec/herdr.md E.1–E.4). So nothing a lifecycle event says is applied: each one is
//! a *hint*, checked against the picture, and where they disagree against Herdr
//! itself (`pane.get`, `workspace.get`, `tab.get`, or a fresh `session.snapshot`).
//! Only what those answers show changes the picture, and only a change of the
//! picture is news: a history record, a push event, activity. A replayed event
//! agrees with the picture (or is refuted by Herdr), so it is never news.
//!
//! What the loop holds open:
//! - one lifecycle stream for the whole connection, renewed rarely
//!   ([`super::Timeouts::resubscribe`]); its replay only costs a probe per id the
//!   picture does not know;
//! - one `pane.agent_status_changed` stream per pane. These do not replay (E.3), so a
//!   new pane gets its own stream without touching the others.
//!
//! And what it asks: `pane.get` of every known pane every [`super::Timeouts::poll`]
//! (Herdr emits nothing when a pane's cwd changes, E.7; the same answer refreshes the
//! title and status, and notices a pane that went without a close event, D.3), and a
//! fresh picture every [`super::Timeouts::resnapshot`] (names set outside this runtime,
//! labels, focus).
//!
//! Status answers race with status events: an answer made before an event the cache
//! already applied would bring an older status back (a false start or finish). Every
//! applied status event is stamped, and an answer requested before the stamp leaves
//! that pane's status alone.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::agent_names;
use super::client::HerdrClient;
use super::error::{HerdrError, codes};
use super::history::{History, Page};
use super::snapshot::fetch_topology;
use super::topology::{AgentState, SETTLED, Topology, split_event, str_of};
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

/// Characters of pane text carried by one `agent_output` event.
pub const OUTPUT_TAIL_CHARS: usize = 4000;
/// A hint asking for a fresh picture waits this long for others to join it.
const RECONCILE_DEBOUNCE: Duration = Duration::from_millis(100);
/// Fresh pictures asked for by hints are at least this far apart.
const RECONCILE_SPACING: Duration = Duration::from_millis(500);

#[derive(Default)]
struct CacheState {
    topology: Option<Topology>,
    /// Picture taken and streams open: the topology is current.
    live: bool,
    warnings: Vec<String>,
    last_error: Option<HerdrError>,
    history: History,
    /// Time of the last real change per pane (`last_activity_at` in `herdr_since`).
    last_activity: HashMap<String, String>,
    /// Names learnt from answers, which a snapshot requested before them must not undo.
    adopted: agent_names::AdoptedNames,
    /// Stamp of the last status event applied, overall and per pane.
    status_clock: u64,
    status_stamp: HashMap<String, u64>,
    /// Panes whose status stream is open: their statuses come from it alone (in order),
    /// not from answers that may be ahead of the events still on their way.
    streamed: HashSet<String>,
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

/// What one lifecycle hint asks the loop to check.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Check {
    Pane(String),
    Workspace(String),
    Tab(String),
    /// A fresh picture.
    Picture,
}

/// A status stream's report to the loop.
enum StatusMsg {
    /// Herdr acknowledged the stream of this pane.
    Opened(String),
    Event(Value),
    Ended(String),
}

/// The per-pane status streams; dropping it ends them all.
#[derive(Default)]
struct StatusStreams {
    open: HashMap<String, tokio::task::JoinHandle<()>>,
}

impl Drop for StatusStreams {
    fn drop(&mut self) {
        for (_, task) in self.open.drain() {
            task.abort();
        }
    }
}

fn pane_id_of(data: &Value) -> Option<&str> {
    str_of(data, "pane_id").or_else(|| data.get("pane").and_then(|p| str_of(p, "pane_id")))
}

fn workspace_id_of(data: &Value) -> Option<&str> {
    data.get("workspace").and_then(|w| str_of(w, "workspace_id")).or_else(|| str_of(data, "workspace_id"))
}

fn tab_id_of(data: &Value) -> Option<&str> {
    data.get("tab").and_then(|t| str_of(t, "tab_id")).or_else(|| str_of(data, "tab_id"))
}

fn tab_known(t: &Topology, id: &str) -> bool {
    t.tabs.iter().any(|x| str_of(x, "tab_id") == Some(id))
}

/// What a lifecycle event asks to check, given the picture (see the module docs).
/// `None`: it agrees with the picture, or says nothing the picture keeps.
fn check_for(t: &Topology, name: &str, data: &Value) -> Option<Check> {
    let pane = pane_id_of(data);
    let ws = workspace_id_of(data);
    let known_ws = |id: &str| t.workspace(id).is_some();
    match name {
        // A pane's record changed (its title, most often): one look shows how it is now
        // (a replayed update costs that look, and changes nothing).
        "pane_updated" => Some(Check::Pane(pane?.to_string())),
        // Something exists: news only when the picture lacks it.
        "pane_created" | "pane_focused" | "pane_moved" => {
            let id = pane?;
            (t.pane(id).is_none()).then(|| Check::Pane(id.to_string()))
        }
        "workspace_created"
        | "workspace_updated"
        | "workspace_metadata_updated"
        | "workspace_renamed"
        | "workspace_focused"
        | "worktree_created"
        | "worktree_opened" => {
            let id = ws?;
            (!known_ws(id)).then(|| Check::Workspace(id.to_string()))
        }
        "tab_created" | "tab_renamed" | "tab_focused" | "tab_moved" => {
            let id = tab_id_of(data)?;
            (!tab_known(t, id)).then(|| Check::Tab(id.to_string()))
        }
        // Something went: news only when the picture still has it (a pane that
        // exited may be gone without any close event, spec D.3).
        "pane_closed" | "pane_exited" => {
            let id = pane?;
            t.pane(id).is_some().then(|| Check::Pane(id.to_string()))
        }
        "workspace_closed" | "worktree_removed" => {
            let id = ws?;
            known_ws(id).then(|| Check::Workspace(id.to_string()))
        }
        "tab_closed" => {
            let id = tab_id_of(data)?;
            tab_known(t, id).then(|| Check::Tab(id.to_string()))
        }
        // An agent appeared or left: news when the picture says otherwise.
        "pane_agent_detected" => {
            let id = pane?;
            t.pane(id)?;
            let ours = t.agent_for_pane(id).and_then(|a| str_of(a, "agent"));
            let agrees = if data.get("released") == Some(&Value::Bool(true)) {
                ours.is_none()
            } else {
                ours.is_some() && ours == str_of(data, "agent")
            };
            (!agrees).then(|| Check::Pane(id.to_string()))
        }
        // Order and focus of workspaces: the next picture has them.
        _ => None,
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
            match self.follow(&cancel).await {
                Ok(()) => break,
                Err(e) => {
                    tracing::debug!(code = %e.code, "herdr event cache: {}", e.message);
                    let was_live = {
                        let mut s = self.write();
                        let was = s.live;
                        s.live = false;
                        s.last_error = Some(e);
                        was
                    };
                    self.bump();
                    // A connection that went live starts the backoff over.
                    if was_live {
                        backoff = timeouts.backoff_initial;
                    }
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

    fn lifecycle_subscriptions() -> Vec<Value> {
        LIFECYCLE_SUBSCRIPTIONS.iter().map(|t| json!({"type": t})).collect()
    }

    /// One connection to Herdr: the lifecycle stream, a picture, the status streams,
    /// then hints, status events, polls and renewals until something fails or
    /// `cancel` fires (`Ok`).
    async fn follow(&self, cancel: &CancellationToken) -> Result<(), HerdrError> {
        let timeouts = self.client.timeouts().clone();
        // The stream first: its replay covers everything from the ring's start, so a
        // change made while the picture is being taken still reaches it as a hint.
        let mut lifecycle = self.client.subscribe(Self::lifecycle_subscriptions()).await?;
        self.refresh().await?;
        self.write().streamed.clear();
        let (status_tx, mut status_rx) = mpsc::unbounded_channel();
        let mut streams = StatusStreams::default();
        self.sync_status_streams(&mut streams, &status_tx);
        // Live once every pane's status stream is open (or the snapshot budget is spent):
        // from then on no status change goes unseen.
        let opened_by = Instant::now() + timeouts.snapshot;
        while !streams.open.keys().all(|p| self.read().streamed.contains(p)) {
            let Ok(msg) = tokio::time::timeout_at(opened_by, status_rx.recv()).await else { break };
            let Some(msg) = msg else { break };
            self.on_status_msg(msg, &mut streams).await?;
        }
        {
            let mut s = self.write();
            s.live = true;
            s.last_error = None;
        }
        self.bump();
        // Ids already checked since the stream opened: a replay names each again.
        let mut checked: HashSet<Check> = HashSet::new();
        let mut renew_at = Instant::now() + timeouts.resubscribe;
        let mut snapshot_at = Instant::now() + timeouts.resnapshot;
        let mut reconcile_at: Option<Instant> = None;
        let mut last_reconcile = Instant::now().checked_sub(RECONCILE_SPACING).unwrap_or_else(Instant::now);
        let mut poll = tokio::time::interval_at(Instant::now() + timeouts.poll, timeouts.poll);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let mut wants_picture = false;
            tokio::select! {
                _ = cancel.cancelled() => return Ok(()),
                line = lifecycle.next_event() => {
                    let Some(line) = line? else {
                        return Err(HerdrError::local(codes::UNEXPECTED_EOF, "herdr closed the event subscription"));
                    };
                    wants_picture = self.on_hint(&line, &mut checked).await?;
                }
                Some(msg) = status_rx.recv() => wants_picture = self.on_status_msg(msg, &mut streams).await?,
                _ = poll.tick() => wants_picture = self.poll_panes().await?,
                _ = tokio::time::sleep_until(renew_at) => {
                    // The new stream replays the ring; the old one closes once it is open.
                    lifecycle = self.client.subscribe(Self::lifecycle_subscriptions()).await?;
                    checked.clear();
                    // The status streams too (they do not replay; each reopened one is looked at once).
                    self.write().streamed.clear();
                    streams = StatusStreams::default();
                    renew_at = Instant::now() + timeouts.resubscribe;
                }
                _ = tokio::time::sleep_until(reconcile_at.unwrap_or(snapshot_at).min(snapshot_at)) => {
                    self.refresh().await?;
                    reconcile_at = None;
                    last_reconcile = Instant::now();
                    snapshot_at = Instant::now() + timeouts.resnapshot;
                }
            }
            if wants_picture && reconcile_at.is_none() {
                reconcile_at = Some((Instant::now() + RECONCILE_DEBOUNCE).max(last_reconcile + RECONCILE_SPACING));
            }
            self.sync_status_streams(&mut streams, &status_tx);
        }
    }

    /// A status stream's report. True when a fresh picture is needed.
    async fn on_status_msg(&self, msg: StatusMsg, streams: &mut StatusStreams) -> Result<bool, HerdrError> {
        match msg {
            // A change made before the stream opened is not on it: one look closes the gap.
            StatusMsg::Opened(pane) => {
                self.write().streamed.insert(pane.clone());
                self.poll_pane(&pane, true).await
            }
            StatusMsg::Event(line) => Ok(self.on_status(&line)),
            // Reopened at the next sync.
            StatusMsg::Ended(pane) => {
                self.write().streamed.remove(&pane);
                streams.open.remove(&pane);
                Ok(false)
            }
        }
    }

    /// Opens a status stream for every pane of the picture without one, and ends those
    /// of panes that are gone.
    fn sync_status_streams(&self, streams: &mut StatusStreams, tx: &mpsc::UnboundedSender<StatusMsg>) {
        let panes: BTreeSet<String> =
            self.read().topology.as_ref().map(|t| t.pane_ids().into_iter().collect()).unwrap_or_default();
        let mut ended = vec![];
        streams.open.retain(|pane, task| {
            let keep = panes.contains(pane) && !task.is_finished();
            if !keep {
                task.abort();
                ended.push(pane.clone());
            }
            keep
        });
        if !ended.is_empty() {
            let mut s = self.write();
            for pane in ended {
                s.streamed.remove(&pane);
            }
        }
        for pane in panes {
            if streams.open.contains_key(&pane) {
                continue;
            }
            let client = Arc::clone(&self.client);
            let tx = tx.clone();
            let id = pane.clone();
            let task = tokio::spawn(async move {
                let subscription = vec![json!({"type": "pane.agent_status_changed", "pane_id": id})];
                if let Ok(mut sub) = client.subscribe(subscription).await {
                    let _ = tx.send(StatusMsg::Opened(id.clone()));
                    while let Ok(Some(line)) = sub.next_event().await {
                        if tx.send(StatusMsg::Event(line)).is_err() {
                            return;
                        }
                    }
                }
                let _ = tx.send(StatusMsg::Ended(id));
            });
            streams.open.insert(pane, task);
        }
    }

    /// Takes a fresh picture of Herdr and installs it.
    async fn refresh(&self) -> Result<(), HerdrError> {
        let (mark, stamp) = {
            let s = self.read();
            (s.adopted.mark(), s.status_clock)
        };
        let (topology, warnings) = fetch_topology(&self.client).await?;
        self.install(topology, warnings, mark, stamp);
        Ok(())
    }

    /// Replaces the topology with a fresh picture, requested when adoptions stood at
    /// `mark` and status events at `stamp`, and records what changed (nothing on the
    /// very first picture: that is `hello`'s job).
    fn install(&self, mut topology: Topology, warnings: Vec<String>, mark: u64, stamp: u64) {
        let old = {
            let mut s = self.write();
            s.adopted.reconcile(&mut topology, mark);
            // A status event applied after the picture was requested is newer than it;
            // a pane whose stream is open gets its status from the stream, in order.
            if let Some(old) = &s.topology {
                let newer = s.status_stamp.iter().filter(|(_, at)| **at > stamp).map(|(p, _)| p);
                for pane in newer.chain(s.streamed.iter()) {
                    if let Some(status) = old.agent_for_pane(pane).and_then(|a| str_of(a, "agent_status")) {
                        topology.set_status(pane, status);
                    }
                }
            }
            s.warnings = warnings;
            s.topology.replace(topology)
        };
        match old {
            Some(old) => self.record(&old),
            None => self.bump(),
        }
    }

    /// Compares the picture now with `old` and makes every real change news: history,
    /// activity, push events.
    fn record(&self, old: &Topology) {
        let Some(new) = self.last_topology() else { return };
        let at = now();
        let mut records: Vec<(&str, Value, Option<String>)> = vec![];
        let ids = |t: &Topology, list: fn(&Topology) -> &Vec<Value>, key: &str| -> BTreeMap<String, Value> {
            list(t).iter().filter_map(|r| Some((str_of(r, key)?.to_string(), r.clone()))).collect()
        };
        let (old_ws, new_ws) = (ids(old, |t| &t.workspaces, "workspace_id"), ids(&new, |t| &t.workspaces, "workspace_id"));
        for (id, ws) in new_ws.iter().filter(|(id, _)| !old_ws.contains_key(*id)) {
            records.push(("workspace_created", json!({"workspace": ws, "workspace_id": id}), None));
        }
        for id in old_ws.keys().filter(|id| !new_ws.contains_key(*id)) {
            records.push(("workspace_closed", json!({"workspace_id": id}), None));
        }
        let (old_panes, new_panes) = (ids(old, |t| &t.panes, "pane_id"), ids(&new, |t| &t.panes, "pane_id"));
        for (id, pane) in new_panes.iter().filter(|(id, _)| !old_panes.contains_key(*id)) {
            records.push(("pane_created", json!({"pane": pane}), Some(id.clone())));
        }
        for (id, pane) in old_panes.iter().filter(|(id, _)| !new_panes.contains_key(*id)) {
            records.push(("pane_closed", json!({"pane_id": id, "workspace_id": pane.get("workspace_id")}), Some(id.clone())));
        }
        let (was, is) = (old.agent_states(), new.agent_states());
        for (pane, a) in &is {
            match was.get(pane) {
                None => records.push((
                    "pane_agent_detected",
                    json!({"pane_id": pane, "workspace_id": a.workspace, "agent": a.kind, "agent_status": a.status}),
                    Some(pane.clone()),
                )),
                Some(b) if b.status != a.status => records.push((
                    "pane.agent_status_changed",
                    json!({"pane_id": pane, "workspace_id": a.workspace, "agent_status": a.status, "agent": a.kind}),
                    Some(pane.clone()),
                )),
                Some(_) => {}
            }
        }
        for (pane, b) in was.iter().filter(|(p, _)| !is.contains_key(*p)) {
            records.push((
                "pane_agent_detected",
                json!({"pane_id": pane, "workspace_id": b.workspace, "agent": b.kind, "released": true, "final_status": b.status}),
                Some(pane.clone()),
            ));
        }
        if !records.is_empty() {
            let mut s = self.write();
            for (kind, data, pane) in records {
                s.history.push(kind, data, at.clone());
                if let Some(pane) = pane {
                    s.last_activity.insert(pane, at.clone());
                }
            }
        }
        self.publish_changes(&self.visible_states(old), &self.visible_states(&new));
        self.bump();
    }

    /// Applies `change` to the picture and records what it changed.
    fn commit(&self, change: impl FnOnce(&mut Topology)) {
        let old = {
            let mut s = self.write();
            let Some(t) = s.topology.as_mut() else { return };
            let old = t.clone();
            change(t);
            if *t == old {
                return;
            }
            old
        };
        self.record(&old);
    }

    /// A lifecycle event: checks what it disagrees with. True when a fresh picture is needed.
    async fn on_hint(&self, line: &Value, checked: &mut HashSet<Check>) -> Result<bool, HerdrError> {
        let Some((name, data)) = split_event(line) else { return Ok(false) };
        let check = match self.read().topology.as_ref() {
            Some(t) => check_for(t, &name, &data),
            None => Some(Check::Picture),
        };
        let Some(check) = check else { return Ok(false) };
        // A replay names an id once per event type: an id the picture lacks is checked
        // once per stream. A pane the picture has is looked at every time (it may have
        // gone or changed since).
        if !matches!(check, Check::Pane(ref id) if self.read().topology.as_ref().is_some_and(|t| t.pane(id).is_some()))
            && !checked.insert(check.clone())
        {
            return Ok(false);
        }
        self.verify(check).await
    }

    /// Asks Herdr about what a hint named. True when a fresh picture is needed.
    async fn verify(&self, check: Check) -> Result<bool, HerdrError> {
        let (method, params, key) = match &check {
            Check::Pane(id) => return self.poll_pane(id, false).await,
            Check::Workspace(id) => ("workspace.get", json!({"workspace_id": id}), "workspace"),
            Check::Tab(id) => ("tab.get", json!({"tab_id": id}), "tab"),
            Check::Picture => return Ok(true),
        };
        let known = {
            let s = self.read();
            let t = s.topology.as_ref();
            match &check {
                Check::Workspace(id) => t.is_some_and(|t| t.workspace(id).is_some()),
                Check::Tab(id) => t.is_some_and(|t| tab_known(t, id)),
                _ => false,
            }
        };
        let budget = self.client.timeouts().agent_get;
        match self.client.call_with_timeout(method, params, budget).await {
            // It exists: news if the picture lacks it.
            Ok(answer) => Ok(!known && answer.get(key).is_some()),
            // It is gone: news if the picture has it.
            Err(e) if e.from_daemon && e.code.ends_with("_not_found") => Ok(known),
            Err(e) if e.is_unavailable() => Err(e),
            Err(_) => Ok(false),
        }
    }

    /// `pane.get` of every pane of the picture. True when a fresh picture is needed.
    async fn poll_panes(&self) -> Result<bool, HerdrError> {
        let panes = self.read().topology.as_ref().map(Topology::pane_ids).unwrap_or_default();
        let answers = futures::future::join_all(panes.iter().map(|p| self.poll_pane(p, false))).await;
        let mut wants_picture = false;
        for answer in answers {
            wants_picture |= answer?;
        }
        Ok(wants_picture)
    }

    /// `pane.get` of one pane, applied to the picture: its cwd and title as Herdr has
    /// them now, or its removal when Herdr no longer knows it; its status too when no
    /// status stream of the pane is open, or when `status` asks for it (the look that
    /// closes the gap before a stream opened). True when a fresh picture is needed (a
    /// pane or an agent the picture lacks).
    async fn poll_pane(&self, pane_id: &str, status: bool) -> Result<bool, HerdrError> {
        let stamp = self.read().status_clock;
        let budget = self.client.timeouts().agent_get;
        let answer = self.client.call_with_timeout("pane.get", json!({"pane_id": pane_id}), budget).await;
        let pane = match answer {
            Ok(answer) => match answer.get("pane") {
                Some(p) if p.is_object() => p.clone(),
                _ => return Ok(false),
            },
            Err(e) if e.from_daemon && e.code == "pane_not_found" => {
                let known = self.read().topology.as_ref().is_some_and(|t| t.pane(pane_id).is_some());
                if known {
                    self.commit(|t| t.remove_pane(pane_id));
                }
                return Ok(false);
            }
            Err(e) if e.is_unavailable() => return Err(e),
            Err(_) => return Ok(false),
        };
        let (known, has_agent) = {
            let s = self.read();
            let t = s.topology.as_ref();
            (t.is_some_and(|t| t.pane(pane_id).is_some()), t.is_some_and(|t| t.agent_for_pane(pane_id).is_some()))
        };
        if !known {
            // Herdr has it now: shown at once; its agent and tab come with a picture.
            self.commit(|t| {
                if t.pane(pane_id).is_none() {
                    t.panes.push(pane.clone());
                }
            });
            return Ok(true);
        }
        let (fresh, streamed) = {
            let s = self.read();
            (s.status_stamp.get(pane_id).is_none_or(|&at| at <= stamp), s.streamed.contains(pane_id))
        };
        let agent_there = pane.get("agent").is_some_and(|a| !a.is_null());
        self.commit(|t| t.refresh_pane(&pane, fresh && (status || !streamed)));
        // An agent came or went: its record (name, seq, session) comes with a picture.
        Ok(fresh && agent_there != has_agent)
    }

    /// A status event (these never replay, spec E.3). True when a fresh picture is needed.
    fn on_status(&self, line: &Value) -> bool {
        let Some((_, data)) = split_event(line) else { return false };
        let (Some(pane), Some(status)) = (str_of(&data, "pane_id"), str_of(&data, "agent_status")) else { return false };
        let agent = str_of(&data, "agent");
        {
            let mut s = self.write();
            s.status_clock += 1;
            let clock = s.status_clock;
            s.status_stamp.insert(pane.to_string(), clock);
        }
        let known = self.read().topology.as_ref().map(|t| (t.pane(pane).is_some(), t.agent_for_pane(pane).is_some()));
        // An agent Herdr names that the picture lacks is shown at once; its full record
        // comes with the next picture.
        let wants_picture = match known {
            None | Some((false, _)) => return true,
            Some((true, had_agent)) => !had_agent && agent.is_some(),
        };
        let ws = str_of(&data, "workspace_id");
        self.commit(|t| t.apply_status(pane, ws, agent, status));
        wants_picture
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

    /// Push events for what changed between two pictures: `agent_working` when an
    /// agent starts working, `agent_settled` (then `agent_output`) when a working agent
    /// stops — never for an agent that only got classified (`unknown` → `idle`, spec
    /// E.5) — and `agent_gone` when an agent leaves.
    fn publish_changes(&self, old: &BTreeMap<String, AgentState>, new: &BTreeMap<String, AgentState>) {
        let Some(bus) = &self.push else { return };
        let label = |a: &AgentState| a.name.clone().or_else(|| a.kind.clone());
        for (pane, now_state) in new {
            let was = old.get(pane).map(|b| class(&b.status));
            let is = class(&now_state.status);
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
            } else if was == Some("working") && SETTLED.contains(&now_state.status.as_str()) {
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
