//! The order of refusals in `herdr_fs_write` and `herdr_fs_patch`, as in
//! `herdr_fs_edit`: a refusal about the path itself (outside the roots, a secret,
//! a symlink escape, a missing parent) comes first, then the mutation gate
//! (`readonly_mode`, `root_not_whitelisted`), and only then anything about what
//! the path names (a directory or FIFO in the way, a file that already exists).

mod tools_support;

use serde_json::{Value, json};
use tools_support::*;

/// A repo with a directory `d`, a FIFO `pipe` and a file `a.txt`.
fn repo_with_obstacles() -> Repo {
    let repo = Repo::with_files(&[("a.txt", "one\n"), ("d/x", "")]);
    nix::unistd::mkfifo(&repo.path("pipe"), nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    repo
}

fn write(ctx: &std::sync::Arc<herdr_mcp::tools::ToolContext>, path: String) -> Value {
    call(ctx, "herdr_fs_write", json!({"path": path, "content": "x", "overwrite": true}))
}

fn patch(ctx: &std::sync::Arc<herdr_mcp::tools::ToolContext>, repo: &Repo, body: &str) -> Value {
    call(ctx, "herdr_fs_patch", json!({"root": repo.p(""), "patch": format!("*** Begin Patch\n{body}*** End Patch\n")}))
}

#[test]
fn fs_write_reports_the_gate_before_a_directory_or_fifo_at_the_path() {
    let repo = repo_with_obstacles();
    // Without a gate, both are refused by what they are.
    for name in ["d", "pipe"] {
        assert_reason(&write(&repo.ctx(), repo.p(name)), "invalid_target");
    }
    let ro = ctx(repo.policy().with_readonly(true));
    for name in ["d", "pipe", "a.txt", "new.txt"] {
        assert_reason(&write(&ro, repo.p(name)), "readonly_mode");
    }
    let wr = ctx(repo.policy().with_write_roots(Some(vec![repo.path("elsewhere")])));
    for name in ["d", "pipe"] {
        let r = write(&wr, repo.p(name));
        assert_reason(&r, "root_not_whitelisted");
        assert_eq!(r["root"], repo.root.display().to_string());
    }
    assert_eq!(repo.read("a.txt"), b"one\n");
    assert!(!repo.path("new.txt").exists());
}

#[test]
fn fs_write_reports_path_refusals_before_the_gate() {
    let repo = repo_with_obstacles();
    std::os::unix::fs::symlink("/tmp", repo.path("tmp_link")).unwrap();
    let ro = ctx(repo.policy().with_readonly(true));
    assert_reason(&write(&ro, "/etc/h6-nowhere".into()), "outside_managed_roots");
    assert_reason(&write(&ro, repo.p("prod.pem")), "secret_path_denied");
    assert_reason(&write(&ro, repo.p("tmp_link/evil")), "symlink_escape");
    assert_reason(&write(&ro, repo.p("missing/b.txt")), "parent_not_found");
    assert_reason(&write(&ro, repo.p("a.txt/b.txt")), "parent_not_directory");
}

#[test]
fn fs_patch_reports_the_gate_before_what_a_file_is() {
    let repo = repo_with_obstacles();
    // (body, what an ungated patch reports: a reason or a code)
    let cases = [
        ("*** Add File: d\n+x\n", "invalid_target"),
        ("*** Add File: a.txt\n+x\n", "PATCH_FAILED"),
        ("*** Update File: pipe\n-x\n+y\n", "PATCH_FAILED"),
        ("*** Delete File: d\n", "PATCH_FAILED"),
        ("*** Update File: a.txt\n-nope\n+y\n", "PATCH_CONTEXT_NOT_FOUND"),
        ("*** Update File: a.txt\n*** Move to: d\n-one\n+y\n", "invalid_target"),
    ];
    let ro = ctx(repo.policy().with_readonly(true));
    let wr = ctx(repo.policy().with_write_roots(Some(vec![repo.path("elsewhere")])));
    for (body, ungated) in cases {
        let r = patch(&repo.ctx(), &repo, body);
        assert_eq!(r["ok"], false, "{body}: {r}");
        assert!(r["reason"] == ungated || r["code"] == ungated, "{body}: expected {ungated}: {r}");
        assert_reason(&patch(&ro, &repo, body), "readonly_mode");
        assert_reason(&patch(&wr, &repo, body), "root_not_whitelisted");
    }
    assert_eq!(repo.read("a.txt"), b"one\n");
}

#[test]
fn fs_patch_reports_path_refusals_before_the_gate() {
    let repo = repo_with_obstacles();
    std::os::unix::fs::symlink("/etc", repo.path("etc")).unwrap();
    let ro = ctx(repo.policy().with_readonly(true));
    assert_reason(&patch(&ro, &repo, "*** Add File: ../../evil\n+x\n"), "cross_project_patch_denied");
    assert_reason(&patch(&ro, &repo, "*** Add File: .env.local\n+x\n"), "secret_path_denied");
    assert_reason(&patch(&ro, &repo, "*** Add File: etc/evil\n+x\n"), "symlink_escape");
    assert_reason(&patch(&ro, &repo, "*** Delete File: nope.txt\n"), "not_found");
    // A dry run is not gated: it reports what the file is.
    let args = json!({"root": repo.p(""), "patch": "*** Begin Patch\n*** Add File: d\n+x\n*** End Patch\n", "dry_run": true});
    assert_reason(&call(&ro, "herdr_fs_patch", args), "invalid_target");
}
