//! Wiring the runtime's Herdr pieces to a simulator: short time budgets, a fake
//! `herdr` CLI that prints a schema, a tool context.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use herdr_mcp::herdr::visibility::AgentVisibility;
use herdr_mcp::herdr::{HerdrConfig, HerdrService, Timeouts};
use herdr_mcp::policy::Policy;
use herdr_mcp::push::PushBus;
use herdr_mcp::runtime_info::RuntimeInfo;
use herdr_mcp::tools::{ToolContext, ToolOutput, ToolRegistry};
use serde_json::{Value, json};

/// Budgets small enough that a test of a silent socket takes well under a second.
pub fn fast_timeouts() -> Timeouts {
    Timeouts {
        default: Duration::from_millis(1500),
        max: Duration::from_secs(3),
        ping: Duration::from_millis(400),
        snapshot: Duration::from_millis(400),
        agent_get: Duration::from_millis(400),
        pane_split: Duration::from_millis(400),
        schema_cli: Duration::from_secs(5),
        resubscribe: Duration::from_secs(20),
        resnapshot: Duration::from_secs(30),
        poll: Duration::from_millis(300),
        backoff_initial: Duration::from_millis(20),
        backoff_max: Duration::from_millis(100),
    }
}

pub fn config(socket: &Path) -> HerdrConfig {
    HerdrConfig {
        socket_path: socket.to_path_buf(),
        herdr_bin: None,
        timeouts: fast_timeouts(),
        visibility: AgentVisibility::All,
    }
}

/// A schema document shaped like `herdr api schema --json` (protocol 20), covering
/// the methods the simulator serves.
pub fn schema_document() -> Value {
    let variant = |method: &str, def: &str| {
        json!({"type": "object", "required": ["method", "params"], "properties": {
            "id": {"type": "string"},
            "method": {"const": method, "type": "string"},
            "params": {"$ref": format!("#/schemas/request/$defs/{def}")}}})
    };
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "protocol": 20,
        "schema_version": 1,
        "schemas": {
            "request": {
                "oneOf": [
                    variant("ping", "EmptyParams"),
                    variant("session.snapshot", "EmptyParams"),
                    variant("workspace.list", "EmptyParams"),
                    variant("tab.list", "TabListParams"),
                    variant("pane.list", "PaneListParams"),
                    variant("pane.read", "PaneReadParams"),
                    variant("pane.send_text", "PaneSendTextParams"),
                    variant("agent.list", "EmptyParams"),
                    variant("agent.get", "AgentTarget"),
                    variant("agent.prompt", "AgentPromptParams"),
                    variant("agent.rename", "AgentRenameParams"),
                    variant("events.subscribe", "EventsSubscribeParams")
                ],
                "$defs": {
                    "EmptyParams": {"type": "object", "properties": {}},
                    "TabListParams": {"type": "object", "properties": {"workspace_id": {"type": ["string", "null"]}}},
                    "PaneListParams": {"type": "object", "properties": {"workspace_id": {"type": ["string", "null"]}}},
                    "ReadSource": {"type": "string", "enum": ["visible", "recent", "recent_unwrapped", "detection"]},
                    "ReadFormat": {"type": "string", "enum": ["text", "ansi"]},
                    "PaneReadParams": {"type": "object", "required": ["pane_id", "source"], "properties": {
                        "pane_id": {"type": "string"},
                        "source": {"$ref": "#/schemas/request/$defs/ReadSource"},
                        "lines": {"type": ["integer", "null"], "minimum": 0},
                        "format": {"$ref": "#/schemas/request/$defs/ReadFormat"},
                        "strip_ansi": {"type": "boolean"}}},
                    "PaneSendTextParams": {"type": "object", "required": ["pane_id", "text"], "properties": {
                        "pane_id": {"type": "string"}, "text": {"type": "string"}}},
                    "AgentTarget": {"type": "object", "required": ["target"], "properties": {"target": {"type": "string"}}},
                    "AgentRenameParams": {"type": "object", "required": ["target", "name"], "properties": {
                        "target": {"type": "string"}, "name": {"type": "string"}}},
                    "AgentStatus": {"type": "string", "enum": ["idle", "working", "blocked", "done", "unknown"]},
                    "AgentPromptParams": {"type": "object", "required": ["target", "text"], "properties": {
                        "target": {"type": "string"}, "text": {"type": "string"},
                        "wait": {"anyOf": [{"type": "null"}, {"type": "object", "properties": {
                            "until": {"type": "array", "items": {"$ref": "#/schemas/request/$defs/AgentStatus"}},
                            "timeout_ms": {"type": ["integer", "null"]}}}]}}},
                    "EventsSubscribeParams": {"type": "object", "required": ["subscriptions"], "properties": {
                        "subscriptions": {"type": "array", "items": {"type": "object"}}}}
                }
            }
        }
    })
}

/// Writes a `herdr` executable into `dir` that prints the schema for
/// `herdr api schema --json` and fails for anything else.
pub fn fake_herdr_cli(dir: &Path) -> PathBuf {
    let schema = dir.join("schema.json");
    std::fs::write(&schema, serde_json::to_vec_pretty(&schema_document()).unwrap()).unwrap();
    let bin = dir.join("herdr");
    let script = format!(
        "#!/bin/sh\nif [ \"$1 $2 $3\" = \"api schema --json\" ]; then cat '{}'; else echo unsupported >&2; exit 2; fi\n",
        schema.display()
    );
    std::fs::write(&bin, script).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

pub fn context(service: Option<Arc<HerdrService>>, push: Option<Arc<PushBus>>, readonly: bool) -> Arc<ToolContext> {
    let mut ctx = ToolContext::new(RuntimeInfo::new(), Policy::for_tests(vec![]).with_readonly(readonly));
    ctx.services.herdr = service;
    ctx.services.push = push;
    Arc::new(ctx)
}

pub async fn call(ctx: &Arc<ToolContext>, tool: &str, args: Value) -> ToolOutput {
    ToolRegistry::standard().call(ctx, tool, Some(args)).await
}

/// A runtime's Herdr service over a simulator, with a tool context on it. Dropping
/// it stops the service's background tasks.
pub struct Rig {
    pub sim: super::HerdrSim,
    pub service: Arc<HerdrService>,
    pub ctx: Arc<ToolContext>,
    pub cancel: tokio_util::sync::CancellationToken,
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// Builds the service on `cfg` for `sim` and a context on it. With `live`, the
/// service is started and this waits (up to `wait`) until its cache is live.
pub async fn rig_on(sim: super::HerdrSim, cfg: HerdrConfig, live: bool, readonly: bool, wait: Duration) -> Rig {
    let service = HerdrService::new(cfg, None);
    let cancel = tokio_util::sync::CancellationToken::new();
    if live {
        service.start(cancel.clone());
        assert!(service.cache.wait_for(wait, |c| c.is_live()).await, "the Herdr cache never went live");
    }
    let ctx = context(Some(Arc::clone(&service)), None, readonly);
    Rig { sim, service, ctx, cancel }
}
