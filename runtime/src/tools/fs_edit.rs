//! `herdr_fs_edit`: replace one exact, unique piece of text in an existing file.

use memchr::memmem;
use serde_json::{Map, Value, json};

use super::common::{bool_arg, commit_refusal, object_schema, path_refusal, path_schema, req_str};
use super::mutation::{check_busy, check_dirty};
use super::unsized_read::read_whole;
use super::{Access, Handler, ToolContext, ToolOutput, ToolSpec};
use crate::policy::atomic::{Change, commit};

pub fn spec() -> ToolSpec {
    ToolSpec {
        name: "herdr_fs_edit",
        description: concat!(
            "Change an existing file by replacing old_string with new_string. old_string must occur exactly ",
            "once, byte for byte (include enough surrounding lines to make it unique); otherwise nothing is ",
            "written and you learn whether it was missing or how often it occurred. The file is replaced ",
            "atomically with its permissions kept. Files with uncommitted changes or untracked files are only ",
            "changed with confirm_dirty:true (check them first). Refused in read-only mode and outside the ",
            "write roots. confirm_busy is accepted for compatibility; without Herdr no agent can be busy.",
            crate::path_rules!()
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
            "path": path_schema("File to change."),
            "old_string": {"type": "string", "minLength": 1, "description": "Exact text to replace; must occur once."},
            "new_string": {"type": "string", "description": "Replacement text (may be empty to delete)."},
            "confirm_dirty": {"type": "boolean", "default": false},
            "confirm_busy": {"type": "boolean", "default": false},
        }),
        &["path", "old_string", "new_string"],
    )
}

fn run(ctx: &ToolContext, args: &Map<String, Value>) -> ToolOutput {
    // The old content is read from the file the checks were about (no gap for a
    // symlink swapped in between). The mutation gate runs as soon as the path is
    // known to be inside a root, so read-only mode and write roots are reported
    // before anything about the file itself (a directory, a FIFO, no permission).
    let gate = |root: &std::path::Path| ctx.policy.check_mutation(root);
    let mut opened = match ctx.policy.open_existing_file_gated(req_str(args, "path"), &gate) {
        Ok(o) => o,
        Err(r) => return r.into(),
    };
    let (path, root) = (&opened.resolved.real, &opened.resolved.root);
    let warnings = match check_busy(ctx, root, bool_arg(args, "confirm_busy", false)) {
        Ok(w) => w,
        Err(out) => return out,
    };
    let before = match read_whole(&mut opened.file, opened.meta.len()) {
        Ok(bytes) => bytes,
        Err(e) => return path_refusal("read_failed", path, format!("cannot read {}: {e}", path.display())),
    };
    let old = req_str(args, "old_string").as_bytes();
    // A plain substring search: a regex of the escaped text has a compiled-size
    // limit that an old_string of a few hundred KiB exceeds.
    let mut found = memmem::find_iter(&before, old);
    let Some(at) = found.next() else {
        return path_refusal("old_string_not_found", path, format!("old_string does not occur in {}", path.display()));
    };
    let occurrences = 1 + found.count();
    if occurrences > 1 {
        return ToolOutput::refusal(
            "old_string_not_unique",
            format!("old_string occurs {occurrences} times in {}; add surrounding text to pick one", path.display()),
            json!({"path": path.display().to_string(), "occurrences": occurrences}),
        );
    }
    if let Err(out) = check_dirty(root, std::slice::from_ref(path), bool_arg(args, "confirm_dirty", false)) {
        return out;
    }
    let after = [&before[..at], req_str(args, "new_string").as_bytes(), &before[at + old.len()..]].concat();
    if let Err(e) = commit(&[Change::Replace { path: path.clone(), bytes: after.clone() }]) {
        return commit_refusal(path, e);
    }
    let mut payload = json!({
        "ok": true,
        "path": path.display().to_string(),
        "root": root.display().to_string(),
        "replaced": 1,
        "bytes_before": before.len(),
        "bytes_after": after.len(),
    });
    if let Some(w) = warnings {
        payload["warnings"] = w;
    }
    ToolOutput::payload(payload)
}
