//! A target's directory swapped for a symlink out of the managed root, over and
//! over, while `herdr_fs_write` creates files below it. Each write is checked by
//! path and committed through the checked directory's descriptor, so nothing may
//! ever be created outside the root. (Against a commit that renames by path this
//! test finds files outside within the first fraction of a second.)

mod tools_support;

use std::collections::BTreeMap;
use std::os::unix::fs::symlink;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use tools_support::*;

#[test]
#[cfg(target_os = "linux")]
fn a_racing_directory_swap_never_lets_a_write_out_of_the_root() {
    let repo = Repo::with_files(&[("swap/keep.txt", "inside\n")]);
    let outside = tempfile::tempdir().unwrap();
    symlink(outside.path(), repo.path("swap_link")).unwrap();
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
    let ctx = repo.ctx();
    let mut written = 0;
    let mut refused: BTreeMap<String, usize> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(2);
    for n in 0.. {
        if Instant::now() >= deadline {
            break;
        }
        let r = call(&ctx, "herdr_fs_write", json!({"path": repo.p(&format!("swap/new-{n}.txt")), "content": "x"}));
        if r["ok"] == true {
            written += 1;
        } else {
            *refused.entry(r["reason"].as_str().unwrap_or("?").to_string()).or_default() += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    racer.join().unwrap();
    let escaped: Vec<String> =
        std::fs::read_dir(outside.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(escaped.is_empty(), "{} entries written outside the root, e.g. {:?}", escaped.len(), &escaped[..escaped.len().min(5)]);
    // symlink_escape: the check saw the symlink; write_failed: the commit met it.
    assert!(refused.keys().all(|r| r == "symlink_escape" || r == "write_failed"), "{refused:?}");
    assert!(written > 0 && !refused.is_empty(), "the race never happened: {written} written, {refused:?}");
}
