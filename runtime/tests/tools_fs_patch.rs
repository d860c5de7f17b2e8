//! `herdr_fs_patch` through the registry: every operation, all-or-nothing failures
//! (byte-identical files afterwards), dry runs, CRLF/BOM preservation and the gates.

mod tools_support;

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};
use tools_support::*;

/// Every file under `root` (except .git) with its bytes, to prove nothing changed.
fn snapshot(root: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(dir: &Path, root: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.file_name().unwrap() == ".git" {
                continue;
            }
            if p.is_dir() {
                walk(&p, root, out);
            } else {
                out.insert(p.strip_prefix(root).unwrap().display().to_string(), std::fs::read(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

fn patch(repo: &Repo, body: &str, extra: Value) -> Value {
    let mut args = json!({"root": repo.p(""), "patch": format!("*** Begin Patch\n{body}*** End Patch\n")});
    for (k, v) in extra.as_object().unwrap() {
        args[k] = v.clone();
    }
    call(&repo.ctx(), "herdr_fs_patch", args)
}

fn sample() -> Repo {
    Repo::with_files(&[
        ("src/a.rs", "fn a() {\n    1\n}\n"),
        ("src/b.rs", "fn b() {\n    2\n}\n"),
        ("old.txt", "bye\nnow\n"),
        ("mv.txt", "move me\n"),
        ("dup.txt", "same\nsame\n"),
    ])
}

#[test]
fn applies_add_update_delete_and_move_together() {
    let repo = sample();
    let r = patch(
        &repo,
        "*** Add File: docs/../new.txt\n+hello\n+world\n*** Update File: src/a.rs\n@@ fn a() {\n-    1\n+    10\n+    11\n*** Delete File: old.txt\n*** Update File: mv.txt\n*** Move to: moved/here.txt\n",
        json!({}),
    );
    // moved/ does not exist: the whole patch must fail without touching anything.
    assert_reason(&r, "parent_not_found");
    std::fs::create_dir(repo.path("moved")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(repo.path("mv.txt"), std::fs::Permissions::from_mode(0o750)).unwrap();
    repo.commit_all();
    let r = patch(
        &repo,
        "*** Add File: new.txt\n+hello\n+world\n*** Update File: src/a.rs\n@@ fn a() {\n-    1\n+    10\n+    11\n*** Delete File: old.txt\n*** Update File: mv.txt\n*** Move to: moved/here.txt\n@@\n-move me\n+moved\n",
        json!({}),
    );
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["dry_run"], false);
    assert_eq!(r["summary"], "A new.txt\nM src/a.rs\nD old.txt\nR mv.txt -> moved/here.txt");
    assert_eq!((r["additions"].clone(), r["removals"].clone()), (json!(5), json!(4)));
    let ops: Vec<&str> = r["affected_files"].as_array().unwrap().iter().map(|a| a["operation"].as_str().unwrap()).collect();
    assert_eq!(ops, ["add", "update", "delete", "update"]);
    assert_eq!(repo.read("new.txt"), b"hello\nworld\n");
    assert_eq!(repo.read("src/a.rs"), b"fn a() {\n    10\n    11\n}\n");
    assert!(!repo.path("old.txt").exists() && !repo.path("mv.txt").exists());
    assert_eq!(repo.read("moved/here.txt"), b"moved\n");
    let mode = std::fs::metadata(repo.path("moved/here.txt")).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o750, "a moved file keeps its permissions");
}

#[test]
fn a_failing_second_file_leaves_every_file_byte_identical() {
    let repo = sample();
    let before = snapshot(&repo.root);
    for body in [
        // second file's hunk does not match
        "*** Update File: src/a.rs\n-    1\n+    9\n*** Update File: src/b.rs\n-    3\n+    9\n",
        // second file's hunk is ambiguous
        "*** Add File: x.txt\n+x\n*** Update File: src/b.rs\n-    2\n+    3\n*** Update File: dup.txt\n-same\n+other\n",
        // a later add collides with an existing file
        "*** Delete File: old.txt\n*** Add File: src/a.rs\n+x\n",
        // the same file twice
        "*** Update File: src/a.rs\n-    1\n+    2\n*** Delete File: ./src/a.rs\n",
        // a later path escapes the project
        "*** Update File: src/a.rs\n-    1\n+    2\n*** Add File: ../escape.txt\n+x\n",
    ] {
        let r = patch(&repo, body, json!({}));
        assert_eq!(r["ok"], false, "{body}: {r}");
        assert_eq!(snapshot(&repo.root), before, "files changed after failed patch {body}");
    }
    assert!(!repo.root.parent().unwrap().join("escape.txt").exists());
}

#[test]
fn a_commit_failure_midway_rolls_back_already_renamed_files() {
    use std::os::unix::fs::PermissionsExt;
    let repo = sample();
    std::fs::create_dir(repo.path("locked")).unwrap();
    repo.write("locked/c.txt", "c\n");
    repo.commit_all();
    let before = snapshot(&repo.root);
    // Staging the second file in a read-only directory fails after the plan has
    // succeeded. Root ignores directory permissions, so there the patch simply
    // applies; the swap-phase rollback itself is proven with injected faults in
    // `policy::atomic`'s unit tests.
    std::fs::set_permissions(repo.path("locked"), std::fs::Permissions::from_mode(0o555)).unwrap();
    let enforced = std::fs::write(repo.path("locked/probe"), "").is_err();
    let r = patch(&repo, "*** Update File: src/a.rs\n-    1\n+    2\n*** Update File: locked/c.txt\n-c\n+d\n", json!({}));
    std::fs::set_permissions(repo.path("locked"), std::fs::Permissions::from_mode(0o755)).unwrap();
    if enforced {
        assert_code(&r, "PATCH_COMMIT_FAILED");
        assert_eq!(snapshot(&repo.root), before);
    } else {
        let _ = std::fs::remove_file(repo.path("locked/probe"));
        assert_eq!(r["ok"], true, "{r}");
    }
}

#[test]
fn hunk_errors_carry_their_index_and_a_retry_hint() {
    let repo = Repo::with_files(&[("f.txt", "x\ny\nx\ny\nz\n")]);
    let r = patch(&repo, "*** Update File: f.txt\n@@\n-z\n+Z\n@@\n-nope\n", json!({}));
    assert_code(&r, "PATCH_CONTEXT_NOT_FOUND");
    assert_eq!((r["hunk_index"].clone(), r["path"].clone()), (json!(1), json!("f.txt")));
    assert!(r["retry_hint"].is_string());
    let r = patch(&repo, "*** Update File: f.txt\n x\n-y\n", json!({}));
    assert_code(&r, "PATCH_CONTEXT_AMBIGUOUS");
    assert_eq!(r["match_count"], 2);
    let r = patch(&repo, "*** Update File: f.txt\n@@\n x\n-y\n x\n@@\n x\n-y\n z\n", json!({}));
    assert_code(&r, "PATCH_HUNKS_OVERLAP");
    assert_eq!(repo.read("f.txt"), b"x\ny\nx\ny\nz\n");
}

#[test]
fn envelope_errors_are_patch_failed() {
    let repo = sample();
    let ctx = repo.ctx();
    for bad in ["garbage", "*** Begin Patch\n*** End Patch", "*** Begin Patch\n*** Frobnicate File: a\n*** End Patch"] {
        let r = call(&ctx, "herdr_fs_patch", json!({"root": repo.p(""), "patch": bad}));
        assert_code(&r, "PATCH_FAILED");
    }
    let r = call(&ctx, "herdr_fs_patch", json!({"root": repo.p(""), "patch": "*** Begin Patch\n*** End Patch"}));
    assert!(r["message"].as_str().unwrap().contains("No files were modified."));
    let r = patch(&repo, "*** Update File: mv.txt\n*** Move to: src/a.rs\n", json!({}));
    assert_code(&r, "PATCH_FAILED");
}

#[test]
fn dry_run_reports_without_writing_even_in_readonly_mode() {
    let repo = sample();
    let before = snapshot(&repo.root);
    let body = "*** Add File: n.txt\n+n\n*** Update File: src/b.rs\n-    2\n+    3\n";
    let r = patch(&repo, body, json!({"dry_run": true}));
    assert_eq!((r["ok"].clone(), r["dry_run"].clone()), (json!(true), json!(true)), "{r}");
    assert_eq!(r["summary"], "A n.txt\nM src/b.rs");
    assert_eq!(snapshot(&repo.root), before);
    let ro = ctx(repo.policy().with_readonly(true));
    let args = |dry: bool| json!({"root": repo.p(""), "patch": format!("*** Begin Patch\n{body}*** End Patch"), "dry_run": dry});
    assert_eq!(call(&ro, "herdr_fs_patch", args(true))["ok"], true);
    assert_reason(&call(&ro, "herdr_fs_patch", args(false)), "readonly_mode");
    let wr = ctx(repo.policy().with_write_roots(Some(vec![repo.path("src")])));
    assert_reason(&call(&wr, "herdr_fs_patch", args(false)), "root_not_whitelisted");
    assert_eq!(call(&wr, "herdr_fs_patch", args(true))["ok"], true);
    assert_eq!(snapshot(&repo.root), before);
    // dry_run still reports hunk failures.
    let r = patch(&repo, "*** Update File: src/b.rs\n-nope\n", json!({"dry_run": true}));
    assert_code(&r, "PATCH_CONTEXT_NOT_FOUND");
}

#[test]
fn crlf_and_bom_are_preserved() {
    let repo = Repo::with_files(&[]);
    repo.write_bytes("win.txt", b"\xEF\xBB\xBFone\r\ntwo\r\nthree\r\n");
    repo.write_bytes("nonl.txt", b"a\nb");
    repo.commit_all();
    let r = patch(&repo, "*** Update File: win.txt\n one\n-two\n+2\n+2b\n*** Update File: nonl.txt\n-b\n+B\n", json!({}));
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(repo.read("win.txt"), b"\xEF\xBB\xBFone\r\n2\r\n2b\r\nthree\r\n");
    assert_eq!(repo.read("nonl.txt"), b"a\nB");
    // A CRLF patch applies to an LF file too (CRLF is tolerated in the patch text).
    let r = call(&repo.ctx(), "herdr_fs_patch", json!({"root": repo.p(""), "patch": "*** Begin Patch\r\n*** Update File: nonl.txt\r\n-a\r\n+A\r\n*** End Patch\r\n", "confirm_dirty": true}));
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(repo.read("nonl.txt"), b"A\nB");
}

#[test]
fn dirty_sources_need_confirmation() {
    let repo = sample();
    repo.write("src/a.rs", "fn a() {\n    1\n}\n// local edit\n");
    let body = "*** Update File: src/a.rs\n-    1\n+    2\n*** Add File: brand_new.txt\n+x\n";
    let r = patch(&repo, body, json!({}));
    assert_reason(&r, "file_dirty_confirmation_required");
    assert_eq!(r["dirty_files"], json!(["src/a.rs"]));
    assert!(!repo.path("brand_new.txt").exists());
    assert_eq!(patch(&repo, body, json!({"dry_run": true}))["ok"], true);
    let r = patch(&repo, body, json!({"confirm_dirty": true, "confirm_busy": true}));
    assert_eq!(r["ok"], true, "{r}");
}

#[test]
fn root_must_be_the_project_root_and_paths_must_stay_inside() {
    let repo = sample();
    let ctx = repo.ctx();
    let p = "*** Begin Patch\n*** Add File: z.txt\n+z\n*** End Patch";
    assert_reason(&call(&ctx, "herdr_fs_patch", json!({"root": repo.p("src"), "patch": p})), "root_not_project_root");
    assert_reason(&call(&ctx, "herdr_fs_patch", json!({"root": "/tmp", "patch": p})), "root_not_project_root");
    assert_reason(&patch(&repo, "*** Add File: /etc/evil\n+x\n", json!({})), "cross_project_patch_denied");
    assert_reason(&patch(&repo, "*** Add File: ../../evil\n+x\n", json!({})), "cross_project_patch_denied");
    assert_reason(&patch(&repo, "*** Add File: .env.local\n+x\n", json!({})), "secret_path_denied");
    assert_reason(&patch(&repo, "*** Update File: id_rsa\n-x\n", json!({})), "secret_path_denied");
    std::os::unix::fs::symlink("/etc", repo.path("etc")).unwrap();
    assert_reason(&patch(&repo, "*** Add File: etc/evil\n+x\n", json!({})), "symlink_escape");
    // A nested managed root is another project.
    let nested = repo.path("src");
    let two = ctx_with(vec![repo.root.clone(), nested]);
    let r = call(&two, "herdr_fs_patch", json!({"root": repo.p(""), "patch": "*** Begin Patch\n*** Add File: src/n.txt\n+x\n*** End Patch"}));
    assert_reason(&r, "cross_project_patch_denied");
}

/// A path that resolves but names no regular file fails the patch and names the
/// path as written; the same names inside a nested project are that project's,
/// refused as such before anything about them is reported.
#[test]
fn a_directory_to_update_or_delete_fails_the_patch_by_name() {
    let repo = sample();
    std::fs::create_dir(repo.path("dir")).unwrap();
    let before = snapshot(&repo.root);
    let cases = [("*** Update File: dir\n-x\n+y\n", "dir"), ("*** Delete File: dir\n", "dir"), ("*** Delete File: ./dir/\n", "./dir/")];
    for (body, raw) in cases {
        let r = patch(&repo, body, json!({}));
        let expected = json!({"ok": false, "code": "PATCH_FAILED", "message": format!("{raw} is not a regular file"), "path": raw});
        assert_eq!(r, expected, "{body}");
    }
    assert_eq!(snapshot(&repo.root), before);
    let two = ctx_with(vec![repo.root.clone(), repo.path("src")]);
    for body in ["*** Update File: src\n-x\n+y\n", "*** Delete File: src/a.rs\n"] {
        let args = json!({"root": repo.p(""), "patch": format!("*** Begin Patch\n{body}*** End Patch")});
        assert_reason(&call(&two, "herdr_fs_patch", args), "cross_project_patch_denied");
    }
}

fn ctx_with(roots: Vec<std::path::PathBuf>) -> std::sync::Arc<herdr_mcp::tools::ToolContext> {
    ctx(herdr_mcp::policy::Policy::for_tests(roots))
}

/// Two nested projects, only the inner one (src) whitelisted: a patch of either
/// that also touches the other is refused as a whole, whether the gate passed
/// or refused the files before, and no file changes.
#[test]
fn a_patch_spanning_a_whitelisted_and_a_non_whitelisted_root_changes_nothing() {
    let repo = sample();
    let policy = herdr_mcp::policy::Policy::for_tests(vec![repo.root.clone(), repo.path("src")]);
    let two = ctx(policy.with_write_roots(Some(vec![repo.path("src")])));
    let before = snapshot(&repo.root);
    let src_a = "*** Update File: a.rs\n-    1\n+    9\n";
    let outer_old = "*** Update File: ../old.txt\n*** Move to: ../gone.txt\n";
    let cases = [
        // inner root: the gate passes a.rs, then the outer file is another project's.
        (repo.p("src"), format!("{src_a}{outer_old}"), "cross_project_patch_denied"),
        (repo.p("src"), format!("*** Delete File: ../old.txt\n{src_a}"), "cross_project_patch_denied"),
        // outer root: refused by the gate at its own file, or as cross-project first.
        (repo.p(""), "*** Delete File: old.txt\n*** Update File: src/a.rs\n-    1\n+    9\n".to_string(), "root_not_whitelisted"),
        (repo.p(""), "*** Update File: src/a.rs\n-    1\n+    9\n*** Delete File: old.txt\n".to_string(), "cross_project_patch_denied"),
    ];
    for (root, body, reason) in cases {
        let r = call(&two, "herdr_fs_patch", json!({"root": root, "patch": format!("*** Begin Patch\n{body}*** End Patch")}));
        assert_reason(&r, reason);
        assert_eq!(snapshot(&repo.root), before, "{body}");
    }
}
