//! Parser throughput and the streaming case (run: `cargo bench -p ext-core --bench parser`).
//!
//! Prints, in one run, plain lines with:
//! - one-shot parse throughput on a 1 MB reply;
//! - the 1 MB reply fed as 1 KB growing snapshots to the incremental parser, and to a
//!   rescan-every-snapshot baseline written here after the reference bridge (find each
//!   `{"tool":` prefix, balanced-brace scan, `JSON.parse` the slice, on the whole text every
//!   snapshot), with the ratio between them;
//! - sanitizer throughput on a 5 MB tool result.
//!
//! Criterion statistics follow for the same cases.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use ext_core::parser::{ReplyState, ToolCallParser, parse_reply};
use ext_core::sanitize::{SanitizeLimits, sanitize};
use serde_json::{Value, json};

const REPLY_BYTES: usize = 1024 * 1024;
const SNAPSHOT_STEP: usize = 1024;
const RESULT_BYTES: usize = 5 * 1024 * 1024;

/// A 1 MB reply of canonical calls whose string arguments contain braces, quotes, escapes and
/// non-ASCII text, with a line of prose every few calls (prose is allowed around calls).
fn big_reply() -> String {
    let mut out = String::with_capacity(REPLY_BYTES + 4096);
    let mut i = 0u32;
    while out.len() < REPLY_BYTES {
        if i.is_multiple_of(5) {
            out.push_str("Next I write the file and check it — résumé of step {n} follows.\n");
        }
        let content = format!("fn f{i}() {{ let s = \"{{\\\"k\\\": [{i}]}}\"; println!(\"$HOME ü\"); }}\n// \u{1F600} end");
        let args = json!({"workspace": "w1", "path": format!("src/f{i}.rs"), "content": content});
        // Written by hand so "tool" comes first whatever the map order: the baseline, like the
        // reference, only finds calls that start with `{"tool":`.
        out.push_str(&format!("{{\"tool\":\"herdr_fs_write\",\"args\":{args}}}"));
        out.push('\n');
        i += 1;
    }
    out
}

fn snapshot_ends(text: &str) -> Vec<usize> {
    let mut ends = Vec::new();
    let mut at = 0;
    while at < text.len() {
        at = (at + SNAPSHOT_STEP).min(text.len());
        while !text.is_char_boundary(at) {
            at += 1;
        }
        ends.push(at);
    }
    ends
}

fn stream_incremental(text: &str, ends: &[usize]) -> (ReplyState, usize) {
    let mut parser = ToolCallParser::new();
    for &end in ends {
        parser.feed(&text[..end], false);
    }
    let state = parser.feed(text, true);
    (state, parser.calls().len())
}

/// The reference approach, re-scanning the full text at every snapshot.
mod rescan {
    use ext_core::parser::ReplyState;
    use serde_json::Value;

    fn tool_prefix_at(b: &[u8], i: usize) -> bool {
        let mut j = i + 1;
        while j < b.len() && b[j].is_ascii_whitespace() {
            j += 1;
        }
        if !b[j..].starts_with(b"\"tool\"") {
            return false;
        }
        j += 6;
        while j < b.len() && b[j].is_ascii_whitespace() {
            j += 1;
        }
        j < b.len() && b[j] == b':'
    }

    pub fn scan(text: &str) -> (ReplyState, usize) {
        let b = text.as_bytes();
        let (mut calls, mut incomplete, mut malformed, mut has_prefix) = (0usize, false, false, false);
        let mut from = 0;
        while let Some(off) = b[from..].iter().position(|&c| c == b'{') {
            let start = from + off;
            if !tool_prefix_at(b, start) {
                from = start + 1;
                continue;
            }
            has_prefix = true;
            let (mut depth, mut in_str, mut esc, mut end) = (0i64, false, false, None);
            for (k, &c) in b[start..].iter().enumerate() {
                if in_str {
                    if esc {
                        esc = false;
                    } else if c == b'\\' {
                        esc = true;
                    } else if c == b'"' {
                        in_str = false;
                    }
                    continue;
                }
                match c {
                    b'"' => in_str = true,
                    b'{' => depth += 1,
                    b'}' => {
                        depth -= 1;
                        if depth == 0 {
                            end = Some(start + k + 1);
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let Some(end) = end else {
                incomplete = true;
                break;
            };
            match serde_json::from_str::<Value>(&text[start..end]) {
                Ok(v) if v.get("tool").and_then(Value::as_str).is_some_and(|t| !t.trim().is_empty()) => calls += 1,
                _ => malformed = true,
            }
            from = end;
        }
        let state = if !has_prefix {
            let t = text.trim();
            let t = t.strip_prefix("```json").unwrap_or(t).trim();
            if t.starts_with('[') || t.starts_with('{') { ReplyState::Malformed } else { ReplyState::None }
        } else if incomplete {
            ReplyState::Incomplete
        } else if malformed || calls == 0 {
            ReplyState::Malformed
        } else {
            ReplyState::Complete
        };
        (state, calls)
    }
}

fn stream_rescan(text: &str, ends: &[usize]) -> (ReplyState, usize) {
    let mut last = (ReplyState::None, 0);
    for &end in ends {
        last = rescan::scan(&text[..end]);
    }
    last
}

/// Best of `runs` wall-clock timings (the least disturbed by other work on the machine).
fn best_of<T>(runs: usize, mut f: impl FnMut() -> T) -> Duration {
    (0..runs)
        .map(|_| {
            let t = Instant::now();
            black_box(f());
            t.elapsed()
        })
        .min()
        .unwrap_or_default()
}

fn mb_per_s(bytes: usize, d: Duration) -> f64 {
    bytes as f64 / (1024.0 * 1024.0) / d.as_secs_f64()
}

fn big_tool_result() -> Value {
    let mut entries = Vec::new();
    let mut size = 0;
    let mut i = 0;
    while size < RESULT_BYTES / 2 {
        let e = json!({"path": format!("src/module_{i}/file_{i}.rs"), "line": i, "text": format!("match {{ \"k\": {i} }} => résumé — {}", "x".repeat(120))});
        size += e.to_string().len();
        entries.push(e);
        i += 1;
    }
    let text = "log line with some detail and an id 0123456789abcdef\n".repeat(RESULT_BYTES / 2 / 53);
    json!({"content": [{"type": "text", "text": text}], "structuredContent": {"ok": true, "hits": entries}})
}

fn main() {
    let reply = big_reply();
    let ends = snapshot_ends(&reply);
    let (inc_state, inc_calls) = stream_incremental(&reply, &ends);
    let (ref_state, ref_calls) = stream_rescan(&reply, &ends);
    assert_eq!(parse_reply(&reply).calls.len(), inc_calls);
    assert_eq!((inc_state, inc_calls), (ref_state, ref_calls), "both approaches agree on the final answer");

    let one_shot = best_of(5, || parse_reply(&reply));
    let incremental = best_of(5, || stream_incremental(&reply, &ends));
    let baseline = best_of(2, || stream_rescan(&reply, &ends));
    let result = big_tool_result();
    let result_bytes = result.to_string().len();
    let limits = SanitizeLimits::default();
    let sanitizing = best_of(5, || sanitize(&result, &limits));

    println!("reply: {} bytes, {} calls, {} snapshots of {} bytes", reply.len(), inc_calls, ends.len(), SNAPSHOT_STEP);
    println!("parse one-shot 1 MB: {:.1} ms, {:.1} MB/s", one_shot.as_secs_f64() * 1e3, mb_per_s(reply.len(), one_shot));
    println!("stream incremental (1 KB snapshots): {:.1} ms", incremental.as_secs_f64() * 1e3);
    println!("stream rescan-every-snapshot baseline: {:.1} ms", baseline.as_secs_f64() * 1e3);
    println!("streaming ratio baseline/incremental: {:.1}x (goal >= 50x)", baseline.as_secs_f64() / incremental.as_secs_f64());
    println!(
        "sanitize 5 MB tool result ({} bytes): {:.1} ms, {:.1} MB/s",
        result_bytes,
        sanitizing.as_secs_f64() * 1e3,
        mb_per_s(result_bytes, sanitizing)
    );

    let mut c = Criterion::default().configure_from_args().sample_size(10).measurement_time(Duration::from_secs(5));
    let mut g = c.benchmark_group("parser");
    g.throughput(Throughput::Bytes(reply.len() as u64));
    g.bench_function("one_shot_1MB", |b| b.iter(|| parse_reply(black_box(&reply))));
    g.bench_function("stream_incremental_1KB_snapshots", |b| b.iter(|| stream_incremental(black_box(&reply), &ends)));
    g.finish();
    let mut g = c.benchmark_group("sanitize");
    g.throughput(Throughput::Bytes(result_bytes as u64));
    g.bench_function("tool_result_5MB", |b| b.iter(|| sanitize(black_box(&result), &limits)));
    g.finish();
    c.final_summary();
}
