//! Issue 22, item 9: the walks of `herdr_fs_list` and `herdr_fs_grep` are bounded
//! and race-proof, through the real `herdr-mcp` binary.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{Runtime, call_tool, git_repo, raw_unix};
use serde_json::json;

/// A recursive list of a ~1200-deep directory chain answers with a clear refusal
/// (before: the recursion overflowed the stack and the whole runtime aborted).
#[tokio::test]
async fn deep_recursive_list_is_refused_not_a_crash() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let mut deep = repo.path().join("chain");
    for _ in 0..1200 {
        deep.push("d");
    }
    std::fs::create_dir_all(&deep).unwrap();
    let rt = Runtime::start(&[repo.path()], &[]).await;
    let client = rt.client().await;
    let args = json!({"path": repo.path().display().to_string(), "recursive": true, "max_entries": 2000});
    let listed = tokio::time::timeout(Duration::from_secs(60), call_tool(&client, "herdr_fs_list", args)).await;
    let health = raw_unix(&rt.socket, "GET", "/health", &[], None).await.map(|r| r.status);
    eprintln!("observed: list answered = {}, health after = {health:?}", listed.is_ok());
    let listed = listed.expect("the list answers");
    assert_eq!(listed["ok"], false, "{listed}");
    assert_eq!(listed["reason"], "too_deep", "{listed}");
    assert!(listed["message"].as_str().unwrap().contains("levels deep"), "{listed}");
    assert_eq!(health, Ok(200), "the runtime survives");
    // A shallower start inside the chain is listed as usual.
    let shallow = call_tool(&client, "herdr_fs_list", json!({"path": repo.path().join("chain/d/d").display().to_string()})).await;
    assert_eq!(shallow["ok"], true, "{shallow}");
}

/// Swaps the directory `dir` and the symlink `alt` (to outside content) back and
/// forth with `renameat2(RENAME_EXCHANGE)` until `stop`.
fn swapper(parent: &Path, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    let dir = std::ffi::CString::new(parent.join("sub").into_os_string().into_encoded_bytes()).unwrap();
    let alt = std::ffi::CString::new(parent.join("alt").into_os_string().into_encoded_bytes()).unwrap();
    std::thread::spawn(move || {
        let mut swaps = 0;
        while !stop.load(Ordering::Relaxed) {
            // SAFETY: two valid NUL-terminated paths; no memory is shared.
            let rc = unsafe {
                libc::syscall(
                    libc::SYS_renameat2,
                    libc::AT_FDCWD,
                    dir.as_ptr(),
                    libc::AT_FDCWD,
                    alt.as_ptr(),
                    libc::RENAME_EXCHANGE,
                )
            };
            assert_eq!(rc, 0, "renameat2: {}", std::io::Error::last_os_error());
            swaps += 1;
        }
        swaps
    })
}

/// While `sub` is swapped for a symlink to outside content over and over, neither
/// grep nor a recursive list ever returns that content or its names.
#[tokio::test]
async fn raced_walks_never_leave_the_root() {
    let repo = git_repo(&[("keep.txt", "k\n")]);
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("outside-data.txt"), "OUTSIDE-NEEDLE\n").unwrap();
    std::fs::create_dir(repo.path().join("sub")).unwrap();
    std::fs::write(repo.path().join("sub/inside.txt"), "INSIDE-NEEDLE\n").unwrap();
    std::os::unix::fs::symlink(outside.path(), repo.path().join("alt")).unwrap();
    let rt = Runtime::start(&[repo.path()], &[]).await;
    let client = rt.client().await;
    let root = repo.path().display().to_string();

    let stop = Arc::new(AtomicBool::new(false));
    let swaps = swapper(repo.path(), Arc::clone(&stop));
    const ROUNDS: usize = 400;
    let (mut grep_leaks, mut list_leaks, mut inside_seen) = (0, 0, 0);
    for _ in 0..ROUNDS {
        let grep = call_tool(&client, "herdr_fs_grep", json!({"root": root, "pattern": "NEEDLE"})).await;
        assert_eq!(grep["ok"], true, "{grep}");
        let text = grep.to_string();
        grep_leaks += usize::from(text.contains("OUTSIDE-NEEDLE"));
        inside_seen += usize::from(text.contains("INSIDE-NEEDLE"));
        let list = call_tool(&client, "herdr_fs_list", json!({"path": root, "recursive": true})).await;
        assert_eq!(list["ok"], true, "{list}");
        list_leaks += usize::from(list.to_string().contains("outside-data.txt"));
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swaps.join().unwrap();
    eprintln!(
        "observed in {ROUNDS} raced rounds ({swaps} swaps): grep leaks {grep_leaks}, list leaks {list_leaks}, inside matches {inside_seen}"
    );
    assert!(swaps > ROUNDS as u64, "the swapper ran during the calls");
    assert_eq!((grep_leaks, list_leaks), (0, 0), "outside content reached the caller");
}
