//! `herdr_git`: read-only git status, diff and log of a managed project.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::common::{bool_arg, invalid_params, object_schema, path_schema, req_str, str_arg, u64_arg};
use super::git_cli::{GIT_TIMEOUT, run_git};
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
    let mut argv: Vec<String> = match action {
        "status" => vec!["status".into(), "--porcelain".into(), "-b".into()],
        "log" => vec!["log".into(), format!("-n{}", u64_arg(args, "max_count", DEFAULT_MAX_COUNT)), "--oneline".into(), "--decorate".into()],
        _ => {
            let mut v = vec!["diff".to_string()];
            if bool_arg(args, "staged", false) {
                v.push("--staged".into());
            }
            v
        }
    };
    if action == "diff" {
        argv.push("--".into());
        if let Some(raw) = str_arg(args, "path") {
            match diff_path(ctx, &root, raw) {
                Ok(rel) if rel.as_os_str().is_empty() => argv.push(".".into()),
                Ok(rel) => argv.push(format!(":(literal){}", rel.display())),
                Err(out) => return out,
            }
        }
        argv.extend(secret_excludes());
    }
    let max_bytes = u64_arg(args, "max_bytes", DEFAULT_MAX_BYTES) as usize;
    let root_s = root.display().to_string();
    match run_git(&root, &argv, max_bytes, GIT_TIMEOUT) {
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

/// `bytes` without a character the cap cut in two: a cut output ends before
/// it, rather than in a replacement mark that reads like broken text in the
/// repository (the same rule as exec output pages). Complete output is left alone.
fn whole_chars(bytes: &[u8], truncated: bool) -> &[u8] {
    if truncated { &bytes[..crate::exec::ring::utf8_safe_len(bytes)] } else { bytes }
}

/// Name patterns of the secret-path policy (spec §2.2) as git globs.
const SECRET_GLOBS: [&str; 14] = [
    ".env", ".env.*", "*.env", "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*", "*secret*", "*token*",
    "*credential*", "*.pem", "*.key", "*.p12", "*.pfx",
];

/// Pathspecs that keep secret-like files (and everything below secret-like
/// directories) out of a diff, so a whole-repository diff cannot leak them.
fn secret_excludes() -> Vec<String> {
    let mut v: Vec<String> = SECRET_GLOBS
        .iter()
        .flat_map(|g| [format!(":(exclude,icase,glob)**/{g}"), format!(":(exclude,icase,glob)**/{g}/**")])
        .collect();
    v.push(":(exclude,icase,glob)**/.git/config".into());
    v
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
