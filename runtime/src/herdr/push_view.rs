//! The event cache as the push bus's source of `hello` and `/push/state`.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};

use super::cache::EventCache;
use super::roots::{git_toplevel_by_walk, pane_cwd};
use super::topology::{Topology, str_of};
use crate::push::{PushState, PushStateSource};

/// Agents and workspaces in the shape the extension reads (spec/extension.md §7.1).
pub fn push_state(topology: &Topology, cache: &EventCache, live: bool) -> PushState {
    let visibility = cache.visibility();
    let agents = topology
        .agents
        .iter()
        .filter(|a| visibility.allows_agent(a))
        .map(|a| {
            let pane = str_of(a, "pane_id");
            json!({
                "pane": pane,
                "status": a.get("agent_status").or_else(|| a.get("status")),
                "workspace": a.get("workspace_id"),
                "name": a.get("name").or_else(|| a.get("agent")),
                "kind": a.get("agent"),
                "seq": a.get("state_change_seq"),
                "terminal_title": a.get("terminal_title"),
                "cwd": a.get("cwd"),
            })
        })
        .collect();
    let mut panes_by_ws: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut roots_by_ws: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for pane in &topology.panes {
        let (Some(ws), Some(id)) = (str_of(pane, "workspace_id"), str_of(pane, "pane_id")) else { continue };
        panes_by_ws.entry(ws).or_default().push(id);
        // Only the cheap `.git` walk here: this runs on every /push/state request.
        if let Some(root) = pane_cwd(topology, pane).and_then(|c| git_toplevel_by_walk(Path::new(&c))) {
            let root = root.display().to_string();
            let roots = roots_by_ws.entry(ws).or_default();
            if !roots.contains(&root) {
                roots.push(root);
            }
        }
    }
    let workspaces = topology
        .workspaces
        .iter()
        .filter_map(|w| {
            let id = str_of(w, "workspace_id")?;
            Some(json!({
                "id": id,
                "label": w.get("label"),
                "roots": roots_by_ws.get(id).cloned().unwrap_or_default(),
                "panes": panes_by_ws.get(id).cloned().unwrap_or_default(),
            }))
        })
        .collect::<Vec<Value>>();
    PushState { agents, workspaces, live }
}

impl PushStateSource for EventCache {
    fn push_state(&self) -> PushState {
        match self.last_topology() {
            Some(t) => push_state(&t, self, self.is_live()),
            None => PushState::default(),
        }
    }
}
