//! Delivery of a `herdr_exec` command through the workspace's Herdr utility pane
//! (the `utility_pane` backend, spec §1.17; the mechanism is in
//! `crate::herdr::utility_pane`). The result is an ordinary exec session.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::json;

use super::ToolOutput;
use crate::exec::workspaces::Workspace;
use crate::exec::{ExecRegistry, ExitReport, Session};
use crate::herdr::HerdrService;
use crate::herdr::utility_pane::{self, Handoff, PaneError};

/// How long one wait for a session's end lasts before the pane is looked at again
/// (cache changes wake the loop far sooner in practice).
const SESSION_WATCH_LIMIT: std::time::Duration = std::time::Duration::from_secs(3600);

/// Why nothing (or possibly something) ran.
pub enum Undelivered {
    /// Refused before anything was typed: the idempotency key is given back.
    NotDelivered(ToolOutput),
    /// Typing may or may not have reached the pane: the outcome is recorded.
    Uncertain(ToolOutput),
}

/// `utility_pane_unavailable`: Herdr could not provide the pane; nothing ran.
pub fn unavailable(workspace: &str, message: impl Into<String>, herdr_code: Option<&str>) -> ToolOutput {
    ToolOutput::code(
        "utility_pane_unavailable",
        message,
        json!({
            "backend": "utility_pane",
            "workspace": workspace,
            "herdr_code": herdr_code,
            "delivery_state": "not_delivered",
            "safe_retry_mode": "retry_after_control_plane_recovery",
            "execution": {"started": false, "completed": false, "exit_code": null},
            "failure_origin": "herdr_control_plane",
            "hint": "Check that Herdr runs (herdr_inspect), then call again; nothing was run.",
        }),
    )
}

/// `utility_pane_not_ready`: the pane is busy; nothing ran.
fn not_ready(workspace: &str, pane_id: &str, detail: &str) -> ToolOutput {
    ToolOutput::code(
        "utility_pane_not_ready",
        format!("the utility pane {pane_id} cannot take a command now: {detail}"),
        json!({
            "backend": "utility_pane",
            "workspace": workspace,
            "pane_id": pane_id,
            "retryable": true,
            "retry_after_ms": 500,
            "conflict_key": format!("workspace:{workspace}:utility_pane"),
            "safe_retry_mode": "retry_after_resource_release",
            "delivery_state": "not_delivered",
            "execution": {"started": false, "completed": false, "exit_code": null},
            "hint": "Wait for the program in the utility pane to finish (or stop it), then call again.",
        }),
    )
}

fn pane_failure(workspace: &str, e: PaneError) -> ToolOutput {
    match e {
        PaneError::Unavailable(err) => unavailable(workspace, format!("Herdr could not provide the utility pane: {}", err.message), Some(&err.code)),
        PaneError::NotReady { pane_id, detail } => not_ready(workspace, &pane_id, &detail),
    }
}

/// A name for one handoff that no other call of this process shares.
fn op_name() -> String {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    format!("up_{:x}-{:x}-{:x}", std::process::id(), nanos, SEQ.fetch_add(1, Ordering::Relaxed))
}

/// Prepares the pane, starts the watcher session, then types the command. Returns
/// the session and the pane it runs in.
pub async fn deliver(
    herdr: Option<Arc<HerdrService>>,
    registry: &Arc<ExecRegistry>,
    root: &Path,
    ws: &Workspace,
    command: &str,
) -> Result<(Arc<Session>, String), Undelivered> {
    let Some(herdr) = herdr else {
        return Err(Undelivered::NotDelivered(unavailable(&ws.id, "this runtime has no Herdr connection for the utility pane", None)));
    };
    let client = &herdr.client;
    let pane_id = utility_pane::prepare(client, &ws.id, root).await.map_err(|e| Undelivered::NotDelivered(pane_failure(&ws.id, e)))?;
    utility_pane::check_foreground(client, &pane_id).await.map_err(|e| Undelivered::NotDelivered(pane_failure(&ws.id, e)))?;
    let dir = utility_pane::handoff_dir().map_err(|e| {
        Undelivered::NotDelivered(unavailable(&ws.id, format!("cannot prepare the handoff directory: {e}"), None))
    })?;
    let handoff = Handoff::new(&dir, &op_name());
    let session = registry.start(root, &dir, &handoff.watcher(), Some(&ws.id), ExitReport::AwaitedByCaller).await.map_err(|e| {
        Undelivered::NotDelivered(unavailable(&ws.id, format!("cannot start watching the utility pane: {e}"), None))
    })?;
    let line = handoff.pane_line(&registry.config().shell, root, command);
    if let Err(e) = client.call("pane.send_text", json!({"pane_id": pane_id, "text": line})).await {
        // The watcher would wait for a status that never comes.
        registry.kill(&session);
        if e.is_unavailable() {
            return Err(Undelivered::NotDelivered(unavailable(&ws.id, format!("Herdr went away before the command was typed: {}", e.message), Some(&e.code))));
        }
        return Err(Undelivered::Uncertain(ToolOutput::code(
            "exec_start_failed",
            format!("typing the command into {pane_id} failed; it may or may not have run: {}", e.message),
            json!({
                "backend": "utility_pane", "workspace": ws.id, "pane_id": pane_id, "command": command,
                "herdr_code": e.code,
                "delivery_state": "unknown",
                "execution": {"started": null, "completed": null, "exit_code": null},
                "failure_origin": "unknown",
                "hint": "Check the utility pane (herdr_inspect / pane read) before running it again.",
            }),
        )));
    }
    herdr.pane_sessions.record(&session.id, &pane_id);
    watch_pane(Arc::clone(&herdr), Arc::clone(registry), Arc::clone(&session), pane_id.clone());
    Ok((session, pane_id))
}

/// Ends the watcher when its pane closes: the status it waits for can no longer come.
/// The pane counts as closed only once the event cache has seen it and then lost it,
/// so a pane too new for the cache is not mistaken for a closed one.
fn watch_pane(herdr: Arc<HerdrService>, registry: Arc<ExecRegistry>, session: Arc<Session>, pane_id: String) {
    tokio::spawn(async move {
        let mut changes = herdr.cache.changes();
        let mut seen = false;
        loop {
            if let Some(view) = herdr.cache.live_view() {
                let present = view.topology.pane(&pane_id).is_some();
                if seen && !present {
                    tracing::info!(session = %session.id, pane = %pane_id, "utility pane closed; ending its session");
                    registry.kill(&session);
                    return;
                }
                seen |= present;
            }
            tokio::select! {
                _ = session.wait(SESSION_WATCH_LIMIT) => return,
                changed = changes.changed() => if changed.is_err() { return },
            }
        }
    });
}
