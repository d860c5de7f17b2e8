//! The extension's picture of the workstation's agents and workspaces, kept current from
//! the push stream (a `hello` replaces it; later events patch it).

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

use super::push_event::{AgentInfo, Hello, PushEvent, WorkspaceInfo};
use super::render::{tail_chars, MAX_OUTPUT_CHARS};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fleet {
    /// By pane id.
    pub agents: BTreeMap<String, AgentInfo>,
    /// By workspace id.
    pub workspaces: BTreeMap<String, WorkspaceInfo>,
    /// The latest `agent_output` per pane since that pane last settled (tail only).
    pub outputs: BTreeMap<String, String>,
    pub herdr_live: bool,
}

impl Fleet {
    pub fn apply(&mut self, event: &PushEvent) {
        match event {
            PushEvent::Hello(hello) => self.replace(hello),
            PushEvent::AgentWorking { workspace, pane, agent, .. } => {
                let a = self.agent_mut(pane, workspace, agent);
                a.status = Some("working".into());
            }
            PushEvent::AgentSettled { workspace, pane, agent, status, .. } => {
                let a = self.agent_mut(pane, workspace, agent);
                a.status = Some(status.as_str().into());
                // What the pane printed before this settle is not its result.
                self.outputs.remove(pane);
            }
            PushEvent::AgentOutput { pane, output, .. } => {
                self.outputs.insert(pane.clone(), tail_chars(output, MAX_OUTPUT_CHARS).to_owned());
            }
            PushEvent::AgentGone { pane, .. } => {
                self.agents.remove(pane);
                self.outputs.remove(pane);
            }
            PushEvent::ExecCompleted { .. } | PushEvent::Lagged { .. } => {}
        }
    }

    /// Takes only what the picture's agents show (terminal title, summary) for panes already
    /// known; statuses stay the stream's, so a picture that is ahead of the stream cannot end
    /// a round before its settle (and that settle's output) arrives.
    pub fn refresh_activity(&mut self, picture: &Hello) {
        for fresh in &picture.agents {
            let Some(known) = fresh.pane.as_ref().and_then(|p| self.agents.get_mut(p)) else { continue };
            known.terminal_title.clone_from(&fresh.terminal_title);
            known.summary.clone_from(&fresh.summary);
        }
    }

    fn replace(&mut self, hello: &Hello) {
        self.agents = hello.agents.iter().filter_map(|a| Some((a.pane.clone()?, a.clone()))).collect();
        self.workspaces = hello.workspaces.iter().map(|w| (w.id.clone(), w.clone())).collect();
        self.outputs.retain(|pane, _| self.agents.contains_key(pane));
        self.herdr_live = hello.herdr_live;
    }

    fn agent_mut(&mut self, pane: &str, workspace: &Option<String>, agent: &Option<String>) -> &mut AgentInfo {
        let a = self.agents.entry(pane.to_owned()).or_insert_with(|| AgentInfo { pane: Some(pane.to_owned()), ..Default::default() });
        if workspace.is_some() {
            a.workspace.clone_from(workspace);
        }
        if agent.is_some() && a.name.is_none() {
            a.name.clone_from(agent);
        }
        a
    }

    /// Agents of a workspace, by pane.
    pub fn scoped(&self, workspace: &str) -> Vec<&AgentInfo> {
        self.agents.values().filter(|a| a.workspace.as_deref() == Some(workspace)).collect()
    }

    pub fn working_in(&self, workspace: &str) -> BTreeSet<String> {
        self.scoped(workspace).into_iter().filter(|a| a.is_working()).filter_map(|a| a.pane.clone()).collect()
    }

    /// The workspace an agent belongs to, as far as the picture knows.
    pub fn workspace_of(&self, pane: &str) -> Option<&str> {
        self.agents.get(pane).and_then(|a| a.workspace.as_deref())
    }

    /// What a pane has to say: its fresh output, else the summary the picture carries.
    pub fn output_of(&self, pane: &str) -> Option<&str> {
        self.outputs
            .get(pane)
            .map(String::as_str)
            .or_else(|| self.agents.get(pane).and_then(|a| a.summary.as_deref()))
            .filter(|o| !o.trim().is_empty())
    }

    /// The first activity among `panes` (the baseline a progress round starts from).
    pub fn activity_in<'a>(&'a self, panes: impl IntoIterator<Item = &'a String>) -> Option<&'a str> {
        panes.into_iter().find_map(|p| self.activity_of(p))
    }

    /// What a working pane is doing, for progress reports: its output, else its summary,
    /// else its terminal title (agents show their current task there, and the runtime's
    /// picture carries titles but no output while an agent works).
    pub fn activity_of(&self, pane: &str) -> Option<&str> {
        self.output_of(pane).or_else(|| {
            self.agents.get(pane).and_then(|a| a.terminal_title.as_deref()).filter(|t| !t.trim().is_empty())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::continuity::push_event::SettledStatus;

    #[test]
    fn events_patch_the_picture_and_settles_drop_stale_output() {
        let mut f = Fleet::default();
        f.apply(&PushEvent::AgentWorking { workspace: Some("w1".into()), pane: "p1".into(), agent: Some("codex".into()), seq: None });
        assert_eq!(f.working_in("w1").len(), 1);
        f.apply(&PushEvent::AgentOutput { workspace: None, pane: "p1".into(), agent: None, output: "old".into(), seq: None });
        assert_eq!(f.output_of("p1"), Some("old"));
        f.apply(&PushEvent::AgentSettled { workspace: Some("w1".into()), pane: "p1".into(), agent: None, status: SettledStatus::Idle, seq: None, at: None });
        assert_eq!(f.output_of("p1"), None);
        assert!(f.working_in("w1").is_empty());
        assert_eq!(f.agents["p1"].name.as_deref(), Some("codex"));
        f.apply(&PushEvent::AgentOutput { workspace: None, pane: "p1".into(), agent: None, output: "x".repeat(MAX_OUTPUT_CHARS + 5), seq: None });
        assert_eq!(f.outputs["p1"].len(), MAX_OUTPUT_CHARS, "stored output is bounded");
        f.apply(&PushEvent::AgentGone { workspace: None, pane: "p1".into(), agent: None, seq: None });
        assert!(f.agents.is_empty() && f.outputs.is_empty());
    }

    #[test]
    fn hello_replaces_everything() {
        let mut f = Fleet::default();
        f.apply(&PushEvent::AgentOutput { workspace: None, pane: "gone".into(), agent: None, output: "x".into(), seq: None });
        let hello = Hello {
            agents: vec![AgentInfo { pane: Some("p2".into()), workspace: Some("w2".into()), status: Some("idle".into()), summary: Some("sum".into()), ..Default::default() }],
            workspaces: vec![WorkspaceInfo { id: "w2".into(), ..Default::default() }],
            herdr_live: true,
            seq: Some(1),
        };
        f.apply(&PushEvent::Hello(hello));
        assert!(f.outputs.is_empty());
        assert_eq!(f.output_of("p2"), Some("sum"));
        f.agents.get_mut("p2").unwrap().summary = None;
        assert_eq!(f.activity_of("p2"), None);
        f.agents.get_mut("p2").unwrap().terminal_title = Some("✳ Refactoring parser".into());
        assert_eq!((f.output_of("p2"), f.activity_of("p2")), (None, Some("✳ Refactoring parser")));
        assert_eq!(f.workspace_of("p2"), Some("w2"));
        assert!(f.herdr_live);
    }
}
