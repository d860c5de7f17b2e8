//! How `herdr_fs_read` and `herdr_fs_image` open files: through symlinks inside the
//! root, never through links out of it or to secrets, and never waiting on a FIFO
//! (nor does any other file tool).

mod tools_support;

use std::os::unix::fs::symlink;
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};
use tools_support::*;

/// A 1×1 PNG.
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89";

fn repo_with_links() -> (Repo, tempfile::TempDir) {
    let repo = Repo::with_files(&[("src/deep/a.txt", "inside\n"), (".env", "SECRET=1\n")]);
    repo.write_bytes("img/pic.png", PNG);
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("o.txt"), "OUTSIDE\n").unwrap();
    std::fs::write(outside.path().join("o.png"), PNG).unwrap();
    symlink(repo.path("src"), repo.path("code")).unwrap();
    symlink(repo.path("img"), repo.path("pictures")).unwrap();
    symlink(repo.path(".env"), repo.path("notes.txt")).unwrap();
    symlink(outside.path(), repo.path("out")).unwrap();
    (repo, outside)
}

#[test]
fn a_symlinked_directory_inside_the_root_is_read_at_its_real_path() {
    let (repo, _outside) = repo_with_links();
    let ctx = repo.ctx();
    let r = call(&ctx, "herdr_fs_read", json!({"path": "code/deep/a.txt"}));
    assert_eq!(r["content"], "inside\n", "{r}");
    assert_eq!(r["path"], repo.p("src/deep/a.txt"));
    let r = call(&ctx, "herdr_fs_image", json!({"path": "pictures/pic.png"}));
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!((r["path"].as_str(), r["bytes"].as_u64()), (Some(repo.p("img/pic.png").as_str()), Some(PNG.len() as u64)));
}

#[test]
fn links_to_secrets_or_out_of_the_root_are_refused() {
    let (repo, _outside) = repo_with_links();
    let ctx = repo.ctx();
    for tool in ["herdr_fs_read", "herdr_fs_image"] {
        assert_reason(&call(&ctx, tool, json!({"path": "notes.txt"})), "secret_path_denied");
        assert_reason(&call(&ctx, tool, json!({"path": "out/o.txt"})), "symlink_escape");
        assert_reason(&call(&ctx, tool, json!({"path": "out/o.png"})), "symlink_escape");
        assert_reason(&call(&ctx, tool, json!({"path": "src"})), "not_a_file");
        assert_reason(&call(&ctx, tool, json!({"path": "src/nope.png"})), "not_found");
    }
}

/// Both tools answer a FIFO without a writer at once, as `not_a_file`.
#[test]
fn a_fifo_inside_the_root_is_refused_promptly() {
    let repo = Repo::with_files(&[]);
    for name in ["pipe.txt", "pipe.png"] {
        nix::unistd::mkfifo(&repo.path(name), nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    }
    let ctx = repo.ctx();
    let (tx, rx) = mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for (tool, path) in [("herdr_fs_read", "pipe.txt"), ("herdr_fs_image", "pipe.png")] {
            tx.send(call(&ctx, tool, json!({"path": path}))).unwrap();
        }
    });
    for _ in 0..2 {
        let r = rx.recv_timeout(Duration::from_secs(10)).expect("a FIFO read hung");
        assert_reason(&r, "not_a_file");
    }
}

/// Every other tool that may meet a file answers about a FIFO without a writer at
/// once: refused by its type, or passed over. Each expected member must match.
#[test]
fn no_file_tool_waits_on_a_fifo() {
    let repo = Repo::with_files(&[("a.txt", "needle\n")]);
    nix::unistd::mkfifo(&repo.path("pipe.txt"), nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let root = repo.p("");
    let patch = |body: &str| json!({"root": root, "patch": format!("*** Begin Patch\n{body}*** End Patch\n")});
    let cases = vec![
        ("herdr_fs_edit", json!({"path": "pipe.txt", "old_string": "a", "new_string": "b"}), json!({"reason": "not_a_file"})),
        ("herdr_fs_grep", json!({"root": root, "pattern": "needle"}), json!({"ok": true, "count": 1})),
        ("herdr_fs_grep", json!({"root": "pipe.txt", "pattern": "needle"}), json!({"reason": "not_a_directory"})),
        ("herdr_fs_list", json!({"path": root}), json!({"ok": true, "count": 2})),
        ("herdr_fs_write", json!({"path": "pipe.txt", "content": "x", "overwrite": true}), json!({"reason": "invalid_target"})),
        ("herdr_fs_patch", patch("*** Update File: pipe.txt\n-a\n+b\n"), json!({"code": "PATCH_FAILED", "path": "pipe.txt"})),
        ("herdr_fs_patch", patch("*** Delete File: pipe.txt\n"), json!({"code": "PATCH_FAILED", "path": "pipe.txt"})),
        ("herdr_fs_patch", patch("*** Add File: pipe.txt\n+b\n"), json!({"reason": "invalid_target"})),
        ("herdr_fs_patch", patch("*** Update File: a.txt\n*** Move to: pipe.txt\n-needle\n+n\n"), json!({"reason": "invalid_target"})),
        ("herdr_git", json!({"root": root, "action": "status"}), json!({"ok": true})),
        ("herdr_git", json!({"root": root, "action": "diff", "path": "pipe.txt"}), json!({"ok": true, "output": ""})),
    ];
    let ctx = repo.ctx();
    let (tx, rx) = mpsc::channel::<Value>();
    let calls: Vec<_> = cases.iter().map(|(tool, args, _)| (*tool, args.clone())).collect();
    std::thread::spawn(move || {
        for (tool, args) in calls {
            tx.send(call(&ctx, tool, args)).unwrap();
        }
    });
    for (tool, args, expected) in &cases {
        let r = rx.recv_timeout(Duration::from_secs(10)).unwrap_or_else(|_| panic!("{tool} {args} hung on a FIFO"));
        for (key, want) in expected.as_object().unwrap() {
            assert_eq!(&r[key], want, "{tool} {args}: {key} in {r}");
        }
    }
    assert_eq!(repo.read("a.txt"), b"needle\n");
}
