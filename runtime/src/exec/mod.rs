//! Exec sessions: commands run by `<shell> -lc` in their own process group, with
//! bounded output rings read by offset, kill by process group, pruning, and
//! restart safety through the state database.
//!
//! - [`registry`]: spawning, lookup, kill, pruning, orphan recovery.
//! - [`session`], [`output`], [`ring`]: one session's output and exit.
//! - [`signal`], [`procfs`]: ending process groups that are provably ours.
//! - [`shell`]: which shell and PATH commands get.
//! - [`idempotency`]: the `intent` / `idempotency_key` ledger flow of `herdr_exec`.
//! - [`workspaces`]: where `herdr_exec` finds workspaces (Herdr or managed roots).
//! - [`structured`], [`steps`]: result and argument shaping for `herdr_exec`.

pub mod backend;
pub mod compact;
pub mod idempotency;
pub mod output;
pub mod procfs;
pub mod registry;
pub mod ring;
pub mod session;
pub mod shell;
pub mod signal;
pub mod steps;
pub mod structured;
pub mod workspaces;

use std::collections::HashMap;
use std::sync::Arc;

pub use output::Stream;
pub use registry::{ExecCompleted, ExecConfig, ExecRegistry, ExecStats, ExitReport, KillOutcome, Lookup};
pub use session::{Exit, Session};

use crate::state::StateError;

/// Every process of a session inherits `HERDR_MCP_EXEC_ID=<session id>`; after a
/// restart it is how orphans are recognised as ours.
pub const EXEC_ID_ENV: &str = "HERDR_MCP_EXEC_ID";

/// What startup recovery found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecoveryReport {
    /// Sessions of a dead runtime whose processes were still running and were ended.
    pub reaped: usize,
    /// Sessions of a dead runtime whose processes were already gone.
    pub detached: usize,
    /// Ledger operations left open by a dead runtime, now settled as interrupted.
    pub interrupted_operations: usize,
}

/// Startup recovery: end orphaned process groups of an earlier runtime process and
/// settle the ledger rows it left open. Run once, before serving tool calls.
pub async fn recover(registry: &Arc<ExecRegistry>) -> Result<RecoveryReport, StateError> {
    let alive = registry.db().run(|c| crate::state::boots::alive(c)).await?;
    let outcomes = registry.recover_orphans(&alive).await?;
    let reaped = outcomes.iter().filter(|(_, s)| s == "reaped_on_restart").count();
    let detached = outcomes.len() - reaped;
    let map: HashMap<String, String> = outcomes.into_iter().collect();
    let interrupted_operations = idempotency::recover_ledger(registry.db(), map, alive.clone()).await?;
    registry.db().run(move |c| crate::state::boots::forget_dead(c, &alive)).await?;
    Ok(RecoveryReport { reaped, detached, interrupted_operations })
}

/// The state database and the exec registry over it, as a runtime process holds them.
pub type ExecServices = (Arc<crate::state::StateDb>, Arc<ExecRegistry>);

/// Opens the state database in `state_dir` and builds the exec registry over it,
/// for a runtime process. Recovery ([`recover`]) still has to run once inside the
/// async runtime before tool calls are served.
pub fn open(state_dir: &std::path::Path, boot_id: &str) -> Result<ExecServices, String> {
    let db = Arc::new(crate::state::StateDb::open(state_dir, boot_id).map_err(|e| e.to_string())?);
    let config = ExecConfig::from_env().map_err(|e| e.to_string())?;
    Ok((Arc::clone(&db), ExecRegistry::new(db, config)))
}

/// The `exec_sessions` part of `/health`.
pub fn health(registry: Option<&ExecRegistry>) -> serde_json::Value {
    match registry {
        Some(r) => {
            let s = r.stats();
            serde_json::json!({"status": "ready", "ready": true, "count": s.count, "running": s.running})
        }
        None => serde_json::json!({
            "status": "not_available",
            "ready": false,
            "message": "command execution is off: the state database could not be opened (see the runtime log)",
        }),
    }
}

/// Startup of the exec subsystem for `herdr-mcp serve`: resolves the state
/// directory (`--state-dir`, `HERDR_MCP_STATE_DIR`, XDG, home) and opens it.
///
/// An explicitly chosen directory that cannot be used is an error (the user asked
/// for it); a failing default only turns exec off, logged, so that the file and Git
/// tools still serve.
pub fn startup(
    state_dir_flag: Option<&std::path::Path>,
    boot_id: &str,
) -> Result<Option<ExecServices>, String> {
    let (dir, explicit) = crate::state::state_dir_from_env(state_dir_flag);
    let opened = dir.map_err(|e| e.to_string()).and_then(|dir| open(&dir, boot_id));
    match opened {
        Ok(services) => {
            tracing::info!(state_db = %services.0.path().display(), "exec sessions ready");
            Ok(Some(services))
        }
        Err(e) if explicit => Err(e),
        Err(e) => {
            tracing::error!("command execution is off: {e}");
            Ok(None)
        }
    }
}

/// Runs [`recover`] and logs what it did; a failure is logged, never fatal.
pub async fn recover_logged(registry: &Arc<ExecRegistry>) {
    match recover(registry).await {
        Ok(r) if r == RecoveryReport::default() => {}
        Ok(r) => tracing::info!(
            reaped = r.reaped,
            detached = r.detached,
            interrupted_operations = r.interrupted_operations,
            "recovered exec state left by an earlier runtime process"
        ),
        Err(e) => tracing::error!("exec recovery after restart failed: {e}"),
    }
}

/// Calls `f` for every session that ends from now on (the push bus turns these into
/// `exec_completed`). A subscriber that falls more than the backlog behind skips
/// the missed events rather than stalling sessions; the task ends with the registry.
pub fn on_completion(
    registry: &Arc<ExecRegistry>,
    f: impl Fn(ExecCompleted) + Send + 'static,
) -> tokio::task::JoinHandle<()> {
    let mut rx = registry.subscribe();
    tokio::spawn(async move {
        loop {
            match rx.recv().await {
                Ok(done) => f(done),
                Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!(missed = n, "exec completion subscriber fell behind");
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            }
        }
    })
}
