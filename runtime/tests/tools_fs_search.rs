//! `herdr_fs_list`, `herdr_fs_grep` and `herdr_fs_image` through the registry.

mod tools_support;

use serde_json::{Value, json};
use tools_support::*;

fn names(r: &Value, key: &str, field: &str) -> Vec<String> {
    r[key].as_array().unwrap().iter().map(|e| e[field].as_str().unwrap().to_string()).collect()
}

fn tree() -> Repo {
    Repo::with_files(&[
        ("b.txt", "bee\n"),
        ("a.rs", "fn alpha() {}\nfn beta() {}\n"),
        ("src/lib.rs", "pub fn Alpha() {}\n"),
        ("src/deep/x.rs", "alpha again\n"),
        (".env", "API=alpha\n"),
        ("src/api_token.txt", "alpha\n"),
        ("secrets/k.txt", "alpha\n"),
        ("ignored.log", "alpha\n"),
        (".gitignore", "*.log\n"),
    ])
}

#[test]
fn list_sorts_by_name_and_hides_git_and_secrets() {
    let repo = tree();
    let r = call(&repo.ctx(), "herdr_fs_list", json!({"path": repo.p("")}));
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(names(&r, "entries", "name"), [".gitignore", "a.rs", "b.txt", "ignored.log", "src"]);
    let a = &r["entries"][1];
    assert_eq!(a["type"], "file");
    assert_eq!(a["size"], 27);
    assert_eq!(a["relative_path"], "a.rs");
    assert!(a["mtime"].as_str().unwrap().ends_with('Z'));
    assert_eq!(r["entries"][4]["type"], "dir");
    assert!(r["entries"][4].get("size").is_none());
    assert_eq!(r["count"], 5);
    assert_eq!(r["truncated"], false);
}

#[test]
fn list_recursive_is_depth_first_with_glob_and_cap() {
    let repo = tree();
    let ctx = repo.ctx();
    let r = call(&ctx, "herdr_fs_list", json!({"path": repo.p("src"), "recursive": true}));
    assert_eq!(names(&r, "entries", "relative_path"), ["src/deep/x.rs", "src/deep", "src/lib.rs"]);
    let r = call(&ctx, "herdr_fs_list", json!({"path": repo.p(""), "recursive": true, "glob": "*.rs"}));
    assert_eq!(names(&r, "entries", "relative_path"), ["a.rs", "src/deep/x.rs", "src/lib.rs"]);
    let r = call(&ctx, "herdr_fs_list", json!({"path": repo.p(""), "recursive": true, "glob": "*.rs", "max_entries": 2}));
    assert_eq!(r["count"], 2);
    assert_eq!(r["truncated"], true);
    let r = call(&ctx, "herdr_fs_list", json!({"path": repo.p(""), "recursive": true, "glob": "?.rs", "max_entries": 3}));
    assert_eq!(names(&r, "entries", "relative_path"), ["a.rs", "src/deep/x.rs"]);
    let r = call(&ctx, "herdr_fs_list", json!({"path": repo.p(""), "recursive": true, "glob": "*.rs", "max_entries": 3}));
    assert_eq!((r["count"].clone(), r["truncated"].clone()), (json!(3), json!(false)));
}

#[test]
fn list_shows_symlinks_without_following_them() {
    let repo = tree();
    std::os::unix::fs::symlink("/etc", repo.path("etc_link")).unwrap();
    let r = call(&repo.ctx(), "herdr_fs_list", json!({"path": repo.p(""), "recursive": true}));
    let link = r["entries"].as_array().unwrap().iter().find(|e| e["name"] == "etc_link").unwrap();
    assert_eq!(link["type"], "symlink");
    assert!(!names(&r, "entries", "path").iter().any(|p| p.starts_with("/etc/")));
}

#[test]
fn list_errors() {
    let repo = tree();
    let ctx = repo.ctx();
    assert_reason(&call(&ctx, "herdr_fs_list", json!({"path": repo.p("a.rs")})), "not_a_directory");
    assert_code(&call(&ctx, "herdr_fs_list", json!({"path": repo.p(""), "glob": "src/*.rs"})), "invalid_params");
    assert_code(&call(&ctx, "herdr_fs_list", json!({"path": repo.p(""), "max_entries": 2001})), "invalid_params");
    assert_eq!(call(&ctx, "herdr_fs_list", json!({"path": repo.p(""), "max_entries": 2000}))["ok"], true);
    assert_reason(&call(&ctx, "herdr_fs_list", json!({"path": "/etc"})), "outside_managed_roots");
    assert_reason(&call(&ctx, "herdr_fs_list", json!({"path": repo.p("secrets")})), "secret_path_denied");
}

#[test]
fn grep_finds_literal_text_and_skips_ignored_and_secret_files() {
    let repo = tree();
    let r = call(&repo.ctx(), "herdr_fs_grep", json!({"root": repo.p(""), "pattern": "alpha"}));
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["engine"], "rust");
    let files: Vec<String> = names(&r, "matches", "file");
    assert_eq!(files, [repo.p("a.rs"), repo.p("src/deep/x.rs")]);
    assert_eq!(r["matches"][0]["line"], 1);
    assert_eq!(r["matches"][0]["content"], "fn alpha() {}");
}

#[test]
fn grep_regex_case_glob_and_caps() {
    let repo = tree();
    let ctx = repo.ctx();
    let r = call(&ctx, "herdr_fs_grep", json!({"root": repo.p(""), "pattern": "^fn [ab]", "regex": true}));
    assert_eq!(r["count"], 2);
    assert_eq!(r["matches"][1]["line"], 2);
    let r = call(&ctx, "herdr_fs_grep", json!({"root": repo.p(""), "pattern": "ALPHA", "case_insensitive": true, "glob": "lib.rs"}));
    assert_eq!(names(&r, "matches", "file"), [repo.p("src/lib.rs")]);
    let r = call(&ctx, "herdr_fs_grep", json!({"root": repo.p(""), "pattern": "alpha", "case_insensitive": true, "max_matches": 2}));
    assert_eq!((r["count"].clone(), r["truncated"].clone()), (json!(2), json!(true)));
    let r = call(&ctx, "herdr_fs_grep", json!({"root": repo.p(""), "pattern": "a.", "max_matches": 1000}));
    assert_eq!(r["count"], 0, "literal mode must not treat '.' as a wildcard: {r}");
}

#[test]
fn grep_skips_files_over_the_per_file_ceiling() {
    let repo = tree();
    let ctx = repo.ctx();
    // a.rs has 27 bytes: a ceiling of 27 keeps it, 26 skips it and flags truncation.
    let r = call(&ctx, "herdr_fs_grep", json!({"root": repo.p(""), "pattern": "beta", "max_bytes": 27}));
    assert_eq!((r["count"].clone(), r["truncated"].clone()), (json!(1), json!(false)));
    let r = call(&ctx, "herdr_fs_grep", json!({"root": repo.p(""), "pattern": "beta", "max_bytes": 26}));
    assert_eq!((r["count"].clone(), r["truncated"].clone()), (json!(0), json!(true)));
}

#[test]
fn grep_errors() {
    let repo = tree();
    let ctx = repo.ctx();
    let r = call(&ctx, "herdr_fs_grep", json!({"root": repo.p(""), "pattern": "(", "regex": true}));
    assert_code(&r, "invalid_params");
    assert!(r["message"].as_str().unwrap().starts_with("invalid regex"));
    assert_reason(&call(&ctx, "herdr_fs_grep", json!({"root": repo.p("a.rs"), "pattern": "x"})), "not_a_directory");
    assert_code(&call(&ctx, "herdr_fs_grep", json!({"root": repo.p(""), "pattern": ""})), "invalid_params");
    assert_code(&call(&ctx, "herdr_fs_grep", json!({"root": repo.p(""), "pattern": "x", "max_matches": 1001})), "invalid_params");
}

const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89";

#[test]
fn image_returns_an_image_block() {
    let repo = tree();
    repo.write_bytes("pic.PNG", PNG);
    let out = call_out(&repo.ctx(), "herdr_fs_image", json!({"path": repo.p("pic.PNG")}));
    assert_eq!(out.payload["ok"], true, "{}", out.payload);
    assert_eq!(out.payload["mime_type"], "image/png");
    assert_eq!(out.payload["bytes"], PNG.len());
    let img = out.image.expect("image block");
    assert_eq!(img.mime_type, "image/png");
    use base64::Engine;
    assert_eq!(base64::engine::general_purpose::STANDARD.decode(img.data_base64).unwrap(), PNG);
}

#[test]
fn image_errors() {
    let repo = tree();
    repo.write_bytes("pic.png", PNG);
    let ctx = repo.ctx();
    let at_limit = call(&ctx, "herdr_fs_image", json!({"path": repo.p("pic.png"), "max_bytes": PNG.len()}));
    assert_eq!(at_limit["ok"], true);
    let r = call(&ctx, "herdr_fs_image", json!({"path": repo.p("pic.png"), "max_bytes": PNG.len() - 1}));
    assert_reason(&r, "image_too_large");
    assert_eq!(r["bytes"], PNG.len());
    let r = call(&ctx, "herdr_fs_image", json!({"path": repo.p("a.rs")}));
    assert_reason(&r, "unsupported_image");
    let hint = r["hint"].as_str().unwrap_or_default();
    assert!(["png", "jpeg", "gif", "webp", "herdr_fs_read"].iter().all(|w| hint.contains(w)), "{r}");
    let at_max = call(&ctx, "herdr_fs_image", json!({"path": repo.p("pic.png"), "max_bytes": 8_000_000}));
    assert_eq!(at_max["ok"], true, "{at_max}");
    assert_code(&call(&ctx, "herdr_fs_image", json!({"path": repo.p("pic.png"), "max_bytes": 0})), "invalid_params");
    assert_reason(&call(&ctx, "herdr_fs_image", json!({"path": repo.p("src")})), "not_a_file");
    assert_code(&call(&ctx, "herdr_fs_image", json!({"path": repo.p("pic.png"), "max_bytes": 8_000_001})), "invalid_params");
}

/// max_matches is inclusive: exactly that many matches are all returned and
/// not flagged; one fewer allowed cuts the last and says so. The same for
/// max_entries of a listing.
#[test]
fn match_and_entry_caps_hold_at_their_edges() {
    let repo = tree();
    let ctx = repo.ctx();
    // "alpha" case-insensitively: a.rs, src/deep/x.rs, src/lib.rs (secret and ignored files are skipped).
    let all = call(&ctx, "herdr_fs_grep", json!({"root": repo.p(""), "pattern": "alpha", "case_insensitive": true}));
    assert_eq!((all["count"].clone(), all["truncated"].clone()), (json!(3), json!(false)), "{all}");
    for (max, count, truncated) in [(4, 3, false), (3, 3, false), (2, 2, true)] {
        let r = call(&ctx, "herdr_fs_grep", json!({"root": repo.p(""), "pattern": "alpha", "case_insensitive": true, "max_matches": max}));
        assert_eq!((r["count"].clone(), r["truncated"].clone()), (json!(count), json!(truncated)), "max_matches {max}: {r}");
    }
    // The root lists .gitignore, a.rs, b.txt, ignored.log, src (.env and secrets/ are hidden).
    let all = call(&ctx, "herdr_fs_list", json!({"path": repo.p("")}));
    assert_eq!((all["count"].clone(), all["truncated"].clone()), (json!(5), json!(false)), "{all}");
    for (max, count, truncated) in [(6, 5, false), (5, 5, false), (4, 4, true)] {
        let r = call(&ctx, "herdr_fs_list", json!({"path": repo.p(""), "max_entries": max}));
        assert_eq!((r["count"].clone(), r["truncated"].clone()), (json!(count), json!(truncated)), "max_entries {max}: {r}");
    }
}
