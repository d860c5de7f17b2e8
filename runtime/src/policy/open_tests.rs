use std::io::Read;
use std::os::unix::fs::symlink;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

use super::*;

/// A root holding a plain file, a symlinked directory and file inside the root,
/// links out of it and to a secret, a loop, a directory, a FIFO and a socket.
struct Tree {
    _dir: tempfile::TempDir,
    root: PathBuf,
    outside: tempfile::TempDir,
    policy: Policy,
    _socket: std::os::unix::net::UnixListener,
}

fn tree() -> Tree {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join("src/deep")).unwrap();
    std::fs::write(root.join("src/deep/a.txt"), "inside\n").unwrap();
    std::fs::write(root.join(".env"), "SECRET=1\n").unwrap();
    std::fs::write(outside.path().join("o.txt"), "OUTSIDE\n").unwrap();
    symlink(root.join("src"), root.join("code")).unwrap();
    symlink(root.join("src/deep/a.txt"), root.join("a_link.txt")).unwrap();
    symlink(root.join(".env"), root.join("innocent.txt")).unwrap();
    symlink(outside.path(), root.join("out")).unwrap();
    symlink(root.join("loop_b"), root.join("loop_a")).unwrap();
    symlink(root.join("loop_a"), root.join("loop_b")).unwrap();
    nix::unistd::mkfifo(&root.join("fifo"), nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let socket = std::os::unix::net::UnixListener::bind(root.join("sock")).unwrap();
    let policy = Policy::for_tests(vec![root.clone()]);
    Tree { _dir: dir, root, outside, policy, _socket: socket }
}

/// What a caller sees of an open: the real path, root and content, or the refusal.
fn seen(r: Result<(OpenedFile, Route), Refusal>) -> Result<(PathBuf, PathBuf, String), Refusal> {
    r.map(|(mut opened, _)| {
        let mut text = String::new();
        opened.file.read_to_string(&mut text).unwrap();
        assert_eq!(opened.meta.len(), text.len() as u64);
        (opened.resolved.real, opened.resolved.root, text)
    })
}

fn route(r: &Result<(OpenedFile, Route), Refusal>) -> Option<Route> {
    r.as_ref().ok().map(|(_, route)| *route)
}

fn errno(n: i32) -> impl Fn(&Path) -> io::Result<File> {
    move |_| Err(io::Error::from_raw_os_error(n))
}

const CASES: [&str; 11] = [
    "src/deep/a.txt",
    "code/deep/a.txt",
    "a_link.txt",
    "innocent.txt",
    "out/o.txt",
    "loop_a",
    "missing.txt",
    "src",
    "fifo",
    "sock",
    "src/deep/a.txt/x",
];

#[test]
#[cfg(target_os = "linux")]
fn a_symlink_free_path_is_opened_once_without_canonicalizing() {
    let t = tree();
    let calls = std::cell::Cell::new(0);
    let counting = |p: &Path| {
        calls.set(calls.get() + 1);
        openat2_no_symlinks(p)
    };
    let r = t.policy.open_existing_via("src/deep/a.txt", &counting);
    assert_eq!(route(&r), Some(Route::Direct));
    assert_eq!(calls.get(), 1);
    let real = t.root.join("src/deep/a.txt");
    assert_eq!(seen(r).unwrap(), (real, t.root.clone(), "inside\n".to_string()));
}

#[test]
#[cfg(target_os = "linux")]
fn a_symlink_inside_the_root_is_resolved_then_opened_without_following() {
    let t = tree();
    for raw in ["code/deep/a.txt", "a_link.txt"] {
        let r = t.policy.open_existing_via(raw, &openat2_no_symlinks);
        assert_eq!(route(&r), Some(Route::Resolved), "{raw}");
        assert_eq!(seen(r).unwrap(), (t.root.join("src/deep/a.txt"), t.root.clone(), "inside\n".into()), "{raw}");
    }
}

/// A root reached through a symlink outside every root (as macOS `/tmp` is) is
/// resolved first, then its real path is opened.
#[test]
fn a_path_through_an_alias_of_the_root_is_opened_at_its_real_path() {
    let t = tree();
    symlink(&t.root, t.outside.path().join("alias")).unwrap();
    let raw = t.outside.path().join("alias/src/deep/a.txt");
    let r = t.policy.open_existing_via(raw.to_str().unwrap(), &openat2_no_symlinks);
    let expected = if cfg!(target_os = "linux") { Route::Resolved } else { Route::Legacy };
    assert_eq!(route(&r), Some(expected));
    assert_eq!(seen(r).unwrap(), (t.root.join("src/deep/a.txt"), t.root.clone(), "inside\n".into()));
    let secret = t.outside.path().join("alias/.env");
    assert_eq!(t.policy.open_existing_file(secret.to_str().unwrap()).unwrap_err().reason, "secret_path_denied");
}

/// Every refusal is the one `resolve_existing` gives, or today's `not_a_file`.
#[test]
fn refusals_match_resolve_existing_and_the_file_type() {
    let t = tree();
    let reason = |raw: &str| t.policy.open_existing_file(raw).unwrap_err().reason;
    for raw in ["innocent.txt", ".env", "out/o.txt", "loop_a", "missing.txt", "src/deep/a.txt/x", "/etc/hostname"] {
        let opened = t.policy.open_existing_file(raw).unwrap_err();
        assert_eq!(opened, t.policy.resolve_existing(raw).unwrap_err(), "{raw}");
    }
    assert_eq!(reason("innocent.txt"), "secret_path_denied");
    assert_eq!(reason("out/o.txt"), "symlink_escape");
    assert_eq!(reason("loop_a"), "not_found");
    assert_eq!(reason("src/deep/a.txt/x"), "not_found");
    for raw in ["src", "sock"] {
        let refusal = t.policy.open_existing_file(raw).unwrap_err();
        assert_eq!(refusal.reason, "not_a_file", "{raw}");
        assert_eq!(refusal.message, format!("{} is not a regular file", t.root.join(raw).display()));
    }
}

/// A FIFO with no writer would block a blocking open forever.
#[test]
fn a_fifo_is_refused_without_waiting_for_a_writer() {
    let t = tree();
    let (tx, rx) = mpsc::channel();
    let policy = t.policy.clone();
    std::thread::spawn(move || tx.send(policy.open_existing_file("fifo").map(|_| ())));
    let answer = rx.recv_timeout(Duration::from_secs(10)).expect("opening a FIFO hung");
    assert_eq!(answer.unwrap_err().reason, "not_a_file");
}

/// A kernel without `openat2` (ENOSYS) or a seccomp filter denying it (EPERM)
/// gives the same answers, by the legacy route.
#[test]
fn without_openat2_every_answer_is_the_same() {
    let t = tree();
    for n in [libc::ENOSYS, libc::EPERM] {
        let unavailable = errno(n);
        for raw in CASES {
            let legacy = t.policy.open_existing_via(raw, &unavailable);
            if let Ok((_, r)) = &legacy {
                assert_eq!(*r, Route::Legacy, "{raw}");
            }
            assert_eq!(seen(legacy), seen(t.policy.open_existing_via(raw, &openat2_no_symlinks)), "errno {n}: {raw}");
        }
    }
}

/// The real path met a symlink at the second open: a racer swapped a directory
/// after the check. Refused, never followed.
#[test]
fn a_symlink_met_after_the_check_is_refused() {
    let t = tree();
    let refusal = t.policy.open_existing_via("src/deep/a.txt", &errno(libc::ELOOP)).unwrap_err();
    assert_eq!(refusal.reason, "read_failed");
    assert!(refusal.message.contains("replaced by a symlink"), "{}", refusal.message);
    assert_eq!(refusal.extra["path"], t.root.join("src/deep/a.txt").display().to_string());
}

#[test]
fn other_open_errors_are_read_failures_with_the_cause() {
    let t = tree();
    let refusal = t.policy.open_existing_via("src/deep/a.txt", &errno(libc::EACCES)).unwrap_err();
    assert_eq!(refusal.reason, "read_failed");
    assert!(refusal.message.contains("Permission denied"), "{}", refusal.message);
}

/// A directory swapped for a symlink out of the root, over and over, while the
/// file below it is read: every answer is the inside file or a refusal.
#[test]
#[cfg(target_os = "linux")]
fn a_racing_symlink_swap_never_reads_outside_the_root() {
    let t = tree();
    std::fs::create_dir(t.root.join("swap")).unwrap();
    std::fs::write(t.root.join("swap/o.txt"), "inside\n").unwrap();
    symlink(t.outside.path(), t.root.join("swap_link")).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let racer = {
        let (stop, root) = (stop.clone(), t.root.clone());
        std::thread::spawn(move || {
            let flags = nix::fcntl::RenameFlags::RENAME_EXCHANGE;
            let fd = nix::fcntl::AT_FDCWD;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                nix::fcntl::renameat2(fd, &root.join("swap"), fd, &root.join("swap_link"), flags).unwrap();
            }
        })
    };
    let (mut read, mut refused) = (0, 0);
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    while std::time::Instant::now() < deadline {
        match seen(t.policy.open_existing_via("swap/o.txt", &openat2_no_symlinks)) {
            Ok((real, _, text)) => {
                assert_eq!(text, "inside\n", "read {} outside the root", real.display());
                read += 1;
            }
            Err(r) => {
                assert!(["symlink_escape", "read_failed", "not_found"].contains(&r.reason), "{r:?}");
                refused += 1;
            }
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    racer.join().unwrap();
    assert!(read > 0 && refused > 0, "the race never happened: {read} read, {refused} refused");
}

/// On a kernel without `openat2`, the process learns it from the first open; later
/// opens go the legacy way without asking the kernel again, with the same answers.
#[test]
fn without_openat2_only_the_first_open_asks_the_kernel() {
    let t = tree();
    let support = crate::policy::no_symlinks::Openat2Support::new();
    let asked = std::cell::Cell::new(0);
    let kernel = |_: &Path| -> io::Result<File> {
        asked.set(asked.get() + 1);
        Err(io::Error::from_raw_os_error(libc::ENOSYS))
    };
    let without_openat2 = |p: &Path| support.call(p, &kernel);
    for _ in 0..3 {
        for raw in CASES {
            let legacy = t.policy.open_existing_via(raw, &without_openat2);
            if let Ok((_, r)) = &legacy {
                assert_eq!(*r, Route::Legacy, "{raw}");
            }
            assert_eq!(seen(legacy), seen(t.policy.open_existing_via(raw, &openat2_no_symlinks)), "{raw}");
        }
    }
    assert_eq!(asked.get(), 1);
}

/// A gate on the root runs on every route once the path is known to name
/// something inside the root: a path refusal comes before it, and its own
/// refusal before anything about the file (its type, an open that fails).
#[test]
fn a_gate_runs_after_the_path_checks_and_before_the_file_is_looked_at() {
    let t = tree();
    let roots_seen = std::cell::RefCell::new(Vec::new());
    let refusing = |root: &Path| {
        roots_seen.borrow_mut().push(root.to_path_buf());
        Err(Refusal::new("gated", "the gate said no", serde_json::Value::Null))
    };
    let (no_kernel_support, denied) = (errno(libc::ENOSYS), errno(libc::EACCES));
    let opens: [NoSymlinkOpen; 3] = [&openat2_no_symlinks, &no_kernel_support, &denied];
    symlink(&t.root, t.outside.path().join("alias")).unwrap();
    let alias = t.outside.path().join("alias/src/deep/a.txt");
    let inside = ["src/deep/a.txt", "code/deep/a.txt", "a_link.txt", "src", "fifo", "sock", alias.to_str().unwrap()];
    for raw in inside {
        for open in opens {
            roots_seen.borrow_mut().clear();
            let refusal = t.policy.open_existing_gated_via(raw, open, &refusing).unwrap_err();
            assert_eq!(refusal.reason, "gated", "{raw}: {refusal:?}");
            assert_eq!(*roots_seen.borrow(), std::slice::from_ref(&t.root), "{raw}");
        }
    }
    for raw in ["innocent.txt", ".env", "out/o.txt", "loop_a", "missing.txt", "src/deep/a.txt/x", "/etc/hostname"] {
        let never = |_: &Path| -> Result<(), Refusal> { panic!("the gate ran for {raw}") };
        let refusal = t.policy.open_existing_gated_via(raw, &openat2_no_symlinks, &never).unwrap_err();
        assert_eq!(refusal, t.policy.resolve_existing(raw).unwrap_err(), "{raw}");
    }
    let passing = |root: &Path| {
        assert_eq!(root, t.root);
        Ok(())
    };
    let opened = t.policy.open_existing_file_gated("code/deep/a.txt", &passing).unwrap();
    assert_eq!(opened.resolved.real, t.root.join("src/deep/a.txt"));
    assert_eq!(t.policy.open_existing_file_gated("fifo", &passing).unwrap_err().reason, "not_a_file");
}
