//! Agent names: the rule Herdr gives them, and how the topology learns a new one.
//!
//! Herdr sets a name with `agent.start` or `agent.rename` and emits no event for it
//! (spec/herdr.md §3, §5: no event lists the agent's name; `pane_updated` carries a
//! `PaneInfo`, which has none). So the cache learns a name in two ways:
//! - at once, from the answer of a call made through this runtime that carries
//!   agent records (`agent_info`, e.g. `agent.rename` or `agent.get`, `agent_prompted`,
//!   and `agent_list`);
//! - otherwise by the event cache's next fresh picture, taken after every new
//!   event stream: at most [`super::Timeouts::resubscribe`] later (25 s by default).
//!
//! A re-snapshot already in flight when an answer is adopted may carry the name from
//! before it; [`AdoptedNames`] keeps such a snapshot from bringing the old name back.

use serde_json::Value;

use super::topology::{Topology, str_of};

/// Longest agent name Herdr accepts (`[a-z][a-z0-9_-]{0,31}`).
pub const MAX_AGENT_NAME_CHARS: usize = 32;

/// Answer types whose `agent` member is a full agent record.
const AGENT_RECORD_ANSWERS: &[&str] = &["agent_info", "agent_prompted"];
/// Answer types whose `agents` member lists full agent records.
const AGENT_LIST_ANSWERS: &[&str] = &["agent_list"];

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

/// The `(pane, name)` pairs a call's answer states, in answer order; records
/// without a pane or with a name Herdr's rule forbids give none.
pub fn names_in_answer(answer: &Value) -> Vec<(String, String)> {
    let records: Vec<&Value> = match str_of(answer, "type") {
        Some(t) if AGENT_RECORD_ANSWERS.contains(&t) => answer.get("agent").into_iter().collect(),
        Some(t) if AGENT_LIST_ANSWERS.contains(&t) => {
            answer.get("agents").and_then(Value::as_array).map(|a| a.iter().collect()).unwrap_or_default()
        }
        _ => vec![],
    };
    records
        .into_iter()
        .filter_map(|r| Some((str_of(r, "pane_id")?, str_of(r, "name")?)))
        .filter(|(_, name)| is_valid(name))
        .map(|(pane, name)| (pane.to_string(), name.to_string()))
        .collect()
}

/// Gives the agent on `pane` the (valid) `name`; true when the topology changed.
/// An agent the topology does not know yet is left to the event that announces it.
fn set_name(topology: &mut Topology, pane: &str, name: &str) -> bool {
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

/// One name taken from an answer, with the adoption count when it was taken.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Adopted {
    generation: u64,
    pane: String,
    name: String,
}

/// Names adopted from answers that a snapshot requested before them may not know.
///
/// A snapshot takes a [`mark`](AdoptedNames::mark) before it is requested; when it
/// is installed, [`reconcile`](AdoptedNames::reconcile) puts back the names adopted
/// after that mark (Herdr may have answered the snapshot before the rename) and
/// forgets those adopted before it (the snapshot saw them, or something newer).
/// Holds at most one name per agent the topology knew when it was adopted.
#[derive(Debug, Default)]
pub struct AdoptedNames {
    generation: u64,
    pending: Vec<Adopted>,
}

impl AdoptedNames {
    /// The point a snapshot requested now starts from.
    pub fn mark(&self) -> u64 {
        self.generation
    }

    /// Adopts the names `answer` states into `topology` and remembers them for
    /// snapshots already in flight; true when the topology changed.
    ///
    /// A name the topology already shows is remembered too: a snapshot in flight may
    /// still carry a different one.
    pub fn adopt(&mut self, topology: &mut Topology, answer: &Value) -> bool {
        let names = names_in_answer(answer);
        if names.is_empty() {
            return false;
        }
        self.generation += 1;
        let mut changed = false;
        for (pane, name) in names {
            if topology.agent_for_pane(&pane).is_none() {
                continue;
            }
            changed |= set_name(topology, &pane, &name);
            self.pending.retain(|a| a.pane != pane);
            self.pending.push(Adopted { generation: self.generation, pane, name });
        }
        changed
    }

    /// Prepares a snapshot requested at `mark` for installing: names adopted since
    /// then win over what it says, in the order they were adopted.
    pub fn reconcile(&mut self, topology: &mut Topology, mark: u64) {
        self.pending.retain(|a| a.generation > mark);
        for a in &self.pending {
            set_name(topology, &a.pane, &a.name);
        }
    }

    /// How many adopted names wait for a snapshot requested after them.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }
}

/// What an agent `target` a tool was given means to Herdr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Send it as it is: a pane id or a set name (Herdr resolves those), or nothing
    /// the picture knows (Herdr's own answer then says so).
    AsIs,
    /// The label `herdr_inspect` shows for an agent without a set name is its kind
    /// (`pi`), which Herdr does not resolve (spec/herdr.md E.6): its pane id.
    Pane(String),
    /// That label is shown for several agents: their panes.
    Ambiguous(Vec<String>),
}

/// Resolves `target` against the picture: pane ids and set names go as they are;
/// the kind shown as the name of exactly one visible agent without a set name
/// becomes that agent's pane id.
pub fn resolve_target(topology: &Topology, visibility: &super::visibility::AgentVisibility, target: &str) -> Target {
    let names_it = |a: &&Value| str_of(a, "pane_id") == Some(target) || str_of(a, "name") == Some(target);
    if topology.pane(target).is_some() || topology.agents.iter().any(|a| names_it(&a)) {
        return Target::AsIs;
    }
    let panes: Vec<String> = topology
        .agents
        .iter()
        .filter(|a| visibility.allows_agent(a) && a.get("name").is_none() && str_of(a, "agent") == Some(target))
        .filter_map(|a| str_of(a, "pane_id").map(str::to_string))
        .collect();
    match panes.len() {
        0 => Target::AsIs,
        1 => Target::Pane(panes[0].clone()),
        _ => Target::Ambiguous(panes),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_kind_shown_as_a_name_resolves_to_its_pane() {
        use super::super::visibility::AgentVisibility;
        let t = Topology {
            panes: vec![json!({"pane_id":"w1:p1"}), json!({"pane_id":"w1:p2"}), json!({"pane_id":"w1:p3"})],
            agents: vec![
                json!({"pane_id":"w1:p1","agent":"pi"}),
                json!({"pane_id":"w1:p2","agent":"claude","name":"helper"}),
                json!({"pane_id":"w1:p3","agent":"codex"}),
            ],
            ..Topology::default()
        };
        let all = AgentVisibility::All;
        assert_eq!(resolve_target(&t, &all, "pi"), Target::Pane("w1:p1".into()));
        assert_eq!(resolve_target(&t, &all, "w1:p2"), Target::AsIs);
        assert_eq!(resolve_target(&t, &all, "helper"), Target::AsIs);
        assert_eq!(resolve_target(&t, &all, "claude"), Target::AsIs, "a set name is shown instead of its kind");
        assert_eq!(resolve_target(&t, &all, "nobody"), Target::AsIs);
        let only_pi = AgentVisibility::from_setting(Some("pi"));
        assert_eq!(resolve_target(&t, &only_pi, "codex"), Target::AsIs, "hidden agents are not resolved");
        let mut two = t.clone();
        two.agents.push(json!({"pane_id":"w1:p4","agent":"pi"}));
        assert_eq!(resolve_target(&two, &all, "pi"), Target::Ambiguous(vec!["w1:p1".into(), "w1:p4".into()]));
    }

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

    /// Adopts `answer` with no snapshot in flight.
    fn adopt_from_answer(t: &mut Topology, answer: &Value) -> bool {
        AdoptedNames::default().adopt(t, answer)
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

    #[test]
    fn an_agent_list_answer_names_every_agent_it_validly_names() {
        let mut t = topology();
        t.agents.push(json!({"pane_id":"w1:p2","agent":"claude","name":"keep"}));
        t.agents.push(json!({"pane_id":"w1:p3","agent":"codex"}));
        let answer = json!({"type":"agent_list","agents":[
            {"pane_id":"w1:p1","name":"renamed","agent_status":"working"},
            {"pane_id":"w1:p2","name":"Not Valid"},
            {"pane_id":"w1:p3","name":"third"},
            {"pane_id":"w1:p9","name":"unknown-pane"},
            {"name":"no-pane"},
            "not a record"
        ]});
        assert_eq!(
            names_in_answer(&answer),
            [("w1:p1", "renamed"), ("w1:p3", "third"), ("w1:p9", "unknown-pane")].map(|(p, n)| (p.to_string(), n.to_string()))
        );
        let mut adopted = AdoptedNames::default();
        assert!(adopted.adopt(&mut t, &answer));
        let names: Vec<Option<&str>> = t.agents.iter().map(|a| str_of(a, "name")).collect();
        assert_eq!(names, [Some("renamed"), Some("keep"), Some("third")]);
        assert_eq!(t.agents[0]["agent_status"], "idle", "only the name is taken");
        assert_eq!(adopted.pending(), 2, "the pane the topology does not know is not remembered");
        assert!(!adopted.adopt(&mut t, &json!({"type":"agent_list","agents":[]})));
        assert!(!adopted.adopt(&mut t, &json!({"type":"agent_list","agents":"w1:p1"})));
    }

    #[test]
    fn a_snapshot_requested_before_an_adoption_keeps_the_adopted_name() {
        let mut live = topology();
        let mut adopted = AdoptedNames::default();
        let mark = adopted.mark();
        // The snapshot's answer was made before the rename.
        let mut in_flight = topology();
        assert!(adopted.adopt(&mut live, &json!({"type":"agent_info","agent":{"pane_id":"w1:p1","name":"new"}})));
        adopted.reconcile(&mut in_flight, mark);
        assert_eq!(in_flight.agents[0]["name"], "new");
        assert_eq!(in_flight.agents[0]["agent_status"], "idle", "everything else comes from the snapshot");
        assert_eq!(adopted.pending(), 1, "kept until a snapshot requested after it is installed");

        // A snapshot requested after the adoption wins, even with another name.
        let mark = adopted.mark();
        let mut later = topology();
        later.agents[0]["name"] = json!("elsewhere");
        adopted.reconcile(&mut later, mark);
        assert_eq!(later.agents[0]["name"], "elsewhere");
        assert_eq!(adopted.pending(), 0);
    }

    #[test]
    fn an_unchanged_name_is_remembered_against_an_older_snapshot() {
        let mut live = topology();
        let mut adopted = AdoptedNames::default();
        let mark = adopted.mark();
        assert!(!adopted.adopt(&mut live, &json!({"type":"agent_info","agent":{"pane_id":"w1:p1","name":"old"}})));
        let mut in_flight = topology();
        in_flight.agents[0]["name"] = json!("stale");
        adopted.reconcile(&mut in_flight, mark);
        assert_eq!(in_flight.agents[0]["name"], "old");
    }

    #[test]
    fn adoptions_since_a_mark_are_put_back_in_their_order() {
        let mut live = topology();
        live.agents.push(json!({"pane_id":"w1:p2","agent":"claude"}));
        let mut adopted = AdoptedNames::default();
        let mark = adopted.mark();
        let named = |pane: &str, name: &str| json!({"type":"agent_info","agent":{"pane_id":pane,"name":name}});
        adopted.adopt(&mut live, &named("w1:p1", "first"));
        adopted.adopt(&mut live, &named("w1:p1", "shared"));
        adopted.adopt(&mut live, &named("w1:p2", "shared"));
        assert_eq!(adopted.pending(), 2, "one name per agent");
        let mut in_flight = live.clone();
        for a in &mut in_flight.agents {
            a.as_object_mut().unwrap().remove("name");
        }
        adopted.reconcile(&mut in_flight, mark);
        assert_eq!(in_flight, live);
        assert!(in_flight.agents[0].get("name").is_none(), "the name moved on to w1:p2 last");
        assert_eq!(in_flight.agents[1]["name"], "shared");
    }
}
