//! `herdr_fs_edit` and `herdr_fs_write` through the registry: success, dirty files,
//! and the read-only and write-root gates.

mod tools_support;

use serde_json::json;
use tools_support::*;

#[test]
fn edit_replaces_a_unique_string_atomically() {
    use std::os::unix::fs::PermissionsExt;
    let repo = Repo::with_files(&[("a.sh", "echo one\necho two\n")]);
    std::fs::set_permissions(repo.path("a.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    repo.commit_all();
    let r = call(&repo.ctx(), "herdr_fs_edit", json!({"path": repo.p("a.sh"), "old_string": "two", "new_string": "$1 three"}));
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!((r["replaced"].clone(), r["bytes_before"].clone(), r["bytes_after"].clone()), (json!(1), json!(18), json!(23)));
    assert_eq!(repo.read("a.sh"), b"echo one\necho $1 three\n");
    assert_eq!(std::fs::metadata(repo.path("a.sh")).unwrap().permissions().mode() & 0o777, 0o755);
    let leftovers: Vec<_> = std::fs::read_dir(&repo.root).unwrap().filter_map(|e| e.ok()).filter(|e| e.file_name().to_string_lossy().contains("herdr-mcp")).collect();
    assert!(leftovers.is_empty());
}

#[test]
fn edit_takes_an_old_string_of_any_size_the_body_limit_allows() {
    // 600 KiB: as an escaped regex this passed the compiled-size limit and panicked.
    let big = "line of text\n".repeat(600 * 1024 / 13);
    let text = format!("head\n{big}tail\n");
    let repo = Repo::with_files(&[("big.txt", text.as_str())]);
    let r = call(&repo.ctx(), "herdr_fs_edit", json!({"path": repo.p("big.txt"), "old_string": big, "new_string": "middle\n"}));
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(repo.read("big.txt"), b"head\nmiddle\ntail\n");
    let r = call(&repo.ctx(), "herdr_fs_edit", json!({"path": repo.p("big.txt"), "old_string": format!("{big}x"), "new_string": ""}));
    assert_reason(&r, "old_string_not_found");
}

#[test]
fn edit_errors() {
    let repo = Repo::with_files(&[("a.txt", "x x\n"), ("d/f", "")]);
    let ctx = repo.ctx();
    assert_reason(&call(&ctx, "herdr_fs_edit", json!({"path": repo.p("a.txt"), "old_string": "y", "new_string": "z"})), "old_string_not_found");
    let r = call(&ctx, "herdr_fs_edit", json!({"path": repo.p("a.txt"), "old_string": "x", "new_string": "z"}));
    assert_reason(&r, "old_string_not_unique");
    assert_eq!(r["occurrences"], 2);
    // Occurrences do not overlap: "xx" occurs once in "xxx".
    let repo3 = Repo::with_files(&[("b.txt", "xxx\n")]);
    let r = call(&repo3.ctx(), "herdr_fs_edit", json!({"path": repo3.p("b.txt"), "old_string": "xx", "new_string": "y"}));
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(repo3.read("b.txt"), b"yx\n");
    assert_code(&call(&ctx, "herdr_fs_edit", json!({"path": repo.p("a.txt"), "old_string": "", "new_string": "z"})), "invalid_params");
    assert_reason(&call(&ctx, "herdr_fs_edit", json!({"path": repo.p("d"), "old_string": "a", "new_string": "z"})), "not_a_file");
    assert_reason(&call(&ctx, "herdr_fs_edit", json!({"path": repo.p("nope"), "old_string": "a", "new_string": "z"})), "not_found");
    assert_eq!(repo.read("a.txt"), b"x x\n");
}

#[test]
fn edit_of_a_dirty_or_untracked_file_needs_confirmation() {
    let repo = Repo::with_files(&[("a.txt", "one\n")]);
    let ctx = repo.ctx();
    repo.write("a.txt", "one two\n");
    let r = call(&ctx, "herdr_fs_edit", json!({"path": repo.p("a.txt"), "old_string": "two", "new_string": "2"}));
    assert_reason(&r, "file_dirty_confirmation_required");
    assert_eq!(r["dirty_files"], json!(["a.txt"]));
    assert_eq!(repo.read("a.txt"), b"one two\n");
    let r = call(&ctx, "herdr_fs_edit", json!({"path": repo.p("a.txt"), "old_string": "two", "new_string": "2", "confirm_dirty": true, "confirm_busy": true}));
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(repo.read("a.txt"), b"one 2\n");
    repo.write("new.txt", "n\n");
    let r = call(&ctx, "herdr_fs_edit", json!({"path": repo.p("new.txt"), "old_string": "n", "new_string": "m"}));
    assert_reason(&r, "file_dirty_confirmation_required");
}

#[test]
fn write_creates_and_overwrites_only_when_asked() {
    let repo = Repo::with_files(&[("a.txt", "old\n")]);
    let ctx = repo.ctx();
    let r = call(&ctx, "herdr_fs_write", json!({"path": repo.p("sub/../b.txt"), "content": "héllo\n"}));
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!((r["created"].clone(), r["overwritten"].clone(), r["bytes"].clone()), (json!(true), json!(false), json!(7)));
    assert_eq!(repo.read("b.txt"), "héllo\n".as_bytes());
    assert_reason(&call(&ctx, "herdr_fs_write", json!({"path": repo.p("a.txt"), "content": "new\n"})), "overwrite_confirmation_required");
    let r = call(&ctx, "herdr_fs_write", json!({"path": repo.p("a.txt"), "content": "new\n", "overwrite": true}));
    assert_eq!((r["created"].clone(), r["overwritten"].clone()), (json!(false), json!(true)), "{r}");
    assert_eq!(repo.read("a.txt"), b"new\n");
    // b.txt is untracked now: replacing it needs confirm_dirty too.
    let r = call(&ctx, "herdr_fs_write", json!({"path": repo.p("b.txt"), "content": "x", "overwrite": true}));
    assert_reason(&r, "file_dirty_confirmation_required");
    let r = call(&ctx, "herdr_fs_write", json!({"path": repo.p("b.txt"), "content": "x", "overwrite": true, "confirm_dirty": true}));
    assert_eq!(r["ok"], true, "{r}");
}

#[test]
fn write_target_errors() {
    let repo = Repo::with_files(&[("a.txt", "old\n"), ("d/x", "")]);
    let ctx = repo.ctx();
    assert_reason(&call(&ctx, "herdr_fs_write", json!({"path": repo.p("missing/b.txt"), "content": ""})), "parent_not_found");
    assert_reason(&call(&ctx, "herdr_fs_write", json!({"path": repo.p("a.txt/b.txt"), "content": ""})), "parent_not_directory");
    assert_reason(&call(&ctx, "herdr_fs_write", json!({"path": repo.p("d"), "content": "", "overwrite": true})), "invalid_target");
    assert_reason(&call(&ctx, "herdr_fs_write", json!({"path": repo.p(""), "content": ""})), "invalid_target");
    std::os::unix::fs::symlink(repo.path("gone"), repo.path("dangling")).unwrap();
    assert_reason(&call(&ctx, "herdr_fs_write", json!({"path": repo.p("dangling"), "content": ""})), "target_unresolvable");
    std::os::unix::fs::symlink("/tmp", repo.path("tmp_link")).unwrap();
    assert_reason(&call(&ctx, "herdr_fs_write", json!({"path": repo.p("tmp_link/evil"), "content": ""})), "symlink_escape");
    assert_reason(&call(&ctx, "herdr_fs_write", json!({"path": repo.p("prod.pem"), "content": ""})), "secret_path_denied");
    assert!(!std::path::Path::new("/tmp/evil").exists());
}

#[test]
fn readonly_mode_blocks_edit_and_write() {
    let repo = Repo::with_files(&[("a.txt", "one\n")]);
    let ctx = ctx(repo.policy().with_readonly(true));
    let r = call(&ctx, "herdr_fs_edit", json!({"path": repo.p("a.txt"), "old_string": "one", "new_string": "1"}));
    assert_reason(&r, "readonly_mode");
    // The path is validated before the gate (spec §1.10 order)...
    let r = call(&ctx, "herdr_fs_edit", json!({"path": repo.p("nope.txt"), "old_string": "one", "new_string": "1"}));
    assert_reason(&r, "not_found");
    // ...and the gate before anything about what the path names: neither a
    // directory nor a FIFO (which fails to open as root too) is looked at.
    std::fs::create_dir(repo.path("d")).unwrap();
    nix::unistd::mkfifo(&repo.path("pipe"), nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    for name in ["d", "pipe"] {
        let r = call(&ctx, "herdr_fs_edit", json!({"path": repo.p(name), "old_string": "one", "new_string": "1"}));
        assert_reason(&r, "readonly_mode");
    }
    assert_reason(&call(&ctx, "herdr_fs_write", json!({"path": repo.p("b.txt"), "content": "x"})), "readonly_mode");
    assert_eq!(repo.read("a.txt"), b"one\n");
    assert!(!repo.path("b.txt").exists());
    // Reads still work.
    assert_eq!(call(&ctx, "herdr_fs_read", json!({"path": repo.p("a.txt")}))["ok"], true);
}

#[test]
fn write_roots_limit_where_edit_and_write_may_change_files() {
    let repo = Repo::with_files(&[("a.txt", "one\n"), ("open/b.txt", "b\n")]);
    let ctx = ctx(repo.policy().with_write_roots(Some(vec![repo.path("open")])));
    let r = call(&ctx, "herdr_fs_edit", json!({"path": repo.p("a.txt"), "old_string": "one", "new_string": "1"}));
    assert_reason(&r, "root_not_whitelisted");
    assert_eq!(r["write_roots"], json!([repo.p("open")]));
    assert_reason(&call(&ctx, "herdr_fs_write", json!({"path": repo.p("c.txt"), "content": "x"})), "root_not_whitelisted");
    // Outside the write roots, a directory at the path is not looked at either.
    std::fs::create_dir(repo.path("d")).unwrap();
    let r = call(&ctx, "herdr_fs_edit", json!({"path": repo.p("d"), "old_string": "one", "new_string": "1"}));
    assert_reason(&r, "root_not_whitelisted");
    let other = Repo::with_files(&[("a.txt", "one\n")]);
    let ctx = ctx_for(&repo, &other);
    let r = call(&ctx, "herdr_fs_write", json!({"path": other.p("new.txt"), "content": "x"}));
    assert_eq!(r["ok"], true, "{r}");
    assert_reason(&call(&ctx, "herdr_fs_write", json!({"path": repo.p("new.txt"), "content": "x"})), "root_not_whitelisted");
}

/// Two managed roots, only `writable` whitelisted.
fn ctx_for(locked: &Repo, writable: &Repo) -> std::sync::Arc<herdr_mcp::tools::ToolContext> {
    let policy = herdr_mcp::policy::Policy::for_tests(vec![locked.root.clone(), writable.root.clone()])
        .with_write_roots(Some(vec![writable.root.clone()]));
    ctx(policy)
}

#[test]
fn a_broken_repository_is_git_status_failed_not_a_silent_write() {
    let repo = Repo::with_files(&[("a.txt", "one\n")]);
    // A HEAD git cannot parse makes every status fail.
    std::fs::write(repo.path(".git/HEAD"), "garbage\n").unwrap();
    let ctx = repo.ctx();
    let r = call(&ctx, "herdr_fs_edit", json!({"path": repo.p("a.txt"), "old_string": "one", "new_string": "1"}));
    assert_reason(&r, "git_status_failed");
    let r = call(&ctx, "herdr_fs_write", json!({"path": repo.p("a.txt"), "content": "x", "overwrite": true}));
    assert_reason(&r, "git_status_failed");
    assert_eq!(repo.read("a.txt"), b"one\n");
    // confirm_dirty skips the check: the caller already accepted local changes.
    let r = call(&ctx, "herdr_fs_edit", json!({"path": repo.p("a.txt"), "old_string": "one", "new_string": "1", "confirm_dirty": true}));
    assert_eq!(r["ok"], true, "{r}");
}

/// Herdr shows an agent working in the one project of the repo.
struct BusyProject(std::path::PathBuf);

impl herdr_mcp::exec::workspaces::WorkspaceSource for BusyProject {
    fn workspaces(&self) -> herdr_mcp::tools::BoxFuture<Vec<herdr_mcp::exec::workspaces::Workspace>> {
        let w = herdr_mcp::exec::workspaces::Workspace { id: "w1".into(), label: "main".into(), roots: vec![self.0.clone()] };
        Box::pin(async move { vec![w] })
    }
    fn working_agents(&self, root: std::path::PathBuf) -> herdr_mcp::tools::BoxFuture<Vec<serde_json::Value>> {
        let busy = root == self.0;
        Box::pin(async move { if busy { vec![json!({"pane": "w1:p1", "agent": "pi"})] } else { vec![] } })
    }
}

/// Spec §2.4 step 3 holds for the file tools as for exec: an agent working in the
/// project refuses the change unless confirm_busy, which reports it as a warning.
#[test]
fn an_agent_working_in_the_project_needs_confirm_busy() {
    let repo = Repo::with_files(&[("a.txt", "one\n")]);
    let mut ctx = herdr_mcp::tools::ToolContext::new(herdr_mcp::runtime_info::RuntimeInfo::new(), repo.policy());
    ctx.services.workspaces = Some(std::sync::Arc::new(BusyProject(repo.root.clone())));
    let ctx = std::sync::Arc::new(ctx);
    let patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n-one\n+three\n*** End Patch";
    let calls = [
        ("herdr_fs_write", json!({"path": repo.p("new.txt"), "content": "x"})),
        ("herdr_fs_edit", json!({"path": repo.p("a.txt"), "old_string": "one", "new_string": "two"})),
        ("herdr_fs_patch", json!({"root": repo.p(""), "patch": patch})),
    ];
    for (tool, args) in &calls {
        let r = call(&ctx, tool, args.clone());
        assert_reason(&r, "agent_working");
        assert_eq!(r["working"], json!([{"pane": "w1:p1", "agent": "pi"}]), "{tool}: {r}");
        assert!(r["hint"].as_str().is_some_and(|h| h.contains("confirm_busy")), "{tool}: {r}");
    }
    assert!(!repo.path("new.txt").exists());
    assert_eq!(repo.read("a.txt"), b"one\n");
    // A dry run changes nothing: the agent is only reported.
    let r = call(&ctx, "herdr_fs_patch", json!({"root": repo.p(""), "patch": patch, "dry_run": true}));
    assert_eq!((r["ok"].clone(), r["warnings"]["working"][0]["agent"].clone()), (json!(true), json!("pi")), "{r}");
    for (tool, args) in &calls {
        let mut args = args.clone();
        args["confirm_busy"] = json!(true);
        // The edit before the patch leaves a.txt with uncommitted changes.
        args["confirm_dirty"] = json!(true);
        if *tool == "herdr_fs_patch" {
            args["patch"] = json!("*** Begin Patch\n*** Update File: a.txt\n@@\n-two\n+three\n*** End Patch");
        }
        let r = call(&ctx, tool, args);
        assert_eq!(r["ok"], true, "{tool}: {r}");
        assert_eq!(r["warnings"]["working"][0]["pane"], "w1:p1", "{tool}: {r}");
    }
    assert_eq!(repo.read("a.txt"), b"three\n");
}
