//! Herdr as the workspace source of `herdr_exec` (spec §2.4 step 3, §1.17): live
//! workspaces with the managed roots of their panes, and who is working where.
//! Configured roots that no Herdr workspace covers stay available as standalone
//! workspaces, and without a reachable Herdr the standalone list is all there is.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};

use super::HerdrService;
use super::roots::{derive_projects, pane_cwd};
use super::snapshot::fetch_topology;
use super::topology::{Topology, str_of};
use crate::exec::workspaces::{StandaloneWorkspaces, Workspace, WorkspaceSource};
use crate::tools::BoxFuture;

pub struct HerdrWorkspaces {
    service: Arc<HerdrService>,
    fallback: StandaloneWorkspaces,
}

impl HerdrWorkspaces {
    pub fn new(service: Arc<HerdrService>, fallback: StandaloneWorkspaces) -> Self {
        HerdrWorkspaces { service, fallback }
    }
}

/// The current topology: the live cache, else a fresh snapshot (bounded by the
/// snapshot budget, so a stuck Herdr cannot stall `herdr_exec`), else none.
async fn topology(service: &HerdrService) -> Option<Topology> {
    if let Some(view) = service.cache.live_view() {
        return Some(view.topology);
    }
    let budget = service.client.timeouts().snapshot;
    let fetched = tokio::time::timeout(budget, fetch_topology(&service.client)).await.ok()?;
    fetched.ok().map(|(t, _)| t)
}

fn canonical(p: &Path) -> PathBuf {
    p.canonicalize().unwrap_or_else(|_| p.to_path_buf())
}

/// Herdr's workspaces with their managed project roots, then every standalone
/// workspace whose root no Herdr workspace has.
pub async fn merged_workspaces(service: &HerdrService, fallback: &[Workspace]) -> Vec<Workspace> {
    let Some(t) = topology(service).await else { return fallback.to_vec() };
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let projects = derive_projects(&t, home.as_deref()).await;
    let mut out: Vec<Workspace> = t
        .workspaces
        .iter()
        .filter_map(|w| {
            let id = str_of(w, "workspace_id")?.to_string();
            let roots =
                projects.iter().filter(|p| p.managed && p.workspace_ids.contains(&id)).map(|p| canonical(&p.root)).collect();
            Some(Workspace { label: str_of(w, "label").unwrap_or(&id).to_string(), id, roots })
        })
        .collect();
    for ws in fallback {
        let covered = ws.roots.iter().all(|r| out.iter().any(|h| h.roots.contains(r)));
        if !covered && !out.iter().any(|h| h.matches(&ws.id)) {
            out.push(ws.clone());
        }
    }
    out
}

/// Agents whose status is `working` (spec §2.4) and whose pane works inside `root`.
pub fn working_in(t: &Topology, root: &Path) -> Vec<Value> {
    let root = canonical(root);
    t.agents
        .iter()
        // `agent_status` is Herdr's field; `status` counts where a record has only that.
        .filter(|a| str_of(a, "agent_status").or_else(|| str_of(a, "status")) == Some("working"))
        .filter_map(|a| {
            let pane_id = str_of(a, "pane_id")?;
            let pane = t.pane(pane_id).cloned().unwrap_or_else(|| json!({"pane_id": pane_id}));
            let cwd = pane_cwd(t, &pane).or_else(|| str_of(a, "cwd").map(str::to_string))?;
            canonical(Path::new(&cwd))
                .starts_with(&root)
                .then(|| json!({"pane": pane_id, "agent": a.get("name").or_else(|| a.get("agent"))}))
        })
        .collect()
}

impl WorkspaceSource for HerdrWorkspaces {
    fn workspaces(&self) -> BoxFuture<Vec<Workspace>> {
        let service = Arc::clone(&self.service);
        let fallback = self.fallback.list().to_vec();
        Box::pin(async move { merged_workspaces(&service, &fallback).await })
    }

    fn working_agents(&self, root: PathBuf) -> BoxFuture<Vec<Value>> {
        let service = Arc::clone(&self.service);
        Box::pin(async move {
            match topology(&service).await {
                Some(t) => working_in(&t, &root),
                None => vec![],
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spec §2.4: an agent counts as working by `agent_status`, or by `status`
    /// where a record carries only that; any other status does not count.
    #[test]
    fn working_is_read_from_agent_status_or_status() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path().display().to_string();
        let snapshot = |agent: Value| {
            Topology::from_snapshot(&json!({
                "panes": [{"pane_id": "w1:p1", "workspace_id": "w1", "cwd": cwd}],
                "agents": [agent],
            }))
        };
        for (agent, working) in [
            (json!({"pane_id": "w1:p1", "agent": "pi", "agent_status": "working"}), true),
            (json!({"pane_id": "w1:p1", "agent": "pi", "status": "working"}), true),
            (json!({"pane_id": "w1:p1", "agent": "pi", "agent_status": "idle", "status": "working"}), false),
            (json!({"pane_id": "w1:p1", "agent": "pi", "status": "idle"}), false),
        ] {
            let found = working_in(&snapshot(agent.clone()), dir.path());
            assert_eq!(found.len(), usize::from(working), "{agent}: {found:?}");
        }
    }
}
