//! `herdr_fs_read` through the registry: windows, budgets, paging and errors.

mod tools_support;

use serde_json::json;
use tools_support::*;

#[test]
fn reads_a_window_and_pages_to_the_end() {
    let body: String = (1..=450).map(|i| format!("line {i}\n")).collect();
    let repo = Repo::with_files(&[("big.txt", &body)]);
    let ctx = repo.ctx();
    let r = call(&ctx, "herdr_fs_read", json!({"path": repo.p("big.txt")}));
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["lines"], json!({"start": 1, "end": 200, "total": 450}));
    assert_eq!(r["next_start_line"], 201);
    assert_eq!(r["truncated_by"], "lines");
    assert_eq!(r["truncated"], true);
    assert_eq!(r["bytes"], body.len());
    assert_eq!(r["root"], repo.root.display().to_string());
    assert!(r["content"].as_str().unwrap().starts_with("line 1\nline 2\n"));
    let r = call(&ctx, "herdr_fs_read", json!({"path": repo.p("big.txt"), "start_line": 401}));
    assert_eq!(r["lines"], json!({"start": 401, "end": 450, "total": 450}));
    assert_eq!(r["next_start_line"], serde_json::Value::Null);
    assert_eq!(r["truncated_by"], serde_json::Value::Null);
    assert!(r["content"].as_str().unwrap().ends_with("line 450\n"));
}

#[test]
fn relative_paths_resolve_against_the_first_root() {
    let repo = Repo::with_files(&[("src/a.rs", "fn a() {}\n")]);
    let r = call(&repo.ctx(), "herdr_fs_read", json!({"path": "src/a.rs"}));
    assert_eq!(r["content"], "fn a() {}\n", "{r}");
    assert_eq!(r["path"], repo.p("src/a.rs"));
}

#[test]
fn byte_budget_returns_whole_lines_only() {
    let repo = Repo::with_files(&[("f.txt", "aaaa\nbbbb\ncccc\n")]);
    let r = call(&repo.ctx(), "herdr_fs_read", json!({"path": repo.p("f.txt"), "max_bytes": 12}));
    assert_eq!(r["content"], "aaaa\nbbbb\n");
    assert_eq!(r["truncated_by"], "bytes");
    assert_eq!(r["next_start_line"], 3);
    assert_eq!(r["budget"], 12);
}

#[test]
fn explicit_end_line_and_lossy_utf8() {
    let repo = Repo::with_files(&[]);
    repo.write_bytes("bin.txt", b"ok\n\xff\xfe bad\nthree\n");
    let r = call(&repo.ctx(), "herdr_fs_read", json!({"path": repo.p("bin.txt"), "start_line": 2, "end_line": 2}));
    assert_eq!(r["content"], "\u{fffd}\u{fffd} bad\n");
    assert_eq!(r["lines"], json!({"start": 2, "end": 2, "total": 3}));
    assert_eq!(r["next_start_line"], 3);
}

#[test]
fn limits_are_enforced_at_their_edges() {
    let repo = Repo::with_files(&[("f.txt", "x\n")]);
    let ctx = repo.ctx();
    let ok = call(&ctx, "herdr_fs_read", json!({"path": repo.p("f.txt"), "max_bytes": 262144}));
    assert_eq!(ok["ok"], true);
    let ok = call(&ctx, "herdr_fs_read", json!({"path": repo.p("f.txt"), "max_bytes": 1}));
    assert_eq!(ok["ok"], true);
    for bad in [json!({"max_bytes": 262145}), json!({"max_bytes": 0}), json!({"start_line": 0}), json!({"end_line": 0})] {
        let mut args = bad.as_object().unwrap().clone();
        args.insert("path".into(), json!(repo.p("f.txt")));
        let r = call(&ctx, "herdr_fs_read", serde_json::Value::Object(args));
        assert_code(&r, "invalid_params");
    }
    let r = call(&ctx, "herdr_fs_read", json!({"path": repo.p("f.txt"), "start_line": 5, "end_line": 4}));
    assert_code(&r, "invalid_params");
    assert!(r["message"].as_str().unwrap().contains("end_line must be >= start_line"));
    let r = call(&ctx, "herdr_fs_read", json!({"path": repo.p("f.txt"), "bogus": 1}));
    assert_code(&r, "invalid_params");
    let r = call(&ctx, "herdr_fs_read", json!({}));
    assert_code(&r, "invalid_params");
}

#[test]
fn directories_missing_files_and_outsiders_are_refused() {
    let repo = Repo::with_files(&[("d/f.txt", "x\n")]);
    let ctx = repo.ctx();
    assert_reason(&call(&ctx, "herdr_fs_read", json!({"path": repo.p("d")})), "not_a_file");
    assert_reason(&call(&ctx, "herdr_fs_read", json!({"path": repo.p("nope.txt")})), "not_found");
    let r = call(&ctx, "herdr_fs_read", json!({"path": "/etc/hostname"}));
    assert_reason(&r, "outside_managed_roots");
    assert_eq!(r["managed_roots"], json!([repo.root.display().to_string()]));
    assert_reason(&call(&ctx, "herdr_fs_read", json!({"path": repo.p(".env")})), "secret_path_denied");
}

/// The last line reads normally; one line past it, and far past it, is refused
/// with the file's line count, so a model with stale or wrong line numbers learns
/// where the file ends instead of getting an empty window.
#[test]
fn start_line_past_the_end_is_refused_with_the_line_count() {
    let repo = Repo::with_files(&[("f.txt", "one\ntwo\nthree\n")]);
    let ctx = repo.ctx();
    let r = call(&ctx, "herdr_fs_read", json!({"path": repo.p("f.txt"), "start_line": 3}));
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["lines"], json!({"start": 3, "end": 3, "total": 3}));
    assert_eq!(r["content"], "three\n");
    for start in [4u64, 5, 9_007_199_254_740_991] {
        let r = call(&ctx, "herdr_fs_read", json!({"path": repo.p("f.txt"), "start_line": start}));
        assert_code(&r, "start_line_past_end");
        assert_eq!(r["start_line"], start, "{r}");
        assert_eq!(r["total_lines"], 3, "{r}");
        assert_eq!(r["path"], repo.p("f.txt"), "{r}");
        assert_eq!(r["bytes"], 14, "{r}");
        let message = r["message"].as_str().unwrap();
        assert!(message.contains(&format!("start_line {start}")) && message.contains("3 lines"), "{message}");
        assert!(r.get("content").is_none(), "{r}");
    }
    // An explicit end_line changes nothing: the window starts past the end.
    let r = call(&ctx, "herdr_fs_read", json!({"path": repo.p("f.txt"), "start_line": 4, "end_line": 10}));
    assert_code(&r, "start_line_past_end");
}

/// A file without a final newline still ends at its last line.
#[test]
fn the_last_line_without_a_newline_is_the_end() {
    let repo = Repo::with_files(&[("f.txt", "one\ntwo")]);
    let ctx = repo.ctx();
    let r = call(&ctx, "herdr_fs_read", json!({"path": repo.p("f.txt"), "start_line": 2}));
    assert_eq!((r["content"].as_str(), r["lines"]["total"].as_u64()), (Some("two"), Some(2)), "{r}");
    let r = call(&ctx, "herdr_fs_read", json!({"path": repo.p("f.txt"), "start_line": 3}));
    assert_code(&r, "start_line_past_end");
    assert_eq!(r["total_lines"], 2);
}

/// An empty file has no lines, yet reading it from the start is a normal, empty
/// read (the default call must work on any file); asking for line 2 is past its end.
#[test]
fn an_empty_file_reads_empty_from_line_one_only() {
    let repo = Repo::with_files(&[("empty.txt", "")]);
    let ctx = repo.ctx();
    let r = call(&ctx, "herdr_fs_read", json!({"path": repo.p("empty.txt")}));
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["content"], "");
    assert_eq!(r["lines"], json!({"start": 1, "end": 0, "total": 0}));
    assert_eq!((r["next_start_line"].is_null(), r["truncated"].as_bool()), (true, Some(false)), "{r}");
    let r = call(&ctx, "herdr_fs_read", json!({"path": repo.p("empty.txt"), "start_line": 2}));
    assert_code(&r, "start_line_past_end");
    assert_eq!(r["total_lines"], 0);
}
