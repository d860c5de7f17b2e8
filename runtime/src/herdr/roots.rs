//! Projects and managed roots derived from where Herdr's panes and agents work
//! (spec §2.1): each pane's working directory is mapped to its git top-level.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use super::topology::{Topology, str_of};

/// Budget of `git rev-parse --show-toplevel` when no `.git` entry is found by walking up.
pub const TOPLEVEL_TIMEOUT: Duration = Duration::from_secs(1);
/// Budget of `git status --porcelain` for a project's dirty state.
pub const STATUS_TIMEOUT: Duration = Duration::from_millis(750);

/// One project: a root directory and the panes working in it.
#[derive(Debug, Clone, PartialEq)]
pub struct Project {
    pub root: PathBuf,
    pub pane_ids: Vec<String>,
    pub workspace_ids: Vec<String>,
    pub is_git: bool,
    pub managed: bool,
}

/// The directory a pane works in: its agent's cwd, else the pane's cwd, else the
/// foreground process's cwd.
pub fn pane_cwd(topology: &Topology, pane: &Value) -> Option<String> {
    let pane_id = str_of(pane, "pane_id")?;
    topology
        .agent_for_pane(pane_id)
        .and_then(|a| str_of(a, "cwd"))
        .or_else(|| str_of(pane, "cwd"))
        .or_else(|| str_of(pane, "foreground_cwd"))
        .filter(|c| c.starts_with('/'))
        .map(str::to_string)
}

/// The nearest ancestor of `dir` (itself included) holding a `.git` entry.
pub fn git_toplevel_by_walk(dir: &Path) -> Option<PathBuf> {
    dir.ancestors().find(|d| d.join(".git").exists()).map(Path::to_path_buf)
}

async fn run_git(dir: &Path, args: &[&str], timeout: Duration) -> Option<String> {
    let child = tokio::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        // Read-only: no optional index lock, so the kill at the deadline leaves none.
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .ok()?;
    let out = tokio::time::timeout(timeout, child.wait_with_output()).await.ok()?.ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The git top-level of `dir`: by walking up, else by asking git (bounded).
pub async fn git_toplevel(dir: &Path) -> Option<PathBuf> {
    if let Some(top) = git_toplevel_by_walk(dir) {
        return Some(top);
    }
    let out = run_git(dir, &["rev-parse", "--show-toplevel"], TOPLEVEL_TIMEOUT).await?;
    let top = out.trim();
    (!top.is_empty()).then(|| PathBuf::from(top))
}

/// A root is managed only if it is a git repo and neither `/` nor the home directory
/// (nor a parent of it: that would serve the whole home).
pub fn is_manageable(root: &Path, home: Option<&Path>) -> bool {
    root.parent().is_some() && home.is_none_or(|h| !h.starts_with(root))
}

/// Groups every pane by project root, deepest roots first.
pub async fn derive_projects(topology: &Topology, home: Option<&Path>) -> Vec<Project> {
    let mut by_root: BTreeMap<PathBuf, Project> = BTreeMap::new();
    let mut toplevels: BTreeMap<String, Option<PathBuf>> = BTreeMap::new();
    for pane in &topology.panes {
        let (Some(pane_id), Some(cwd)) = (str_of(pane, "pane_id"), pane_cwd(topology, pane)) else { continue };
        if !toplevels.contains_key(&cwd) {
            let top = git_toplevel(Path::new(&cwd)).await;
            toplevels.insert(cwd.clone(), top);
        }
        let top = toplevels[&cwd].clone();
        let is_git = top.is_some();
        let root = top.unwrap_or_else(|| PathBuf::from(&cwd));
        let project = by_root.entry(root.clone()).or_insert_with(|| Project {
            managed: is_git && is_manageable(&root, home),
            root,
            pane_ids: vec![],
            workspace_ids: vec![],
            is_git,
        });
        project.pane_ids.push(pane_id.to_string());
        if let Some(ws) = str_of(pane, "workspace_id")
            && !project.workspace_ids.iter().any(|w| w == ws)
        {
            project.workspace_ids.push(ws.to_string());
        }
    }
    let mut projects: Vec<Project> = by_root.into_values().collect();
    projects.sort_by(|a, b| b.root.components().count().cmp(&a.root.components().count()).then(a.root.cmp(&b.root)));
    projects
}

/// Managed roots: the live managed projects merged with the configured roots,
/// without duplicates, deepest first.
pub fn merge_roots(live: &[Project], configured: &[PathBuf]) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = configured.to_vec();
    for p in live.iter().filter(|p| p.managed) {
        let canonical = p.root.canonicalize().unwrap_or_else(|_| p.root.clone());
        if !roots.contains(&canonical) {
            roots.push(canonical);
        }
    }
    roots.sort_by(|a, b| b.components().count().cmp(&a.components().count()).then(a.cmp(b)));
    roots
}

/// `dirty` and `changed_files` of a git project (`None` when git did not answer in time).
pub async fn git_dirty(root: &Path) -> Option<(bool, usize)> {
    let out = run_git(root, &["status", "--porcelain", "--untracked-files=normal"], STATUS_TIMEOUT).await?;
    let changed = out.lines().filter(|l| !l.trim().is_empty()).count();
    Some((changed > 0, changed))
}

/// The `projects[]` entry of one workspace in `herdr_inspect`.
pub async fn project_json(project: &Project, workspace_id: &str) -> Value {
    let (dirty, changed) = if project.is_git { git_dirty(&project.root).await.unzip() } else { (None, None) };
    let panes: Vec<&String> = project.pane_ids.iter().filter(|p| p.starts_with(&format!("{workspace_id}:"))).collect();
    json!({
        "root": project.root.display().to_string(),
        "pane_ids": panes,
        "dirty": dirty,
        "changed_files": changed,
        "vcs": if project.is_git { "git" } else { "none" },
        "managed": project.managed,
        "also_open_in": project.workspace_ids.iter().filter(|w| *w != workspace_id).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_and_home_are_never_managed() {
        assert!(!is_manageable(Path::new("/"), None));
        assert!(!is_manageable(Path::new("/home/u"), Some(Path::new("/home/u"))));
        assert!(!is_manageable(Path::new("/home"), Some(Path::new("/home/u"))));
        assert!(is_manageable(Path::new("/home/u/repo"), Some(Path::new("/home/u"))));
    }

    #[test]
    fn agent_cwd_wins_then_pane_then_foreground() {
        let t = Topology {
            panes: vec![
                json!({"pane_id":"w1:p1","cwd":"/a","foreground_cwd":"/b"}),
                json!({"pane_id":"w1:p2","foreground_cwd":"/b"}),
                json!({"pane_id":"w1:p3","cwd":"relative"}),
            ],
            agents: vec![json!({"pane_id":"w1:p1","cwd":"/agent"})],
            ..Default::default()
        };
        assert_eq!(pane_cwd(&t, &t.panes[0]).as_deref(), Some("/agent"));
        assert_eq!(pane_cwd(&t, &t.panes[1]).as_deref(), Some("/b"));
        assert_eq!(pane_cwd(&t, &t.panes[2]), None, "relative cwds are ignored");
    }
}
