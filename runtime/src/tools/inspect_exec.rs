//! The exec part of `herdr_inspect`'s `workstation_info`: which command sessions
//! this runtime holds, so a model that lost track (a new chat, a timeout) finds a
//! running build or test again instead of starting it twice.

use std::sync::Arc;

use serde_json::{Value, json};

use super::ToolContext;
use crate::exec::{Exit, Session};

/// Sessions listed at most. A busy hour of herdr_exec calls leaves hundreds of
/// ended sessions in memory; the running ones and the newest matter, and
/// `exec_sessions_diagnostics` still counts them all.
pub const EXEC_SESSIONS_SHOWN: usize = 20;
/// Characters of each command shown; commands may be 64 KiB of shell.
pub const COMMAND_SHOWN_CHARS: usize = 200;

/// `(exec_sessions, exec_sessions_ready, exec_sessions_diagnostics)`.
pub fn exec_sessions(ctx: &ToolContext) -> (Value, bool, Value) {
    let registry = ctx.services.exec.as_deref();
    let mut diagnostics = crate::exec::health(registry);
    let Some(registry) = registry else {
        return (json!([]), false, diagnostics);
    };
    // Each session's end is read once: a session ending during the sort must not
    // change its place halfway (the sort needs a consistent order).
    let mut sessions: Vec<(Option<Exit>, Arc<Session>)> = registry.list().into_iter().map(|s| (s.exit(), s)).collect();
    // Running first, then newest first, by the monotonic start time (finer than
    // the wall-clock milliseconds, which two quick starts can share).
    sessions
        .sort_by(|(a_exit, a), (b_exit, b)| a_exit.is_some().cmp(&b_exit.is_some()).then(b.started.cmp(&a.started)));
    let total = sessions.len();
    sessions.truncate(EXEC_SESSIONS_SHOWN);
    diagnostics["shown"] = json!(sessions.len());
    diagnostics["omitted"] = json!(total - sessions.len());
    (Value::Array(sessions.into_iter().map(|(exit, s)| describe(&s, exit)).collect()), true, diagnostics)
}

fn describe(session: &Session, exit: Option<Exit>) -> Value {
    let mut command: String = session.command.chars().take(COMMAND_SHOWN_CHARS).collect();
    let cut = command.len() < session.command.len();
    if cut {
        command.push('…');
    }
    let mut entry = json!({
        "session_id": session.id,
        "running": exit.is_none(),
        "phase": if exit.is_some() { "completed" } else { "running" },
        "exit_code": exit.as_ref().and_then(|e| e.exit_code),
        "signal": exit.as_ref().and_then(|e| e.signal.clone()),
        "command": command,
        "root": session.root.display().to_string(),
        "cwd": session.cwd.display().to_string(),
        "workspace": session.workspace,
        "started_at": session.started_at,
        "elapsed_ms": session.elapsed_ms(),
    });
    if cut {
        entry["command_truncated"] = json!(true);
    }
    entry
}
