//! `herdr_git` through the registry, on real repositories.

mod tools_support;

use serde_json::json;
use tools_support::*;

#[test]
fn status_diff_and_log() {
    let repo = Repo::with_files(&[("a.txt", "one\n")]);
    repo.write("a.txt", "two\n");
    repo.write("new.txt", "n\n");
    let ctx = repo.ctx();
    let r = call(&ctx, "herdr_git", json!({"root": repo.p("a.txt"), "action": "status"}));
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["root"], repo.root.display().to_string());
    let out = r["output"].as_str().unwrap();
    assert!(out.starts_with("## main"), "{out}");
    assert!(out.contains(" M a.txt") && out.contains("?? new.txt"), "{out}");
    let r = call(&ctx, "herdr_git", json!({"root": repo.p(""), "action": "diff"}));
    assert!(r["output"].as_str().unwrap().contains("-one\n+two"), "{r}");
    let r = call(&ctx, "herdr_git", json!({"root": repo.p(""), "action": "diff", "staged": true}));
    assert_eq!(r["output"], "");
    git(&repo.root, &["add", "a.txt"]);
    let r = call(&ctx, "herdr_git", json!({"root": repo.p(""), "action": "diff", "staged": true, "path": "a.txt"}));
    assert!(r["output"].as_str().unwrap().contains("+two"), "{r}");
    repo.commit_all();
    let r = call(&ctx, "herdr_git", json!({"root": repo.p(""), "action": "log", "max_count": 1}));
    let log = r["output"].as_str().unwrap();
    assert_eq!(log.lines().count(), 1, "{log}");
    assert!(log.contains("more"), "{log}");
}

#[test]
fn diff_never_shows_secret_files() {
    let repo = Repo::with_files(&[(".env", "A=1\n"), ("conf/db_credentials.yml", "p: 1\n"), ("ok.txt", "1\n")]);
    repo.write(".env", "A=2\n");
    repo.write("conf/db_credentials.yml", "p: 2\n");
    repo.write("ok.txt", "2\n");
    let r = call(&repo.ctx(), "herdr_git", json!({"root": repo.p(""), "action": "diff"}));
    let out = r["output"].as_str().unwrap();
    assert!(out.contains("ok.txt"), "{out}");
    assert!(!out.contains(".env") && !out.contains("credentials"), "{out}");
}

#[test]
fn output_cap_and_argument_errors() {
    let repo = Repo::with_files(&[("a.txt", "one\n")]);
    repo.write("a.txt", "two\n");
    let ctx = repo.ctx();
    let r = call(&ctx, "herdr_git", json!({"root": repo.p(""), "action": "diff", "max_bytes": 10}));
    assert_eq!(r["truncated"], true);
    assert_eq!(r["output"].as_str().unwrap().len(), 10);
    assert_reason(&call(&ctx, "herdr_git", json!({"root": repo.p(""), "action": "diff", "path": ".env"})), "secret_path_denied");
    assert_reason(&call(&ctx, "herdr_git", json!({"root": repo.p(""), "action": "diff", "path": "../x"})), "outside_managed_roots");
    assert_reason(&call(&ctx, "herdr_git", json!({"root": "/etc", "action": "status"})), "outside_managed_roots");
    assert_code(&call(&ctx, "herdr_git", json!({"root": repo.p(""), "action": "push"})), "invalid_params");
    assert_code(&call(&ctx, "herdr_git", json!({"root": repo.p(""), "action": "log", "path": "a.txt"})), "invalid_params");
    assert_code(&call(&ctx, "herdr_git", json!({"root": repo.p(""), "action": "log", "max_count": 101})), "invalid_params");
    assert_code(&call(&ctx, "herdr_git", json!({"root": repo.p(""), "action": "log", "max_bytes": 512001})), "invalid_params");
}

#[test]
fn a_failing_git_is_ok_false_with_stderr() {
    let repo = Repo::with_files(&[]);
    // A fresh repo without commits has no log.
    let empty = tempfile::tempdir().unwrap();
    git(empty.path(), &["init", "-q"]);
    let ctx = ctx(herdr_mcp::policy::Policy::for_tests(vec![empty.path().to_path_buf()]));
    let r = call(&ctx, "herdr_git", json!({"root": empty.path().display().to_string(), "action": "log"}));
    assert_eq!(r["ok"], false, "{r}");
    assert_ne!(r["exit_code"], 0);
    assert!(!r["stderr"].as_str().unwrap().is_empty());
    drop(repo);
}

/// max_bytes is inclusive: an output of exactly that size is whole and not
/// flagged; one byte less cuts it and says so.
#[test]
fn max_bytes_holds_at_its_edge() {
    let repo = Repo::with_files(&[("a.txt", "one\n")]);
    repo.write("a.txt", "two\n");
    let ctx = repo.ctx();
    let full = call(&ctx, "herdr_git", json!({"root": repo.p(""), "action": "diff"}));
    let text = full["output"].as_str().unwrap().to_string();
    assert_eq!(full["truncated"], false);
    let exact = call(&ctx, "herdr_git", json!({"root": repo.p(""), "action": "diff", "max_bytes": text.len()}));
    assert_eq!((exact["output"].as_str(), exact["truncated"].as_bool()), (Some(text.as_str()), Some(false)), "{exact}");
    let cut = call(&ctx, "herdr_git", json!({"root": repo.p(""), "action": "diff", "max_bytes": text.len() - 1}));
    assert_eq!((cut["output"].as_str(), cut["truncated"].as_bool()), (Some(&text[..text.len() - 1]), Some(true)), "{cut}");
}

/// A cut never splits a character: the output ends before a multi-byte
/// character that does not fit whole, instead of showing a replacement mark.
/// An invalid byte earlier in the file (shown as one) does not change that.
#[test]
fn a_cut_output_ends_on_a_whole_character() {
    let repo = Repo::with_files(&[("a.txt", "one\n")]);
    repo.write_bytes("a.txt", &[b"\xff", "€€€\n".as_bytes()].concat());
    let ctx = repo.ctx();
    let full = call(&ctx, "herdr_git", json!({"root": repo.p(""), "action": "diff"}));
    let text = full["output"].as_str().unwrap().to_string();
    // The raw 0xff byte is shown as U+FFFD, two bytes longer than in git's output.
    let euro = text.find('€').unwrap();
    let raw_euro = euro - 2;
    // One and two bytes into the first "€" (3 bytes) the cut drops it whole.
    for (max, want) in [(raw_euro + 1, euro), (raw_euro + 2, euro), (raw_euro + 3, euro + 3)] {
        let r = call(&ctx, "herdr_git", json!({"root": repo.p(""), "action": "diff", "max_bytes": max}));
        assert_eq!(r["output"].as_str(), Some(&text[..want]), "max_bytes {max}: {r}");
        assert_eq!(r["truncated"], true);
    }
}
