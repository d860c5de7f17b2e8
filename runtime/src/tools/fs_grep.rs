//! `herdr_fs_grep`: search file contents under a directory, honouring `.gitignore`.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use regex::bytes::RegexBuilder;
use serde_json::{Map, Value, json};

use super::common::{bool_arg, invalid_params, object_schema, path_refusal, path_schema, req_str, str_arg, u64_arg};
use super::fs_list::glob_regex;
use super::{Access, Handler, ToolContext, ToolOutput, ToolSpec};
use crate::policy::secret::is_secret_path;
use crate::policy::walk::{MAX_WALK_DEPTH, WalkDir};

pub const DEFAULT_MAX_MATCHES: u64 = 50;
pub const MAX_MATCHES_LIMIT: u64 = 1000;
pub const DEFAULT_MAX_BYTES: u64 = 65_536;
pub const MAX_BYTES_LIMIT: u64 = 1_048_576;
/// Longest line text returned per match; longer lines (minified code) are cut.
pub const MAX_LINE_CHARS: usize = 500;
/// Longest a search may run. A huge tree or a slow disk ends the search with what
/// was found so far (`truncated` and `time_limited` true) instead of holding the call.
pub const TIME_LIMIT: Duration = Duration::from_secs(10);
/// Compiled-regex size ceiling, so a hostile pattern cannot eat memory.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

pub fn spec() -> ToolSpec {
    ToolSpec {
        name: "herdr_fs_grep",
        description: concat!(
            "Search the text of files under a directory of a managed project and get matching lines as ",
            "{file, line, content}. pattern is a plain substring unless regex:true (Rust regex syntax, no ",
            "look-around); case_insensitive works for both. glob keeps only files whose name matches (* and ?). ",
            "Files ignored by .gitignore, the .git directory, binary files and secret-looking files are skipped. ",
            "Files larger than max_bytes (default 65536) are skipped and flagged with truncated:true; at most ",
            "max_matches (default 50) lines are returned. Lines longer than 500 characters are shortened.",
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
            "root": path_schema("Directory to search (recursively)."),
            "pattern": {"type": "string", "minLength": 1, "maxLength": 4096, "description": "Text or regex to find."},
            "regex": {"type": "boolean", "default": false},
            "glob": {"type": "string", "minLength": 1, "maxLength": 512, "description": "File-name filter, e.g. \"*.rs\"."},
            "max_matches": {"type": "integer", "minimum": 1, "maximum": MAX_MATCHES_LIMIT, "default": DEFAULT_MAX_MATCHES},
            "max_bytes": {"type": "integer", "minimum": 1, "maximum": MAX_BYTES_LIMIT, "default": DEFAULT_MAX_BYTES, "description": "Per-file size ceiling; larger files are skipped."},
            "case_insensitive": {"type": "boolean", "default": false},
        }),
        &["root", "pattern"],
    )
}

fn run(ctx: &ToolContext, args: &Map<String, Value>) -> ToolOutput {
    search(ctx, args, TIME_LIMIT)
}

fn search(ctx: &ToolContext, args: &Map<String, Value>, time_limit: Duration) -> ToolOutput {
    let pattern = req_str(args, "pattern");
    let source = if bool_arg(args, "regex", false) { pattern.to_string() } else { regex::escape(pattern) };
    let re = match RegexBuilder::new(&source)
        .case_insensitive(bool_arg(args, "case_insensitive", false))
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
    {
        Ok(re) => re,
        Err(e) => return invalid_params(format!("invalid regex: {e}")),
    };
    let glob = match str_arg(args, "glob").map(glob_regex).transpose() {
        Ok(g) => g,
        Err(e) => return invalid_params(format!("invalid glob: {e}")),
    };
    let resolved = match ctx.policy.resolve_existing(req_str(args, "root")) {
        Ok(r) => r,
        Err(r) => return r.into(),
    };
    if !resolved.real.is_dir() {
        return path_refusal("not_a_directory", &resolved.real, format!("{} is not a directory", resolved.real.display()));
    }
    // Files are opened from this descriptor, one directory at a time without
    // following symlinks: a directory swapped for a symlink during the walk is
    // not followed out of the root.
    let start = match WalkDir::open(&resolved.real) {
        Ok(d) => d,
        Err(e) => {
            return path_refusal("read_failed", &resolved.real, format!("cannot search {}: {e}", resolved.real.display()));
        }
    };
    let max_matches = u64_arg(args, "max_matches", DEFAULT_MAX_MATCHES) as usize;
    let max_bytes = u64_arg(args, "max_bytes", DEFAULT_MAX_BYTES);
    let mut matches = Vec::new();
    let mut truncated = false;
    let mut time_limited = false;
    let deadline = Instant::now() + time_limit;
    for file in files(&resolved.real, &resolved.root) {
        if Instant::now() >= deadline {
            time_limited = true;
            truncated = true;
            break;
        }
        if glob.as_ref().is_some_and(|g| !g.is_match(&file.file_name().unwrap_or_default().to_string_lossy())) {
            continue;
        }
        let Some((handle, len)) = open_regular(&start, &resolved.real, &file) else { continue };
        if len > max_bytes {
            truncated = true;
            continue;
        }
        let Some(bytes) = read_capped(handle, max_bytes) else { continue };
        if bytes[..bytes.len().min(8192)].contains(&0) {
            continue; // binary
        }
        // A final newline ends the last line; it does not start an empty one.
        let text = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
        for (i, line) in text.split(|b| *b == b'\n').enumerate() {
            if !re.is_match(line) {
                continue;
            }
            if matches.len() >= max_matches {
                truncated = true;
                break;
            }
            matches.push(json!({"file": file.display().to_string(), "line": i + 1, "content": shorten(line)}));
        }
        if matches.len() >= max_matches && truncated {
            break;
        }
    }
    let mut payload = json!({
        "ok": true,
        "root": resolved.real.display().to_string(),
        "count": matches.len(),
        "truncated": truncated,
        "matches": matches,
        "engine": "rust",
    });
    if time_limited {
        payload["time_limited"] = json!(true);
        payload["time_limit_ms"] = json!(time_limit.as_millis() as u64);
    }
    ToolOutput::payload(payload)
}

/// Regular files under `dir` in name order, skipping `.git`, ignored and secret paths.
/// Symlinks are not followed, so nothing outside the root is searched.
fn files(dir: &Path, root: &Path) -> impl Iterator<Item = PathBuf> {
    let root = root.to_path_buf();
    ignore::WalkBuilder::new(dir)
        .hidden(false)
        .follow_links(false)
        .max_depth(Some(MAX_WALK_DEPTH))
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(move |e| {
            let below = e.path().strip_prefix(&root).unwrap_or(e.path());
            e.file_name() != ".git" && !is_secret_path(below)
        })
        .build()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
        .map(ignore::DirEntry::into_path)
}

/// Opens a file the walk found below `start` (open at `start_path`), with its
/// size, if it is still a regular file when opened. The walk saw its type a moment
/// earlier; what is there now may differ. No symlink is followed, neither the file
/// nor a directory on the way (so nothing outside the root is read), and the open
/// is non-blocking, so a FIFO put in its place is refused by its type instead of
/// waiting for a writer.
fn open_regular(start: &WalkDir, start_path: &Path, path: &Path) -> Option<(fs::File, u64)> {
    let rel = path.strip_prefix(start_path).ok()?;
    if rel.components().any(|c| !matches!(c, std::path::Component::Normal(_))) {
        return None;
    }
    start.open_file_below(rel).ok()
}

/// Reads at most `cap` bytes (the file may have grown since it was measured).
fn read_capped(file: fs::File, cap: u64) -> Option<Vec<u8>> {
    let mut bytes = Vec::new();
    file.take(cap).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

fn shorten(line: &[u8]) -> String {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let text = String::from_utf8_lossy(line);
    if text.chars().count() <= MAX_LINE_CHARS {
        return text.into_owned();
    }
    let mut cut: String = text.chars().take(MAX_LINE_CHARS).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    /// At the limit the search stops before the next file and says so; with time to
    /// spare it finds everything and does not mention the limit.
    #[test]
    fn the_time_limit_cuts_the_search_short_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["a.txt", "b.txt"] {
            std::fs::write(dir.path().join(name), "needle\n").unwrap();
        }
        let ctx = ToolContext::new(
            crate::runtime_info::RuntimeInfo::new(),
            crate::policy::Policy::for_tests(vec![dir.path().to_path_buf()]),
        );
        let args = json!({"root": dir.path().display().to_string(), "pattern": "needle"});
        let args = args.as_object().unwrap();

        let cut = search(&ctx, args, Duration::ZERO).payload;
        assert_eq!(cut["ok"], true, "{cut}");
        assert_eq!((cut["count"].as_u64(), cut["truncated"].as_bool()), (Some(0), Some(true)), "{cut}");
        assert_eq!(cut["time_limited"], true);
        assert_eq!(cut["time_limit_ms"], 0);

        let full = search(&ctx, args, TIME_LIMIT).payload;
        assert_eq!((full["count"].as_u64(), full["truncated"].as_bool()), (Some(2), Some(false)), "{full}");
        assert!(full.get("time_limited").is_none(), "{full}");
    }

    /// What the walk saw as a file may be something else by the time it is read:
    /// a FIFO is skipped at once (a blocking open would wait for a writer for
    /// good), a symlink is not followed, a regular file is opened with its size.
    #[test]
    fn only_a_regular_file_is_opened_and_nothing_waits() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("o.txt"), "needle\n").unwrap();
        std::os::unix::fs::symlink(outside.path().join("o.txt"), dir.path().join("link.txt")).unwrap();
        nix::unistd::mkfifo(&dir.path().join("pipe.txt"), nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        std::fs::write(dir.path().join("a.txt"), "needle\n").unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let start_path = dir.path().canonicalize().unwrap();
        let paths = ["pipe.txt", "link.txt", "a.txt"].map(|n| start_path.join(n));
        std::thread::spawn(move || {
            let start = WalkDir::open(&start_path).unwrap();
            for path in paths {
                tx.send(open_regular(&start, &start_path, &path).map(|(_, len)| len)).unwrap();
            }
        });
        let next = || rx.recv_timeout(Duration::from_secs(10)).expect("opening a FIFO hung");
        assert_eq!((next(), next(), next()), (None, None, Some(7)));
    }

    #[test]
    fn long_lines_are_cut_at_the_limit() {
        let exact = "a".repeat(MAX_LINE_CHARS);
        assert_eq!(shorten(exact.as_bytes()), exact);
        let long = "a".repeat(MAX_LINE_CHARS + 1);
        assert_eq!(shorten(long.as_bytes()).chars().count(), MAX_LINE_CHARS + 1);
        assert!(shorten(long.as_bytes()).ends_with('…'));
        assert_eq!(shorten(b"x\r"), "x");
    }
}
