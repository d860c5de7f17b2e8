//! `herdr_fs_write`: create a file, or replace one when asked to.

use serde_json::{Map, Value, json};

use super::common::{bool_arg, commit_refusal, object_schema, path_schema, req_str};
use super::mutation::{check_busy, check_dirty};
use super::{Access, Handler, ToolContext, ToolOutput, ToolSpec};
use crate::policy::atomic::{Change, commit};

pub fn spec() -> ToolSpec {
    ToolSpec {
        name: "herdr_fs_write",
        description: concat!(
            "Write a whole file with the given content. Creates the file when it does not exist (its directory ",
            "must exist already); replacing an existing file needs overwrite:true, and replacing one with ",
            "uncommitted changes or an untracked file also needs confirm_dirty:true. Writes are atomic and keep ",
            "the old file's permissions. Prefer herdr_fs_edit or herdr_fs_patch for small changes to existing ",
            "files. Refused in read-only mode and outside the write roots. confirm_busy is accepted for ",
            "compatibility; without Herdr no agent can be busy.",
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
            "path": path_schema("File to create or replace."),
            "content": {"type": "string", "description": "The complete new content."},
            "overwrite": {"type": "boolean", "default": false},
            "confirm_dirty": {"type": "boolean", "default": false},
            "confirm_busy": {"type": "boolean", "default": false},
        }),
        &["path", "content"],
    )
}

fn run(ctx: &ToolContext, args: &Map<String, Value>) -> ToolOutput {
    // As in fs_edit: the path refusals first, then the mutation gate, then what
    // is at the path (a directory or FIFO in the way).
    let gate = |root: &std::path::Path| ctx.policy.check_mutation(root);
    let target = match ctx.policy.resolve_target_gated(req_str(args, "path"), &gate) {
        Ok(t) => t,
        Err(r) => return r.into(),
    };
    let (path, root) = (&target.path, &target.root);
    let warnings = match check_busy(ctx, root, bool_arg(args, "confirm_busy", false)) {
        Ok(w) => w,
        Err(out) => return out,
    };
    if target.exists && !bool_arg(args, "overwrite", false) {
        return ToolOutput::refusal(
            "overwrite_confirmation_required",
            format!("{} already exists; repeat with overwrite:true to replace it", path.display()),
            json!({"path": path.display().to_string()}),
        );
    }
    if target.exists
        && let Err(out) = check_dirty(root, std::slice::from_ref(path), bool_arg(args, "confirm_dirty", false))
    {
        return out;
    }
    let content = req_str(args, "content").as_bytes().to_vec();
    let bytes = content.len();
    // A new file is created only if nothing took its name since the check, so a
    // file that appeared meanwhile is never replaced without overwrite:true; and
    // a file replaced with overwrite:true that vanished meanwhile is not recreated.
    let change = if target.exists {
        Change::Replace { path: path.clone(), bytes: content }
    } else {
        Change::Create { path: path.clone(), bytes: content }
    };
    if let Err(e) = commit(&[change]) {
        return commit_refusal(path, e);
    }
    let mut payload = json!({
        "ok": true,
        "path": path.display().to_string(),
        "root": root.display().to_string(),
        "created": !target.exists,
        "overwritten": target.exists,
        "bytes": bytes,
    });
    if let Some(w) = warnings {
        payload["warnings"] = w;
    }
    ToolOutput::payload(payload)
}
