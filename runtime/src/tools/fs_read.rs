//! `herdr_fs_read`: a window of lines from a text file, bounded by lines and bytes.

use std::fs::{File, Metadata};
use std::io::{ErrorKind, Read as _};
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::common::{object_schema, path_schema, req_str, u64_arg};
use super::fs_read_window::{Window, WindowScanner, into_text, select};
use super::unsized_read::Bounded;
use super::{Access, BoxFuture, Handler, ToolContext, ToolOutput, ToolSpec};
use crate::policy::{OpenedFile, Resolved};

/// Lines returned when `end_line` is omitted.
pub const DEFAULT_LINES: u64 = 200;
pub const DEFAULT_MAX_BYTES: u64 = 16_384;
pub const MAX_BYTES_LIMIT: u64 = 262_144;
/// Files up to this size are read on the async worker that received the call. Such a
/// read is a few page-cache copies, far cheaper than the two thread wake-ups of a
/// trip through the blocking pool, which dominate a small read on a busy machine.
/// Bigger files (the line count needs a pass over the whole file) go to the pool,
/// and so do files that report a size of 0: pseudo-files (procfs, sysfs) report 0
/// whatever they hold, and producing their text can take the kernel a while.
pub const INLINE_READ_MAX_BYTES: u64 = 262_144;
pub use super::unsized_read::UNSIZED_READ_MAX_BYTES;
/// Read size for files read in chunks: big enough that a large file takes few
/// system calls, small enough to hold beside the window on a pool thread.
const CHUNK_BYTES: usize = 65_536;

pub fn spec() -> ToolSpec {
    ToolSpec {
        name: "herdr_fs_read",
        description: concat!(
            "Read part of a text file inside a managed project, by line numbers. Returns up to 200 lines ",
            "from start_line (1-based) unless end_line says otherwise, and never more than max_bytes ",
            "(default 16384): a byte cut always ends on a whole line. When more remains, the result gives ",
            "next_start_line, so page through a big file by calling again with start_line set to it. The ",
            "result also reports the file's total line count and size; a start_line after the last line is ",
            "refused with start_line_past_end and that count. Invalid UTF-8 is shown with replacement characters.",
            crate::path_rules!()
        ),
        input_schema: schema,
        access: Access::Read,
        read_only_hint: false,
        handler: Handler::Async(run),
    }
}

fn schema() -> Value {
    object_schema(
        json!({
            "path": path_schema("File to read."),
            "start_line": {"type": "integer", "minimum": 1, "maximum": super::common::MAX_SAFE_INTEGER, "default": 1, "description": "First line to return (1-based)."},
            "end_line": {"type": "integer", "minimum": 1, "maximum": super::common::MAX_SAFE_INTEGER, "description": "Last line to return (inclusive); default start_line + 199."},
            "max_bytes": {"type": "integer", "minimum": 1, "maximum": MAX_BYTES_LIMIT, "default": DEFAULT_MAX_BYTES, "description": "Byte budget for the returned content."},
        }),
        &["path"],
    )
}

/// Whether a file that reports `len` bytes is read on the async worker (see
/// [`INLINE_READ_MAX_BYTES`]).
pub fn reads_inline(len: u64) -> bool {
    len > 0 && len <= INLINE_READ_MAX_BYTES
}

fn run(ctx: Arc<ToolContext>, args: Map<String, Value>) -> BoxFuture<ToolOutput> {
    Box::pin(async move {
        // The checked open and its fstat are two syscalls, cheap enough for the
        // async worker; only the read may need the pool.
        let read = match prepare(&ctx, &args) {
            Ok(read) => read,
            Err(out) => return out,
        };
        if reads_inline(read.meta.len()) {
            return read.run();
        }
        let path = read.resolved.real.clone();
        tokio::task::spawn_blocking(move || read.run()).await.unwrap_or_else(|e| {
            ToolOutput::protocol_error("internal_error", format!("reading {} failed: {e}", path.display()))
        })
    })
}

/// A validated read request: the window asked for and the file it applies to.
struct Read {
    start: u64,
    end: u64,
    budget: usize,
    /// Opened by the policy check itself, so the file read is the file checked.
    file: File,
    resolved: Resolved,
    meta: Metadata,
}

fn prepare(ctx: &ToolContext, args: &Map<String, Value>) -> Result<Read, ToolOutput> {
    let start = u64_arg(args, "start_line", 1);
    let end = u64_arg(args, "end_line", start.saturating_add(DEFAULT_LINES - 1));
    if end < start {
        return Err(super::common::invalid_params("end_line must be >= start_line"));
    }
    let budget = u64_arg(args, "max_bytes", DEFAULT_MAX_BYTES) as usize;
    let OpenedFile { file, meta, resolved } = ctx.policy.open_existing_file(req_str(args, "path"))?;
    Ok(Read { start, end, budget, file, resolved, meta })
}

impl Read {
    fn run(self) -> ToolOutput {
        let Read { start, end, budget, file, resolved, meta } = self;
        let path = &resolved.real;
        let FileWindow { window, size } = match read_file_window(file, meta.len(), start, end, budget) {
            Ok(read) => read,
            Err(e) => return super::common::path_refusal("read_failed", path, format!("cannot read {}: {e}", path.display())),
        };
        // A window that starts after the last line is refused rather than answered
        // with empty content: paging by next_start_line never gets here, so the
        // caller's line numbers are wrong or stale (another file, an older
        // version), and an empty "ok" would hide that. The count tells it where
        // the file ends. Line 1 of an empty file stays a normal, empty read, so
        // the default call works on every file.
        if start > window.total.max(1) {
            return past_end(path, &resolved.root, start, window.total, size);
        }
        let last = start + window.returned - 1;
        let truncated_by = if window.cut_by_bytes {
            Some("bytes")
        } else if window.total > end {
            Some("lines")
        } else {
            None
        };
        let next = if window.total > last { Some(last + 1) } else { None };
        let mut payload = json!({
            "ok": true,
            // Same text as `display()` (lossy UTF-8) without a trip through the formatter.
            "path": path.to_string_lossy(),
            "root": resolved.root.to_string_lossy(),
            "lines": {"start": start, "end": last, "total": window.total},
            "next_start_line": next,
            "truncated_by": truncated_by,
            "bytes": size,
            "budget": budget,
            "truncated": truncated_by.is_some(),
        });
        // Moved in rather than written inside `json!`, which would copy the text.
        payload["content"] = Value::String(into_text(window.content));
        if window.line_cut {
            payload["line_truncated"] = json!(true);
        }
        ToolOutput::payload(payload)
    }
}

/// `start_line_past_end`: the file has `total` lines, all before `start`.
fn past_end(path: &std::path::Path, root: &std::path::Path, start: u64, total: u64, size: u64) -> ToolOutput {
    let ends = match total {
        0 => "it is empty".to_string(),
        1 => "it has 1 line".to_string(),
        n => format!("it has {n} lines, so start_line may be 1 to {n}"),
    };
    ToolOutput::code(
        "start_line_past_end",
        format!("start_line {start} is past the end of {}: {ends}", path.display()),
        json!({
            "path": path.to_string_lossy(),
            "root": root.to_string_lossy(),
            "start_line": start,
            "total_lines": total,
            "bytes": size,
        }),
    )
}

/// The window of a file and the size to report for it.
#[derive(Debug)]
struct FileWindow {
    window: Window,
    /// The bytes read, which is the size the descriptor reported unless the file
    /// shrank in between; 0 for a file that reports 0 (see [`UNSIZED_READ_MAX_BYTES`]).
    size: u64,
}

/// Reads the window of `file`, whose descriptor reported `len` bytes. A file of
/// known small size is read whole, in one call when it is not changing; any
/// other is read in chunks, keeping only the window.
fn read_file_window(file: File, len: u64, start: u64, end: u64, budget: usize) -> std::io::Result<FileWindow> {
    if len == 0 {
        return read_unsized_window(file, UNSIZED_READ_MAX_BYTES, start, end, budget);
    }
    // Stopping at the reported size saves the read that would only find the end,
    // and keeps the lines consistent with the `bytes` reported.
    let (window, read) = if reads_inline(len) {
        read_whole(file, len, start, end, budget)?
    } else {
        read_in_chunks(file, len, start, end, budget)?
    };
    Ok(FileWindow { window, size: read })
}

/// The window of a file that reports a size of 0, which must end within `max`
/// bytes. The file was opened non-blocking, so a pseudo-file with nothing to
/// give yet fails the read (`EAGAIN`) instead of waiting.
fn read_unsized_window(file: File, max: u64, start: u64, end: u64, budget: usize) -> std::io::Result<FileWindow> {
    let (window, _) = read_in_chunks(Bounded::new(file, max), u64::MAX, start, end, budget)?;
    Ok(FileWindow { window, size: 0 })
}

/// At most `len` bytes of `file` into a buffer of exactly that size. Bytes
/// appended after the descriptor reported `len` are not read, so `bytes` and the
/// lines agree; a file that shrank gives what it still holds.
fn read_whole(file: File, len: u64, start: u64, end: u64, budget: usize) -> std::io::Result<(Window, u64)> {
    let mut buf = Vec::with_capacity(len as usize);
    file.take(len).read_to_end(&mut buf)?;
    let read = buf.len() as u64;
    Ok((select(&buf, start, end, budget).into_window(buf), read))
}

/// Up to `limit` bytes of `file`, [`CHUNK_BYTES`] at a time.
fn read_in_chunks(mut file: impl std::io::Read, limit: u64, start: u64, end: u64, budget: usize) -> std::io::Result<(Window, u64)> {
    let mut scanner = WindowScanner::new(start, end, budget);
    let mut chunk = vec![0; CHUNK_BYTES];
    let mut read = 0u64;
    while read < limit {
        let want = usize::try_from(limit - read).unwrap_or(usize::MAX).min(CHUNK_BYTES);
        let n = match file.read(&mut chunk[..want]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        scanner.feed(&chunk[..n]);
        read += n as u64;
    }
    Ok((scanner.finish(), read))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn win(text: &str, start: u64, end: u64, budget: usize) -> Window {
        select(text.as_bytes(), start, end, budget).into_window(text.as_bytes().to_vec())
    }

    #[test]
    fn counts_lines_like_a_text_editor() {
        assert_eq!(win("", 1, 10, 100).total, 0);
        assert_eq!(win("a", 1, 10, 100).total, 1);
        assert_eq!(win("a\n", 1, 10, 100).total, 1);
        assert_eq!(win("a\nb", 1, 10, 100).total, 2);
    }

    #[test]
    fn byte_budget_keeps_whole_lines_and_budget_edge_is_inclusive() {
        let w = win("ab\ncd\nef\n", 1, 10, 6);
        assert_eq!(w.content, b"ab\ncd\n");
        assert_eq!((w.returned, w.cut_by_bytes), (2, true));
        let w = win("ab\ncd\nef\n", 1, 10, 5);
        assert_eq!(w.content, b"ab\n");
        assert!(!win("ab\ncd\nef\n", 1, 10, 9).cut_by_bytes);
    }

    #[test]
    fn inline_reads_stop_at_their_size_limit() {
        assert!(!reads_inline(0), "a size of 0 bounds nothing; such files go to the pool");
        assert!(reads_inline(1));
        assert!(reads_inline(INLINE_READ_MAX_BYTES));
        assert!(!reads_inline(INLINE_READ_MAX_BYTES + 1));
    }

    /// Both sides of the inline limit give the same, complete answer: the file just
    /// over it goes through the blocking pool.
    #[tokio::test]
    async fn files_on_both_sides_of_the_inline_limit_read_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let line = "0123456789abcde\n";
        let lines_at_limit = INLINE_READ_MAX_BYTES as usize / line.len();
        let at_limit = line.repeat(lines_at_limit);
        assert_eq!(at_limit.len() as u64, INLINE_READ_MAX_BYTES);
        std::fs::write(dir.path().join("at.txt"), &at_limit).unwrap();
        std::fs::write(dir.path().join("over.txt"), format!("{at_limit}x")).unwrap();
        let ctx = Arc::new(ToolContext::new(
            crate::runtime_info::RuntimeInfo::new(),
            crate::policy::Policy::for_tests(vec![dir.path().to_path_buf()]),
        ));
        let registry = super::super::ToolRegistry::from_specs(vec![spec()]);
        for (name, total, bytes) in [("at.txt", lines_at_limit, at_limit.len()), ("over.txt", lines_at_limit + 1, at_limit.len() + 1)] {
            let out = registry.call(&ctx, "herdr_fs_read", Some(json!({"path": name, "start_line": 2, "end_line": 3}))).await;
            assert_eq!(out.payload["ok"], true, "{name}: {}", out.payload);
            assert_eq!(out.payload["lines"]["total"], total as u64, "{name}");
            assert_eq!(out.payload["bytes"], bytes as u64, "{name}");
            assert_eq!(out.payload["content"], line.repeat(2), "{name}");
        }
    }

    #[test]
    fn invalid_utf8_becomes_replacement_characters() {
        assert_eq!(into_text(b"a\xffb".to_vec()), "a\u{FFFD}b");
        assert_eq!(into_text("héllo".as_bytes().to_vec()), "héllo");
    }

    #[test]
    fn an_oversized_first_line_is_cut_on_a_char_boundary() {
        let w = win("héllo\nx\n", 1, 10, 2);
        assert_eq!(w.content, b"h");
        assert!(w.line_cut && w.cut_by_bytes);
        assert_eq!(w.returned, 1);
    }

    /// The read stops at the size the descriptor reported: bytes appended after
    /// the open are not read, so `bytes` and the lines agree.
    #[test]
    fn the_read_stops_at_the_size_reported_at_open() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("log.txt"), "one\ntwo\n").unwrap();
        let policy = crate::policy::Policy::for_tests(vec![dir.path().to_path_buf()]);
        let OpenedFile { file, meta, resolved } = policy.open_existing_file("log.txt").unwrap();
        let mut appender = std::fs::OpenOptions::new().append(true).open(dir.path().join("log.txt")).unwrap();
        std::io::Write::write_all(&mut appender, b"three\n").unwrap();
        let out = Read { start: 1, end: 10, budget: 100, file, resolved, meta }.run();
        assert_eq!(out.payload["content"], "one\ntwo\n", "{}", out.payload);
        assert_eq!((out.payload["bytes"].as_u64(), out.payload["lines"]["total"].as_u64()), (Some(8), Some(2)));
    }

    /// Every member of the payload, for a window cut by lines and for a first
    /// line cut by bytes (the only case with `line_truncated`).
    #[test]
    fn the_payload_has_exactly_the_contract_members() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f.txt"), "alpha\nbeta\ngamma\n").unwrap();
        let policy = crate::policy::Policy::for_tests(vec![dir.path().to_path_buf()]);
        let run = |start, end, budget| {
            let OpenedFile { file, meta, resolved } = policy.open_existing_file("f.txt").unwrap();
            (Read { start, end, budget, file, resolved: resolved.clone(), meta }.run().payload, resolved)
        };
        let (payload, resolved) = run(2, 2, 100);
        let (path, root) = (resolved.real.to_str().unwrap(), resolved.root.to_str().unwrap());
        assert_eq!(payload, json!({
            "ok": true, "path": path, "root": root, "lines": {"start": 2, "end": 2, "total": 3},
            "next_start_line": 3, "truncated_by": "lines", "bytes": 17, "budget": 100, "truncated": true,
            "content": "beta\n",
        }));
        let (payload, _) = run(3, 9, 2);
        assert_eq!(payload, json!({
            "ok": true, "path": path, "root": root, "lines": {"start": 3, "end": 3, "total": 3},
            "next_start_line": null, "truncated_by": "bytes", "bytes": 17, "budget": 2, "truncated": true,
            "content": "ga", "line_truncated": true,
        }));
    }

    /// procfs files report a size of 0 but hold text: a 0 does not bound the read.
    #[test]
    fn a_file_reporting_size_zero_is_read_to_its_end() {
        let policy = crate::policy::Policy::for_tests(vec![std::path::PathBuf::from("/proc/self")]);
        let OpenedFile { file, meta, resolved } = policy.open_existing_file("status").unwrap();
        assert_eq!(meta.len(), 0);
        let out = Read { start: 1, end: 1, budget: 1000, file, resolved, meta }.run();
        assert!(out.payload["content"].as_str().unwrap().starts_with("Name:"), "{}", out.payload);
        assert_eq!(out.payload["bytes"], 0, "the size the file reports");
    }

    /// A pseudo-file read in chunks gives the window of its whole text, the same
    /// as a selection over the text read in one go. /proc/filesystems does not
    /// change while the test runs and has many lines.
    #[test]
    fn a_pseudo_file_gives_the_window_of_all_its_text() {
        let text = std::fs::read("/proc/filesystems").unwrap();
        let policy = crate::policy::Policy::for_tests(vec![std::path::PathBuf::from("/proc")]);
        for (start, end, budget) in [(1, u64::MAX, 1 << 20), (2, 5, 1000), (3, 400, 64), (1, 1, 3)] {
            let OpenedFile { file, meta, .. } = policy.open_existing_file("filesystems").unwrap();
            assert_eq!(meta.len(), 0);
            let got = read_file_window(file, meta.len(), start, end, budget).unwrap();
            assert_eq!(got.window, select(&text, start, end, budget).into_window(text.clone()), "{start}..={end} in {budget}");
            assert_eq!(got.size, 0);
        }
    }

    /// A pseudo-file is read up to the limit for files that report 0, and
    /// refused one byte past it, without its text. The limit itself is checked
    /// at a small value, with a real pseudo-file of known length.
    #[test]
    fn a_pseudo_file_longer_than_the_unsized_limit_is_refused() {
        let text = std::fs::read("/proc/filesystems").unwrap();
        let open = || std::fs::File::open("/proc/filesystems").unwrap();
        let len = text.len() as u64;
        let at_limit = read_unsized_window(open(), len, 1, u64::MAX, 1 << 20).unwrap();
        assert_eq!(at_limit.window, select(&text, 1, u64::MAX, 1 << 20).into_window(text.clone()));
        let err = read_unsized_window(open(), len - 1, 1, u64::MAX, 1 << 20).unwrap_err();
        assert!(err.to_string().contains(&format!("holds more than {} bytes", len - 1)), "{err}");
    }

    /// Through the registry, a pseudo-file is read on the blocking pool and gives
    /// its text.
    #[tokio::test]
    async fn a_pseudo_file_is_read_through_the_registry() {
        let ctx = Arc::new(ToolContext::new(
            crate::runtime_info::RuntimeInfo::new(),
            crate::policy::Policy::for_tests(vec![std::path::PathBuf::from("/proc/self")]),
        ));
        let registry = super::super::ToolRegistry::from_specs(vec![spec()]);
        let out = registry.call(&ctx, "herdr_fs_read", Some(json!({"path": "status", "end_line": 1}))).await;
        assert_eq!(out.payload["ok"], true, "{}", out.payload);
        assert!(out.payload["content"].as_str().unwrap().starts_with("Name:"), "{}", out.payload);
        assert_eq!(out.payload["bytes"], 0, "the size the file reports");
    }

    /// A file that shrank after its size was taken gives the lines it still holds,
    /// and reports the bytes it gave.
    #[test]
    fn a_file_that_shrank_reports_what_was_read() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("log.txt"), "one\ntwo\nthree\n").unwrap();
        let policy = crate::policy::Policy::for_tests(vec![dir.path().to_path_buf()]);
        let OpenedFile { file, meta, resolved } = policy.open_existing_file("log.txt").unwrap();
        assert_eq!(meta.len(), 14);
        std::fs::OpenOptions::new().write(true).open(dir.path().join("log.txt")).unwrap().set_len(6).unwrap();
        let out = Read { start: 1, end: 10, budget: 100, file, resolved, meta }.run();
        assert_eq!(out.payload["content"], "one\ntw", "{}", out.payload);
        assert_eq!((out.payload["bytes"].as_u64(), out.payload["lines"]["total"].as_u64()), (Some(6), Some(2)));
    }

    /// Reading whole and reading in chunks agree on files that span several
    /// chunks, with lines and multi-byte characters across chunk boundaries.
    #[test]
    fn whole_and_chunked_reads_agree_across_chunk_boundaries() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.txt");
        let mut text = Vec::new();
        let mut n = 0u32;
        while text.len() < 3 * CHUNK_BYTES + 100 {
            n = n.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            text.extend(std::iter::repeat_n(b'x', (n >> 20) as usize % 300));
            text.extend_from_slice(if n & 1 == 0 { "€\n".as_bytes() } else { b"\r\n" });
        }
        std::fs::write(&path, &text).unwrap();
        let len = text.len() as u64;
        let windows = [(1, u64::MAX, MAX_BYTES_LIMIT as usize), (500, 700, 16_384), (1, 200, 7), (100_000, 100_001, 10)];
        for (start, end, budget) in windows {
            let (whole, read) = read_whole(File::open(&path).unwrap(), len, start, end, budget).unwrap();
            assert_eq!(read, len);
            let (chunked, read) = read_in_chunks(File::open(&path).unwrap(), len, start, end, budget).unwrap();
            assert_eq!(read, len);
            assert_eq!(whole, chunked, "{start}..={end} in {budget}");
            assert_eq!(whole, select(&text, start, end, budget).into_window(text.clone()));
        }
        // The limit is kept in chunks too: a limit inside the file ends the text there.
        let limit = CHUNK_BYTES as u64 + 3;
        let (cut, read) = read_in_chunks(File::open(&path).unwrap(), limit, 1, u64::MAX, 1 << 20).unwrap();
        let head = &text[..limit as usize];
        assert_eq!((cut, read), (select(head, 1, u64::MAX, 1 << 20).into_window(head.to_vec()), limit));
    }
}
