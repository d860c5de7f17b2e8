//! When a bound conversation should be woken (spec/extension.md §7.2), decided per binding
//! from the push events. The scope of a binding is the agents of its workspace.
//!
//! - `agent_working` arms the binding (status `working`); it never wakes.
//! - `agent_settled` with a settle key not seen before wakes a binding that was working:
//!   `partial` while another scoped agent still works, `round` when none does.
//! - `hello` (a fresh picture after connecting) reconciles: scoped agents working → armed;
//!   none working but the binding was working → a settle was missed while offline →
//!   `round`, unless that settle was already acted on.
//! - `exec_completed` of a session whose root lies in the bound root (or in a root of the
//!   bound workspace, or naming that workspace) → `exec`, once per session.
//!
//! These functions only decide; whether a wake may be sent (Auto) is the caller's business.

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

use super::bindings::{path_within, Binding, BindingStatus, LastSettle, WorkspaceRef};
use super::push_event::{AgentInfo, SettledStatus, WorkspaceInfo};
use super::render::WakeKind;

/// What a binding should be woken about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WakeDecision {
    pub kind: WakeKind,
    /// The focus agent's pane (exec: the session's root).
    pub pane: String,
    /// The focus agent (exec: the session id).
    pub agent: String,
    /// `idle|done|blocked`, or for exec `exit <code>` / `signal <name>`.
    pub status: String,
    /// Scoped agents still working.
    pub working_count: usize,
    /// The settle (or session) this wake is about; unique per binding.
    pub key: String,
}

/// The duplicate-detection key of a settle: the bus seq with its time (the bus seq alone
/// restarts with the runtime), else time and pane.
pub fn settle_key(seq: Option<u64>, at: Option<&str>, pane: &str) -> String {
    match (seq, at) {
        (Some(seq), Some(at)) => format!("{seq}@{at}"),
        (Some(seq), None) => seq.to_string(),
        (None, at) => format!("t:{}:{pane}", at.unwrap_or("")),
    }
}

/// `agent_working`: arms the binding. True when this starts a new working round.
pub fn on_working(b: &mut Binding, pane: &str) -> bool {
    b.working_panes.insert(pane.to_owned());
    std::mem::replace(&mut b.status, BindingStatus::Working) != BindingStatus::Working
}

/// `agent_settled` of `pane`; `still_working` = the scoped panes working now (this pane
/// excluded or not, it is removed).
pub fn on_settled(
    b: &mut Binding,
    pane: &str,
    agent: &str,
    status: SettledStatus,
    key: &str,
    still_working: &BTreeSet<String>,
    now_ms: u64,
) -> Option<WakeDecision> {
    let was_working = b.status == BindingStatus::Working;
    b.working_panes.remove(pane);
    let others = still_working.iter().chain(b.working_panes.iter()).filter(|p| *p != pane).collect::<BTreeSet<_>>().len();
    b.status = if others == 0 { BindingStatus::Idle } else { BindingStatus::Working };
    if !b.remember(key) {
        return None;
    }
    b.last_settle = Some(LastSettle { seq: key.to_owned(), at_ms: now_ms });
    if !was_working {
        return None;
    }
    let kind = if others == 0 { WakeKind::Round } else { WakeKind::Partial };
    Some(WakeDecision {
        kind,
        pane: pane.to_owned(),
        agent: agent.to_owned(),
        status: status.as_str().to_owned(),
        working_count: others,
        key: key.to_owned(),
    })
}

/// What a `hello` did to a binding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HelloOutcome {
    /// Scoped agents are working; `new_round` when the binding was not armed before.
    Armed { new_round: bool },
    /// A settle was missed while offline.
    Wake(WakeDecision),
    /// Nothing to do; the baseline is updated.
    Baseline,
}

/// `hello` for one binding; `scoped` = the agents of its workspace in the picture.
pub fn on_hello(b: &mut Binding, scoped: &[&AgentInfo], now_ms: u64) -> HelloOutcome {
    let working: BTreeSet<String> = scoped.iter().filter(|a| a.is_working()).filter_map(|a| a.pane.clone()).collect();
    if !working.is_empty() {
        let new_round = b.status != BindingStatus::Working;
        b.status = BindingStatus::Working;
        b.working_panes = working;
        return HelloOutcome::Armed { new_round };
    }
    let was_working = b.status == BindingStatus::Working;
    b.status = BindingStatus::Idle;
    b.working_panes.clear();
    let first_settled = scoped.iter().find(|a| a.settled_status().is_some());
    let key = match first_settled {
        Some(a) => match &a.seq {
            Some(seq) => format!("hello:{}:{seq}", a.pane.as_deref().unwrap_or("")),
            None => format!("hello:{}", a.status.as_deref().unwrap_or("")),
        },
        None => "hello:empty".to_owned(),
    };
    let already = b.last_settle.as_ref().is_some_and(|s| s.seq == key);
    if !was_working || already {
        return HelloOutcome::Baseline;
    }
    b.last_settle = Some(LastSettle { seq: key.clone(), at_ms: now_ms });
    b.remember(&key);
    let (pane, agent, status) = match first_settled {
        Some(a) => (
            a.pane.clone().unwrap_or_default(),
            a.name.clone().unwrap_or_default(),
            a.status.clone().unwrap_or_default(),
        ),
        None => (String::new(), String::new(), String::new()),
    };
    HelloOutcome::Wake(WakeDecision { kind: WakeKind::Round, pane, agent, status, working_count: 0, key })
}

/// A finished exec session, as the decision needs it.
#[derive(Debug, Clone, Copy)]
pub struct ExecDone<'a> {
    pub session_id: &'a str,
    pub root: &'a str,
    pub exit_code: Option<i32>,
    pub signal: Option<&'a str>,
    pub workspace: Option<&'a str>,
}

/// Whether a session in `root` (naming `workspace`) belongs to the binding's scope.
pub fn exec_in_scope(b: &Binding, done: &ExecDone<'_>, workspace_info: Option<&WorkspaceInfo>) -> bool {
    match &b.workspace {
        WorkspaceRef::Root { path } => path_within(path, done.root),
        WorkspaceRef::Herdr { id } => {
            done.workspace == Some(id.as_str())
                || workspace_info.is_some_and(|w| w.roots.iter().any(|r| path_within(r, done.root)))
        }
    }
}

/// `exec_completed`: wakes once per session in scope.
pub fn on_exec(b: &mut Binding, done: &ExecDone<'_>, workspace_info: Option<&WorkspaceInfo>, still_working: usize) -> Option<WakeDecision> {
    if !exec_in_scope(b, done, workspace_info) {
        return None;
    }
    let key = format!("exec:{}", done.session_id);
    if !b.remember(&key) {
        return None;
    }
    let status = match (done.exit_code, done.signal) {
        (Some(code), _) => format!("exit {code}"),
        (None, Some(sig)) => format!("signal {sig}"),
        (None, None) => "ended".to_owned(),
    };
    Some(WakeDecision {
        kind: WakeKind::Exec,
        pane: done.root.to_owned(),
        agent: done.session_id.to_owned(),
        status,
        working_count: still_working,
        key,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::continuity::bindings::{Bindings, ConvTarget};

    fn binding(ws: WorkspaceRef) -> Binding {
        let mut all = Bindings::default();
        let target = ConvTarget::Conversation { site: "chatgpt".into(), conv_key: "k".into() };
        all.bind(&target, ws, None, None, 0).unwrap().clone()
    }

    fn herdr() -> Binding {
        binding(WorkspaceRef::Herdr { id: "w1".into() })
    }

    fn set(panes: &[&str]) -> BTreeSet<String> {
        panes.iter().map(|p| p.to_string()).collect()
    }

    fn agent(pane: &str, status: &str, seq: Option<&str>) -> AgentInfo {
        AgentInfo {
            pane: Some(pane.into()),
            status: Some(status.into()),
            workspace: Some("w1".into()),
            name: Some("claude".into()),
            seq: seq.map(Into::into),
            ..Default::default()
        }
    }

    #[test]
    fn working_arms_without_waking_and_reports_new_rounds_once() {
        let mut b = herdr();
        assert!(on_working(&mut b, "p1"));
        assert!(!on_working(&mut b, "p2"));
        assert_eq!(b.status, BindingStatus::Working);
        assert_eq!(b.working_panes, set(&["p1", "p2"]));
    }

    #[test]
    fn one_agent_settling_wakes_a_round() {
        let mut b = herdr();
        on_working(&mut b, "p1");
        let d = on_settled(&mut b, "p1", "claude", SettledStatus::Done, "5@t", &set(&[]), 9).unwrap();
        assert_eq!((d.kind, d.working_count, d.status.as_str(), d.agent.as_str()), (WakeKind::Round, 0, "done", "claude"));
        assert_eq!(b.status, BindingStatus::Idle);
        assert_eq!(b.last_settle, Some(LastSettle { seq: "5@t".into(), at_ms: 9 }));
    }

    #[test]
    fn two_agents_give_partial_then_round() {
        let mut b = herdr();
        on_working(&mut b, "p1");
        on_working(&mut b, "p2");
        let first = on_settled(&mut b, "p1", "a", SettledStatus::Idle, "5", &set(&["p2"]), 1).unwrap();
        assert_eq!((first.kind, first.working_count), (WakeKind::Partial, 1));
        assert_eq!(b.status, BindingStatus::Working, "still armed");
        let second = on_settled(&mut b, "p2", "b", SettledStatus::Blocked, "6", &set(&[]), 2).unwrap();
        assert_eq!((second.kind, second.working_count), (WakeKind::Round, 0));
    }

    #[test]
    fn binding_panes_count_as_working_even_if_the_picture_missed_them() {
        let mut b = herdr();
        on_working(&mut b, "p1");
        on_working(&mut b, "p2");
        let d = on_settled(&mut b, "p1", "a", SettledStatus::Done, "5", &set(&[]), 1).unwrap();
        assert_eq!(d.kind, WakeKind::Partial);
    }

    #[test]
    fn duplicate_settles_never_wake_twice() {
        let mut b = herdr();
        on_working(&mut b, "p1");
        assert!(on_settled(&mut b, "p1", "a", SettledStatus::Done, "5", &set(&[]), 1).is_some());
        on_working(&mut b, "p1");
        assert!(on_settled(&mut b, "p1", "a", SettledStatus::Done, "5", &set(&[]), 2).is_none(), "replayed settle");
        assert_eq!(b.status, BindingStatus::Idle, "the replay still updates the status");
    }

    #[test]
    fn a_settle_without_a_working_round_does_not_wake() {
        let mut b = herdr();
        assert!(on_settled(&mut b, "p1", "a", SettledStatus::Done, "5", &set(&[]), 1).is_none());
        assert_eq!(b.last_settle.as_ref().map(|s| s.seq.as_str()), Some("5"), "baseline recorded");
    }

    #[test]
    fn settle_keys_survive_a_runtime_restart() {
        assert_eq!(settle_key(Some(5), Some("2026-01-01T00:00:00Z"), "p"), "5@2026-01-01T00:00:00Z");
        assert_ne!(settle_key(Some(5), Some("a"), "p"), settle_key(Some(5), Some("b"), "p"));
        assert_eq!(settle_key(None, Some("a"), "p1"), "t:a:p1");
        assert_eq!(settle_key(Some(3), None, "p1"), "3");
    }

    #[test]
    fn hello_arms_when_agents_work() {
        let mut b = herdr();
        let a = agent("p1", "working", None);
        assert_eq!(on_hello(&mut b, &[&a], 1), HelloOutcome::Armed { new_round: true });
        assert_eq!(on_hello(&mut b, &[&a], 2), HelloOutcome::Armed { new_round: false });
        assert_eq!(b.working_panes, set(&["p1"]));
    }

    #[test]
    fn hello_wakes_once_for_a_settle_missed_offline() {
        let mut b = herdr();
        on_working(&mut b, "p1");
        let done = agent("p1", "done", Some("42"));
        let HelloOutcome::Wake(d) = on_hello(&mut b, &[&done], 5) else { panic!("wake expected") };
        assert_eq!((d.kind, d.pane.as_str(), d.status.as_str(), d.key.as_str()), (WakeKind::Round, "p1", "done", "hello:p1:42"));
        assert_eq!(on_hello(&mut b, &[&done], 6), HelloOutcome::Baseline, "second reconnect");
        // Even if something re-armed the binding, the same settle is not reported again.
        b.status = BindingStatus::Working;
        assert_eq!(on_hello(&mut b, &[&done], 7), HelloOutcome::Baseline);
    }

    #[test]
    fn hello_without_a_previous_round_only_records_the_baseline() {
        let mut b = herdr();
        assert_eq!(on_hello(&mut b, &[&agent("p1", "idle", None)], 1), HelloOutcome::Baseline);
        on_working(&mut b, "p1");
        let HelloOutcome::Wake(d) = on_hello(&mut b, &[], 2) else { panic!("wake expected") };
        assert_eq!(d.key, "hello:empty");
    }

    #[test]
    fn exec_wakes_once_per_session_in_scope() {
        let mut b = binding(WorkspaceRef::Root { path: "/src/app".into() });
        let done = ExecDone { session_id: "s1", root: "/src/app/sub", exit_code: Some(0), signal: None, workspace: None };
        let d = on_exec(&mut b, &done, None, 0).unwrap();
        assert_eq!((d.kind, d.status.as_str(), d.agent.as_str()), (WakeKind::Exec, "exit 0", "s1"));
        assert!(on_exec(&mut b, &done, None, 0).is_none(), "same session again");
        let elsewhere = ExecDone { session_id: "s2", root: "/src/application", ..done };
        assert!(on_exec(&mut b, &elsewhere, None, 0).is_none());
        let killed = ExecDone { session_id: "s3", exit_code: None, signal: Some("SIGTERM"), ..done };
        assert_eq!(on_exec(&mut b, &killed, None, 0).unwrap().status, "signal SIGTERM");
    }

    #[test]
    fn exec_scope_of_a_herdr_workspace_is_its_roots_or_its_name() {
        let b = herdr();
        let info = WorkspaceInfo { id: "w1".into(), roots: vec!["/src/w1".into()], ..Default::default() };
        let done = |root, ws| ExecDone { session_id: "s", root, exit_code: Some(1), signal: None, workspace: ws };
        assert!(exec_in_scope(&b, &done("/src/w1/x", None), Some(&info)));
        assert!(exec_in_scope(&b, &done("/elsewhere", Some("w1")), None));
        assert!(!exec_in_scope(&b, &done("/elsewhere", Some("w2")), Some(&info)));
        assert!(!exec_in_scope(&b, &done("/src/w1/x", None), None));
    }
}
