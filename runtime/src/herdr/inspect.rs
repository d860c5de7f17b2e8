//! The live half of `herdr_inspect`: Herdr's version, its workspaces, tabs, panes
//! and agents, and the projects derived from them (spec §1.2, §2.1, §4). The
//! standalone half (build, policy, exec sessions) is the tool's own.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::{Map, Value, json};

use super::HerdrService;
use super::error::HerdrError;
use super::roots::{self, pane_cwd};
use super::snapshot::fetch_topology;
use super::topology::{Topology, str_of};

/// Why the live part could not be produced.
#[derive(Debug, Clone)]
pub struct InspectFailure {
    pub error: HerdrError,
    /// `ping` or `snapshot`.
    pub phase: &'static str,
}

impl InspectFailure {
    /// The tool result for this failure.
    pub fn to_output(&self) -> crate::tools::ToolOutput {
        let code_override = (self.phase == "snapshot" && !self.error.is_unavailable()).then_some("snapshot_unavailable");
        let extra = json!({"context": "herdr_inspect", "failure_phase": self.phase});
        match code_override {
            Some(code) => crate::tools::ToolOutput::code(code, self.error.message.clone(), extra),
            None => super::failure_output(&self.error, extra),
        }
    }
}

fn agent_label(a: &Value) -> Option<&str> {
    str_of(a, "name").or_else(|| str_of(a, "agent"))
}

/// Live fields of `herdr_inspect`, to be merged into its payload:
/// `focused_workspace, focused_pane, workspaces, tabs, panes, agents,
/// shared_projects, herdr_version, protocol, agent_visibility, agent_allow,
/// agents_hidden, capability_inventory, managed_git_roots, default_cwd, warnings`.
pub async fn live_parts(service: &HerdrService) -> Result<Map<String, Value>, InspectFailure> {
    let pong = service.client.ping().await.map_err(|error| InspectFailure { error, phase: "ping" })?;
    let (topology, warnings, source) = match service.cache.live_view() {
        Some(view) => (view.topology, view.warnings, "event_cache"),
        None => {
            let (t, w) = fetch_topology(&service.client).await.map_err(|error| InspectFailure { error, phase: "snapshot" })?;
            let source = if w.is_empty() { "session.snapshot" } else { "list_apis" };
            (t, w, source)
        }
    };
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let projects = roots::derive_projects(&topology, home.as_deref()).await;
    let mut out = describe(&topology, &projects, service).await;
    out.insert("herdr_version".into(), json!(pong.version));
    out.insert("protocol".into(), json!(pong.protocol));
    out.insert("capability_inventory".into(), json!({"source": source, "herdr_capabilities": pong.raw.get("capabilities")}));
    if !warnings.is_empty() {
        out.insert("warnings".into(), json!(warnings));
    }
    Ok(out)
}

async fn describe(t: &Topology, projects: &[roots::Project], service: &HerdrService) -> Map<String, Value> {
    let visibility = &service.config.visibility;
    let hidden_panes: Vec<&str> =
        t.agents.iter().filter(|a| !visibility.allows_agent(a)).filter_map(|a| str_of(a, "pane_id")).collect();

    let tabs: Vec<Value> = t
        .tabs
        .iter()
        .map(|tab| json!({"id": tab.get("tab_id"), "workspace": tab.get("workspace_id"), "label": tab.get("label")}))
        .collect();

    let panes: Vec<Value> = t
        .panes
        .iter()
        .map(|p| {
            let id = str_of(p, "pane_id").unwrap_or_default();
            let agent = t.agent_for_pane(id).filter(|_| !hidden_panes.contains(&id)).map(|a| {
                json!({
                    "name": agent_label(a),
                    "status": a.get("agent_status"),
                    "terminal_title": a.get("terminal_title"),
                    "state_change_seq": a.get("state_change_seq"),
                })
            });
            json!({"id": id, "workspace": p.get("workspace_id"), "cwd": pane_cwd(t, p), "agent": agent})
        })
        .collect();

    let agents: Vec<Value> = t
        .agents
        .iter()
        .filter(|a| visibility.allows_agent(a))
        .map(|a| {
            json!({
                "name": agent_label(a),
                "kind": a.get("agent"),
                "pane": a.get("pane_id"),
                "status": a.get("agent_status"),
                "workspace": a.get("workspace_id"),
                "cwd": a.get("cwd"),
                "terminal_title": a.get("terminal_title"),
                "state_change_seq": a.get("state_change_seq"),
                "interactive_ready": a.get("interactive_ready"),
                "session_ref": a.get("agent_session"),
                "capabilities": ["agent.prompt", "agent.read", "agent.wait", "agent.send_keys"],
            })
        })
        .collect();

    let mut workspaces = vec![];
    for w in &t.workspaces {
        let id = str_of(w, "workspace_id").unwrap_or_default();
        let ws_panes: Vec<&Value> = t.panes.iter().filter(|p| str_of(p, "workspace_id") == Some(id)).collect();
        let mut ws_projects = vec![];
        for project in projects.iter().filter(|p| p.workspace_ids.iter().any(|x| x == id)) {
            ws_projects.push(roots::project_json(project, id).await);
        }
        let cwd = str_of(w, "cwd")
            .map(str::to_string)
            .or_else(|| w.get("worktree").and_then(|wt| str_of(wt, "checkout_path")).map(str::to_string))
            .or_else(|| ws_panes.iter().find_map(|p| pane_cwd(t, p)));
        workspaces.push(json!({
            "id": id,
            "label": w.get("label"),
            "cwd": cwd,
            "tabs": t.tabs.iter().filter(|tab| str_of(tab, "workspace_id") == Some(id)).filter_map(|tab| tab.get("tab_id")).collect::<Vec<_>>(),
            "panes": ws_panes.iter().filter_map(|p| p.get("pane_id")).collect::<Vec<_>>(),
            "focused": t.focused_workspace_id.as_deref() == Some(id) || w.get("focused") == Some(&Value::Bool(true)),
            "heterogeneous": ws_projects.len() > 1,
            "projects": ws_projects,
        }));
    }

    let mut shared: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for p in projects.iter().filter(|p| p.workspace_ids.len() > 1) {
        shared.insert(p.root.display().to_string(), p.workspace_ids.clone());
    }
    let shared_projects: Vec<Value> =
        shared.into_iter().map(|(root, workspaces)| json!({"root": root, "workspaces": workspaces})).collect();

    let default_cwd = t
        .focused_pane_id
        .as_deref()
        .and_then(|id| t.pane(id))
        .and_then(|p| pane_cwd(t, p))
        .or_else(|| workspaces.iter().find(|w| w["focused"] == true).and_then(|w| w["cwd"].as_str().map(str::to_string)));

    let mut out = Map::new();
    out.insert("focused_workspace".into(), json!(t.focused_workspace_id));
    out.insert("focused_pane".into(), json!(t.focused_pane_id));
    out.insert("workspaces".into(), json!(workspaces));
    out.insert("tabs".into(), json!(tabs));
    out.insert("panes".into(), json!(panes));
    out.insert("agents".into(), json!(agents));
    out.insert("shared_projects".into(), json!(shared_projects));
    out.insert(
        "managed_git_roots".into(),
        json!(projects.iter().filter(|p| p.managed).map(|p| p.root.display().to_string()).collect::<Vec<_>>()),
    );
    out.insert("default_cwd".into(), json!(default_cwd));
    if let Value::Object(report) = visibility.report(hidden_panes.len()) {
        out.extend(report);
    }
    out
}

/// Fields of the live part that replace the standalone payload's.
const LIVE_FIELDS: &[&str] = &[
    "focused_workspace",
    "focused_pane",
    "workspaces",
    "tabs",
    "panes",
    "agents",
    "shared_projects",
    "herdr_version",
    "protocol",
    "agent_visibility",
    "agent_allow",
    "agents_hidden",
    "capability_inventory",
    "warnings",
];

/// `herdr_inspect` with Herdr: the standalone payload (build, policy, exec
/// environment) overlaid with the live Herdr picture. Without a Herdr server the
/// standalone payload stands, noting why Herdr is absent; any other Herdr failure
/// is reported with its phase.
pub async fn with_live(ctx: &crate::tools::ToolContext, standalone: crate::tools::ToolOutput) -> crate::tools::ToolOutput {
    let Some(herdr) = ctx.services.herdr.clone() else { return standalone };
    if !standalone.ok() {
        return standalone;
    }
    let mut payload = standalone.payload;
    match live_parts(&herdr).await {
        Ok(mut live) => {
            let tool_count = payload.pointer("/capability_inventory/tool_count").cloned();
            for key in LIVE_FIELDS {
                if let Some(v) = live.remove(*key) {
                    payload[*key] = v;
                }
            }
            if let Some(count) = tool_count {
                payload["capability_inventory"]["tool_count"] = count;
            }
            payload["mode"] = json!("herdr");
            payload["herdr_available"] = json!(true);
            payload["herdr"] = json!({"available": true, "socket": herdr.client.socket_path().display().to_string()});
            if let Some(info) = payload.get_mut("workstation_info").and_then(Value::as_object_mut) {
                if let Some(cwd) = live.remove("default_cwd").filter(|v| !v.is_null()) {
                    info.insert("default_cwd".into(), cwd);
                }
                let mut roots: Vec<Value> = info.get("managed_git_roots").and_then(Value::as_array).cloned().unwrap_or_default();
                for r in live.remove("managed_git_roots").and_then(|v| v.as_array().cloned()).unwrap_or_default() {
                    if !roots.contains(&r) {
                        roots.push(r);
                    }
                }
                info.insert("managed_git_roots".into(), json!(roots));
                info.insert("agent_visibility".into(), json!(herdr.config.visibility.mode()));
            }
            crate::tools::ToolOutput::payload(payload)
        }
        Err(failure) if failure.error.is_unavailable() => {
            payload["herdr"] = json!({
                "available": false,
                "code": failure.error.code,
                "message": failure.error.message,
                "hint": super::error::START_HERDR_HINT,
            });
            crate::tools::ToolOutput::payload(payload)
        }
        Err(failure) => failure.to_output(),
    }
}
