//! Agent names: the rule Herdr gives them, and how the topology learns a new one.
//!
//! Herdr sets a name with `agent.start` or `agent.rename` and emits no event for it
//! (spec/herdr.md §3, §5: no event lists the agent's name; `pane_updated` carries a
//! `PaneInfo`, which has none). So the cache learns a name in two ways:
//! - at once, from the answer of a call made through this runtime that carries the
//!   agent's record (`agent_info`, e.g. `agent.rename` or `agent.get`, and
//!   `agent_prompted`);
//! - otherwise by the event cache's next re-snapshot, at most
//!   [`super::Timeouts::resnapshot`] later (30 s by default).

use serde_json::Value;

use super::topology::{Topology, str_of};

/// Longest agent name Herdr accepts (`[a-z][a-z0-9_-]{0,31}`).
pub const MAX_AGENT_NAME_CHARS: usize = 32;

/// Answer types whose `agent` member is a full agent record.
const AGENT_RECORD_ANSWERS: &[&str] = &["agent_info", "agent_prompted"];

/// Whether `name` follows Herdr's rule: a lowercase ASCII letter, then up to 31
/// lowercase letters, digits, `_` or `-`.
pub fn is_valid(name: &str) -> bool {
    let bytes = name.as_bytes();
    let Some((first, rest)) = bytes.split_first() else { return false };
    bytes.len() <= MAX_AGENT_NAME_CHARS
        && first.is_ascii_lowercase()
        && rest.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_' || *b == b'-')
}

/// Removes every `name` that breaks the rule from agent records: a name the runtime
/// shows or matches on must be one Herdr itself would accept as a target.
pub fn drop_invalid(agents: &mut [Value]) {
    for agent in agents {
        let invalid = agent.get("name").is_some_and(|n| !n.as_str().is_some_and(is_valid));
        if invalid && let Some(obj) = agent.as_object_mut() {
            obj.remove("name");
        }
    }
}

/// Takes the agent's name from a call's answer into `topology`; true when it changed.
///
/// Only the name is taken: statuses and titles arrive by events, and an answer may be
/// older than an event the cache already applied. An agent the topology does not
/// know yet is left to the event that announces it, and an invalid name is ignored.
pub fn adopt_from_answer(topology: &mut Topology, answer: &Value) -> bool {
    if !str_of(answer, "type").is_some_and(|t| AGENT_RECORD_ANSWERS.contains(&t)) {
        return false;
    }
    let Some(record) = answer.get("agent") else { return false };
    let (Some(pane), Some(name)) = (str_of(record, "pane_id"), str_of(record, "name")) else { return false };
    if !is_valid(name) {
        return false;
    }
    let Some(i) = topology.agents.iter().position(|a| str_of(a, "pane_id") == Some(pane)) else { return false };
    if str_of(&topology.agents[i], "name") == Some(name) {
        return false;
    }
    // Herdr's names are unique among live agents: another record still holding this
    // one is stale.
    for other in topology.agents.iter_mut().filter(|a| str_of(a, "name") == Some(name)) {
        if let Some(obj) = other.as_object_mut() {
            obj.remove("name");
        }
    }
    topology.agents[i]["name"] = Value::String(name.to_string());
    true
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_name_rule_at_its_edges() {
        assert!(is_valid("a"));
        assert!(is_valid("pi-main_2"));
        assert!(is_valid(&format!("a{}", "b".repeat(MAX_AGENT_NAME_CHARS - 1))));
        assert!(!is_valid(&format!("a{}", "b".repeat(MAX_AGENT_NAME_CHARS))), "33 characters");
        for bad in ["", "1abc", "-a", "_a", "Abc", "aBc", "a b", "a.b", "a:b", "é", "aé"] {
            assert!(!is_valid(bad), "{bad:?}");
        }
    }

    #[test]
    fn invalid_names_are_dropped_and_valid_ones_kept() {
        let mut agents =
            vec![json!({"pane_id":"w1:p1","name":"Bad Name"}), json!({"pane_id":"w1:p2","name":"good"}), json!({"pane_id":"w1:p3","name":7}), json!({"pane_id":"w1:p4"})];
        drop_invalid(&mut agents);
        assert!(agents[0].get("name").is_none());
        assert_eq!(agents[1]["name"], "good");
        assert!(agents[2].get("name").is_none());
        assert!(agents[3].get("name").is_none());
    }

    fn topology() -> Topology {
        Topology { agents: vec![json!({"pane_id":"w1:p1","agent":"pi","agent_status":"idle","name":"old"})], ..Topology::default() }
    }

    #[test]
    fn an_agent_info_answer_renames_only_the_name() {
        let mut t = topology();
        let answer = json!({"type":"agent_info","agent":{"pane_id":"w1:p1","agent":"pi","agent_status":"working","name":"new"}});
        assert!(adopt_from_answer(&mut t, &answer));
        assert_eq!(t.agents[0]["name"], "new");
        assert_eq!(t.agents[0]["agent_status"], "idle", "the status comes from events, not answers");
        assert!(!adopt_from_answer(&mut t, &answer), "the same name again changes nothing");
        let prompted = json!({"type":"agent_prompted","agent":{"pane_id":"w1:p1","name":"newer"}});
        assert!(adopt_from_answer(&mut t, &prompted));
        assert_eq!(t.agents[0]["name"], "newer");
    }

    #[test]
    fn a_name_taken_over_leaves_its_stale_holder() {
        let mut t = topology();
        t.agents.push(json!({"pane_id":"w1:p2","agent":"claude","name":"shared"}));
        assert!(adopt_from_answer(&mut t, &json!({"type":"agent_info","agent":{"pane_id":"w1:p1","name":"shared"}})));
        assert_eq!(t.agents[0]["name"], "shared");
        assert!(t.agents[1].get("name").is_none());
    }

    #[test]
    fn answers_that_cannot_be_adopted_change_nothing() {
        let mut t = topology();
        let before = t.clone();
        for answer in [
            json!({"type":"agent_info","agent":{"pane_id":"w1:p1","name":"NOT-valid"}}),
            json!({"type":"agent_info","agent":{"pane_id":"w1:p9","name":"elsewhere"}}),
            json!({"type":"agent_info","agent":{"pane_id":"w1:p1"}}),
            json!({"type":"pane_info","agent":{"pane_id":"w1:p1","name":"other"}}),
            json!({"type":"agent_info"}),
            json!("agent_info"),
        ] {
            assert!(!adopt_from_answer(&mut t, &answer), "{answer}");
        }
        assert_eq!(t, before);
    }
}
