//! `herdr_fs_list`: the entries of a directory, optionally recursive, sorted by name.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use nix::sys::stat::FileStat;

use regex::Regex;
use serde_json::{Map, Value, json};

use super::common::{bool_arg, invalid_params, object_schema, path_refusal, path_schema, req_str, str_arg, u64_arg};
use super::{Access, Handler, ToolContext, ToolOutput, ToolSpec};
use crate::policy::secret::is_secret_path;
use crate::policy::walk::{Entry, Kind, MAX_WALK_DEPTH, WalkDir};
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
    let start = match WalkDir::open(&resolved.real) {
        Ok(d) => d,
        Err(e) => {
            return path_refusal("read_failed", &resolved.real, format!("cannot list {}: {e}", resolved.real.display()));
        }
    };
    let mut walk = Walk {
        root: &resolved.root,
        glob: glob.as_ref(),
        recursive: bool_arg(args, "recursive", false),
        max: u64_arg(args, "max_entries", DEFAULT_MAX_ENTRIES) as usize,
        entries: Vec::new(),
        truncated: false,
    };
    if let Err(TooDeep(at)) = walk.run(start, &resolved.real) {
        return ToolOutput::refusal(
            "too_deep",
            format!(
                "{} nests directories more than {MAX_WALK_DEPTH} levels deep (at {}); list a deeper directory on its own, or without recursive",
                resolved.real.display(),
                at.display()
            ),
            json!({"path": resolved.real.display().to_string(), "max_depth": MAX_WALK_DEPTH, "deepest_path": at.display().to_string()}),
        );
    }
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

/// A recursive walk met a directory deeper than [`MAX_WALK_DEPTH`] (its path).
struct TooDeep(PathBuf);

/// One open directory of the walk: its entries, the next one to look at, and the
/// directory's own entry, listed once its contents are (depth first).
struct Frame {
    dir: WalkDir,
    path: PathBuf,
    children: std::vec::IntoIter<Entry>,
    own: Option<Value>,
}

impl Walk<'_> {
    /// Lists `start` (open at `path`): iteratively, each directory opened from its
    /// parent's descriptor without following symlinks, so a deep tree cannot
    /// exhaust the stack and a directory swapped for a symlink is not entered.
    fn run(&mut self, start: WalkDir, path: &Path) -> Result<(), TooDeep> {
        let children = start.entries().unwrap_or_default().into_iter();
        let mut stack = vec![Frame { dir: start, path: path.to_path_buf(), children, own: None }];
        while let Some(frame) = stack.last_mut() {
            let Some(child) = frame.children.next() else {
                let done = stack.pop().expect("a frame");
                if let Some(own) = done.own
                    && !self.push(own)
                {
                    return Ok(());
                }
                continue;
            };
            let name = child.name.to_string_lossy().into_owned();
            let path = frame.path.join(&child.name);
            let below = path.strip_prefix(self.root).unwrap_or(&path);
            if name == ".git" || is_secret_path(below) {
                continue;
            }
            let kind = match child.kind {
                Kind::Symlink => "symlink",
                Kind::Dir => "dir",
                Kind::File => "file",
                Kind::Other => "other",
            };
            let entry = self.glob.is_none_or(|g| g.is_match(&name)).then(|| {
                let mut entry = json!({
                    "name": name,
                    "type": kind,
                    "path": path.display().to_string(),
                    "relative_path": below.display().to_string(),
                });
                if child.kind == Kind::File {
                    entry["size"] = json!(child.stat.st_size);
                    entry["mtime"] = json!(rfc3339(mtime(&child.stat)));
                }
                entry
            });
            // Depth first: a directory's contents come before its own entry.
            if child.kind == Kind::Dir && self.recursive {
                let opened = frame.dir.open_dir(&child.name);
                if stack.len() > MAX_WALK_DEPTH {
                    return Err(TooDeep(path));
                }
                if let Ok(dir) = opened {
                    let children = dir.entries().unwrap_or_default().into_iter();
                    stack.push(Frame { dir, path, children, own: entry });
                    continue;
                }
            }
            if let Some(entry) = entry
                && !self.push(entry)
            {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Adds `entry`, or marks the listing truncated (false) when it is full.
    fn push(&mut self, entry: Value) -> bool {
        if self.entries.len() >= self.max {
            self.truncated = true;
            return false;
        }
        self.entries.push(entry);
        true
    }
}

fn mtime(stat: &FileStat) -> SystemTime {
    let since = Duration::new(stat.st_mtime.max(0) as u64, stat.st_mtime_nsec.clamp(0, 999_999_999) as u32);
    UNIX_EPOCH + since
}
