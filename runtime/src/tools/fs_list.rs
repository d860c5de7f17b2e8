//! `herdr_fs_list`: the entries of a directory, optionally recursive, sorted by name.

use std::fs;
use std::path::Path;

use regex::Regex;
use serde_json::{Map, Value, json};

use super::common::{bool_arg, invalid_params, object_schema, path_refusal, path_schema, req_str, str_arg, u64_arg};
use super::{Access, Handler, ToolContext, ToolOutput, ToolSpec};
use crate::policy::secret::is_secret_path;
use crate::runtime_info::rfc3339;

pub const DEFAULT_MAX_ENTRIES: u64 = 200;
pub const MAX_ENTRIES_LIMIT: u64 = 2000;

pub fn spec() -> ToolSpec {
    ToolSpec {
        name: "herdr_fs_list",
        description: concat!(
            "List a directory inside a managed project: each entry's name, type (file, dir, symlink, other), ",
            "absolute path and path relative to its managed root, plus size and modification time for files. ",
            "Entries are sorted by name; with recursive:true subdirectories are walked too (symlinks are listed, ",
            "never followed). glob filters entry names with * and ? only (for example \"*.rs\"). At most ",
            "max_entries (default 200, up to 2000) are returned; truncated tells you when there were more. ",
            ".git directories and secret-looking files are left out.",
            crate::path_rules!()
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
            "path": path_schema("Directory to list."),
            "recursive": {"type": "boolean", "default": false, "description": "Also list subdirectories, depth first."},
            "glob": {"type": "string", "minLength": 1, "maxLength": 512, "description": "Keep only entries whose name matches; * and ? are the only wildcards."},
            "max_entries": {"type": "integer", "minimum": 1, "maximum": MAX_ENTRIES_LIMIT, "default": DEFAULT_MAX_ENTRIES},
        }),
        &["path"],
    )
}

fn run(ctx: &ToolContext, args: &Map<String, Value>) -> ToolOutput {
    let glob = match str_arg(args, "glob").map(glob_regex).transpose() {
        Ok(g) => g,
        Err(e) => return invalid_params(format!("invalid glob: {e}")),
    };
    let resolved = match ctx.policy.resolve_existing(req_str(args, "path")) {
        Ok(r) => r,
        Err(r) => return r.into(),
    };
    if !resolved.real.is_dir() {
        return path_refusal("not_a_directory", &resolved.real, format!("{} is not a directory", resolved.real.display()));
    }
    let mut walk = Walk {
        root: &resolved.root,
        glob: glob.as_ref(),
        recursive: bool_arg(args, "recursive", false),
        max: u64_arg(args, "max_entries", DEFAULT_MAX_ENTRIES) as usize,
        entries: Vec::new(),
        truncated: false,
    };
    walk.dir(&resolved.real);
    ToolOutput::payload(json!({
        "ok": true,
        "path": resolved.real.display().to_string(),
        "root": resolved.root.display().to_string(),
        "count": walk.entries.len(),
        "truncated": walk.truncated,
        "entries": walk.entries,
    }))
}

/// `*` and `?` become regex wildcards; everything else matches literally.
/// A `/` can never match a single name, so it is refused rather than silently
/// matching nothing.
pub fn glob_regex(glob: &str) -> Result<Regex, String> {
    if glob.contains('/') {
        return Err(format!("{glob:?} contains '/', but globs match entry names only"));
    }
    let mut re = String::from("^");
    for c in glob.chars() {
        match c {
            '*' => re.push_str(".*"),
            '?' => re.push('.'),
            c => re.push_str(&regex::escape(&c.to_string())),
        }
    }
    re.push('$');
    Regex::new(&re).map_err(|e| e.to_string())
}

struct Walk<'a> {
    root: &'a Path,
    glob: Option<&'a Regex>,
    recursive: bool,
    max: usize,
    entries: Vec<Value>,
    truncated: bool,
}

impl Walk<'_> {
    fn dir(&mut self, dir: &Path) {
        let Ok(read) = fs::read_dir(dir) else { return };
        let mut children: Vec<_> = read.filter_map(Result::ok).collect();
        children.sort_by_key(|e| e.file_name());
        for child in children {
            if self.truncated {
                return;
            }
            let name = child.file_name().to_string_lossy().into_owned();
            let path = child.path();
            let below = path.strip_prefix(self.root).unwrap_or(&path);
            if name == ".git" || is_secret_path(below) {
                continue;
            }
            let Ok(meta) = fs::symlink_metadata(&path) else { continue };
            let kind = if meta.file_type().is_symlink() {
                "symlink"
            } else if meta.is_dir() {
                "dir"
            } else if meta.is_file() {
                "file"
            } else {
                "other"
            };
            // Depth first: a directory's contents come before its own entry.
            if kind == "dir" && self.recursive {
                self.dir(&path);
                if self.truncated {
                    return;
                }
            }
            if self.glob.is_some_and(|g| !g.is_match(&name)) {
                continue;
            }
            if self.entries.len() >= self.max {
                self.truncated = true;
                return;
            }
            let mut entry = json!({
                "name": name,
                "type": kind,
                "path": path.display().to_string(),
                "relative_path": below.display().to_string(),
            });
            if kind == "file" {
                entry["size"] = json!(meta.len());
                if let Ok(mtime) = meta.modified() {
                    entry["mtime"] = json!(rfc3339(mtime));
                }
            }
            self.entries.push(entry);
        }
    }
}
