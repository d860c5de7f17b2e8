//! Scenarios through the whole [`Continuity`] state, fed the way the shell feeds it.

use super::*;
use crate::continuity::push_event::{AgentInfo, WorkspaceInfo};

const CONV: &str = "https://chatgpt.com/c/A";

fn target(key: &str) -> ConvTarget {
    ConvTarget::Conversation { site: "chatgpt".into(), conv_key: key.into() }
}

fn w1() -> WorkspaceRef {
    WorkspaceRef::Herdr { id: "w1".into() }
}

fn working(pane: &str) -> PushEvent {
    PushEvent::AgentWorking { workspace: Some("w1".into()), pane: pane.into(), agent: Some(format!("agent-{pane}")), seq: None }
}

fn settled(pane: &str, seq: u64) -> PushEvent {
    PushEvent::AgentSettled {
        workspace: Some("w1".into()),
        pane: pane.into(),
        agent: Some(format!("agent-{pane}")),
        status: SettledStatus::Done,
        seq: Some(seq),
        at: Some("2026-01-01T00:00:00Z".into()),
    }
}

fn output(pane: &str, text: &str) -> PushEvent {
    PushEvent::AgentOutput { workspace: Some("w1".into()), pane: pane.into(), agent: None, output: text.into(), seq: None }
}

fn wakes(actions: &[ContinuityAction]) -> Vec<&Wake> {
    actions.iter().filter_map(|a| if let ContinuityAction::Wake(w) = a { Some(w) } else { None }).collect()
}

fn bound(auto: bool) -> Continuity {
    let mut c = Continuity::default();
    c.bind(&target(CONV), w1(), Some("alpha".into()), Some(TabRef { id: 4, url: CONV.into() }), 0).unwrap();
    c.set_auto(CONV, auto);
    c
}

#[test]
fn a_settle_whose_output_never_comes_wakes_within_one_poll_after_the_1200_ms_wait() {
    // The shell's clock runs at a phase of its own: whatever it is, the wake goes out no
    // sooner than 1.2 s and no later than 1.3 s after the settle (spec §7.2, 100 ms polls).
    for settle_at in (1..=300u64).step_by(7) {
        let mut c = bound(true);
        c.on_push_event(working("p1"), 0);
        assert!(c.on_push_event(settled("p1", 5), settle_at).is_empty());
        let mut now = 0;
        let sent_at = loop {
            now += OUTPUT_POLL_MS;
            if !wakes(&c.on_tick(now)).is_empty() {
                break now;
            }
            assert!(now < settle_at + 10_000, "no wake at all");
        };
        assert!(sent_at >= settle_at + OUTPUT_WAIT_MS, "settle at {settle_at}: sent at {sent_at}, before its output wait ended");
        assert!(sent_at - settle_at <= 1_300, "settle at {settle_at}: sent {} ms after it", sent_at - settle_at);
    }
}

#[test]
fn a_settle_with_auto_on_wakes_once_with_the_agent_and_its_output() {
    let mut c = bound(true);
    assert!(c.on_push_event(working("p1"), 10).is_empty());
    assert!(c.on_push_event(settled("p1", 5), 20).is_empty(), "waits for the pane's output");
    assert_eq!(c.next_deadline_ms(), Some(20 + OUTPUT_WAIT_MS));
    let actions = c.on_push_event(output("p1", "build ok: 41 tests"), 30);
    let w = wakes(&actions);
    assert_eq!(w.len(), 1, "{actions:?}");
    assert_eq!((w[0].kind, w[0].conv_key.as_str(), w[0].tab_id), (WakeKind::Round, CONV, Some(4)));
    assert!(w[0].text.contains("agent-p1") && w[0].text.contains("build ok: 41 tests"), "{}", w[0].text);
    assert!(render::is_wake_text(&w[0].text));
    // Replays of the same events wake nothing.
    c.on_push_event(working("p1"), 40);
    assert!(c.on_push_event(settled("p1", 5), 50).is_empty());
    assert!(c.on_tick(10_000).is_empty());
}

#[test]
fn auto_off_never_produces_a_sendable_wake() {
    let mut c = bound(false);
    c.on_push_event(working("p1"), 10);
    c.on_push_event(settled("p1", 5), 20);
    let actions = c.on_push_event(output("p1", "x"), 30);
    assert!(wakes(&actions).is_empty());
    assert!(matches!(&actions[..], [ContinuityAction::Suppressed(w)] if w.kind == WakeKind::Round));
    assert_eq!(c.suppressed().count(), 1);
    // Progress ticks stay silent too.
    c.on_push_event(working("p1"), 100);
    c.on_push_event(output("p1", "new things"), 110);
    assert!(c.on_tick(1_000_000).iter().all(|a| !matches!(a, ContinuityAction::Wake(_))));
}

#[test]
fn unbound_conversations_and_other_workspaces_get_nothing() {
    let mut c = Continuity::default();
    c.bind(&target(CONV), WorkspaceRef::Herdr { id: "w2".into() }, None, None, 0).unwrap();
    c.set_auto(CONV, true);
    c.on_push_event(working("p1"), 1);
    c.on_push_event(settled("p1", 5), 2);
    assert!(c.on_push_event(output("p1", "x"), 3).is_empty());
    assert!(c.on_tick(100_000).is_empty());
}

#[test]
fn two_agents_give_one_partial_then_one_round() {
    let mut c = bound(true);
    c.on_push_event(working("p1"), 1);
    c.on_push_event(working("p2"), 2);
    c.on_push_event(settled("p1", 5), 3);
    let first = c.on_tick(3 + OUTPUT_WAIT_MS);
    let first = wakes(&first);
    assert_eq!(first.len(), 1);
    assert_eq!((first[0].kind, first[0].working_count), (WakeKind::Partial, 1));
    assert!(first[0].text.contains("(no output captured)"), "released without output at the deadline");
    c.on_push_event(settled("p2", 6), 5_000);
    let second = c.on_push_event(output("p2", "done two"), 5_001);
    let second = wakes(&second);
    assert_eq!(second.len(), 1);
    assert_eq!((second[0].kind, second[0].agent.as_str()), (WakeKind::Round, "agent-p2"));
}

#[test]
fn a_round_whose_output_wait_sees_another_agent_start_goes_out_as_a_partial() {
    let mut c = bound(true);
    c.on_push_event(working("p1"), 1);
    c.on_push_event(settled("p1", 5), 2);
    // While the round waits for p1's output, p2 starts: not every agent has stopped any more.
    c.on_push_event(working("p2"), 3);
    let actions = c.on_push_event(output("p1", "first half done"), 4);
    let w = wakes(&actions);
    assert_eq!(w.len(), 1, "{actions:?}");
    assert_eq!((w[0].kind, w[0].working_count), (WakeKind::Partial, 1));
    assert!(w[0].text.contains("1 other agent(s) are still busy"), "{}", w[0].text);
    // p2's own settle then ends the round.
    c.on_push_event(settled("p2", 6), 10);
    let w = c.on_tick(10 + OUTPUT_WAIT_MS);
    assert_eq!(wakes(&w).iter().map(|w| (w.kind, w.working_count)).collect::<Vec<_>>(), vec![(WakeKind::Round, 0)]);
}

#[test]
fn held_wakes_are_released_exactly_at_the_deadline() {
    let mut c = bound(true);
    c.on_push_event(working("p1"), 0);
    c.on_push_event(settled("p1", 5), 100);
    assert!(c.on_tick(100 + OUTPUT_WAIT_MS - 1).is_empty());
    assert_eq!(wakes(&c.on_tick(100 + OUTPUT_WAIT_MS)).len(), 1);
    assert_eq!(c.next_deadline_ms(), None);
}

#[test]
fn a_settle_missed_while_the_runtime_restarted_wakes_exactly_once() {
    let mut c = bound(true);
    let hello = |status: &str| Hello {
        agents: vec![AgentInfo {
            pane: Some("p1".into()),
            status: Some(status.into()),
            workspace: Some("w1".into()),
            name: Some("claude".into()),
            seq: Some("9".into()),
            summary: Some("finished the migration".into()),
            ..Default::default()
        }],
        workspaces: vec![WorkspaceInfo { id: "w1".into(), label: Some("alpha".into()), ..Default::default() }],
        herdr_live: true,
        seq: Some(1),
    };
    assert!(c.on_push_event(PushEvent::Hello(hello("working")), 0).is_empty());
    // …the runtime goes away, the agent finishes, the stream reconnects:
    let actions = c.on_push_event(PushEvent::Hello(hello("done")), 60_000);
    let w = wakes(&actions);
    assert_eq!(w.len(), 1, "{actions:?}");
    assert_eq!(w[0].kind, WakeKind::Round);
    assert!(w[0].text.contains("finished the migration") && w[0].text.contains("claude"), "{}", w[0].text);
    assert!(c.on_push_event(PushEvent::Hello(hello("done")), 70_000).is_empty(), "a second reconnect");
    assert!(c.on_state(hello("done"), 80_000).is_empty());
}

#[test]
fn exec_completion_in_a_bound_root_wakes_without_herdr() {
    let mut c = Continuity::default();
    c.bind(&target(CONV), WorkspaceRef::Root { path: "/src/app".into() }, None, None, 0).unwrap();
    c.set_auto(CONV, true);
    let done = PushEvent::ExecCompleted {
        session_id: "s-1".into(),
        root: "/src/app".into(),
        exit_code: Some(2),
        signal: None,
        workspace: None,
        at: None,
        seq: Some(3),
    };
    let actions = c.on_push_event(done.clone(), 5);
    let w = wakes(&actions);
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].kind, WakeKind::Exec);
    assert!(w[0].text.contains("s-1") && w[0].text.contains("exit 2") && w[0].text.contains("app"), "{}", w[0].text);
    assert!(c.on_push_event(done, 6).is_empty(), "once per session");
}

#[test]
fn progress_ticks_report_changed_output_while_working() {
    let mut c = bound(true);
    c.on_push_event(working("p1"), 0);
    assert_eq!(c.next_deadline_ms(), Some(60_000));
    c.on_push_event(output("p1", "compiling 3/10"), 1_000);
    let actions = c.on_tick(60_000);
    let w = wakes(&actions);
    assert_eq!(w.len(), 1);
    assert_eq!((w[0].kind, w[0].working_count), (WakeKind::Progress, 1));
    assert!(w[0].text.contains("compiling 3/10"));
    c.on_push_event(output("p1", "compiling 4/10"), 61_000);
    assert!(c.on_tick(120_000).is_empty(), "cooldown");
    assert_eq!(wakes(&c.on_tick(60_000 + 1_200_000)).len(), 1);
}

#[test]
fn lagged_asks_for_a_resync_and_binding_a_busy_workspace_arms_it() {
    let mut c = Continuity::default();
    assert_eq!(c.on_push_event(PushEvent::Lagged { dropped: 4 }, 0), vec![ContinuityAction::Resync]);
    c.on_push_event(working("p1"), 1);
    let view = c.bind(&target(CONV), w1(), None, None, 2).unwrap();
    assert_eq!(view.binding.status, BindingStatus::Working);
    c.set_auto(CONV, true);
    c.on_push_event(settled("p1", 7), 3);
    assert_eq!(wakes(&c.on_push_event(output("p1", "x"), 4)).len(), 1, "armed at bind time");
}

#[test]
fn unbinding_drops_held_wakes_and_state_survives_serde() {
    let mut c = bound(true);
    c.on_push_event(working("p1"), 0);
    c.on_push_event(settled("p1", 5), 1);
    let saved = serde_json::to_string(&c).unwrap();
    let mut restored: Continuity = serde_json::from_str(&saved).unwrap();
    assert_eq!(restored, c);
    assert_eq!(wakes(&restored.on_push_event(output("p1", "x"), 2)).len(), 1, "a held wake survives a restart");
    c.unbind(CONV, None).unwrap();
    assert!(c.on_push_event(output("p1", "x"), 2).is_empty());
}

#[test]
fn the_wire_feeds_the_state_end_to_end() {
    let mut c = bound(true);
    let mut parser = SseParser::default();
    let wire = concat!(
        "event: hello\ndata: {\"agents\":[],\"workspaces\":[{\"id\":\"w1\",\"label\":\"alpha\",\"roots\":[],\"panes\":[]}],\"herdr_live\":true,\"seq\":0}\n\n",
        "event: agent_working\nid: 1\ndata: {\"workspace\":\"w1\",\"pane\":\"w1:p1\",\"agent\":\"codex\",\"seq\":1}\n\n",
        ":keep-alive\n\n",
        "event: agent_settled\nid: 2\ndata: {\"workspace\":\"w1\",\"pane\":\"w1:p1\",\"agent\":\"codex\",\"status\":\"idle\",\"at\":\"t\",\"seq\":2}\n\n",
        "event: agent_output\nid: 3\ndata: {\"workspace\":\"w1\",\"pane\":\"w1:p1\",\"agent\":\"codex\",\"output\":\"PR ready\",\"seq\":3}\n\n",
    );
    let mut all = Vec::new();
    for chunk in wire.as_bytes().chunks(5) {
        for ev in parser.push(chunk) {
            all.extend(c.on_push_event(ev.unwrap(), 10));
        }
    }
    let w = wakes(&all);
    assert_eq!(w.len(), 1, "{all:?}");
    assert!(w[0].text.contains("codex") && w[0].text.contains("PR ready") && w[0].text.contains("alpha (w1)"));
}

#[test]
fn progress_falls_back_to_the_terminal_title_the_picture_carries() {
    let mut c = bound(true);
    let state = |title: &str| Hello {
        agents: vec![AgentInfo {
            pane: Some("p1".into()),
            status: Some("working".into()),
            workspace: Some("w1".into()),
            name: Some("claude".into()),
            terminal_title: Some(title.into()),
            ..Default::default()
        }],
        workspaces: vec![WorkspaceInfo { id: "w1".into(), ..Default::default() }],
        herdr_live: true,
        seq: None,
    };
    c.on_state(state("⠋ Planning"), 0);
    c.on_state(state("⠙ Planning"), 59_000);
    assert!(c.on_tick(60_000).is_empty(), "the same title under a spinner is no news");
    c.on_state(state("⠹ Writing tests"), 100_000);
    let actions = c.on_tick(120_000);
    let w = wakes(&actions);
    assert_eq!(w.len(), 1, "{actions:?}");
    assert!(w[0].text.contains("Writing tests"), "{}", w[0].text);
}

#[test]
fn a_progress_tick_is_due_only_for_a_working_auto_binding_and_not_for_a_held_settle() {
    let mut c = bound(true);
    assert!(!c.progress_due(u64::MAX), "idle: no ticks");
    c.on_push_event(working("p1"), 0);
    assert!(!c.progress_due(59_999));
    assert!(c.progress_due(60_000), "due exactly at the tick");
    c.set_auto(CONV, false);
    assert!(!c.progress_due(60_000), "Auto off: nothing to report");
    c.set_auto(CONV, true);
    c.on_tick(60_000);
    assert!(!c.progress_due(60_000), "the tick moved the next one on");
    assert!(c.progress_due(120_000));
    c.on_push_event(settled("p1", 5), 70_000);
    assert_eq!(c.next_deadline_ms(), Some(70_000 + OUTPUT_WAIT_MS), "the settle waits for its output");
    assert!(!c.progress_due(u64::MAX), "a settle wake due is no progress tick");
    let mut off = bound(true);
    off.set_settings(Settings { progress: ProgressSettings::new(0, 0).unwrap(), ..Default::default() }).unwrap();
    off.on_push_event(working("p1"), 0);
    assert!(!off.progress_due(u64::MAX), "tick 0 turns progress off");
}

#[test]
fn a_picture_fetched_for_a_tick_refreshes_titles_but_never_ends_a_round() {
    let mut c = bound(true);
    let agent = |status: &str, title: &str| AgentInfo {
        pane: Some("p1".into()),
        status: Some(status.into()),
        workspace: Some("w1".into()),
        name: Some("claude".into()),
        terminal_title: Some(title.into()),
        ..Default::default()
    };
    let picture = |agents: Vec<AgentInfo>| Hello {
        agents,
        workspaces: vec![WorkspaceInfo { id: "w1".into(), ..Default::default() }],
        herdr_live: true,
        seq: None,
    };
    c.on_state(picture(vec![agent("working", "✳ Planning")]), 0);
    // Ahead of the stream: the agent is done already, its settle (and output) not yet here.
    c.refresh_activity(&picture(vec![agent("done", "✳ Writing tests"), AgentInfo { pane: Some("p9".into()), ..agent("working", "x") }]));
    assert_eq!(c.fleet().agents["p1"].status.as_deref(), Some("working"), "the status is the stream's");
    assert!(!c.fleet().agents.contains_key("p9"), "no agent appears from a tick's picture");
    assert_eq!(c.bindings().iter().next().unwrap().status, BindingStatus::Working);
    let actions = c.on_tick(60_000);
    let w = wakes(&actions);
    assert_eq!(w.len(), 1, "{actions:?}");
    assert_eq!(w[0].kind, WakeKind::Progress);
    assert!(w[0].text.contains("Writing tests"), "{}", w[0].text);
    // The settle then wakes the round once, with its output.
    c.on_push_event(settled("p1", 7), 61_000);
    let w = wakes(&c.on_push_event(output("p1", "all green (marker-r)"), 61_100)).into_iter().map(|w| (w.kind, w.text.contains("marker-r"))).collect::<Vec<_>>();
    assert_eq!(w, [(WakeKind::Round, true)]);
}

#[test]
fn a_round_first_seen_through_a_settle_is_armed_for_progress() {
    let mut c = Continuity::default();
    c.on_push_event(working("p1"), 0);
    c.on_push_event(working("p2"), 0);
    c.bind(&target(CONV), w1(), None, None, 1).unwrap();
    c.set_auto(CONV, true);
    // The binding was idle-bound earlier in another picture: simulate by unarming it.
    c.bindings_mut().iter_mut().for_each(|b| {
        b.status = BindingStatus::Idle;
        b.working_panes.clear();
        b.progress = Default::default();
    });
    c.on_push_event(settled("p1", 5), 1_000);
    let b = c.bindings().iter().next().unwrap();
    assert_eq!(b.status, BindingStatus::Working, "p2 still works");
    assert_eq!(b.progress.next_tick_at_ms, 61_000, "progress armed at the settle");
    c.on_push_event(settled("p2", 6), 2_000);
    // The picture showed both at work, so p1's settle is a partial finish and p2's the round.
    let actions = c.on_tick(2_000 + OUTPUT_WAIT_MS);
    assert_eq!(wakes(&actions).iter().map(|w| w.kind).collect::<Vec<_>>(), [WakeKind::Partial, WakeKind::Round]);
}

fn picture(status: &str, seq: u64) -> Hello {
    Hello {
        agents: vec![AgentInfo {
            pane: Some("p1".into()),
            status: Some(status.into()),
            workspace: Some("w1".into()),
            name: Some("agent-p1".into()),
            // Herdr's own seq as the runtime's picture carries it: unchanged between rounds.
            seq: Some("3".into()),
            ..Default::default()
        }],
        workspaces: vec![WorkspaceInfo { id: "w1".into(), label: Some("alpha".into()), ..Default::default() }],
        herdr_live: true,
        seq: Some(seq),
    }
}

fn seq_working(pane: &str, seq: u64) -> PushEvent {
    PushEvent::AgentWorking { workspace: Some("w1".into()), pane: pane.into(), agent: Some(format!("agent-{pane}")), seq: Some(seq) }
}

/// working → done within milliseconds while a polled `/push/state` (taken before the agent
/// started) is still on its way: its answer lands between `agent_working` and
/// `agent_settled`. It must not disarm the binding — every round wakes once, with its output.
#[test]
fn a_polled_picture_older_than_the_stream_events_does_not_swallow_the_settle() {
    let mut c = bound(true);
    c.on_push_event(PushEvent::Hello(picture("idle", 1)), 0);
    let mut bus = 1;
    for round in 1..=3u64 {
        let taken_at = bus;
        bus += 1;
        assert!(c.on_push_event(seq_working("p1", bus), round * 1_000).is_empty());
        assert!(c.on_state(picture("idle", taken_at), round * 1_000 + 1).is_empty(), "round {round}: a stale picture changes nothing");
        assert_eq!(c.list()[0].binding.status, BindingStatus::Working, "round {round}");
        bus += 1;
        c.on_push_event(settled("p1", bus), round * 1_000 + 2);
        bus += 1;
        let actions = c.on_push_event(output("p1", &format!("round {round} done")), round * 1_000 + 3);
        let w = wakes(&actions);
        assert_eq!(w.len(), 1, "round {round}: {actions:?}");
        assert!(w[0].text.contains(&format!("round {round} done")), "{}", w[0].text);
        assert_eq!(c.list()[0].binding.status, BindingStatus::Idle);
    }
    // A picture as new as the stream is still taken (it is how a missed settle is found).
    let actions = c.on_state(picture("working", bus), 10_000);
    assert!(actions.is_empty());
    assert_eq!(c.list()[0].binding.status, BindingStatus::Working);
    // The runtime restarts (its bus counts from 0 again) before Herdr is live: its pictures
    // are not stale, so the settle missed meanwhile is found.
    c.on_unreconciled_hello(&Hello { herdr_live: false, seq: Some(0), ..Default::default() });
    let w = c.on_state(picture("done", 1), 20_000);
    assert_eq!(wakes(&w).len(), 1, "{w:?}");
}

/// A settle whose `agent_working` the binding never saw (it came without a workspace, so it
/// could not be scoped) still ends the round when the picture shows the agent working — once.
#[test]
fn a_settle_without_a_seen_working_wakes_when_the_picture_shows_the_agent_working() {
    let mut c = bound(true);
    c.on_push_event(PushEvent::Hello(picture("idle", 1)), 0);
    let unscoped = PushEvent::AgentWorking { workspace: None, pane: "p2".into(), agent: None, seq: Some(2) };
    assert!(c.on_push_event(unscoped, 10).is_empty());
    assert_eq!(c.list()[0].binding.status, BindingStatus::Idle, "the binding could not tell p2 was its agent");
    let settle = PushEvent::AgentSettled {
        workspace: Some("w1".into()),
        pane: "p2".into(),
        agent: Some("agent-p2".into()),
        status: SettledStatus::Done,
        seq: Some(3),
        at: None,
    };
    c.on_push_event(settle.clone(), 20);
    let w = wakes(&c.on_push_event(output("p2", "p2 finished"), 30)).into_iter().cloned().collect::<Vec<_>>();
    assert_eq!(w.len(), 1);
    assert!(w[0].text.contains("p2 finished"), "{}", w[0].text);
    // Never twice: the same settle again, or a settle of an agent the picture never saw working.
    assert!(c.on_push_event(settle, 40).is_empty());
    assert!(c.on_tick(40 + OUTPUT_WAIT_MS).is_empty());
    let idle_settle = settled("p1", 5);
    assert!(c.on_push_event(idle_settle, 50).is_empty());
    assert!(c.on_tick(50 + OUTPUT_WAIT_MS).is_empty(), "p1 was idle in the picture: no round to end");
}
