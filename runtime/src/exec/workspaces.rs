//! Where `herdr_exec` finds workspaces and their project roots, and who is busy.
//!
//! With Herdr running, the Herdr client supplies live workspaces and agent states
//! through [`WorkspaceSource`]. Without it, [`StandaloneWorkspaces`] offers one
//! workspace per managed root: its id and label are the root's directory name (a
//! second root with the same name gets `-2`, then `-3`, …), and nobody is ever busy.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::policy::Policy;
use crate::tools::BoxFuture;

/// One workspace as `herdr_exec` sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Workspace {
    pub id: String,
    pub label: String,
    /// Canonical project roots of the workspace's current projects.
    pub roots: Vec<PathBuf>,
}

impl Workspace {
    /// Whether `name` designates this workspace (by id or label).
    pub fn matches(&self, name: &str) -> bool {
        self.id == name || self.label == name
    }
}

/// A supplier of workspaces and agent activity.
pub trait WorkspaceSource: Send + Sync {
    fn workspaces(&self) -> BoxFuture<Vec<Workspace>>;
    /// Agents currently working in `root`, as `{pane, agent}` objects (spec §2.4 step 3).
    fn working_agents(&self, root: PathBuf) -> BoxFuture<Vec<Value>>;
}

/// The workspaces of a runtime without Herdr: one per managed root.
pub struct StandaloneWorkspaces {
    workspaces: Vec<Workspace>,
}

impl StandaloneWorkspaces {
    pub fn from_policy(policy: &Policy) -> Self {
        let mut workspaces: Vec<Workspace> = Vec::new();
        // Name by configuration order where possible so ids are stable across runs;
        // policy.roots is sorted deepest first, which is stable too.
        for root in &policy.roots {
            let base = dir_name(root);
            let mut id = base.clone();
            let mut n = 1;
            while workspaces.iter().any(|w| w.id == id) {
                n += 1;
                id = format!("{base}-{n}");
            }
            workspaces.push(Workspace { label: id.clone(), id, roots: vec![root.clone()] });
        }
        StandaloneWorkspaces { workspaces }
    }

    pub fn list(&self) -> &[Workspace] {
        &self.workspaces
    }
}

fn dir_name(root: &Path) -> String {
    root.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| root.display().to_string())
}

impl WorkspaceSource for StandaloneWorkspaces {
    fn workspaces(&self) -> BoxFuture<Vec<Workspace>> {
        let list = self.workspaces.clone();
        Box::pin(async move { list })
    }

    fn working_agents(&self, _root: PathBuf) -> BoxFuture<Vec<Value>> {
        Box::pin(async { Vec::new() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_workspace_per_root_named_after_its_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let a = tmp.path().join("x/app");
        let b = tmp.path().join("y/app");
        let c = tmp.path().join("web");
        for d in [&a, &b, &c] {
            std::fs::create_dir_all(d).unwrap();
        }
        let policy = Policy::for_tests(vec![a.clone(), b.clone(), c.clone()]);
        let ws = StandaloneWorkspaces::from_policy(&policy);
        let ids: Vec<&str> = ws.list().iter().map(|w| w.id.as_str()).collect();
        assert_eq!(ids.len(), 3);
        assert!(ids.contains(&"app") && ids.contains(&"app-2") && ids.contains(&"web"), "{ids:?}");
        let web = ws.list().iter().find(|w| w.matches("web")).unwrap();
        assert_eq!(web.roots, vec![c.canonicalize().unwrap()]);
    }
}
