//! Pieces the four exec tools share: finding the registry and a session, the
//! busy check, root checks and the progress object.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Value, json};

use super::{ToolContext, ToolOutput};
use crate::exec::workspaces::{StandaloneWorkspaces, WorkspaceSource};
use crate::exec::{ExecRegistry, Lookup, Session};

/// Largest accepted command string (bytes). A command longer than this is almost
/// surely data that belongs in a file.
pub const MAX_COMMAND_BYTES: usize = 65_536;

/// The registry, or the refusal a runtime without exec support gives.
pub fn registry(ctx: &ToolContext) -> Result<Arc<ExecRegistry>, ToolOutput> {
    ctx.services.exec.clone().ok_or_else(|| {
        ToolOutput::refusal(
            "exec_unavailable",
            "command execution is not available in this runtime: its state database could not be opened (see the runtime log)",
            json!({}),
        )
    })
}

/// The workspace source: live Herdr workspaces when attached, else one per root.
pub fn workspace_source(ctx: &ToolContext) -> Arc<dyn WorkspaceSource> {
    ctx.services
        .workspaces
        .clone()
        .unwrap_or_else(|| Arc::new(StandaloneWorkspaces::from_policy(&ctx.policy)) as Arc<dyn WorkspaceSource>)
}

/// A live session, or the not-found / recovered-after-restart refusal.
pub async fn live_session(registry: &ExecRegistry, session_id: &str) -> Result<Arc<Session>, ToolOutput> {
    match registry.lookup(session_id).await {
        Ok(Lookup::Live(s)) => Ok(s),
        Ok(Lookup::NotFound) => Err(ToolOutput::refusal(
            "session_not_found",
            format!("no exec session {session_id}; sessions are forgotten 1 hour after they end"),
            json!({"session_id": session_id}),
        )),
        Ok(Lookup::OtherRuntime) => Err(ToolOutput::refusal(
            "session_not_found",
            format!("session {session_id} belongs to another herdr-mcp process that shares this state directory; ask that runtime"),
            json!({"session_id": session_id}),
        )),
        Ok(Lookup::Recovered { recovery_state, row }) => Err(ToolOutput::refusal(
            "session_recovered_after_restart",
            format!("session {session_id} belonged to an earlier runtime process; its output did not survive the restart"),
            json!({
                "session_id": session_id,
                "recovery_state": recovery_state,
                "exit_code": row.exit_code,
                "signal": row.signal,
                "hint": recovery_hint(&recovery_state),
            }),
        )),
        Err(e) => Err(ToolOutput::refusal("state_unavailable", format!("cannot look up {session_id}: {e}"), json!({}))),
    }
}

fn recovery_hint(state: &str) -> &'static str {
    match state {
        "closed_before_restart" => "The command had finished before the restart; exit_code/signal are its final status.",
        "reaped_on_restart" => "The command was still running at the restart and was stopped then. Check its effects before running it again.",
        _ => "The command was running when the runtime stopped and was gone afterwards; its outcome is unknown. Check its effects before running it again.",
    }
}

/// `{bytes_read, bytes_total, elapsed_ms}`.
pub fn progress(session: &Session, bytes_read: u64) -> Value {
    let bytes_total = session.with_output(|o| o.bytes_total());
    json!({"bytes_read": bytes_read, "bytes_total": bytes_total, "elapsed_ms": session.elapsed_ms()})
}

/// Step 3 of the mutation gate: agents working in `root` block the call unless
/// `confirm_busy`; with it, they are returned as `warnings`.
pub async fn busy_check(ctx: &ToolContext, root: &std::path::Path, confirm_busy: bool) -> Result<Option<Value>, ToolOutput> {
    let working = workspace_source(ctx).working_agents(root.to_path_buf()).await;
    if working.is_empty() {
        return Ok(None);
    }
    if confirm_busy {
        return Ok(Some(json!({"working": working})));
    }
    Err(ToolOutput::refusal(
        "agent_working",
        format!("an agent is working in {}; pass confirm_busy:true to run anyway", root.display()),
        json!({
            "root": root.display().to_string(),
            "working": working,
            "hint": "Wait until the agent is done (herdr_since shows it), or call again with confirm_busy:true if the user agrees to run it now.",
        }),
    ))
}

/// Every root a command may run in: the managed roots in force plus live workspace roots.
pub async fn managed_roots(ctx: &ToolContext) -> Vec<PathBuf> {
    let mut roots = ctx.policy.managed_roots().to_vec();
    if let Some(source) = &ctx.services.workspaces {
        for w in source.workspaces().await {
            for r in w.roots {
                if !roots.contains(&r) {
                    roots.push(r);
                }
            }
        }
    }
    roots
}

/// `command` must hold something besides whitespace and fit the byte limit.
pub fn check_command(command: &str) -> Result<(), ToolOutput> {
    if command.trim().is_empty() {
        return Err(super::common::invalid_params("command must not be empty"));
    }
    if command.len() > MAX_COMMAND_BYTES {
        return Err(super::common::invalid_params(format!("command must be at most {MAX_COMMAND_BYTES} bytes")));
    }
    if command.contains('\0') {
        return Err(super::common::invalid_params("command must not contain NUL bytes"));
    }
    Ok(())
}
