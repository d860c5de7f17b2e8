//! Small pieces every tool module shares: schema scaffolding, typed argument access
//! (after schema validation, so types are already right) and refusal conversion.

use serde_json::{Map, Value, json};

use super::ToolOutput;
use crate::policy::Refusal;

/// Largest integer JSON can carry exactly; the cap for "unbounded" integers.
pub const MAX_SAFE_INTEGER: u64 = 9_007_199_254_740_991;

/// A draft-07 object schema that rejects unknown members.
pub fn object_schema(properties: Value, required: &[&str]) -> Value {
    json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

/// The schema of a path argument: non-empty, at most `MAX_PATH_BYTES` characters.
pub fn path_schema(description: &str) -> Value {
    json!({"type": "string", "minLength": 1, "maxLength": crate::policy::paths::MAX_PATH_BYTES, "description": description})
}

pub fn str_arg<'a>(args: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str)
}

/// A required string (the schema guarantees presence; an empty string is the fallback).
pub fn req_str<'a>(args: &'a Map<String, Value>, key: &str) -> &'a str {
    str_arg(args, key).unwrap_or("")
}

pub fn bool_arg(args: &Map<String, Value>, key: &str, default: bool) -> bool {
    args.get(key).and_then(Value::as_bool).unwrap_or(default)
}

pub fn u64_arg(args: &Map<String, Value>, key: &str, default: u64) -> u64 {
    args.get(key).and_then(Value::as_u64).unwrap_or(default)
}

impl From<Refusal> for ToolOutput {
    fn from(r: Refusal) -> Self {
        if r.is_code { ToolOutput::code(r.reason, r.message, r.extra) } else { ToolOutput::refusal(r.reason, r.message, r.extra) }
    }
}

/// `{ok:false, code:"invalid_params", message}`, for checks a schema cannot express.
pub fn invalid_params(message: impl Into<String>) -> ToolOutput {
    ToolOutput::code("invalid_params", message, json!({}))
}

/// A refusal about one path, with `path` in the payload.
pub fn path_refusal(reason: &str, path: &std::path::Path, message: impl Into<String>) -> ToolOutput {
    ToolOutput::refusal(reason, message, json!({"path": path.display().to_string()}))
}

/// A failed commit of herdr_fs_write or herdr_fs_edit. `target_changed` when the
/// file or its directory is no longer what the checks saw, so the user looks
/// again before a retry (the spec has no reason for this); `write_failed` for
/// every other failure.
pub fn commit_refusal(path: &std::path::Path, e: crate::policy::atomic::CommitError) -> ToolOutput {
    let reason = if e.target_changed { "target_changed" } else { "write_failed" };
    path_refusal(reason, path, e.message)
}

/// Shared wording about how paths are interpreted, for tool descriptions.
#[macro_export]
macro_rules! path_rules {
    () => {
        " Paths may be absolute or relative; relative paths are taken from the first managed root. Every path must stay inside a managed root after symlinks are resolved, and secret-looking files (.env*, keys, *.pem, anything named like a token, secret or credential, .git/config, .netrc, .npmrc, .pgpass, .pypirc, kubeconfig, .kube/config, .docker/config.json, anything under .ssh) are never touched."
    };
}
