//! What a write target holds, changed between the policy check and the commit.
//! `herdr_fs_write` decides by path whether its target is new or a regular file
//! to replace; the commit verifies that again on the entry in the checked
//! directory's descriptor, so a file that appears is never replaced without
//! overwrite:true, a directory that takes a file's place is put back, not moved
//! aside and left behind, and a file removed after the check is not recreated.
//! Each is refused as `target_changed` (herdr_fs_patch: PATCH_COMMIT_FAILED with
//! target_changed:true). (Against the commit that trusted the check, the first
//! test lost the other writer's file and the second left backup directories
//! behind, both within the first second.)

mod tools_support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tools_support::*;

/// How long the race runs at least.
const RACE_FOR: Duration = Duration::from_secs(2);
/// How long it may go on when the outcome that proves the window was hit has not
/// come yet (a loaded machine hits the narrow window less often).
const RACE_AT_MOST: Duration = Duration::from_secs(15);

/// Runs `step` in a loop on another thread while `call` runs in a loop here for
/// [`RACE_FOR`], and on until `proof` (the outcome that shows the window was hit)
/// has come or [`RACE_AT_MOST`] has passed; returns the outcomes of `call` by
/// reason/code ("ok" for success).
fn race(step: impl Fn() + Send + 'static, proof: &str, mut call: impl FnMut() -> Value) -> BTreeMap<String, usize> {
    let stop = Arc::new(AtomicBool::new(false));
    let racer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                step();
            }
        })
    };
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    let start = Instant::now();
    loop {
        let elapsed = start.elapsed();
        if elapsed >= RACE_AT_MOST || (elapsed >= RACE_FOR && outcomes.contains_key(proof)) {
            break;
        }
        let r = call();
        let why = if r["ok"] == true { "ok" } else { r["reason"].as_str().or(r["code"].as_str()).unwrap_or("?") };
        *outcomes.entry(why.to_string()).or_default() += 1;
    }
    stop.store(true, Ordering::Relaxed);
    racer.join().unwrap();
    outcomes
}

/// Entries of the transaction (temp or backup files) left in `dir`.
fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".herdr-mcp-"))
        .collect()
}

#[test]
fn a_file_that_appears_after_the_check_is_never_replaced_without_overwrite() {
    let repo = Repo::with_files(&[("theirs.txt", "theirs\n")]);
    let (parked, name): (PathBuf, PathBuf) = (repo.path("theirs.txt"), repo.path("new.txt"));
    // Another writer moves its file to the name and back, over and over. A
    // rename replaces: whatever fs_write created there is the other writer's to
    // lose, never the other way round.
    let (a, n) = (parked.clone(), name.clone());
    let outcomes = race(
        move || {
            if std::fs::rename(&a, &n).is_ok() {
                let _ = std::fs::rename(&n, &a);
            }
        },
        "target_changed",
        || call(&repo.ctx(), "herdr_fs_write", json!({"path": repo.p("new.txt"), "content": "ours\n"})),
    );
    let allowed = ["ok", "overwrite_confirmation_required", "target_changed"];
    assert!(outcomes.keys().all(|k| allowed.contains(&k.as_str())), "{outcomes:?}");
    assert!(outcomes.get("target_changed").is_some_and(|&n| n > 0), "the file never appeared mid-commit: {outcomes:?}");
    let survived = [&parked, &name].iter().any(|p| std::fs::read(p).is_ok_and(|b| b == b"theirs\n"));
    assert!(survived, "the other writer's file was replaced: {outcomes:?}");
    assert!(leftovers(&repo.root).is_empty(), "{:?}", leftovers(&repo.root));
}

#[test]
#[cfg(target_os = "linux")]
fn a_directory_that_takes_a_files_place_after_the_check_is_put_back() {
    let repo = Repo::with_files(&[("f.txt", "old\n"), ("d/marker", "kept\n")]);
    let (f, d) = (repo.path("f.txt"), repo.path("d"));
    let outcomes = race(
        move || {
            let (fd, flags) = (nix::fcntl::AT_FDCWD, nix::fcntl::RenameFlags::RENAME_EXCHANGE);
            // Fails while the commit has moved the entry aside; tried again.
            let _ = nix::fcntl::renameat2(fd, &f, fd, &d, flags);
        },
        "target_changed",
        || {
            let args = json!({"path": repo.p("f.txt"), "content": "ours\n", "overwrite": true, "confirm_dirty": true});
            call(&repo.ctx(), "herdr_fs_write", args)
        },
    );
    let allowed = ["ok", "invalid_target", "target_changed"];
    assert!(outcomes.keys().all(|k| allowed.contains(&k.as_str())), "{outcomes:?}");
    assert!(outcomes.get("target_changed").is_some_and(|&n| n > 0), "no directory arrived mid-commit: {outcomes:?}");
    let dir_kept = ["f.txt", "d"].iter().any(|n| repo.path(n).join("marker").is_file());
    assert!(dir_kept, "the directory was replaced: {outcomes:?}");
    assert!(leftovers(&repo.root).is_empty(), "{:?}", leftovers(&repo.root));
}

/// Another process removes `f.txt` and puts it back (same inode), over and over.
/// Putting it back is a hard link, which fails only if somebody created a new
/// `f.txt` while it was away: the count of those is returned with the racer.
fn remove_and_restore(repo: &Repo) -> (impl Fn() + Send + 'static, Arc<AtomicUsize>) {
    let recreated = Arc::new(AtomicUsize::new(0));
    let (f, parked, count) = (repo.path("f.txt"), repo.path("parked"), recreated.clone());
    let step = move || {
        if std::fs::rename(&f, &parked).is_err() {
            return; // the commit has it moved aside
        }
        match std::fs::hard_link(&parked, &f) {
            Ok(()) => std::fs::remove_file(&parked).unwrap(),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                count.fetch_add(1, Ordering::Relaxed);
                std::fs::rename(&parked, &f).unwrap();
            }
            Err(e) => panic!("cannot put f.txt back: {e}"),
        }
    };
    (step, recreated)
}

/// The change was computed against a file that is gone by the commit: neither
/// an edit nor a patch brings it back, and the patch changes none of its files.
/// (Against the commit that recreated a replaced file that had vanished, the
/// racer found f.txt recreated.)
#[test]
fn a_file_removed_after_the_check_is_not_recreated() {
    let repo = Repo::with_files(&[("f.txt", "line\n"), ("a.txt", "v0\n")]);
    let ctx = repo.ctx();
    let (step, recreated) = remove_and_restore(&repo);
    let edit = json!({"path": repo.p("f.txt"), "old_string": "line", "new_string": "line", "confirm_dirty": true});
    let outcomes = race(step, "target_changed", || call(&ctx, "herdr_fs_edit", edit.clone()));
    assert_eq!(recreated.load(Ordering::Relaxed), 0, "herdr_fs_edit recreated f.txt: {outcomes:?}");
    // not_found: the check missed the file; read_failed: it went between the check and the open.
    let allowed = ["ok", "not_found", "read_failed", "target_changed"];
    assert!(outcomes.keys().all(|k| allowed.contains(&k.as_str())), "{outcomes:?}");
    assert!(outcomes.get("target_changed").is_some_and(|&n| n > 0), "f.txt never vanished mid-commit: {outcomes:?}");

    let (step, recreated) = remove_and_restore(&repo);
    let patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n-v0\n+v1\n*** Update File: f.txt\n@@\n+more\n*** End Patch\n";
    let args = json!({"root": repo.p(""), "patch": patch, "confirm_dirty": true});
    let outcomes = race(step, "PATCH_COMMIT_FAILED", || {
        repo.write("a.txt", "v0\n");
        let r = call(&ctx, "herdr_fs_patch", args.clone());
        let a = String::from_utf8(repo.read("a.txt")).unwrap();
        if r["ok"] == true {
            assert_eq!(a, "v1\n");
        } else {
            assert_eq!(a, "v0\n", "a failed patch changed a.txt: {r}");
        }
        if r["code"] == "PATCH_COMMIT_FAILED" {
            assert!(r["target_changed"] == true && r["rolled_back"] == true, "{r}");
        }
        r
    });
    assert_eq!(recreated.load(Ordering::Relaxed), 0, "herdr_fs_patch recreated f.txt: {outcomes:?}");
    // PATCH_FAILED: the file went between the check and the open (read_failed above).
    let allowed = ["ok", "not_found", "PATCH_FAILED", "PATCH_COMMIT_FAILED"];
    assert!(outcomes.keys().all(|k| allowed.contains(&k.as_str())), "{outcomes:?}");
    assert!(outcomes.get("PATCH_COMMIT_FAILED").is_some_and(|&n| n > 0), "f.txt never vanished mid-commit: {outcomes:?}");
    assert!(leftovers(&repo.root).is_empty(), "{:?}", leftovers(&repo.root));
}
