//! `herdr_git`: read-only git status, diff and log of a managed project.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::common::{bool_arg, invalid_params, object_schema, path_schema, req_str, str_arg, u64_arg};
use super::git_cli::{GIT_TIMEOUT, GitError, GitRun, STDERR_CAP, run_git};
use super::{Access, Handler, ToolContext, ToolOutput, ToolSpec};
use crate::policy::paths::lexical_normalize;
use crate::policy::secret::is_secret_path;

pub const DEFAULT_MAX_COUNT: u64 = 20;
pub const MAX_COUNT_LIMIT: u64 = 100;
pub const DEFAULT_MAX_BYTES: u64 = 65_536;
pub const MAX_BYTES_LIMIT: u64 = 512_000;

pub fn spec() -> ToolSpec {
    ToolSpec {
        name: "herdr_git",
        description: concat!(
            "Look at a managed project's git state without changing it. action \"status\" gives the branch and ",
            "changed files (porcelain format), \"diff\" the unstaged changes (staged:true for the index; path ",
            "narrows it to one file or directory, repo-relative or absolute), \"log\" the last max_count commits ",
            "(default 20, at most 100) one per line. root may be any path inside a managed root; the command runs ",
            "in that managed root. Output beyond max_bytes (default 65536) is cut and flagged truncated; ok follows ",
            "git's exit code, and git's own error text is in stderr. Commands stop after 15 seconds."
        ),
        input_schema: schema,
        access: Access::Read,
        read_only_hint: false,
        handler: Handler::Blocking(run),
    }
}

fn schema() -> Value {
    object_schema(
        json!({
            "root": path_schema("The project (any path inside a managed root)."),
            "action": {"type": "string", "enum": ["status", "diff", "log"]},
            "path": path_schema("diff only: limit the diff to this path."),
            "staged": {"type": "boolean", "default": false, "description": "diff only: show staged changes."},
            "max_count": {"type": "integer", "minimum": 1, "maximum": MAX_COUNT_LIMIT, "default": DEFAULT_MAX_COUNT, "description": "log only: number of commits."},
            "max_bytes": {"type": "integer", "minimum": 1, "maximum": MAX_BYTES_LIMIT, "default": DEFAULT_MAX_BYTES},
        }),
        &["root", "action"],
    )
}

fn run(ctx: &ToolContext, args: &Map<String, Value>) -> ToolOutput {
    let action = req_str(args, "action");
    if action != "diff" && (args.contains_key("path") || args.contains_key("staged")) {
        return invalid_params("path and staged apply to action \"diff\" only");
    }
    let resolved = match ctx.policy.resolve_existing(req_str(args, "root")) {
        Ok(r) => r,
        Err(r) => return r.into(),
    };
    let root = resolved.root;
    let max_bytes = u64_arg(args, "max_bytes", DEFAULT_MAX_BYTES) as usize;
    let root_s = root.display().to_string();
    // Every action is limited to the managed root: a root inside a bigger
    // repository (a monorepo package, a folder of a dotfiles repository) shows
    // only its own files and the commits that touched them. git runs in the root,
    // so the pathspec "." is the root.
    let ran = match action {
        "status" => run_git(&root, &["status", "--porcelain", "-b", "--", "."], max_bytes, GIT_TIMEOUT),
        "log" => {
            let count = format!("-n{}", u64_arg(args, "max_count", DEFAULT_MAX_COUNT));
            run_git(&root, &["log", count.as_str(), "--oneline", "--decorate", "--", "."], max_bytes, GIT_TIMEOUT)
        }
        _ => {
            let spec = match str_arg(args, "path") {
                None => ".".to_string(),
                Some(raw) => match diff_path(ctx, &root, raw) {
                    Ok(rel) if rel.as_os_str().is_empty() => ".".into(),
                    Ok(rel) => format!(":(literal){}", rel.display()),
                    Err(out) => return out,
                },
            };
            diff(&root, &spec, bool_arg(args, "staged", false), max_bytes)
        }
    };
    match ran {
        Ok(run) => {
            let mut payload = json!({
                "ok": run.success(),
                "root": root_s,
                "action": action,
                "exit_code": run.exit_code,
                "truncated": run.stdout_truncated,
                "output": String::from_utf8_lossy(whole_chars(&run.stdout, run.stdout_truncated)),
            });
            let stderr = run.stderr_text();
            if !stderr.is_empty() {
                payload["stderr"] = json!(stderr);
            }
            if !run.success() {
                payload["message"] = json!(format!("git {action} exited with {:?}", run.exit_code));
            }
            ToolOutput::payload(payload)
        }
        Err(e) => ToolOutput::payload(json!({"ok": false, "root": root_s, "action": action, "message": e.to_string()})),
    }
}

/// Largest list of changed paths read before a diff.
const NAMES_CAP: usize = 16 * 1024 * 1024;
/// Bytes of path arguments given to one `git diff`; more paths take several runs.
const PATHSPEC_CHUNK_BYTES: usize = 128 * 1024;

/// The diff of the changed files under `spec` that the secret-path policy allows.
///
/// git's own case folding (`:(icase)`) knows ASCII only, so a secret name with a
/// non-ASCII case variant would pass an exclude pathspec. Instead the changed paths
/// are listed first (`-z --name-only`, relative to the root), each is judged by the
/// policy's own matcher, and only the allowed ones are diffed, named literally: a
/// file that changes between the two steps is not in the second one at all.
/// Renames are off, so a secret renamed to an innocent name shows as the deletion
/// of a secret (left out) and the addition of a new file, never as a diff against
/// the secret's content.
fn diff(root: &Path, spec: &str, staged: bool, max_bytes: usize) -> Result<GitRun, GitError> {
    let mut base: Vec<OsString> = ["diff", "--no-ext-diff", "--no-renames", "--relative"].map(OsString::from).into();
    if staged {
        base.push("--staged".into());
    }
    let mut list = base.clone();
    list.extend(["--name-only", "-z", "--", spec].map(OsString::from));
    let names = run_git(root, &list, NAMES_CAP, GIT_TIMEOUT)?;
    if !names.success() || names.stdout_truncated {
        return Ok(GitRun { stdout: Vec::new(), stdout_truncated: false, ..names });
    }
    let allowed: Vec<OsString> = names
        .stdout
        .split(|b| *b == 0)
        .map(OsStr::from_bytes)
        .filter(|name| !name.is_empty() && !is_secret_path(Path::new(name)))
        .map(|name| {
            let mut spec = OsString::from(":(literal)");
            spec.push(name);
            spec
        })
        .collect();
    let mut out = GitRun { exit_code: Some(0), stdout: Vec::new(), stdout_truncated: false, stderr: Vec::new() };
    let mut pending = allowed.into_iter().peekable();
    while pending.peek().is_some() {
        if out.stdout.len() >= max_bytes {
            out.stdout_truncated = true;
            break;
        }
        let mut argv = base.clone();
        argv.push("--".into());
        let mut bytes = 0;
        while let Some(next) = pending.next_if(|next| bytes == 0 || bytes + next.len() <= PATHSPEC_CHUNK_BYTES) {
            bytes += next.len();
            argv.push(next);
        }
        let run = run_git(root, &argv, max_bytes - out.stdout.len(), GIT_TIMEOUT)?;
        out.stdout.extend_from_slice(&run.stdout);
        out.stderr.extend_from_slice(&run.stderr);
        out.stderr.truncate(STDERR_CAP);
        out.exit_code = run.exit_code;
        out.stdout_truncated = run.stdout_truncated;
        if !run.success() || run.stdout_truncated {
            break;
        }
    }
    Ok(out)
}

/// `bytes` without a character the cap cut in two: a cut output ends before
/// it, rather than in a replacement mark that reads like broken text in the
/// repository (the same rule as exec output pages). Complete output is left alone.
fn whole_chars(bytes: &[u8], truncated: bool) -> &[u8] {
    if truncated { &bytes[..crate::exec::ring::utf8_safe_len(bytes)] } else { bytes }
}

/// The diff path, relative to `root`. It need not exist (a deleted file still has a
/// diff), so it is checked lexically: inside the root and not secret-like.
fn diff_path(ctx: &ToolContext, root: &Path, raw: &str) -> Result<PathBuf, ToolOutput> {
    // Reuse the policy's control-character and length checks.
    ctx.policy.normalize(raw).map_err(ToolOutput::from)?;
    let p = Path::new(raw);
    let full = lexical_normalize(&if p.is_absolute() { p.to_path_buf() } else { root.join(p) });
    let Ok(rel) = full.strip_prefix(root) else {
        return Err(ToolOutput::refusal(
            "outside_managed_roots",
            format!("{raw} is outside the project {}", root.display()),
            json!({"path": raw, "managed_roots": ctx.policy.roots_json(), "hint": crate::policy::paths::OUTSIDE_HINT}),
        ));
    };
    if is_secret_path(rel) {
        return Err(ToolOutput::refusal(
            "secret_path_denied",
            format!("{raw} looks like a secret and its diff is not shown"),
            json!({"path": raw}),
        ));
    }
    Ok(rel.to_path_buf())
}
