//! `herdr_fs_patch`: apply a multi-file patch to one project, all or nothing.
//!
//! Every operation is resolved and computed in memory first; only when all of them
//! succeed are the files changed, in one atomic transaction (`policy::atomic`).

use std::cell::OnceCell;
use std::collections::HashSet;
use std::fs::File;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::common::{bool_arg, object_schema, path_schema, req_str};
use super::mutation::{check_busy, check_dirty};
use super::unsized_read::read_whole;
use super::patch_apply::{HunkError, TextFile, apply_hunks};
use super::patch_parse::{HunkLine, Op, parse};
use super::{Access, Handler, ToolContext, ToolOutput, ToolSpec};
use crate::policy::atomic::{Change, commit};
use crate::policy::{Refusal, Resolved, Target};

/// Longest patch text accepted (the HTTP body limit is 1 MiB anyway).
pub const MAX_PATCH_BYTES: u64 = 1_000_000;

const RETRY_HINT: &str =
    "re-read the file with herdr_fs_read and copy the context and '-' lines exactly, adding lines or an @@ anchor until they match one place";

pub fn spec() -> ToolSpec {
    ToolSpec {
        name: "herdr_fs_patch",
        description: concat!(
            "Apply a patch that adds, deletes, updates or moves files of one managed project, all or nothing: ",
            "if any part fails, no file changes. root must be the project's managed root itself; file paths in ",
            "the patch are relative to it (or absolute inside it). Format:\n",
            "*** Begin Patch\n",
            "*** Add File: path/new.txt\n+every line starts with +\n",
            "*** Delete File: path/old.txt\n",
            "*** Update File: path/file.rs\n*** Move to: path/renamed.rs   (optional)\n",
            "@@ optional anchor line, e.g. fn main()\n context line\n-removed line\n+added line\n",
            "*** End Patch\n",
            "Each hunk's context and '-' lines must match exactly one run of lines in the current file (after its ",
            "@@ anchor line, if given); otherwise you get PATCH_CONTEXT_NOT_FOUND or PATCH_CONTEXT_AMBIGUOUS with ",
            "the hunk's index. A hunk with only '+' lines appends at the end. Line endings (LF/CRLF) and a UTF-8 ",
            "BOM are preserved. dry_run:true checks everything and reports the summary without writing (allowed ",
            "in read-only mode). Changing files with uncommitted changes, or untracked files, needs ",
            "confirm_dirty:true. confirm_busy is accepted for compatibility; without Herdr no agent can be busy. ",
            "Secret-looking files are never touched."
        ),
        input_schema: schema,
        access: Access::Write,
        read_only_hint: false,
        handler: Handler::Blocking(run),
    }
}

fn schema() -> Value {
    object_schema(
        json!({
            "root": path_schema("The managed project root the patch applies to."),
            "patch": {"type": "string", "minLength": 1, "maxLength": MAX_PATCH_BYTES, "description": "The patch text, from *** Begin Patch to *** End Patch."},
            "dry_run": {"type": "boolean", "default": false},
            "confirm_dirty": {"type": "boolean", "default": false},
            "confirm_busy": {"type": "boolean", "default": false},
        }),
        &["root", "patch"],
    )
}

/// Everything decided before any file is touched.
#[derive(Default)]
struct Plan {
    changes: Vec<Change>,
    summary: Vec<String>,
    affected: Vec<Value>,
    /// Existing files the patch modifies, deletes or moves (the dirty check).
    sources: Vec<PathBuf>,
    additions: usize,
    removals: usize,
    seen: HashSet<PathBuf>,
}

fn run(ctx: &ToolContext, args: &Map<String, Value>) -> ToolOutput {
    let root = match project_root(ctx, req_str(args, "root")) {
        Ok(r) => r,
        Err(out) => return out,
    };
    let ops = match parse(req_str(args, "patch")) {
        Ok(ops) => ops,
        Err(e) => return failed(&e, Value::Null),
    };
    let dry_run = bool_arg(args, "dry_run", false);
    let check_mutation = |root: &Path| ctx.policy.check_mutation(root);
    let gate = Gate::new(ctx, &root, (!dry_run).then_some(&check_mutation as &MutationCheck));
    let plan = match plan(&gate, &ops) {
        Ok(plan) => plan,
        Err(out) => return out,
    };
    // A dry run changes nothing, so working agents are only reported.
    let warnings = match check_busy(ctx, &root, dry_run || bool_arg(args, "confirm_busy", false)) {
        Ok(w) => w,
        Err(out) => return out,
    };
    if !dry_run {
        if let Err(out) = check_dirty(&root, &plan.sources, bool_arg(args, "confirm_dirty", false)) {
            return out;
        }
        if let Err(e) = commit(&plan.changes) {
            return ToolOutput::code(
                "PATCH_COMMIT_FAILED",
                e.message,
                json!({"path": e.path.display().to_string(), "rolled_back": e.rolled_back, "target_changed": e.target_changed}),
            );
        }
    }
    let mut payload = json!({
        "ok": true,
        "dry_run": dry_run,
        "root": root.display().to_string(),
        "summary": plan.summary.join("\n"),
        "affected_files": plan.affected,
        "additions": plan.additions,
        "removals": plan.removals,
    });
    if let Some(w) = warnings {
        payload["warnings"] = w;
    }
    ToolOutput::payload(payload)
}

/// The `root` argument must name a managed root exactly (after canonicalization).
fn project_root(ctx: &ToolContext, raw: &str) -> Result<PathBuf, ToolOutput> {
    let lexical = ctx.policy.normalize(raw).map_err(ToolOutput::from)?;
    let real = lexical.canonicalize().unwrap_or(lexical);
    if ctx.policy.is_managed_root(&real) {
        return Ok(real);
    }
    Err(ToolOutput::refusal(
        "root_not_project_root",
        format!("{raw} is not a managed project root; pass one of managed_roots exactly"),
        json!({"root": raw, "managed_roots": ctx.policy.roots_json()}),
    ))
}

/// The mutation gate (spec §2.4) for a project root.
type MutationCheck<'a> = dyn Fn(&Path) -> Result<(), Refusal> + 'a;

/// What every file of a patch must pass once its path is resolved. The gate
/// is consulted as each path is resolved, so that as in fs_edit and fs_write a
/// path refusal comes before it and anything about the file itself (missing
/// context, a directory in the way) after it; every patch names a file, so it
/// always runs. It runs once per root the patch touches, which is once: a file
/// of any other root is refused as cross-project before the gate.
struct Gate<'a> {
    ctx: &'a ToolContext,
    root: &'a Path,
    /// None for dry_run, which skips the gate.
    mutation: Option<&'a MutationCheck<'a>>,
    verdict: OnceCell<Result<(), Refusal>>,
}

impl<'a> Gate<'a> {
    fn new(ctx: &'a ToolContext, root: &'a Path, mutation: Option<&'a MutationCheck<'a>>) -> Self {
        Gate { ctx, root, mutation, verdict: OnceCell::new() }
    }

    /// The file's root must be the patch's own, and the root writable.
    fn check(&self, resolved_root: &Path, raw: &str) -> Result<(), Refusal> {
        if resolved_root != self.root {
            return Err(cross_project_refusal(self.root, raw));
        }
        match self.mutation {
            Some(mutation) => self.verdict.get_or_init(|| mutation(self.root)).clone(),
            None => Ok(()),
        }
    }
}

/// Resolves, gates and computes every operation, touching no file.
fn plan(gate: &Gate, ops: &[Op]) -> Result<Plan, ToolOutput> {
    let mut plan = Plan::default();
    for op in ops {
        plan_op(gate, op, &mut plan)?;
    }
    Ok(plan)
}

fn plan_op(gate: &Gate, op: &Op, plan: &mut Plan) -> Result<(), ToolOutput> {
    let root = gate.root;
    match op {
        Op::Add { path, lines } => {
            let target = resolve_target(gate, path)?;
            if target.exists {
                return Err(failed(&format!("cannot add {path}: the file already exists"), json!({"path": path})));
            }
            plan.claim(&target.path, path)?;
            plan.additions += lines.len();
            plan.summary.push(format!("A {}", rel(root, &target.path)));
            plan.affected.push(json!({"path": target.path.display().to_string(), "operation": "add"}));
            plan.changes.push(Change::Create { path: target.path, bytes: TextFile::new(lines.clone()).encode() });
        }
        Op::Delete { path } => {
            let (src, mut file, len) = open_file(gate, path)?;
            plan.claim(&src.real, path)?;
            let text = read_text(&mut file, len, path)?;
            plan.removals += text.lines.len();
            plan.summary.push(format!("D {}", rel(root, &src.real)));
            plan.affected.push(json!({"path": src.real.display().to_string(), "operation": "delete"}));
            plan.sources.push(src.real.clone());
            plan.changes.push(Change::Delete { path: src.real });
        }
        Op::Update { path, move_to, hunks } => {
            let (src, mut file, len) = open_file(gate, path)?;
            plan.claim(&src.real, path)?;
            let mut text = read_text(&mut file, len, path)?;
            let new_lines = apply_hunks(&text.lines, hunks).map_err(|e| hunk_failure(path, e))?;
            text.set_lines(new_lines);
            for line in hunks.iter().flat_map(|h| &h.lines) {
                match line {
                    HunkLine::Add(_) => plan.additions += 1,
                    HunkLine::Remove(_) => plan.removals += 1,
                    HunkLine::Context(_) => {}
                }
            }
            plan.sources.push(src.real.clone());
            let bytes = text.encode();
            match move_to {
                None => {
                    plan.summary.push(format!("M {}", rel(root, &src.real)));
                    plan.affected.push(json!({"path": src.real.display().to_string(), "operation": "update"}));
                    plan.changes.push(Change::Replace { path: src.real, bytes });
                }
                Some(dest_raw) => {
                    let dest = resolve_target(gate, dest_raw)?;
                    if dest.exists {
                        return Err(failed(
                            &format!("cannot move {path} to {dest_raw}: the destination already exists"),
                            json!({"path": dest_raw}),
                        ));
                    }
                    plan.claim(&dest.path, dest_raw)?;
                    plan.summary.push(format!("R {} -> {}", rel(root, &src.real), rel(root, &dest.path)));
                    plan.affected.push(json!({
                        "path": dest.path.display().to_string(),
                        "operation": "update",
                        "moved_from": src.real.display().to_string(),
                    }));
                    plan.changes.push(Change::WriteLike { path: dest.path, bytes, like: src.real.clone() });
                    plan.changes.push(Change::Delete { path: src.real });
                }
            }
        }
    }
    Ok(())
}

impl Plan {
    /// Each file may appear once in a patch: two operations on it would race.
    fn claim(&mut self, real: &Path, raw: &str) -> Result<(), ToolOutput> {
        if !self.seen.insert(real.to_path_buf()) {
            return Err(failed(&format!("{raw} appears more than once in the patch"), json!({"path": raw})));
        }
        Ok(())
    }
}

/// A patch path as an absolute string: relative paths are taken from `root`.
fn absolute(root: &Path, raw: &str) -> String {
    if Path::new(raw).is_absolute() { raw.to_string() } else { root.join(raw).display().to_string() }
}

/// Refuses a path that leaves `root` (lexically, or by landing in another root).
fn same_project(ctx: &ToolContext, root: &Path, raw: &str) -> Result<String, ToolOutput> {
    let full = absolute(root, raw);
    let lexical = ctx.policy.normalize(&full).map_err(ToolOutput::from)?;
    // The deepest root holding the path must be this one: inside `root` by its
    // letters and not in a project nested below it.
    if ctx.policy.root_of(&lexical).as_deref() != Some(root) {
        return Err(cross_project(root, raw));
    }
    Ok(full)
}

/// An existing file of the project, open for reading, so that the content patched
/// is that of the file the checks were about; with the size its descriptor reported.
fn open_file(gate: &Gate, raw: &str) -> Result<(Resolved, File, u64), ToolOutput> {
    let full = same_project(gate.ctx, gate.root, raw)?;
    // Another project's file, or a read-only runtime, is refused as such before
    // the file's type or readability is reported; the gate sees the root the
    // open resolved, so the path is resolved once for both.
    let check = |resolved_root: &Path| gate.check(resolved_root, raw);
    let opened = gate.ctx.policy.open_existing_file_gated(&full, &check).map_err(|r| match r.reason {
        "not_a_file" => failed(&format!("{raw} is not a regular file"), json!({"path": raw})),
        "read_failed" => failed(&r.message, json!({"path": raw})),
        _ => refusal(r),
    })?;
    let len = opened.meta.len();
    Ok((opened.resolved, opened.file, len))
}

/// Where a new file of the patch goes, with the same gate as [`open_file`].
fn resolve_target(gate: &Gate, raw: &str) -> Result<Target, ToolOutput> {
    let full = same_project(gate.ctx, gate.root, raw)?;
    let check = |resolved_root: &Path| gate.check(resolved_root, raw);
    gate.ctx.policy.resolve_target_gated(&full, &check).map_err(refusal)
}

fn read_text(file: &mut File, len: u64, raw: &str) -> Result<TextFile, ToolOutput> {
    let bytes = read_whole(file, len).map_err(|e| failed(&format!("cannot read {raw}: {e}"), json!({"path": raw})))?;
    TextFile::decode(&bytes).map_err(|e| failed(&format!("cannot patch {raw}: {e}"), json!({"path": raw})))
}

fn refusal(r: Refusal) -> ToolOutput {
    r.into()
}

fn cross_project(root: &Path, raw: &str) -> ToolOutput {
    cross_project_refusal(root, raw).into()
}

fn cross_project_refusal(root: &Path, raw: &str) -> Refusal {
    Refusal::new(
        "cross_project_patch_denied",
        format!("{raw} is outside the project {}; one patch changes one project", root.display()),
        json!({"path": raw, "root": root.display().to_string()}),
    )
}

fn failed(message: &str, extra: Value) -> ToolOutput {
    ToolOutput::code("PATCH_FAILED", message, extra)
}

fn hunk_failure(path: &str, e: HunkError) -> ToolOutput {
    match e {
        HunkError::NotFound { hunk_index } => ToolOutput::code(
            "PATCH_CONTEXT_NOT_FOUND",
            format!("hunk {hunk_index} (0-based) of {path}: its context and '-' lines are not in the file"),
            json!({"path": path, "hunk_index": hunk_index, "retry_hint": RETRY_HINT}),
        ),
        HunkError::Ambiguous { hunk_index, match_count } => ToolOutput::code(
            "PATCH_CONTEXT_AMBIGUOUS",
            format!("hunk {hunk_index} (0-based) of {path} matches {match_count} places"),
            json!({"path": path, "hunk_index": hunk_index, "match_count": match_count, "retry_hint": RETRY_HINT}),
        ),
        HunkError::Overlap { hunk_index } => ToolOutput::code(
            "PATCH_HUNKS_OVERLAP",
            format!("hunk {hunk_index} (0-based) of {path} overlaps an earlier hunk; merge them into one"),
            json!({"path": path, "hunk_index": hunk_index}),
        ),
    }
}

fn rel(root: &Path, path: &Path) -> String {
    path.strip_prefix(root).unwrap_or(path).display().to_string()
}

#[cfg(test)]
#[path = "fs_patch_tests.rs"]
mod tests;
