//! `herdr_exec_start`: start a command in a managed root and return at once with a
//! session to read from.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::common::{bool_arg, object_schema, req_str};
use super::exec_common::{self, MAX_COMMAND_BYTES};
use super::{Access, BoxFuture, Handler, ToolContext, ToolOutput, ToolSpec};
use crate::exec::ExitReport;

pub fn spec() -> ToolSpec {
    ToolSpec {
        name: "herdr_exec_start",
        description: concat!(
            "Start a shell command in the background inside a managed project root and return immediately ",
            "with a session_id. The command runs through the user's login shell (zsh, bash or sh) with -lc, ",
            "in its own process group, with no stdin, from the root directory. Read its output with ",
            "herdr_exec_read (by byte offset, while it runs or after it ends) and stop it with herdr_exec_kill. ",
            "Use this for long jobs such as builds, test suites or servers; for a short command whose result ",
            "you want right away, use herdr_exec. root must be exactly one of the managed project roots. ",
            "Refused in read-only mode, outside the write roots, and while an agent works in that project ",
            "unless confirm_busy is true. The command is not sandboxed: it runs as the user and can change files ",
            "outside its root. Sessions are forgotten one hour after they end."
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
            "root": {"type": "string", "minLength": 1, "maxLength": crate::policy::paths::MAX_PATH_BYTES, "description": "A managed project root, exactly as listed by herdr_inspect."},
            "command": {"type": "string", "minLength": 1, "maxLength": MAX_COMMAND_BYTES, "description": "Shell command line to run."},
            "confirm_busy": {"type": "boolean", "default": false, "description": "Run even though an agent is working in this project."},
        }),
        &["root", "command"],
    )
}

fn run(ctx: Arc<ToolContext>, args: Map<String, Value>) -> BoxFuture<ToolOutput> {
    Box::pin(async move {
        match start(&ctx, &args).await {
            Ok(out) | Err(out) => out,
        }
    })
}

async fn start(ctx: &ToolContext, args: &Map<String, Value>) -> Result<ToolOutput, ToolOutput> {
    let registry = exec_common::registry(ctx)?;
    let command = req_str(args, "command");
    exec_common::check_command(command)?;
    let raw_root = req_str(args, "root");
    let root = std::path::Path::new(raw_root);
    let canonical = match root.canonicalize() {
        Ok(c) if !root.is_absolute() => return Err(not_a_root(ctx, raw_root, Some(&c)).await),
        Ok(c) if c.is_dir() => c,
        Ok(_) => {
            return Err(ToolOutput::refusal("not_a_directory", format!("{raw_root} is not a directory"), json!({"root": raw_root})));
        }
        Err(_) => return Err(not_a_root(ctx, raw_root, None).await),
    };
    if !exec_common::managed_roots(ctx).await.contains(&canonical) {
        return Err(not_a_root(ctx, raw_root, None).await);
    }
    ctx.policy.check_mutation(&canonical).map_err(ToolOutput::from)?;
    let warnings = exec_common::busy_check(ctx, &canonical, bool_arg(args, "confirm_busy", false)).await?;
    let session = registry.start(&canonical, &canonical, command, None, ExitReport::Announced).await.map_err(|e| {
        ToolOutput::refusal("exec_start_failed", e.to_string(), json!({"root": canonical.display().to_string()}))
    })?;
    let mut payload = json!({
        "ok": true,
        "session_id": session.id,
        "cwd": session.cwd.display().to_string(),
        "command": session.command,
        "started_at": session.started_at,
        "pid": session.pid,
        "phase": "started",
        "progress": {"bytes_read": 0, "bytes_total": 0, "elapsed_ms": 0},
        "root": canonical.display().to_string(),
        "hint": "Poll herdr_exec_read with this session_id (pass next_offset back as offset) until running is false.",
    });
    if let Some(w) = warnings {
        payload["warnings"] = w;
    }
    Ok(ToolOutput::payload(payload))
}

/// `resolved` is shown when a relative path happened to resolve: roots must be given
/// absolute, as listed, so that the caller and the runtime mean the same directory.
async fn not_a_root(ctx: &ToolContext, raw_root: &str, resolved: Option<&std::path::Path>) -> ToolOutput {
    let roots: Vec<String> = exec_common::managed_roots(ctx).await.iter().map(|r| r.display().to_string()).collect();
    ToolOutput::refusal(
        "root_not_project_root",
        format!("{raw_root} is not one of the managed project roots"),
        json!({"root": raw_root, "resolved": resolved.map(|p| p.display().to_string()), "managed_roots": roots}),
    )
}
