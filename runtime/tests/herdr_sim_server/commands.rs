//! The command language of the simulator process: one JSON object per stdin line,
//! checked against what was created so far so that a test's mistake (an unknown
//! pane, a bad status) comes back as an error ack instead of a panic in the simulator.

use std::collections::{HashMap, HashSet};

use serde::Deserialize;
use serde_json::{Value, json};

use crate::herdr_sim::HerdrSim;

/// The statuses Herdr 0.8.2 reports for an agent (spec/herdr.md).
const STATUSES: [&str; 5] = ["working", "idle", "done", "blocked", "unknown"];

#[derive(Debug, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case", deny_unknown_fields)]
pub enum Command {
    AddWorkspace {
        id: String,
        label: String,
    },
    AddPane {
        workspace: String,
        pane: String,
        cwd: String,
    },
    AddAgent {
        pane: String,
        kind: String,
        status: String,
        #[serde(default)]
        name: Option<String>,
    },
    /// `output` becomes the pane's text before the status changes, so the runtime's
    /// read after a settle sees it.
    SetStatus {
        pane: String,
        status: String,
        #[serde(default)]
        output: Option<String>,
    },
    /// The pane's terminal title changes (what a working agent shows of its task).
    SetTitle {
        pane: String,
        title: String,
    },
    /// A new agent process is detected: `unknown` for about 3 s, then `idle` (spec E.5).
    DetectAgent {
        pane: String,
        kind: String,
        #[serde(default)]
        name: Option<String>,
    },
    RemoveAgent {
        pane: String,
    },
    /// `pane.close`: `pane_closed`, then focus and layout events for a survivor.
    RemovePane {
        pane: String,
    },
    /// The pane's shell exits: only `pane_exited` (spec D.3).
    ExitPane {
        pane: String,
    },
    /// A `cd` in the pane: `pane.get` shows it, nothing is emitted (spec E.7).
    SetCwd {
        pane: String,
        cwd: String,
    },
    /// How many Herdr API requests were served so far.
    Requests,
    /// How many `events.subscribe` streams are open (a test waits for the runtime's).
    Subscribers,
    Stop,
}

impl Command {
    pub fn parse(line: &[u8]) -> Result<Command, String> {
        serde_json::from_slice(line).map_err(|e| format!("bad command: {e}"))
    }

    pub fn name(&self) -> &'static str {
        match self {
            Command::AddWorkspace { .. } => "add_workspace",
            Command::AddPane { .. } => "add_pane",
            Command::AddAgent { .. } => "add_agent",
            Command::SetStatus { .. } => "set_status",
            Command::SetTitle { .. } => "set_title",
            Command::DetectAgent { .. } => "detect_agent",
            Command::RemoveAgent { .. } => "remove_agent",
            Command::RemovePane { .. } => "remove_pane",
            Command::ExitPane { .. } => "exit_pane",
            Command::SetCwd { .. } => "set_cwd",
            Command::Requests => "requests",
            Command::Subscribers => "subscribers",
            Command::Stop => "stop",
        }
    }
}

/// What exists in the simulator, mirrored here because the simulator's own setters
/// panic on unknown ids (fine in a Rust test, wrong for a long-lived process).
#[derive(Default)]
pub struct Registry {
    workspaces: HashSet<String>,
    panes: HashMap<String, String>,
    agents: HashSet<String>,
}

fn check_status(status: &str) -> Result<(), String> {
    if STATUSES.contains(&status) {
        Ok(())
    } else {
        Err(format!("unknown status {status:?} (one of {})", STATUSES.join(", ")))
    }
}

impl Registry {
    fn pane(&self, pane: &str) -> Result<(), String> {
        if self.panes.contains_key(pane) { Ok(()) } else { Err(format!("no pane {pane:?}")) }
    }

    fn agent(&self, pane: &str) -> Result<(), String> {
        if self.agents.contains(pane) { Ok(()) } else { Err(format!("no agent on pane {pane:?}")) }
    }

    /// Applies `command` to `sim`; the extra fields of the ack on success.
    pub fn apply(&mut self, sim: &HerdrSim, command: &Command) -> Result<Value, String> {
        match command {
            Command::AddWorkspace { id, label } => {
                if !self.workspaces.insert(id.clone()) {
                    return Err(format!("workspace {id:?} exists"));
                }
                sim.add_workspace(id, label);
            }
            Command::AddPane { workspace, pane, cwd } => {
                if !self.workspaces.contains(workspace) {
                    return Err(format!("no workspace {workspace:?}"));
                }
                if self.panes.contains_key(pane) {
                    return Err(format!("pane {pane:?} exists"));
                }
                self.panes.insert(pane.clone(), workspace.clone());
                sim.add_pane(workspace, pane, cwd);
            }
            Command::AddAgent { pane, kind, status, name } => {
                self.pane(pane)?;
                check_status(status)?;
                if !self.agents.insert(pane.clone()) {
                    return Err(format!("pane {pane:?} already has an agent"));
                }
                sim.add_named_agent(pane, kind, status, name.as_deref());
            }
            Command::SetStatus { pane, status, output } => {
                self.agent(pane)?;
                check_status(status)?;
                if let Some(output) = output {
                    sim.set_pane_text(pane, output);
                }
                sim.set_agent_status(pane, status);
            }
            Command::SetTitle { pane, title } => {
                self.pane(pane)?;
                sim.set_terminal_title(pane, title);
            }
            Command::DetectAgent { pane, kind, name } => {
                self.pane(pane)?;
                if !self.agents.insert(pane.clone()) {
                    return Err(format!("pane {pane:?} already has an agent"));
                }
                sim.detect_agent(pane, kind, name.as_deref());
            }
            Command::ExitPane { pane } => {
                self.pane(pane)?;
                self.panes.remove(pane);
                self.agents.remove(pane);
                sim.exit_pane(pane);
            }
            Command::SetCwd { pane, cwd } => {
                self.pane(pane)?;
                sim.set_pane_cwd(pane, cwd);
            }
            Command::Requests => return Ok(json!({"count": sim.request_count()})),
            Command::RemoveAgent { pane } => {
                self.agent(pane)?;
                self.agents.remove(pane);
                sim.remove_agent(pane);
            }
            Command::RemovePane { pane } => {
                self.pane(pane)?;
                self.panes.remove(pane);
                self.agents.remove(pane);
                sim.close_pane(pane);
            }
            Command::Subscribers => return Ok(json!({"count": sim.subscriber_count()})),
            Command::Stop => {}
        }
        Ok(json!({}))
    }
}
