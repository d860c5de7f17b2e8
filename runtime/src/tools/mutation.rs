//! The parts of the mutation gate the file tools add to `Policy::check_mutation`
//! (read-only mode, write roots): the busy check (spec §2.4 step 3), which needs
//! Herdr's agents, so a runtime without Herdr accepts `confirm_busy` and has nobody
//! to wait for; and the dirty-file confirmation, which needs git.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::{ToolContext, ToolOutput};
use super::git_cli::{GIT_TIMEOUT, is_repo, run_git};

/// Output kept from `git status` when checking files.
const STATUS_CAP: usize = 64 * 1024;

/// Agents working in `root` refuse the change (`agent_working`) unless
/// `confirm_busy`; with it, they come back as `{working:[…]}` for the result's
/// `warnings`. The file tools run on tokio's blocking pool, where waiting on the
/// runtime for Herdr's answer is allowed.
pub fn check_busy(ctx: &ToolContext, root: &Path, confirm_busy: bool) -> Result<Option<Value>, ToolOutput> {
    // Without Herdr no agent can be working: nothing to ask.
    if ctx.services.workspaces.is_none() {
        return Ok(None);
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else { return Ok(None) };
    runtime.block_on(super::exec_common::busy_check(ctx, root, confirm_busy))
}

/// Refuses with `file_dirty_confirmation_required` when any of `files` has
/// uncommitted changes or is untracked, unless `confirm_dirty`. Outside a git work
/// tree nothing can be compared, so nothing counts as dirty.
pub fn check_dirty(root: &Path, files: &[PathBuf], confirm_dirty: bool) -> Result<(), ToolOutput> {
    if confirm_dirty || files.is_empty() || !is_repo(root) {
        return Ok(());
    }
    let mut args: Vec<String> = vec!["status".into(), "--porcelain".into(), "--untracked-files=all".into(), "--".into()];
    for f in files {
        let rel = f.strip_prefix(root).unwrap_or(f);
        args.push(format!(":(literal){}", rel.display()));
    }
    let run = run_git(root, &args, STATUS_CAP, GIT_TIMEOUT).map_err(|e| {
        ToolOutput::refusal("git_status_failed", format!("cannot check for uncommitted changes: {e}"), json!({"root": root.display().to_string()}))
    })?;
    if !run.success() {
        return Err(ToolOutput::refusal(
            "git_status_failed",
            format!("git status failed: {}", run.stderr_text()),
            json!({"root": root.display().to_string()}),
        ));
    }
    let dirty: Vec<String> = run.stdout_text().lines().filter(|l| l.len() > 3).map(|l| l[3..].to_string()).collect();
    if dirty.is_empty() {
        return Ok(());
    }
    Err(ToolOutput::refusal(
        "file_dirty_confirmation_required",
        "these files have uncommitted changes or are untracked; look at them (herdr_git diff) and repeat with confirm_dirty:true to change them anyway",
        json!({"root": root.display().to_string(), "dirty_files": dirty}),
    ))
}
