//! `herdr_exec`: run a command in a workspace's project root and wait (up to
//! `timeout_ms`) for its result, with optional `intent` + `idempotency_key` so that a
//! retried call never runs a command twice (spec §1.17, §2.5).
//!
//! Order of a call: arguments are validated; a keyed call claims its key in the
//! ledger (a replay, conflict or unsettled claim ends here, before any topology or
//! gate work); the workspace and project root are chosen; the mutation gate runs
//! (a refusal gives the key back, since nothing was delivered); the command starts
//! as a durable session and the ledger records the delivery; the result, or the
//! timeout that leaves the command running, is settled in the ledger.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::common::{bool_arg, object_schema, req_str, str_arg, u64_arg};
use super::exec_common::{self, MAX_COMMAND_BYTES};
use super::exec_pane::{self, Undelivered};
use super::{Access, BoxFuture, Handler, ToolContext, ToolOutput, ToolSpec};
use crate::exec::idempotency::{self, Claim, Idempotency, Intent};
use crate::exec::workspaces::Workspace;
use crate::exec::{ExitReport, Session, Stream, backend, compact, steps, structured};

pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
pub const MAX_TIMEOUT_MS: u64 = 60_000;
/// The output window a synchronous result carries (spec §2.3).
pub const OUTPUT_WINDOW_BYTES: usize = 65_536;

pub fn spec() -> ToolSpec {
    ToolSpec {
        name: "herdr_exec",
        description: concat!(
            "Run a shell command in a workspace's project root and wait for it (timeout_ms, default 30000, at most ",
            "60000). Give either command (a shell line for the user's login shell) or steps (a list of ",
            "{program, args} run in order with &&, no quoting needed). The result carries exit_code, the output ",
            "(the last 64 KiB of stdout and stderr interleaved), execution evidence, and structured_output when a ",
            "stream is exactly one JSON object. If the time runs out the answer is exec_timeout: the command keeps ",
            "running under its session_id, so continue with herdr_exec_read and never send it again. workspace is ",
            "a workspace id or label; without Herdr there is one workspace per managed root, named after the root's ",
            "directory. project_root is needed only when the workspace has several projects. To make a retry safe, ",
            "pass intent (read_only, idempotent_write, non_idempotent_write) and, for writes, an idempotency_key: a ",
            "repeated call with the same key and request returns the recorded result (idempotent_replay:true) ",
            "without running anything; the same key with a different request is refused. Refused in read-only ",
            "mode, in a workspace outside the write roots, and while an agent works in that project unless ",
            "confirm_busy is true. The command is not sandboxed: it runs as the user and can change files outside ",
            "its project, so the write roots decide where a command starts, not what it touches. ",
            "For folders a background process may not open (macOS Documents, Desktop, Downloads), or when the ",
            "runtime is set to, the command is typed into the workspace's herdr-mcp:utility pane instead ",
            "(backend utility_pane); utility_pane_not_ready means that pane is busy: retry after retry_after_ms."
        ),
        input_schema: schema,
        access: Access::Write,
        read_only_hint: false,
        handler: Handler::Async(run),
    }
}

fn schema() -> Value {
    object_schema(
        json!({
            "workspace": {"type": "string", "minLength": 1, "maxLength": 256, "description": "Workspace id or label."},
            "command": {"type": "string", "minLength": 1, "maxLength": MAX_COMMAND_BYTES, "description": "Shell command line to run."},
            "steps": {
                "type": "array", "minItems": 1, "maxItems": steps::MAX_STEPS,
                "description": "Alternative to command: programs with arguments, run in order while each succeeds.",
                "items": {
                    "type": "object",
                    "properties": {
                        "program": {"type": "string", "minLength": 1},
                        "args": {"type": "array", "maxItems": steps::MAX_ARGS, "items": {"type": "string"}},
                    },
                    "required": ["program"],
                    "additionalProperties": false,
                },
            },
            "project_root": {"type": "string", "minLength": 1, "maxLength": crate::policy::paths::MAX_PATH_BYTES, "description": "Project root within the workspace; required when it has several."},
            "timeout_ms": {"type": "integer", "minimum": 1, "maximum": MAX_TIMEOUT_MS, "default": DEFAULT_TIMEOUT_MS, "description": "How long to wait for the command before answering exec_timeout."},
            "confirm_busy": {"type": "boolean", "default": false, "description": "Run even though an agent is working in this project."},
            "intent": {"type": "string", "enum": ["read_only", "idempotent_write", "non_idempotent_write"], "description": "What the command does; required with idempotency_key."},
            "idempotency_key": {"type": "string", "minLength": 1, "maxLength": idempotency::MAX_KEY_CHARS, "description": "Caller-chosen key that makes a retry return the first result instead of running again."},
        }),
        &["workspace"],
    )
}

fn run(ctx: Arc<ToolContext>, args: Map<String, Value>) -> BoxFuture<ToolOutput> {
    Box::pin(async move { execute(&ctx, &args).await })
}

/// How the idempotency fields of the answer are filled in.
struct Ledger {
    idem: Idempotency,
    op_id: Option<String>,
    persisted: bool,
}

impl Ledger {
    fn finish(&self, mut out: ToolOutput, replay: bool, mode: &str) -> ToolOutput {
        idempotency::decorate(&mut out.payload, self.idem.intent, self.persisted, replay, mode);
        out
    }

    fn settled_mode(&self) -> &'static str {
        if self.idem.key.is_some() { "replay_with_same_key" } else { "retry_freely" }
    }
}

async fn execute(ctx: &ToolContext, args: &Map<String, Value>) -> ToolOutput {
    // 1. Arguments, before anything runs.
    let idem = match idempotency::validate(str_arg(args, "intent"), str_arg(args, "idempotency_key")) {
        Ok(i) => i,
        Err(message) => {
            let mut out = super::common::invalid_params(message);
            if let Some(intent) = str_arg(args, "intent").and_then(Intent::parse) {
                idempotency::decorate(&mut out.payload, intent, false, false, "fix_arguments_then_retry");
            }
            return out;
        }
    };
    let command = match command_of(args) {
        Ok(c) => c,
        Err(out) => return out,
    };
    let workspace = req_str(args, "workspace");
    let project_root = str_arg(args, "project_root");
    let registry = match exec_common::registry(ctx) {
        Ok(r) => r,
        Err(out) => return out,
    };

    // 2. The ledger claim.
    let mut ledger = idem.map(|idem| Ledger { idem, op_id: None, persisted: false });
    if let Some(l) = ledger.as_mut()
        && let Some(key) = l.idem.key.clone()
    {
        let hash = idempotency::request_hash(workspace, &command, project_root, l.idem.intent);
        match idempotency::claim(registry.db(), &key, &hash).await {
            Ok(Claim::Fresh { op_id }) => {
                l.op_id = Some(op_id);
                l.persisted = true;
            }
            Ok(Claim::Replay(recorded)) => {
                l.persisted = true;
                return l.finish(ToolOutput::payload(recorded), true, "replay_with_same_key");
            }
            Ok(Claim::Conflict(_)) => {
                l.persisted = true;
                let out = ToolOutput::code(
                    "idempotency_key_conflict",
                    "this idempotency_key was already used for a different request; nothing was run",
                    json!({"delivery_state": "not_delivered"}),
                );
                return l.finish(out, false, "new_key_for_a_different_request");
            }
            Ok(Claim::InFlight(rec)) => {
                l.persisted = true;
                let session_id = rec.result.as_ref().and_then(|r| r.get("session_id")).cloned().unwrap_or(Value::Null);
                let out = ToolOutput::code(
                    "idempotency_in_flight",
                    "an earlier call with this idempotency_key has not settled yet; it was not run again",
                    json!({
                        "phase": rec.phase,
                        "session_id": session_id,
                        "op_id": session_id,
                        "hint": "Ask again later with the same key, or follow the session with herdr_exec_read when session_id is set.",
                    }),
                );
                return l.finish(out, false, "wait_then_replay_with_same_key");
            }
            Err(e) => {
                let out = ToolOutput::code(
                    "idempotency_unavailable",
                    format!("the idempotency ledger could not be written, so nothing was run: {e}"),
                    json!({"delivery_state": "not_delivered"}),
                );
                return l.finish(out, false, "retry_after_resource_release");
            }
        }
    }

    // 3. Workspace, project root and the gate; a refusal frees the key.
    let (root, ws, warnings) = match choose_root(ctx, workspace, project_root, bool_arg(args, "confirm_busy", false)).await {
        Ok(chosen) => chosen,
        Err(out) => return release_and_finish(&registry, ledger.as_ref(), out).await,
    };

    // 4. Delivery, by the backend the root calls for.
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let ran = if backend::uses_utility_pane(ctx.services.exec_backend, &root, home.as_deref()) {
        match exec_pane::deliver(ctx.services.herdr.clone(), &registry, &root, &ws, &command).await {
            Ok((session, pane_id)) => Ran { session, backend: "utility_pane", command: command.clone(), cwd: root.clone(), pane_id: Some(pane_id) },
            Err(Undelivered::NotDelivered(out)) => return release_and_finish(&registry, ledger.as_ref(), out).await,
            Err(Undelivered::Uncertain(out)) => return settle_and_finish(&registry, ledger.as_mut(), "failed", out).await,
        }
    } else {
        match registry.start(&root, &root, &command, Some(&ws.id), ExitReport::AwaitedByCaller).await {
            Ok(session) => Ran { command: session.command.clone(), cwd: session.cwd.clone(), session, backend: "native", pane_id: None },
            Err(e) => {
                let out = ToolOutput::code(
                    "exec_start_failed",
                    e.to_string(),
                    json!({
                        "backend": "native", "workspace": ws.id, "command": command,
                        "delivery_state": "unknown",
                        "execution": {"started": null, "completed": null, "exit_code": null},
                        "failure_origin": "unknown",
                    }),
                );
                return settle_and_finish(&registry, ledger.as_mut(), "failed", out).await;
            }
        }
    };
    let session = Arc::clone(&ran.session);
    if let Some(l) = ledger.as_mut()
        && let Some(op) = &l.op_id
        && let Err(e) = idempotency::mark_delivered(registry.db(), op, &session.id).await
    {
        tracing::warn!(op = %op, "ledger delivery not recorded: {e}");
        l.persisted = false;
    }

    // 5. Wait, then settle.
    let timeout = Duration::from_millis(u64_arg(args, "timeout_ms", DEFAULT_TIMEOUT_MS));
    let (phase, out) = match session.wait(timeout).await {
        Some(_) => ("completed", completed(&ran, &ws, &root, warnings)),
        // The ended-meanwhile case reports the result here, as its end may have gone unannounced.
        None if session.hand_over_exit() => ("completed", completed(&ran, &ws, &root, warnings)),
        None => ("running", timed_out(&ran, &ws, &root)),
    };
    settle_and_finish(&registry, ledger.as_mut(), phase, out).await
}

/// The command line from `command` or `steps` (exactly one of them).
fn command_of(args: &Map<String, Value>) -> Result<String, ToolOutput> {
    let command = match (str_arg(args, "command"), args.get("steps")) {
        (Some(_), Some(_)) => return Err(super::common::invalid_params("give either command or steps, not both")),
        (None, None) => return Err(super::common::invalid_params("command or steps is required")),
        (Some(c), None) => c.to_string(),
        (None, Some(steps)) => {
            let list = steps.as_array().map(Vec::as_slice).unwrap_or_default();
            steps::render(list).map_err(super::common::invalid_params)?
        }
    };
    exec_common::check_command(&command)?;
    Ok(command)
}

async fn choose_root(
    ctx: &ToolContext,
    workspace: &str,
    project_root: Option<&str>,
    confirm_busy: bool,
) -> Result<(PathBuf, Workspace, Option<Value>), ToolOutput> {
    let all = exec_common::workspace_source(ctx).workspaces().await;
    let Some(ws) = all.iter().find(|w| w.matches(workspace)).cloned() else {
        let available: Vec<Value> = all.iter().map(|w| json!({"id": w.id, "label": w.label})).collect();
        return Err(ToolOutput::refusal(
            "workspace_not_found",
            format!("no workspace with id or label {workspace:?}"),
            json!({"workspace": workspace, "available": available, "hint": "Use a workspace id or label from herdr_inspect."}),
        ));
    };
    let candidates: Vec<String> = ws.roots.iter().map(|r| r.display().to_string()).collect();
    let current_projects: Vec<Value> = ws
        .roots
        .iter()
        .map(|r| json!({"root": r.display().to_string(), "name": r.file_name().map(|n| n.to_string_lossy().into_owned())}))
        .collect();
    let root = match project_root {
        Some(given) => {
            let canonical = std::path::Path::new(given).canonicalize().ok();
            match canonical.filter(|c| ws.roots.contains(c)) {
                Some(c) => c,
                None => {
                    return Err(ToolOutput::refusal(
                        "project_root_not_in_workspace",
                        format!("{given} is not a project root of workspace {}", ws.id),
                        json!({"workspace": ws.id, "project_root": given, "candidates": candidates, "current_projects": current_projects,
                               "hint": "Pick project_root from candidates."}),
                    ));
                }
            }
        }
        None if ws.roots.len() == 1 => ws.roots[0].clone(),
        None => {
            return Err(ToolOutput::refusal(
                "project_root_required",
                format!("workspace {} has {} project roots; say which one with project_root", ws.id, ws.roots.len()),
                json!({"workspace": ws.id, "candidates": candidates, "current_projects": current_projects,
                       "hint": "Call again with project_root set to one of candidates."}),
            ));
        }
    };
    ctx.policy.check_mutation(&root).map_err(ToolOutput::from)?;
    let warnings = exec_common::busy_check(ctx, &root, confirm_busy).await?;
    Ok((root, ws, warnings))
}

/// The last `OUTPUT_WINDOW_BYTES` of the interleaved output, and whether more exists.
fn output_window(session: &Session) -> (String, u64, bool) {
    let total = session.with_output(|o| o.ring(Stream::Both).total());
    let from = total.saturating_sub(OUTPUT_WINDOW_BYTES as u64);
    let r = session.read(Stream::Both, from, OUTPUT_WINDOW_BYTES);
    (String::from_utf8_lossy(&r.read.bytes).into_owned(), r.read.offset, r.read.offset > 0)
}

/// A delivered command: its session, and what the caller should see of it (the
/// utility-pane backend's session runs a watcher, not the command itself).
struct Ran {
    session: Arc<Session>,
    backend: &'static str,
    command: String,
    cwd: PathBuf,
    pane_id: Option<String>,
}

impl Ran {
    fn describe(&self, p: &mut Value) {
        p["backend"] = json!(self.backend);
        p["effective_cwd"] = json!(self.cwd.display().to_string());
        if let Some(pane) = &self.pane_id {
            p["pane_id"] = json!(pane);
        }
    }
}

fn completed(ran: &Ran, ws: &Workspace, root: &std::path::Path, warnings: Option<Value>) -> ToolOutput {
    let session = &ran.session;
    let exit = session.exit();
    let exit_code = exit.as_ref().and_then(|e| e.exit_code);
    let signal = exit.as_ref().and_then(|e| e.signal.clone());
    let (output, output_offset, truncated) = output_window(session);
    let mut p = json!({
        "ok": exit_code == Some(0),
        "backend": "native",
        "workspace": ws.id,
        "command": ran.command,
        "session_id": session.id,
        "op_id": session.id,
        "phase": "completed",
        "exit_code": exit_code,
        "output": output,
        "effective_cwd": session.cwd.display().to_string(),
        "project_root": root.display().to_string(),
        "progress": exec_common::progress(session, session.with_output(|o| o.bytes_total())),
        "execution": {"started": true, "completed": true, "exit_code": exit_code},
    });
    if truncated {
        p["truncated"] = json!(true);
        p["output_offset"] = json!(output_offset);
    } else if exit_code == Some(0) {
        // The whole output of a successful command: long output is compacted as
        // herdr_exec_read does, with offsets into its `both` stream.
        let all = session.read(Stream::Both, 0, OUTPUT_WINDOW_BYTES);
        compact::apply(&mut p, "output", &all.read.bytes);
    }
    if let Some(sig) = signal {
        p["signal"] = json!(sig);
    }
    if exit_code != Some(0) {
        p["failure_origin"] = json!("child_process");
    }
    if let Some((value, stream)) = session.with_output(structured::detect) {
        p["structured_output"] = value;
        p["structured_output_stream"] = json!(stream.as_str());
    }
    if let Some(w) = warnings {
        p["warnings"] = w;
    }
    ran.describe(&mut p);
    ToolOutput::payload(p)
}

fn timed_out(ran: &Ran, ws: &Workspace, root: &std::path::Path) -> ToolOutput {
    let session = &ran.session;
    let (partial, _, _) = output_window(session);
    let next_offset = session.with_output(|o| o.ring(Stream::Both).total());
    let mut out = ToolOutput::code(
        "exec_timeout",
        format!("{} is still running after the timeout; it was not stopped", session.id),
        json!({
            "backend": "native",
            "workspace": ws.id,
            "phase": "running",
            "session_id": session.id,
            "op_id": session.id,
            "partial_output": partial,
            "next_offset": next_offset,
            "effective_cwd": session.cwd.display().to_string(),
            "project_root": root.display().to_string(),
            "execution": {"started": true, "completed": false, "exit_code": null},
            "failure_origin": "timeout",
            "hint": "Follow it with herdr_exec_read (stream both, offset next_offset) or stop it with herdr_exec_kill; do not send the command again.",
        }),
    );
    ran.describe(&mut out.payload);
    out
}

async fn settle_and_finish(
    registry: &crate::exec::ExecRegistry,
    ledger: Option<&mut Ledger>,
    phase: &str,
    out: ToolOutput,
) -> ToolOutput {
    let Some(l) = ledger else { return out };
    let mode = l.settled_mode();
    if let Some(op) = &l.op_id {
        // What is stored is exactly what a replay returns (with idempotent_replay set
        // then), so the record is decorated before it is written.
        let mut record = out.clone();
        idempotency::decorate(&mut record.payload, l.idem.intent, l.persisted, false, mode);
        if let Err(e) = idempotency::settle(registry.db(), op, phase, &record.payload).await {
            tracing::warn!(op = %op, "ledger result not recorded: {e}");
            l.persisted = false;
        }
    }
    l.finish(out, false, mode)
}

async fn release_and_finish(registry: &crate::exec::ExecRegistry, ledger: Option<&Ledger>, out: ToolOutput) -> ToolOutput {
    let Some(l) = ledger else { return out };
    if let Some(op) = &l.op_id
        && let Err(e) = idempotency::release(registry.db(), op).await
    {
        tracing::warn!(op = %op, "ledger reservation not released: {e}");
    }
    // Nothing ran and nothing is recorded: the same key may be used again (a refusal
    // that knows better, e.g. "wait for the pane", keeps its own mode).
    let default = if l.idem.key.is_none() { "retry_freely" } else { "retry_with_same_key" };
    let mode = out.payload.get("safe_retry_mode").and_then(Value::as_str).unwrap_or(default).to_string();
    Ledger { idem: l.idem.clone(), op_id: None, persisted: false }.finish(out, false, &mode)
}
