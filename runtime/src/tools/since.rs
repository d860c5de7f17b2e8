//! `herdr_since`: what happened in Herdr since a cursor — events from the event
//! cache's ring, plus the current agents and workspaces.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::common::{MAX_SAFE_INTEGER, object_schema, str_arg, u64_arg};
use super::{Access, BoxFuture, Handler, ToolContext, ToolOutput, ToolSpec};
use crate::herdr::HerdrService;
use crate::herdr::roots::pane_cwd;
use crate::herdr::snapshot::fetch_topology;
use crate::herdr::topology::{Topology, str_of};

pub const CURSOR_RESET_WARNING: &str = "cursor_reset_boot_or_rollover";
pub const CACHE_NOT_LIVE_WARNING: &str = "event_cache_not_live";

pub fn spec() -> ToolSpec {
    ToolSpec {
        name: "herdr_since",
        description: concat!(
            "Catch up on Herdr: the events seen since cursor (agents changing status, panes and workspaces ",
            "appearing or closing), together with every agent's current status and the open workspaces. Start ",
            "with cursor 0 (the latest 64 events), then pass back the cursor this call returns to get only ",
            "newer events. If boot_id differs from the previous answer, or cursor_reset is true, the runtime ",
            "restarted: start again from 0. workspace narrows everything to one workspace (id or label)."
        ),
        input_schema: schema,
        access: Access::Read,
        read_only_hint: false,
        handler: Handler::Async(run),
    }
}

fn schema() -> Value {
    object_schema(
        json!({
            "cursor": {"type": "integer", "minimum": 0, "maximum": MAX_SAFE_INTEGER, "default": 0, "description": "The cursor returned by the previous call; 0 for the latest events."},
            "workspace": {"type": "string", "minLength": 1, "maxLength": 256, "description": "Workspace id or label to narrow the answer to."},
        }),
        &[],
    )
}

/// The workspace id a filter means: an id or label match, else the string itself.
pub fn resolve_workspace(topology: &Topology, filter: &str) -> String {
    topology
        .workspaces
        .iter()
        .find(|w| str_of(w, "workspace_id") == Some(filter))
        .or_else(|| topology.workspaces.iter().find(|w| str_of(w, "label") == Some(filter)))
        .and_then(|w| str_of(w, "workspace_id"))
        .unwrap_or(filter)
        .to_string()
}

fn agents_json(herdr: &HerdrService, t: &Topology, ws: Option<&str>) -> (Vec<Value>, usize) {
    let visibility = &herdr.config.visibility;
    let in_scope: Vec<&Value> = t.agents.iter().filter(|a| ws.is_none_or(|w| str_of(a, "workspace_id") == Some(w))).collect();
    let hidden = in_scope.iter().filter(|a| !visibility.allows_agent(a)).count();
    let agents = in_scope
        .into_iter()
        .filter(|a| visibility.allows_agent(a))
        .map(|a| {
            let pane = str_of(a, "pane_id").unwrap_or_default();
            json!({
                "name": a.get("name").or_else(|| a.get("agent")),
                "pane": pane,
                "status": a.get("agent_status"),
                "workspace": a.get("workspace_id"),
                "cwd": a.get("cwd"),
                "started_at": a.get("agent_session").and_then(|s| s.get("started_at")),
                "last_activity_at": herdr.cache.last_activity(pane),
                "state_change_seq": a.get("state_change_seq"),
                "terminal_title": a.get("terminal_title"),
                "session_ref": a.get("agent_session"),
            })
        })
        .collect();
    (agents, hidden)
}

fn workspaces_json(t: &Topology, ws: Option<&str>) -> Vec<Value> {
    t.workspaces
        .iter()
        .filter(|w| ws.is_none_or(|id| str_of(w, "workspace_id") == Some(id)))
        .map(|w| {
            let id = str_of(w, "workspace_id").unwrap_or_default();
            let panes: Vec<&Value> = t.panes.iter().filter(|p| str_of(p, "workspace_id") == Some(id)).collect();
            json!({
                "workspace_id": id,
                "label": w.get("label"),
                "cwd": w.get("cwd").cloned().or_else(|| panes.iter().find_map(|p| pane_cwd(t, p)).map(Value::from)),
                "panes": panes.iter().filter_map(|p| p.get("pane_id")).collect::<Vec<_>>(),
                "tabs": t.tabs.iter().filter(|x| str_of(x, "workspace_id") == Some(id)).filter_map(|x| x.get("tab_id")).collect::<Vec<_>>(),
            })
        })
        .collect()
}

fn run(ctx: Arc<ToolContext>, args: Map<String, Value>) -> BoxFuture<ToolOutput> {
    Box::pin(async move {
        let Some(herdr) = ctx.services.herdr.clone() else { return crate::herdr::not_configured() };
        let cursor = u64_arg(&args, "cursor", 0);
        let mut warnings: Vec<String> = vec![];
        let topology = match herdr.cache.live_view() {
            Some(view) => view.topology,
            None => match fetch_topology(&herdr.client).await {
                Ok((t, w)) => {
                    warnings.push(CACHE_NOT_LIVE_WARNING.into());
                    warnings.extend(w);
                    t
                }
                Err(e) => return crate::herdr::failure_output(&e, json!({"boot_id": ctx.info.boot_id})),
            },
        };
        let ws = str_arg(&args, "workspace").map(|f| resolve_workspace(&topology, f));
        let page = herdr.cache.history_page(cursor, |e| ws.as_deref().is_none_or(|w| e.workspace_id() == Some(w)));
        if page.cursor_reset {
            warnings.push(CURSOR_RESET_WARNING.into());
        }
        let (agents, hidden) = agents_json(&herdr, &topology, ws.as_deref());
        let mut out = json!({
            "ok": true,
            "boot_id": ctx.info.boot_id,
            "cursor": page.cursor,
            "cursor_reset": page.cursor_reset,
            "event_count": page.events.len(),
            "events": page.events.iter().map(|e| e.to_json()).collect::<Vec<_>>(),
            "agents": agents,
            "workspaces": workspaces_json(&topology, ws.as_deref()),
            "hint": "Call again with cursor set to this answer's cursor; if boot_id changes or cursor_reset is true, start over from 0.",
        });
        if let (Value::Object(obj), Value::Object(report)) = (&mut out, herdr.config.visibility.report(hidden)) {
            obj.extend(report);
        }
        if !warnings.is_empty() {
            out["warnings"] = json!(warnings);
        }
        ToolOutput::payload(out)
    })
}
