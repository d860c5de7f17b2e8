//! Property test of the topology cache against Herdr's event stream: any sequence of
//! event lines, of any shape, is applied or sends the cache back to a snapshot —
//! never a panic — and the cache stays consistent with its own lookups.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::{Topology, split_event};

const EVENT_NAMES: &[&str] = &[
    "workspace_created", "workspace_updated", "workspace_metadata_updated", "workspace_renamed",
    "workspace_closed", "workspace_focused", "workspace_moved", "workspace_reordered", "tab_created",
    "tab_closed", "tab_renamed", "pane_created", "pane_updated", "pane_closed", "pane_exited",
    "pane_focused", "pane_agent_detected", "pane.agent_status_changed", "worktree_added", "unknown",
];

fn id() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => prop::sample::select(vec!["w1", "w2", "w1:p1", "w1:p2", "w2:p1", "w1:t1"]).prop_map(Value::from),
        1 => Just(Value::Null),
        1 => Just(json!(7)),
        1 => Just(json!({"id": "w1"})),
    ]
}

fn field_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        id(),
        Just(json!("idle")),
        Just(json!("working")),
        Just(json!([])),
        Just(json!([{"workspace_id": "w1"}, "x", 3])),
        any::<String>().prop_map(Value::String),
    ]
}

/// A record or an event body: known keys with right or wrong types, nested records.
fn body() -> impl Strategy<Value = Value> {
    let keys = prop::sample::select(vec![
        "workspace_id", "pane_id", "tab_id", "label", "agent", "agent_status", "status", "focused", "cwd",
        "title", "name", "workspaces",
    ]);
    let flat = move || {
        prop::collection::vec((keys.clone(), field_value()), 0..6)
            .prop_map(|kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect()))
    };
    (flat(), prop::option::of(prop::sample::select(vec!["workspace", "pane", "tab", "agent"])), flat()).prop_map(
        |(mut outer, nest, inner)| {
            if let (Some(key), Value::Object(o)) = (nest, &mut outer) {
                o.insert(key.to_string(), inner);
            }
            outer
        },
    )
}

fn event_line() -> impl Strategy<Value = Value> {
    let name = prop::sample::select(EVENT_NAMES.to_vec());
    prop_oneof![
        4 => (name.clone(), body()).prop_map(|(n, d)| json!({"event": n, "data": d})),
        1 => (name, body()).prop_map(|(n, mut d)| {
            if let Value::Object(o) = &mut d {
                o.insert("type".into(), json!(n));
            }
            json!({"event": d})
        }),
        1 => field_value().prop_map(|d| json!({"event": "pane_updated", "data": d})),
        1 => field_value().prop_map(|e| json!({"event": e})),
        1 => field_value(),
    ]
}

fn snapshot() -> impl Strategy<Value = Value> {
    let list = || prop::collection::vec(prop_oneof![4 => body(), 1 => field_value()], 0..4);
    (list(), list(), list(), list(), any::<bool>()).prop_map(|(workspaces, tabs, panes, agents, nested)| {
        let snap = json!({"version": "1", "protocol": 20, "workspaces": workspaces, "tabs": tabs, "panes": panes, "agents": agents});
        if nested { json!({"type": "session_snapshot", "snapshot": snap}) } else { snap }
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn any_event_stream_is_applied_or_asks_for_a_snapshot(snap in snapshot(), lines in prop::collection::vec(event_line(), 0..12)) {
        let mut topology = Topology::from_snapshot(&snap);
        for line in &lines {
            if let Some((name, data)) = split_event(line) {
                let applied = topology.apply(&name, &data);
                if !data.is_object() {
                    prop_assert!(applied.resnapshot, "{} without a body", name);
                }
            }
        }
        for pane_id in topology.pane_ids() {
            prop_assert!(topology.pane(&pane_id).is_some());
        }
        for (pane, state) in topology.agent_states() {
            prop_assert_eq!(&state.pane, &pane);
        }
    }
}
