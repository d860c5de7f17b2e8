//! [`Continuity`]: bindings, the fleet picture and the wake decisions tied together. The
//! service worker feeds it push events and clock ticks and carries out the actions it
//! returns; it holds no timers or I/O of its own.

use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

use super::bindings::{BindError, Binding, BindingStatus, BindingView, Bindings, ConvTarget, Moved, TabRef, WorkspaceRef};
use super::fleet::Fleet;
use super::progress::{self, ProgressDecision, ProgressSettings, SettingsError};
use super::push_event::{Hello, PushEvent};
use super::render::{self, Lang, WakeFacts, WakeKind};
use super::wake::{self, ExecDone, HelloOutcome, WakeDecision};

/// How long a settle wake waits for the pane's `agent_output` (the runtime reads the
/// pane after publishing the settle).
pub const OUTPUT_WAIT_MS: u64 = 1_200;
/// How often the shell calls [`Continuity::on_tick`]: a settle wake whose output never came
/// goes out at most this long after its wait ends (spec §7.2: 1.2 s in 100 ms polls).
pub const OUTPUT_POLL_MS: u64 = 100;
/// Suppressed wakes (Auto off) kept for the popup.
pub const MAX_SUPPRESSED: usize = 20;

/// Options that shape wakes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settings {
    pub lang: Lang,
    pub progress: ProgressSettings,
    /// Replaces the built-in round template when set.
    pub round_template: Option<String>,
    /// Replaces the built-in progress template when set.
    pub progress_template: Option<String>,
}

/// A wake ready to deliver (or, when suppressed, to show).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Wake {
    /// Unique per binding and occasion.
    pub id: String,
    pub binding_key: String,
    /// The conversation to type into (a Project binding's active conversation).
    pub conv_key: String,
    pub site: String,
    pub tab_id: Option<i64>,
    pub kind: WakeKind,
    pub workspace_id: String,
    pub agent: String,
    pub pane: String,
    pub status: String,
    pub working_count: usize,
    /// The output excerpt the text carries (≤ 4000 chars).
    pub output: String,
    pub text: String,
    pub created_at_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum ContinuityAction {
    /// Deliver this wake (Auto is on).
    Wake(Wake),
    /// Auto is off: never send this; it may be shown in the popup.
    Suppressed(Wake),
    /// The stream lost events: fetch `/push/state` and pass it to [`Continuity::on_state`].
    Resync,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Held {
    binding_key: String,
    decision: WakeDecision,
    deadline_ms: u64,
}

/// The whole continuity state; plain serde data the shell persists between service-worker
/// lifetimes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Continuity {
    settings: Settings,
    bindings: Bindings,
    fleet: Fleet,
    /// Settle wakes waiting for their pane's output.
    held: Vec<Held>,
    suppressed: VecDeque<Wake>,
    /// The bus seq of the newest stream event applied (a stream `hello` restarts it, since
    /// the bus seq restarts with the runtime). A polled `/push/state` picture older than
    /// this is stale: applying it would undo those events.
    #[serde(default)]
    stream_seq: Option<u64>,
}

impl Continuity {
    pub fn new(settings: Settings) -> Result<Self, SettingsError> {
        let mut c = Continuity::default();
        c.set_settings(settings)?;
        Ok(c)
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    pub fn set_settings(&mut self, settings: Settings) -> Result<(), SettingsError> {
        settings.progress.validate()?;
        self.settings = settings;
        Ok(())
    }

    pub fn bindings(&self) -> &Bindings {
        &self.bindings
    }

    pub fn fleet(&self) -> &Fleet {
        &self.fleet
    }

    /// Wakes Auto held back, newest last.
    pub fn suppressed(&self) -> impl Iterator<Item = &Wake> {
        self.suppressed.iter()
    }

    /// Binds the page's conversation scope; a workspace that is already working arms it.
    pub fn bind(
        &mut self,
        target: &ConvTarget,
        workspace: WorkspaceRef,
        workspace_label: Option<String>,
        tab: Option<TabRef>,
        now_ms: u64,
    ) -> Result<BindingView, BindError> {
        let b = self.bindings.bind(target, workspace, workspace_label, tab, now_ms)?;
        if let Some(ws) = b.workspace.herdr_id() {
            let working = self.fleet.working_in(ws);
            if !working.is_empty() {
                b.status = BindingStatus::Working;
                b.working_panes = working;
                let baseline = self.fleet.activity_in(&b.working_panes).unwrap_or("");
                progress::arm(&mut b.progress, self.settings.progress, baseline, now_ms);
            }
        }
        let b = b.clone();
        let auto = self.bindings.auto(&b.conv_key);
        Ok(BindingView { binding: b, auto })
    }

    pub fn unbind(&mut self, conv_key: &str, workspace: Option<&WorkspaceRef>) -> Result<Vec<Binding>, BindError> {
        let removed = self.bindings.unbind(conv_key, workspace)?;
        self.held.retain(|h| removed.iter().all(|b| b.key != h.binding_key));
        Ok(removed)
    }

    pub fn set_auto(&mut self, conv_key: &str, on: bool) {
        self.bindings.set_auto(conv_key, on);
    }

    pub fn list(&self) -> Vec<BindingView> {
        self.bindings.list()
    }

    /// A tab reports its page; see [`Bindings::register_page`].
    pub fn register_page(&mut self, target: &ConvTarget, tab: &TabRef, now_ms: u64) -> Vec<Moved> {
        let moved = self.bindings.register_page(target, tab, now_ms);
        for m in &moved {
            for h in self.held.iter_mut().filter(|h| h.binding_key == m.old_key) {
                h.binding_key.clone_from(&m.new_key);
            }
        }
        moved
    }

    /// Direct access for operations that need it (handoff commits).
    pub fn bindings_mut(&mut self) -> &mut Bindings {
        &mut self.bindings
    }

    /// A fresh `/push/state` picture (after `Resync`, or polled): reconciled like `hello`.
    ///
    /// The answer travels apart from the stream, so it can arrive after events that are newer
    /// than the picture (e.g. the agent's `agent_working`); such a stale picture is dropped —
    /// reconciling with it would disarm a working binding, and its settle would then wake no one.
    pub fn on_state(&mut self, state: Hello, now_ms: u64) -> Vec<ContinuityAction> {
        if let (Some(picture), Some(applied)) = (state.seq, self.stream_seq)
            && picture < applied
        {
            return Vec::new();
        }
        self.on_push_event(PushEvent::Hello(state), now_ms)
    }

    /// A `/push/state` picture fetched for a progress tick: refreshes what working panes show
    /// and nothing else (no wake, no status change; see [`Fleet::refresh_activity`]).
    pub fn refresh_activity(&mut self, picture: &Hello) {
        self.fleet.refresh_activity(picture);
    }

    /// A stream `hello` the shell does not reconcile with (Herdr not live yet) still tells
    /// where the bus seq stands: a restarted runtime counts from the start again, and its
    /// polled pictures must not be taken for stale.
    pub fn on_unreconciled_hello(&mut self, hello: &Hello) {
        self.stream_seq = hello.seq;
    }

    fn note_stream_seq(&mut self, event: &PushEvent) {
        let seq = match event {
            PushEvent::Hello(h) => {
                self.stream_seq = h.seq;
                return;
            }
            PushEvent::AgentWorking { seq, .. }
            | PushEvent::AgentSettled { seq, .. }
            | PushEvent::AgentOutput { seq, .. }
            | PushEvent::AgentGone { seq, .. }
            | PushEvent::ExecCompleted { seq, .. } => *seq,
            PushEvent::Lagged { .. } => None,
        };
        if seq.is_some() {
            self.stream_seq = self.stream_seq.max(seq);
        }
    }

    /// One event of the push stream.
    pub fn on_push_event(&mut self, event: PushEvent, now_ms: u64) -> Vec<ContinuityAction> {
        self.note_stream_seq(&event);
        // Whether the picture had this pane working before its settle is applied below.
        let pane_was_working = match &event {
            PushEvent::AgentSettled { pane, .. } => self.fleet.agents.get(pane).is_some_and(|a| a.is_working()),
            _ => false,
        };
        self.fleet.apply(&event);
        let mut decisions: Vec<(String, WakeDecision)> = Vec::new();
        match &event {
            PushEvent::Hello(_) => {
                let settings = self.settings.progress;
                for b in self.bindings.iter_mut() {
                    let Some(ws) = b.workspace.herdr_id() else { continue };
                    let scoped = self.fleet.scoped(ws);
                    match wake::on_hello(b, &scoped, now_ms) {
                        HelloOutcome::Armed { new_round: true } => {
                            let baseline = self.fleet.activity_in(&b.working_panes).unwrap_or("");
                            progress::arm(&mut b.progress, settings, baseline, now_ms);
                        }
                        HelloOutcome::Wake(d) => decisions.push((b.key.clone(), d)),
                        HelloOutcome::Armed { new_round: false } | HelloOutcome::Baseline => {}
                    }
                }
            }
            PushEvent::AgentWorking { workspace, pane, .. } => {
                let ws = workspace.clone().or_else(|| self.fleet.workspace_of(pane).map(str::to_owned));
                let settings = self.settings.progress;
                for b in self.bindings.iter_mut().filter(|b| ws.is_some() && b.workspace.herdr_id() == ws.as_deref()) {
                    if wake::on_working(b, pane) {
                        let baseline = self.fleet.activity_in(&b.working_panes).unwrap_or("");
                        progress::arm(&mut b.progress, settings, baseline, now_ms);
                    }
                }
            }
            PushEvent::AgentSettled { workspace, pane, agent, status, seq, at } => {
                let ws = workspace.clone().or_else(|| self.fleet.workspace_of(pane).map(str::to_owned));
                let key = wake::settle_key(*seq, at.as_deref(), pane);
                let still_working = ws.as_deref().map(|w| self.fleet.working_in(w)).unwrap_or_default();
                let agent = agent.clone().or_else(|| self.fleet.agents.get(pane).and_then(|a| a.name.clone())).unwrap_or_default();
                let settings = self.settings.progress;
                for b in self.bindings.iter_mut().filter(|b| ws.is_some() && b.workspace.herdr_id() == ws.as_deref()) {
                    let was_working = b.status == BindingStatus::Working;
                    // The binding missed this pane's agent_working (e.g. it came without a
                    // workspace) but the runtime's picture shows the agent worked: the settle
                    // ends a round all the same (spec §7.2). Its key still wakes only once.
                    if pane_was_working && !was_working {
                        wake::on_working(b, pane);
                    }
                    if let Some(d) = wake::on_settled(b, pane, &agent, *status, &key, &still_working, now_ms) {
                        self.held.push(Held { binding_key: b.key.clone(), decision: d, deadline_ms: now_ms.saturating_add(OUTPUT_WAIT_MS) });
                    }
                    // Learning from a settle that others still work starts a round too.
                    if !was_working && b.status == BindingStatus::Working {
                        let baseline = self.fleet.activity_in(&still_working).unwrap_or("");
                        progress::arm(&mut b.progress, settings, baseline, now_ms);
                    }
                }
            }
            PushEvent::AgentOutput { pane, .. } => {
                let (ready, waiting): (Vec<Held>, Vec<Held>) =
                    std::mem::take(&mut self.held).into_iter().partition(|h| h.decision.pane == *pane);
                self.held = waiting;
                decisions.extend(ready.into_iter().map(|h| (h.binding_key, h.decision)));
            }
            PushEvent::AgentGone { workspace, pane, .. } => {
                for b in self.bindings.iter_mut() {
                    let Some(ws) = b.workspace.herdr_id() else { continue };
                    if workspace.as_deref().is_some_and(|w| w != ws) || !b.working_panes.remove(pane) {
                        continue;
                    }
                    // A vanished agent ends its part of the round without a result to report.
                    if b.working_panes.is_empty() && self.fleet.working_in(ws).is_empty() {
                        b.status = BindingStatus::Idle;
                    }
                }
            }
            PushEvent::ExecCompleted { session_id, root, exit_code, signal, workspace, .. } => {
                let done = ExecDone {
                    session_id,
                    root,
                    exit_code: *exit_code,
                    signal: signal.as_deref(),
                    workspace: workspace.as_deref(),
                };
                for b in self.bindings.iter_mut() {
                    let info = b.workspace.herdr_id().and_then(|ws| self.fleet.workspaces.get(ws));
                    let working = b.workspace.herdr_id().map(|ws| self.fleet.working_in(ws).len()).unwrap_or(0);
                    if let Some(d) = wake::on_exec(b, &done, info, working) {
                        decisions.push((b.key.clone(), d));
                    }
                }
            }
            PushEvent::Lagged { .. } => return vec![ContinuityAction::Resync],
        }
        decisions.into_iter().filter_map(|(key, d)| self.finish(&key, d, now_ms)).collect()
    }

    /// The clock: releases settle wakes whose output wait is over and runs progress ticks.
    pub fn on_tick(&mut self, now_ms: u64) -> Vec<ContinuityAction> {
        let (ready, waiting): (Vec<Held>, Vec<Held>) =
            std::mem::take(&mut self.held).into_iter().partition(|h| h.deadline_ms <= now_ms);
        self.held = waiting;
        let mut decisions: Vec<(String, WakeDecision)> = ready.into_iter().map(|h| (h.binding_key, h.decision)).collect();
        let settings = self.settings.progress;
        let ticking: Vec<String> = self
            .bindings
            .iter()
            .filter(|b| settings.enabled() && b.status == BindingStatus::Working && b.workspace.herdr_id().is_some())
            .filter(|b| self.bindings.auto(&b.conv_key))
            .map(|b| b.key.clone())
            .collect();
        for key in ticking {
            let Some(b) = self.bindings.get_mut(&key) else { continue };
            let Some(ws) = b.workspace.herdr_id() else { continue };
            let working = self.fleet.working_in(ws);
            let panes: Vec<&String> = b.working_panes.iter().chain(working.iter()).collect();
            let focus = panes.iter().find(|p| self.fleet.activity_of(p).is_some()).or(panes.first()).map(|p| p.to_string());
            let Some(pane) = focus else { continue };
            let output = self.fleet.activity_of(&pane).unwrap_or("");
            if progress::tick(&mut b.progress, settings, output, now_ms) == ProgressDecision::Send {
                let agent = self.fleet.agents.get(&pane).and_then(|a| a.name.clone()).unwrap_or_default();
                let working_count = b.working_panes.union(&working).count();
                let key = format!("progress:{now_ms}");
                let d = WakeDecision { kind: WakeKind::Progress, pane, agent, status: "working".into(), working_count, key };
                decisions.push((b.key.clone(), d));
            }
        }
        decisions.into_iter().filter_map(|(key, d)| self.finish(&key, d, now_ms)).collect()
    }

    /// When [`Continuity::on_tick`] next has something to do, if ever.
    pub fn next_deadline_ms(&self) -> Option<u64> {
        let held = self.held.iter().map(|h| h.deadline_ms);
        held.chain(self.progress_ticks()).min()
    }

    /// Whether a progress tick of some binding is due at `now_ms`. The stream carries no
    /// output while agents work, so the shell fetches a fresh `/push/state` picture for such
    /// a tick (spec §7.3, [`Continuity::refresh_activity`]); a due settle wake needs none.
    pub fn progress_due(&self, now_ms: u64) -> bool {
        self.progress_ticks().any(|at| at <= now_ms)
    }

    fn progress_ticks(&self) -> impl Iterator<Item = u64> + '_ {
        self.bindings
            .iter()
            .filter(|b| b.status == BindingStatus::Working && b.workspace.herdr_id().is_some())
            .filter(|b| self.settings.progress.enabled() && self.bindings.auto(&b.conv_key))
            .map(|b| b.progress.next_tick_at_ms)
    }

    /// Renders a decision into a wake, sendable only when the conversation's Auto is on.
    ///
    /// A settle wake may have waited for its output, so its kind is checked against who works
    /// now (spec §7.2): a `round` during whose wait another agent started is only a `partial`.
    /// The other way stays as decided: if the other agents settle while a `partial` waits,
    /// their own settle brings the `round`, and turning this one into a round too would
    /// announce the end of the round twice.
    fn finish(&mut self, binding_key: &str, mut d: WakeDecision, now_ms: u64) -> Option<ContinuityAction> {
        let b = self.bindings.get(binding_key)?;
        if let (WakeKind::Round | WakeKind::Partial, Some(ws)) = (d.kind, b.workspace.herdr_id()) {
            let working = self.fleet.working_in(ws);
            let others = working.union(&b.working_panes).filter(|p| **p != d.pane).count();
            if others > 0 {
                d.kind = WakeKind::Partial;
                d.working_count = others;
            }
        }
        let (workspace_id, info) = match &b.workspace {
            WorkspaceRef::Herdr { id } => (id.clone(), self.fleet.workspaces.get(id)),
            WorkspaceRef::Root { path } => (path.clone(), None),
        };
        let agents = match &b.workspace {
            WorkspaceRef::Herdr { id } => self.fleet.scoped(id).into_iter().cloned().collect(),
            WorkspaceRef::Root { .. } => Vec::new(),
        };
        let output = match d.kind {
            WakeKind::Exec => None,
            WakeKind::Progress => self.fleet.activity_of(&d.pane),
            WakeKind::Round | WakeKind::Partial => self.fleet.output_of(&d.pane),
        };
        let output = output.map(|o| render::tail_chars(o, render::MAX_OUTPUT_CHARS).to_owned()).unwrap_or_default();
        let roots = match (&b.workspace, info) {
            (WorkspaceRef::Root { path }, _) => vec![path.clone()],
            (_, Some(info)) => info.roots.clone(),
            _ => Vec::new(),
        };
        let facts = WakeFacts {
            agent: d.agent.clone(),
            pane: d.pane.clone(),
            status: d.status.clone(),
            workspace_id: workspace_id.clone(),
            workspace_label: b.workspace_label.clone().or_else(|| info.and_then(|i| i.label.clone())),
            workspace_roots: roots,
            working_count: d.working_count,
            output: output.clone(),
            agents,
        };
        let custom = match d.kind {
            WakeKind::Round => self.settings.round_template.as_deref(),
            WakeKind::Progress => self.settings.progress_template.as_deref(),
            _ => None,
        };
        let text = render::render(d.kind, self.settings.lang, custom, &facts);
        let wake = Wake {
            id: format!("{binding_key}#{}", d.key),
            binding_key: binding_key.to_owned(),
            conv_key: b.target_conv_key().to_owned(),
            site: b.site.clone(),
            tab_id: b.tab_id,
            kind: d.kind,
            workspace_id,
            agent: d.agent,
            pane: d.pane,
            status: d.status,
            working_count: d.working_count,
            output,
            text,
            created_at_ms: now_ms,
        };
        if self.bindings.auto(&b.conv_key) {
            Some(ContinuityAction::Wake(wake))
        } else {
            self.suppressed.push_back(wake.clone());
            while self.suppressed.len() > MAX_SUPPRESSED {
                self.suppressed.pop_front();
            }
            Some(ContinuityAction::Suppressed(wake))
        }
    }
}
