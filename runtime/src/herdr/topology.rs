//! The live picture of Herdr: workspaces, tabs, panes and agents as Herdr reports
//! them (raw JSON records, so unknown fields survive), built from a snapshot and
//! kept current by events.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::agent_names;

/// Agent statuses after which an agent waits for someone (spec/extension.md §7.1).
pub const SETTLED: &[&str] = &["idle", "done", "blocked"];

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Topology {
    pub version: Option<String>,
    pub protocol: Option<u64>,
    pub focused_workspace_id: Option<String>,
    pub focused_pane_id: Option<String>,
    pub workspaces: Vec<Value>,
    pub tabs: Vec<Value>,
    pub panes: Vec<Value>,
    pub agents: Vec<Value>,
}

/// What one event did to the topology.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    /// The event cannot be applied faithfully (unknown workspace, a maybe-gone pane,
    /// a worktree change, no body): take a fresh snapshot.
    pub resnapshot: bool,
}

/// The state of one agent, as compared between two topologies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentState {
    pub pane: String,
    pub workspace: Option<String>,
    pub name: Option<String>,
    pub kind: Option<String>,
    pub status: String,
}

pub fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

fn list(v: &Value, key: &str) -> Vec<Value> {
    v.get(key).and_then(Value::as_array).cloned().unwrap_or_default()
}

/// The agent records of a snapshot or `agent.list` answer, without names Herdr's rule forbids.
fn agents(v: &Value) -> Vec<Value> {
    let mut agents = list(v, "agents");
    agent_names::drop_invalid(&mut agents);
    agents
}

/// `PaneInfo` fields about what the terminal shows, mirrored from a pane update onto its agent.
const PANE_DISPLAY_FIELDS: [&str; 3] = ["title", "terminal_title", "terminal_title_stripped"];

/// Upserts `record` into `items` by its `key` field; records without the key are ignored.
fn upsert(items: &mut Vec<Value>, key: &str, record: &Value) {
    let Some(id) = str_of(record, key) else { return };
    match items.iter_mut().find(|r| str_of(r, key) == Some(id)) {
        Some(slot) => merge_into(slot, record),
        None => items.push(record.clone()),
    }
}

/// Overwrites the fields `update` carries, keeping the others (events may be partial).
fn merge_into(slot: &mut Value, update: &Value) {
    match (slot.as_object_mut(), update.as_object()) {
        (Some(dst), Some(src)) => {
            for (k, v) in src {
                dst.insert(k.clone(), v.clone());
            }
        }
        _ => *slot = update.clone(),
    }
}

impl Topology {
    /// From a `session.snapshot` result (either the result itself or `result.snapshot`).
    pub fn from_snapshot(result: &Value) -> Topology {
        let snap = result.get("snapshot").filter(|s| s.is_object()).unwrap_or(result);
        Topology {
            version: str_of(snap, "version").map(str::to_string),
            protocol: snap.get("protocol").and_then(Value::as_u64),
            focused_workspace_id: str_of(snap, "focused_workspace_id").map(str::to_string),
            focused_pane_id: str_of(snap, "focused_pane_id").map(str::to_string),
            workspaces: list(snap, "workspaces"),
            tabs: list(snap, "tabs"),
            panes: list(snap, "panes"),
            agents: agents(snap),
        }
    }

    /// From the list APIs (the fallback when `session.snapshot` fails, and the
    /// reconciliation after it succeeds).
    pub fn replace_lists(&mut self, workspaces: &Value, panes: &Value, agents: &Value) {
        self.workspaces = list(workspaces, "workspaces");
        self.panes = list(panes, "panes");
        self.agents = self::agents(agents);
        if self.focused_workspace_id.is_none() {
            self.focused_workspace_id =
                self.workspaces.iter().find(|w| w["focused"] == true).and_then(|w| str_of(w, "workspace_id")).map(str::to_string);
        }
        if self.focused_pane_id.is_none() {
            self.focused_pane_id =
                self.panes.iter().find(|p| p["focused"] == true).and_then(|p| str_of(p, "pane_id")).map(str::to_string);
        }
    }

    pub fn workspace(&self, id: &str) -> Option<&Value> {
        self.workspaces.iter().find(|w| str_of(w, "workspace_id") == Some(id))
    }

    pub fn pane(&self, id: &str) -> Option<&Value> {
        self.panes.iter().find(|p| str_of(p, "pane_id") == Some(id))
    }

    pub fn agent_for_pane(&self, pane_id: &str) -> Option<&Value> {
        self.agents.iter().find(|a| str_of(a, "pane_id") == Some(pane_id))
    }

    pub fn pane_ids(&self) -> Vec<String> {
        self.panes.iter().filter_map(|p| str_of(p, "pane_id")).map(str::to_string).collect()
    }

    /// Every agent's state, keyed by its pane.
    pub fn agent_states(&self) -> BTreeMap<String, AgentState> {
        self.agents
            .iter()
            .filter_map(|a| {
                let pane = str_of(a, "pane_id")?.to_string();
                Some((
                    pane.clone(),
                    AgentState {
                        pane,
                        workspace: str_of(a, "workspace_id").map(str::to_string),
                        name: str_of(a, "name").map(str::to_string),
                        kind: str_of(a, "agent").or_else(|| str_of(a, "kind")).map(str::to_string),
                        status: str_of(a, "agent_status").or_else(|| str_of(a, "status")).unwrap_or("unknown").to_string(),
                    },
                ))
            })
            .collect()
    }

    fn remove_workspace(&mut self, id: &str) {
        self.workspaces.retain(|w| str_of(w, "workspace_id") != Some(id));
        self.tabs.retain(|t| str_of(t, "workspace_id") != Some(id));
        self.panes.retain(|p| str_of(p, "workspace_id") != Some(id));
        self.agents.retain(|a| str_of(a, "workspace_id") != Some(id));
    }

    /// Removes a pane and its agent (Herdr no longer knows the pane).
    pub fn remove_pane(&mut self, id: &str) {
        self.panes.retain(|p| str_of(p, "pane_id") != Some(id));
        self.agents.retain(|a| str_of(a, "pane_id") != Some(id));
    }

    fn knows_workspace(&self, id: Option<&str>) -> bool {
        id.is_some_and(|id| self.workspace(id).is_some())
    }

    /// An agent record is its pane's `PaneInfo` plus agent fields (spec/herdr.md §3), so what
    /// a pane update says about the terminal reaches the agent too: its terminal title is what
    /// a working agent shows of its current task, and `/push/state` reads it from the agent.
    fn mirror_pane_display(&mut self, pane_id: &str, pane: &Value) {
        let Some(agent) = self.agents.iter_mut().find(|a| str_of(a, "pane_id") == Some(pane_id)) else { return };
        for field in PANE_DISPLAY_FIELDS {
            match pane.get(field) {
                Some(v) => agent[field] = v.clone(),
                None => {
                    if let Some(a) = agent.as_object_mut() {
                        a.remove(field);
                    }
                }
            }
        }
    }

    /// Sets an agent's status from a status event or a pane update; an agent Herdr
    /// names but the cache does not know yet is added with what the event says.
    fn set_agent_status(&mut self, pane_id: &str, workspace_id: Option<&str>, agent: Option<&str>, status: &str) -> bool {
        if let Some(pane) = self.panes.iter_mut().find(|p| str_of(p, "pane_id") == Some(pane_id)) {
            pane["agent_status"] = json!(status);
        }
        match self.agents.iter_mut().find(|a| str_of(a, "pane_id") == Some(pane_id)) {
            Some(existing) => {
                existing["agent_status"] = json!(status);
                if let Some(kind) = agent {
                    existing["agent"] = json!(kind);
                }
                false
            }
            None => {
                let Some(kind) = agent else { return false };
                self.agents
                    .push(json!({"agent": kind, "pane_id": pane_id, "workspace_id": workspace_id, "agent_status": status}));
                true
            }
        }
    }

    /// Sets the status of the agent on `pane_id` (and of the pane), if there is one.
    pub fn set_status(&mut self, pane_id: &str, status: &str) {
        if let Some(agent) = self.agents.iter_mut().find(|a| str_of(a, "pane_id") == Some(pane_id)) {
            agent["agent_status"] = json!(status);
            if let Some(pane) = self.panes.iter_mut().find(|p| str_of(p, "pane_id") == Some(pane_id)) {
                pane["agent_status"] = json!(status);
            }
        }
    }

    /// Takes what a `pane.get` answer says about a known pane: its fields (cwd, title,
    /// focus, …) and, when `with_status`, its agent's status. Nothing else: whether an
    /// agent is there, and its record, come with a picture.
    pub fn refresh_pane(&mut self, pane: &Value, with_status: bool) {
        let Some(id) = str_of(pane, "pane_id") else { return };
        let Some(slot) = self.panes.iter_mut().find(|p| str_of(p, "pane_id") == Some(id)) else { return };
        let kept_status = slot.get("agent_status").cloned();
        merge_into(slot, pane);
        if !with_status && let Some(status) = kept_status {
            slot["agent_status"] = status;
        }
        self.mirror_pane_display(id, pane);
        if with_status && let Some(status) = str_of(pane, "agent_status") {
            self.set_status(id, status);
        }
    }

    /// Applies a `pane.agent_status_changed` event of a known pane (spec §5, C): the
    /// status of its agent; an agent the picture lacks is added with what the event
    /// says; `unknown` without an agent is the agent leaving.
    pub fn apply_status(&mut self, pane_id: &str, workspace_id: Option<&str>, agent: Option<&str>, status: &str) {
        if agent.is_none() && status == "unknown" {
            self.agents.retain(|a| str_of(a, "pane_id") != Some(pane_id));
            if let Some(pane) = self.panes.iter_mut().find(|p| str_of(p, "pane_id") == Some(pane_id)) {
                pane["agent_status"] = json!(status);
            }
            return;
        }
        self.set_agent_status(pane_id, workspace_id, agent, status);
    }

    /// Applies one event (`name` as Herdr sent it, `data` its body).
    pub fn apply(&mut self, name: &str, data: &Value) -> Applied {
        let resnapshot = |yes: bool| Applied { resnapshot: yes };
        if !data.is_object() {
            return resnapshot(true);
        }
        let ws_id = str_of(data, "workspace_id");
        let pane_id = str_of(data, "pane_id");
        match name {
            "workspace_created" | "workspace_updated" | "workspace_metadata_updated" => {
                let Some(ws) = data.get("workspace") else { return resnapshot(true) };
                upsert(&mut self.workspaces, "workspace_id", ws);
                resnapshot(false)
            }
            "workspace_renamed" => {
                let known = self.knows_workspace(ws_id);
                if let (Some(id), Some(label)) = (ws_id, data.get("label"))
                    && let Some(w) = self.workspaces.iter_mut().find(|w| str_of(w, "workspace_id") == Some(id))
                {
                    w["label"] = label.clone();
                }
                resnapshot(!known)
            }
            "workspace_closed" => {
                if let Some(id) = ws_id {
                    self.remove_workspace(id);
                }
                resnapshot(ws_id.is_none())
            }
            "workspace_focused" => {
                self.focused_workspace_id = ws_id.map(str::to_string);
                resnapshot(!self.knows_workspace(ws_id))
            }
            "workspace_moved" | "workspace_reordered" => {
                if let Some(all) = data.get("workspaces").and_then(Value::as_array) {
                    for ws in all {
                        upsert(&mut self.workspaces, "workspace_id", ws);
                    }
                }
                resnapshot(false)
            }
            "tab_created" => {
                let Some(tab) = data.get("tab") else { return resnapshot(true) };
                let known = self.knows_workspace(str_of(tab, "workspace_id"));
                upsert(&mut self.tabs, "tab_id", tab);
                resnapshot(!known)
            }
            "tab_closed" => {
                if let Some(id) = str_of(data, "tab_id") {
                    self.tabs.retain(|t| str_of(t, "tab_id") != Some(id));
                    let gone: Vec<String> = self
                        .panes
                        .iter()
                        .filter(|p| str_of(p, "tab_id") == Some(id))
                        .filter_map(|p| str_of(p, "pane_id").map(str::to_string))
                        .collect();
                    for p in gone {
                        self.remove_pane(&p);
                    }
                }
                resnapshot(false)
            }
            "tab_renamed" | "tab_moved" | "tab_focused" => {
                if let (Some(id), Some(label)) = (str_of(data, "tab_id"), data.get("label"))
                    && let Some(t) = self.tabs.iter_mut().find(|t| str_of(t, "tab_id") == Some(id))
                {
                    t["label"] = label.clone();
                }
                resnapshot(!self.knows_workspace(ws_id))
            }
            "pane_created" | "pane_updated" | "pane_moved" => {
                let Some(pane) = data.get("pane") else { return resnapshot(true) };
                if name == "pane_moved"
                    && let Some(old) = str_of(data, "previous_pane_id")
                {
                    self.remove_pane(old);
                }
                let known = self.knows_workspace(str_of(pane, "workspace_id"));
                upsert(&mut self.panes, "pane_id", pane);
                if let Some(id) = str_of(pane, "pane_id") {
                    self.mirror_pane_display(id, pane);
                }
                let mut missing_agent = false;
                if let (Some(id), Some(status)) = (str_of(pane, "pane_id"), str_of(pane, "agent_status")) {
                    missing_agent = self.set_agent_status(id, str_of(pane, "workspace_id"), str_of(pane, "agent"), status);
                }
                resnapshot(!known || missing_agent || name == "pane_moved")
            }
            "pane_closed" => {
                if let Some(id) = pane_id {
                    self.remove_pane(id);
                }
                resnapshot(pane_id.is_none())
            }
            // A pane whose process exited may be gone without a close event (spec D.3).
            "pane_exited" => resnapshot(true),
            "pane_focused" => {
                self.focused_pane_id = pane_id.map(str::to_string);
                if ws_id.is_some() {
                    self.focused_workspace_id = ws_id.map(str::to_string);
                }
                resnapshot(false)
            }
            "pane_agent_detected" => {
                if data.get("released") == Some(&Value::Bool(true)) {
                    if let Some(id) = pane_id {
                        self.agents.retain(|a| str_of(a, "pane_id") != Some(id));
                    }
                    return resnapshot(false);
                }
                // The event names the agent but not its full record (name, session, seq).
                resnapshot(true)
            }
            "pane.agent_status_changed" => {
                let (Some(id), Some(status)) = (pane_id, str_of(data, "agent_status")) else { return resnapshot(true) };
                let agent = str_of(data, "agent");
                if agent.is_none() && status == "unknown" {
                    // The agent left the pane (Herdr drops the `agent` key).
                    self.agents.retain(|a| str_of(a, "pane_id") != Some(id));
                    if let Some(pane) = self.panes.iter_mut().find(|p| str_of(p, "pane_id") == Some(id)) {
                        pane["agent_status"] = json!(status);
                    }
                    return resnapshot(false);
                }
                let added = self.set_agent_status(id, ws_id, agent, status);
                resnapshot(added || !self.knows_workspace(ws_id))
            }
            n if n.starts_with("worktree_") => resnapshot(true),
            _ => resnapshot(false),
        }
    }
}

/// Splits an event line into its name and body. Herdr sends `{"event":"name","data":{..}}`;
/// some builds send `{"event":{"type":..,..}}`.
pub fn split_event(line: &Value) -> Option<(String, Value)> {
    match line.get("event")? {
        Value::String(name) => Some((name.clone(), line.get("data").cloned().unwrap_or(Value::Null))),
        Value::Object(obj) => {
            let name = obj.get("type").or_else(|| obj.get("event")).and_then(Value::as_str)?;
            let data = obj.get("data").cloned().unwrap_or_else(|| Value::Object(obj.clone()));
            Some((name.to_string(), data))
        }
        _ => None,
    }
}

#[cfg(test)]
#[path = "topology_props.rs"]
mod props;

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Topology {
        Topology::from_snapshot(&json!({"type":"session_snapshot","snapshot":{
            "version":"0.8.2","protocol":20,"focused_workspace_id":"w1",
            "workspaces":[{"workspace_id":"w1","label":"repo"}],
            "tabs":[{"tab_id":"w1:t1","workspace_id":"w1","label":"1"}],
            "panes":[{"pane_id":"w1:p1","workspace_id":"w1","tab_id":"w1:t1","cwd":"/r","agent_status":"idle"}],
            "agents":[{"agent":"pi","pane_id":"w1:p1","workspace_id":"w1","agent_status":"idle","state_change_seq":1}]
        }}))
    }

    #[test]
    fn snapshot_fields_are_read() {
        let t = base();
        assert_eq!(t.version.as_deref(), Some("0.8.2"));
        assert_eq!(t.protocol, Some(20));
        assert_eq!(t.agent_states()["w1:p1"].status, "idle");
    }

    #[test]
    fn names_herdr_would_refuse_are_not_taken_from_a_snapshot_or_the_lists() {
        let snap = json!({"agents":[{"pane_id":"w1:p1","name":"Not Valid"},{"pane_id":"w1:p2","name":"ok-name"}]});
        let t = Topology::from_snapshot(&snap);
        assert_eq!((t.agents[0].get("name"), &t.agents[1]["name"]), (None, &json!("ok-name")));
        let mut t = Topology::default();
        t.replace_lists(&json!({}), &json!({}), &snap);
        assert_eq!((t.agents[0].get("name"), &t.agents[1]["name"]), (None, &json!("ok-name")));
    }

    #[test]
    fn status_changes_and_agent_departure() {
        let mut t = base();
        let a = t.apply(
            "pane.agent_status_changed",
            &json!({"pane_id":"w1:p1","workspace_id":"w1","agent_status":"working","agent":"pi"}),
        );
        assert!(!a.resnapshot);
        assert_eq!(t.agent_states()["w1:p1"].status, "working");
        assert_eq!(t.agent_for_pane("w1:p1").unwrap()["state_change_seq"], 1, "other fields survive");
        t.apply("pane.agent_status_changed", &json!({"pane_id":"w1:p1","workspace_id":"w1","agent_status":"unknown"}));
        assert!(t.agent_states().is_empty());
    }

    #[test]
    fn unknown_workspaces_exits_and_worktrees_ask_for_a_snapshot() {
        let mut t = base();
        assert!(t.apply("tab_created", &json!({"tab":{"tab_id":"w9:t1","workspace_id":"w9"}})).resnapshot);
        assert!(t.apply("pane_exited", &json!({"pane_id":"w1:p1","workspace_id":"w1"})).resnapshot);
        assert!(t.apply("worktree_created", &json!({"workspace":{}})).resnapshot);
        assert!(t.apply("pane_created", &Value::Null).resnapshot);
        assert!(!t.apply("layout_updated", &json!({"layout":{}})).resnapshot);
    }

    #[test]
    fn a_pane_update_refreshes_its_agents_terminal_title() {
        let mut t = base();
        let pane = |title: Option<&str>| {
            let mut p = json!({"pane_id":"w1:p1","workspace_id":"w1","tab_id":"w1:t1","cwd":"/r","agent_status":"working","agent":"pi"});
            if let Some(title) = title {
                p["terminal_title"] = json!(title);
            }
            json!({"pane": p})
        };
        assert!(!t.apply("pane_updated", &pane(Some("✳ Writing tests"))).resnapshot);
        let agent = t.agent_for_pane("w1:p1").unwrap();
        assert_eq!(agent["terminal_title"], "✳ Writing tests");
        assert_eq!((agent["agent_status"].as_str(), &agent["state_change_seq"]), (Some("working"), &json!(1)), "agent fields survive");
        t.apply("pane_updated", &pane(None));
        assert!(t.agent_for_pane("w1:p1").unwrap().get("terminal_title").is_none(), "a cleared title is cleared");
        // A pane without an agent gets none from its update.
        t.apply("pane_updated", &json!({"pane":{"pane_id":"w1:p2","workspace_id":"w1","terminal_title":"bash","agent_status":"unknown"}}));
        assert!(t.agent_for_pane("w1:p2").is_none());
    }

    #[test]
    fn closes_remove_children() {
        let mut t = base();
        t.apply("workspace_closed", &json!({"workspace_id":"w1"}));
        assert!(t.workspaces.is_empty() && t.tabs.is_empty() && t.panes.is_empty() && t.agents.is_empty());
    }

    #[test]
    fn event_lines_split_in_both_shapes() {
        let (n, d) = split_event(&json!({"event":"pane_closed","data":{"pane_id":"w1:p1"}})).unwrap();
        assert_eq!((n.as_str(), &d["pane_id"]), ("pane_closed", &json!("w1:p1")));
        let (n, d) = split_event(&json!({"event":{"type":"pane_closed","pane_id":"w1:p2"}})).unwrap();
        assert_eq!((n.as_str(), &d["pane_id"]), ("pane_closed", &json!("w1:p2")));
        assert!(split_event(&json!({"id":"x"})).is_none());
    }
}
