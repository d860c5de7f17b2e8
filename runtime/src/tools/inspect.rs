//! `herdr_inspect` for a runtime without Herdr: one workspace per managed root, with
//! its git state, plus what this runtime is and allows. (With Herdr, workspaces,
//! panes and agents come from the live session instead; that is another module's job.)

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::git_cli::{is_repo, run_git};
use super::skill::contract_identity;
use super::{Access, Handler, ToolContext, ToolOutput, ToolSpec};
use crate::contract::CONTRACT_EPOCH;
use crate::exec::workspaces::StandaloneWorkspaces;

/// Deadline of the per-project `git status` (spec §2.1).
pub const STATUS_TIMEOUT: Duration = Duration::from_millis(750);
/// Output kept from that status; beyond it changed_files is a lower bound.
const STATUS_CAP: usize = 256 * 1024;
/// Programs whose presence on PATH a model may want to know about.
const PROGRAMS: [&str; 5] = ["herdr", "git", "rg", "dsh", "dsh_tui"];

pub fn spec() -> ToolSpec {
    ToolSpec {
        name: "herdr_inspect",
        description: concat!(
            "Start here. Shows the workstation as this runtime sees it: the managed project roots (the only places ",
            "the file and git tools work), each with its git state (dirty, number of changed files), whether the ",
            "runtime is read-only and which roots are writable, which helper programs are installed, and the build ",
            "and contract identity. workstation_info.exec_sessions lists the command sessions this runtime holds ",
            "(running first): look there before starting a long command again. When Herdr is running it also lists ",
            "workspaces, panes and agents; when it is not, each managed root appears as one workspace and the herdr ",
            "fields say Herdr is unavailable."
        ),
        input_schema: schema,
        access: Access::Read,
        read_only_hint: false,
        handler: Handler::Async(run_with_herdr),
    }
}

/// With Herdr configured, the live picture overlays the standalone one
/// (`crate::herdr::inspect::with_live`).
fn run_with_herdr(ctx: std::sync::Arc<ToolContext>, args: Map<String, Value>) -> super::BoxFuture<ToolOutput> {
    Box::pin(async move {
        let standalone = {
            let ctx = std::sync::Arc::clone(&ctx);
            tokio::task::spawn_blocking(move || run(&ctx, &args)).await
        };
        match standalone {
            Ok(out) => crate::herdr::inspect::with_live(&ctx, out).await,
            Err(e) => ToolOutput::protocol_error("internal_error", format!("herdr_inspect failed: {e}")),
        }
    })
}

/// No arguments (spec §1.2: a bare object schema without `$schema`).
fn schema() -> Value {
    json!({"type": "object", "properties": {}})
}

fn run(ctx: &ToolContext, _args: &Map<String, Value>) -> ToolOutput {
    let policy = &ctx.policy;
    let info = &ctx.info;
    // The same ids herdr_exec accepts, from the one place that names them.
    let names: Vec<String> = StandaloneWorkspaces::from_policy(policy).list().iter().map(|w| w.id.clone()).collect();
    let workspaces: Vec<Value> = policy
        .roots
        .iter()
        .zip(&names)
        .enumerate()
        .map(|(i, (root, name))| {
            json!({
                "id": name,
                "label": name,
                "cwd": root.display().to_string(),
                // The same types as with Herdr (lists of ids), so a client reads
                // both modes alike; a root without Herdr has no tabs or panes.
                "tabs": [],
                "panes": [],
                "focused": i == 0,
                "projects": [project(root)],
                "heterogeneous": false,
            })
        })
        .collect();
    // The roots in force now: with Herdr, those of its panes' projects are included.
    let roots: Vec<String> = policy.managed_roots().iter().map(|r| r.display().to_string()).collect();
    let default_cwd = policy.relative_base.as_ref().map(|p| p.display().to_string());
    let (tool_count, hash) = contract_identity();
    let (exec_sessions, exec_ready, exec_diagnostics) = super::inspect_exec::exec_sessions(ctx);
    // HERDR_MCP_AGENT_ALLOW holds whether Herdr is up or not.
    let visibility = ctx.services.herdr.as_ref().map(|h| h.config.visibility.clone()).unwrap_or_else(|| {
        crate::herdr::visibility::AgentVisibility::from_setting(std::env::var("HERDR_MCP_AGENT_ALLOW").ok().as_deref())
    });
    let build = json!({
        "commit": info.build_commit,
        "built_at": Value::Null,
        "started_at": info.started_at,
        "pid": info.pid,
        "server_version": info.version,
        "runtime": "rust",
        "stale": false,
    });
    ToolOutput::payload(json!({
        "ok": true,
        "mode": "standalone",
        "focused_workspace": names.first(),
        "focused_pane": Value::Null,
        "workspaces": workspaces,
        "tabs": [],
        "panes": [],
        "agents": [],
        "shared_projects": [],
        "herdr_available": false,
        "herdr_version": Value::Null,
        "protocol": Value::Null,
        "herdr": {"available": false, "message": "Herdr is not connected to this runtime; files and git work, panes and agents do not"},
        "agent_visibility": visibility.mode(),
        "agent_allow": visibility.allow_list(),
        "agents_hidden": 0,
        "capability_inventory": {"source": "standalone", "tool_count": tool_count},
        "contract": {"epoch": CONTRACT_EPOCH, "hash": hash},
        "build": build,
        "workstation_info": {
            "server_name": info.name,
            "server_version": info.version,
            "default_cwd": default_cwd,
            "managed_git_roots": roots,
            "readonly_mode": policy.readonly,
            "write_roots": policy.write_roots.as_ref().map(|w| w.iter().map(|p| p.display().to_string()).collect::<Vec<_>>()),
            "agent_visibility": visibility.mode(),
            "agent_skill": {
                "tool": "herdr_skill",
                "project_upstream": Value::Null,
                "project_bundled": "assets/herdr-mcp-SKILL.md",
                "native_reference": "assets/herdr-agent-SKILL.md",
                "self_update": false,
                "hint": "call herdr_skill once for the working guide",
            },
            "exec_environment": exec_environment(),
            "boot_id": info.boot_id,
            "exec_sessions": exec_sessions,
            "exec_sessions_ready": exec_ready,
            "exec_sessions_diagnostics": exec_diagnostics,
        },
    }))
}

/// One project: its git state, or nulls when it is not a repository or git is slow.
fn project(root: &Path) -> Value {
    let mut p = json!({
        "root": root.display().to_string(),
        "pane_ids": [],
        "dirty": Value::Null,
        "changed_files": Value::Null,
        "vcs": Value::Null,
        "managed": true,
        "also_open_in": [],
    });
    if !is_repo(root) {
        return p;
    }
    p["vcs"] = json!("git");
    match run_git(root, &["status", "--porcelain", "--untracked-files=normal", "--", "."], STATUS_CAP, STATUS_TIMEOUT) {
        Ok(run) if run.success() => {
            let changed = run.stdout_text().lines().filter(|l| !l.is_empty()).count();
            p["dirty"] = json!(changed > 0);
            p["changed_files"] = json!(changed);
        }
        Ok(run) => p["git_error"] = json!(run.stderr_text()),
        Err(e) => p["git_error"] = json!(e.to_string()),
    }
    p
}

/// The shell and helper programs, looked up once (PATH does not change under us).
fn exec_environment() -> Value {
    static ENV: OnceLock<Value> = OnceLock::new();
    ENV.get_or_init(|| {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
        let has: Map<String, Value> =
            PROGRAMS.iter().map(|p| (p.to_string(), json!(dirs.iter().any(|d| is_executable(&d.join(p)))))).collect();
        json!({
            "shell": std::env::var("SHELL").ok(),
            "path_has": has,
            "hint": "command execution is provided by the exec tools when this runtime enables them",
        })
    })
    .clone()
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
