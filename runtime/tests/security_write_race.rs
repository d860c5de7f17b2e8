//! A target's directory swapped for a symlink out of the managed root, over and
//! over, while `herdr_fs_write`, `herdr_fs_patch` or `herdr_fs_edit` change files
//! below it. Each change is checked by path and committed through the checked
//! directory's descriptor, so nothing outside the root may ever be created or
//! changed. (Against a commit that renames by path, the herdr_fs_write test found
//! 588 entries outside in 2 s.)

mod tools_support;

use std::collections::BTreeMap;
use std::os::unix::fs::symlink;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tools_support::*;

/// Swaps `swap` (a directory in the root) and `swap_link` (a symlink to `outside`)
/// with RENAME_EXCHANGE for 2 s while `call(n)` runs in a loop; returns how many
/// calls succeeded and the refusals by reason/code.
#[cfg(target_os = "linux")]
fn race(repo: &Repo, outside: &std::path::Path, mut call: impl FnMut(u32) -> Value) -> (u32, BTreeMap<String, usize>) {
    symlink(outside, repo.path("swap_link")).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let racer = {
        let (stop, dir, link) = (stop.clone(), repo.path("swap"), repo.path("swap_link"));
        std::thread::spawn(move || {
            let (fd, flags) = (nix::fcntl::AT_FDCWD, nix::fcntl::RenameFlags::RENAME_EXCHANGE);
            while !stop.load(Ordering::Relaxed) {
                nix::fcntl::renameat2(fd, &dir, fd, &link, flags).unwrap();
            }
        })
    };
    let mut done = 0;
    let mut refused: BTreeMap<String, usize> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(2);
    for n in 0.. {
        if Instant::now() >= deadline {
            break;
        }
        let r = call(n);
        if r["ok"] == true {
            done += 1;
        } else {
            let why = r["reason"].as_str().or(r["code"].as_str()).unwrap_or("?");
            *refused.entry(why.to_string()).or_default() += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    racer.join().unwrap();
    (done, refused)
}

/// The names in `outside`, with the content of each regular file.
fn listing(outside: &std::path::Path) -> BTreeMap<String, String> {
    std::fs::read_dir(outside)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.file_name().to_string_lossy().into_owned(), std::fs::read_to_string(e.path()).unwrap_or_default())
        })
        .collect()
}

/// Nothing was created in `outside`.
fn assert_nothing_written_outside(outside: &std::path::Path) {
    let escaped: Vec<String> = listing(outside).into_keys().collect();
    assert!(escaped.is_empty(), "{} entries written outside the root, e.g. {:?}", escaped.len(), &escaped[..escaped.len().min(5)]);
}

fn assert_raced(done: u32, refused: &BTreeMap<String, usize>, allowed: &[&str]) {
    assert!(refused.keys().all(|r| allowed.contains(&r.as_str())), "{refused:?}");
    assert!(done > 0 && !refused.is_empty(), "the race never happened: {done} done, {refused:?}");
}

#[test]
#[cfg(target_os = "linux")]
fn a_racing_directory_swap_never_lets_a_write_out_of_the_root() {
    let repo = Repo::with_files(&[("swap/keep.txt", "inside\n")]);
    let outside = tempfile::tempdir().unwrap();
    let ctx = repo.ctx();
    let (written, refused) = race(&repo, outside.path(), |n| {
        call(&ctx, "herdr_fs_write", json!({"path": repo.p(&format!("swap/new-{n}.txt")), "content": "x"}))
    });
    assert_nothing_written_outside(outside.path());
    // symlink_escape: the check saw the symlink; target_changed: the commit met it.
    assert_raced(written, &refused, &["symlink_escape", "target_changed"]);
}

#[test]
#[cfg(target_os = "linux")]
fn a_racing_directory_swap_never_lets_a_patch_out_of_the_root() {
    let repo = Repo::with_files(&[("swap/keep.txt", "inside\n")]);
    let outside = tempfile::tempdir().unwrap();
    let ctx = repo.ctx();
    let (applied, refused) = race(&repo, outside.path(), |n| {
        let patch = format!("*** Begin Patch\n*** Add File: swap/new-{n}.txt\n+x\n*** End Patch\n");
        call(&ctx, "herdr_fs_patch", json!({"root": repo.p(""), "patch": patch}))
    });
    assert_nothing_written_outside(outside.path());
    assert_raced(applied, &refused, &["symlink_escape", "PATCH_COMMIT_FAILED"]);
}

/// The same name exists on both sides: an edit that followed the swapped-in
/// symlink would change the outside file.
#[test]
#[cfg(target_os = "linux")]
fn a_racing_directory_swap_never_lets_an_edit_out_of_the_root() {
    let repo = Repo::with_files(&[("swap/keep.txt", "state 0\n")]);
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("keep.txt"), "state 0\n").unwrap();
    let ctx = repo.ctx();
    let mut state = 0;
    let (edited, refused) = race(&repo, outside.path(), |_| {
        let r = call(
            &ctx,
            "herdr_fs_edit",
            json!({"path": repo.p("swap/keep.txt"), "old_string": format!("state {state}"), "new_string": format!("state {}", state + 1), "confirm_dirty": true}),
        );
        if r["ok"] == true {
            state += 1;
        }
        r
    });
    let outside_now = listing(outside.path());
    assert_eq!(outside_now, BTreeMap::from([("keep.txt".to_string(), "state 0\n".to_string())]));
    assert_raced(edited, &refused, &["symlink_escape", "read_failed", "target_changed"]);
}
