use std::fs;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{PermissionsExt, symlink};

use super::*;
use crate::policy::new_name::KERNEL;

/// A temp dir by its canonical path, as the policy hands targets to a commit.
pub(crate) fn canonical_tempdir() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().canonicalize().unwrap();
    (tmp, path)
}

fn errno(n: i32) -> impl Fn(&Path) -> io::Result<OwnedFd> {
    move |_| Err(io::Error::from_raw_os_error(n))
}

/// Temp files and backups a commit left in `dir`.
pub(crate) fn leftovers(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("herdr-mcp-"))
        .collect()
}

#[test]
fn writes_creates_deletes_and_keeps_permissions() {
    let (_tmp, dir) = canonical_tempdir();
    let (a, b, c) = (dir.as_path().join("a"), dir.as_path().join("b"), dir.as_path().join("c"));
    fs::write(&a, "old a").unwrap();
    fs::set_permissions(&a, fs::Permissions::from_mode(0o751)).unwrap();
    fs::write(&c, "c").unwrap();
    commit(&[
        Change::Replace { path: a.clone(), bytes: b"new a".to_vec() },
        Change::Create { path: b.clone(), bytes: b"new b".to_vec() },
        Change::Delete { path: c.clone() },
    ])
    .unwrap();
    assert_eq!(fs::read(&a).unwrap(), b"new a");
    assert_eq!(fs::metadata(&a).unwrap().permissions().mode() & 0o777, 0o751);
    assert_eq!(fs::read(&b).unwrap(), b"new b");
    assert!(!c.exists());
    let d = dir.as_path().join("d");
    commit(&[Change::WriteLike { path: d.clone(), bytes: b"d".to_vec(), like: a.clone() }]).unwrap();
    assert_eq!(fs::metadata(&d).unwrap().permissions().mode() & 0o777, 0o751);
    assert!(leftovers(dir.as_path()).is_empty());
}

#[test]
fn a_failure_midway_restores_every_file() {
    let (_tmp, dir) = canonical_tempdir();
    let (a, b, c, d) =
        (dir.as_path().join("a"), dir.as_path().join("b"), dir.as_path().join("c"), dir.as_path().join("d"));
    fs::write(&a, "A").unwrap();
    fs::write(&c, "C").unwrap();
    let changes = [
        Change::Replace { path: a.clone(), bytes: b"A2".to_vec() },
        Change::Create { path: b.clone(), bytes: b"B2".to_vec() },
        Change::Delete { path: c.clone() },
        Change::Create { path: d.clone(), bytes: b"D2".to_vec() },
    ];
    for fail_at in 1..changes.len() {
        let err = commit_with_fault(&changes, &mut |i| {
            if i == fail_at { Err(io::Error::other("injected")) } else { Ok(()) }
        })
        .unwrap_err();
        assert!(err.rolled_back, "{err}");
        assert!(err.message.contains("injected"), "{err}");
        assert_eq!(fs::read(&a).unwrap(), b"A");
        assert!(!b.exists());
        assert_eq!(fs::read(&c).unwrap(), b"C");
        assert!(!d.exists());
        assert!(leftovers(dir.as_path()).is_empty(), "{:?}", leftovers(dir.as_path()));
    }
}

#[test]
fn a_staging_failure_touches_nothing() {
    let (_tmp, dir) = canonical_tempdir();
    let a = dir.as_path().join("a");
    fs::write(&a, "A").unwrap();
    let missing_dir = dir.as_path().join("nope").join("x");
    let err = commit(&[
        Change::Replace { path: a.clone(), bytes: b"A2".to_vec() },
        Change::Create { path: missing_dir, bytes: b"X".to_vec() },
    ])
    .unwrap_err();
    assert!(err.message.contains("cannot stage"), "{err}");
    assert!(err.message.contains(&format!("cannot open the directory {}", dir.join("nope").display())), "{err}");
    assert_eq!(fs::read(&a).unwrap(), b"A");
    assert!(leftovers(dir.as_path()).is_empty());
}

/// A kernel without `openat2` (ENOSYS) or a seccomp filter denying it (EPERM):
/// the directory is opened by path and the commit works as before.
#[test]
fn without_openat2_the_commit_opens_directories_by_path() {
    for n in [libc::ENOSYS, libc::EPERM] {
        let (_tmp, dir) = canonical_tempdir();
        let (a, b) = (dir.join("a"), dir.join("b"));
        fs::write(&a, "old").unwrap();
        fs::set_permissions(&a, fs::Permissions::from_mode(0o640)).unwrap();
        let changes = [
            Change::Replace { path: a.clone(), bytes: b"new".to_vec() },
            Change::WriteLike { path: b.clone(), bytes: b"b".to_vec(), like: a.clone() },
        ];
        commit_via(&changes, &mut |_| Ok(()), &errno(n), KERNEL).unwrap();
        assert_eq!(fs::read(&a).unwrap(), b"new", "errno {n}");
        assert_eq!(fs::metadata(&b).unwrap().permissions().mode() & 0o777, 0o640, "errno {n}");
        assert!(leftovers(&dir).is_empty());
    }
}

/// A directory swapped for a symlink after the policy check: the open of the
/// checked path meets it and the whole transaction is refused before anything is
/// staged, here or where the symlink points.
#[test]
fn a_directory_replaced_by_a_symlink_after_the_check_is_refused() {
    let (_tmp, dir) = canonical_tempdir();
    let (_out, outside) = canonical_tempdir();
    let a = dir.join("a");
    fs::write(&a, "A").unwrap();
    fs::write(outside.join("x"), "X").unwrap();
    symlink(&outside, dir.join("sub")).unwrap();
    let changes = [
        Change::Replace { path: a.clone(), bytes: b"A2".to_vec() },
        Change::Replace { path: dir.join("sub/x"), bytes: b"X2".to_vec() },
        Change::Create { path: dir.join("sub/new"), bytes: b"N".to_vec() },
    ];
    let direct = commit(&changes);
    // The same refusal when the kernel reports the symlink (ELOOP) on any system.
    let simulated = commit_via(&changes, &mut |_| Ok(()), &errno(libc::ELOOP), KERNEL);
    let mut results = vec![simulated];
    if cfg!(target_os = "linux") {
        results.push(direct);
    }
    for result in results {
        let err = result.unwrap_err();
        assert!(err.rolled_back && err.target_changed, "{err}");
        assert!(err.message.starts_with("cannot stage new content for "), "{err}");
        assert!(err.message.contains("was replaced by a symlink after it was checked; it was not followed"), "{err}");
        assert_eq!(fs::read(&a).unwrap(), b"A");
        assert_eq!(fs::read(outside.join("x")).unwrap(), b"X");
        assert!(!outside.join("new").exists());
        assert!(leftovers(&dir).is_empty() && leftovers(&outside).is_empty());
    }
}

/// The target itself swapped for a symlink after the check is never written
/// through, nor replaced: the commit is refused, the symlink put back, and the
/// file it points to keeps its content.
#[test]
fn a_target_replaced_by_a_symlink_is_neither_followed_nor_replaced() {
    let (_tmp, dir) = canonical_tempdir();
    let (_out, outside) = canonical_tempdir();
    fs::write(outside.join("o"), "O").unwrap();
    symlink(outside.join("o"), dir.join("t")).unwrap();
    let err = commit(&[Change::Replace { path: dir.join("t"), bytes: b"T".to_vec() }]).unwrap_err();
    assert!(err.rolled_back && err.target_changed && err.message.contains("is no longer a regular file"), "{err}");
    assert_eq!(fs::read(outside.join("o")).unwrap(), b"O");
    assert_eq!(fs::read_link(dir.join("t")).unwrap(), outside.join("o"));
    assert!(leftovers(&dir).is_empty() && leftovers(&outside).is_empty());
}

/// What the policy check saw at a target is verified again at the swap: an
/// entry that appears at a new file's name is never replaced, and one that
/// takes a replaced or deleted file's place is put back untouched. Every other
/// change of the transaction is rolled back. The hook before the swap plays the
/// other process.
#[test]
fn a_target_changed_after_the_check_refuses_the_commit_and_is_kept() {
    type Intruder = fn(&Path);
    let file: Intruder = |p| fs::write(p, "theirs").unwrap();
    let directory: Intruder = |p| {
        let _ = fs::remove_file(p);
        fs::create_dir(p).unwrap();
        fs::write(p.join("marker"), "kept").unwrap();
    };
    let link: Intruder = |p| {
        let _ = fs::remove_file(p);
        symlink("/etc/hostname", p).unwrap();
    };
    let kept = |p: &Path, intruder: usize| match intruder {
        0 => fs::read(p).unwrap() == b"theirs",
        1 => fs::read(p.join("marker")).unwrap() == b"kept",
        _ => fs::read_link(p).unwrap() == Path::new("/etc/hostname"),
    };
    for (intruder, make) in [file, directory, link].into_iter().enumerate() {
        let (_tmp, dir) = canonical_tempdir();
        let (first, t) = (dir.join("first"), dir.join("t"));
        fs::write(&first, "1").unwrap();
        let like = dir.join("first");
        let cases: Vec<(Change, bool)> = vec![
            (Change::Create { path: t.clone(), bytes: b"ours".to_vec() }, false),
            (Change::WriteLike { path: t.clone(), bytes: b"ours".to_vec(), like }, false),
            (Change::Replace { path: t.clone(), bytes: b"ours".to_vec() }, true),
            (Change::Delete { path: t.clone() }, true),
        ];
        for (change, existed) in cases {
            if intruder == 0 && existed {
                continue; // a regular file is what a replacement expects
            }
            if t.is_dir() {
                fs::remove_dir_all(&t).unwrap();
            } else if t.symlink_metadata().is_ok() {
                fs::remove_file(&t).unwrap();
            }
            if existed {
                fs::write(&t, "checked").unwrap();
            }
            let changes = [Change::Replace { path: first.clone(), bytes: b"2".to_vec() }, change.clone()];
            let err = commit_with_fault(&changes, &mut |i| {
                if i == 1 {
                    make(&t);
                }
                Ok(())
            })
            .unwrap_err();
            assert!(err.rolled_back && err.target_changed, "{change:?} / intruder {intruder}: {err}");
            assert!(kept(&t, intruder), "{change:?} / intruder {intruder}: {err}");
            assert_eq!(fs::read(&first).unwrap(), b"1", "{change:?} / intruder {intruder}");
            assert!(leftovers(&dir).is_empty(), "{:?}", leftovers(&dir));
        }
    }
}

/// A file to replace or delete that is removed after the check: the content was
/// computed against it, so it is not recreated; the commit is refused as a
/// changed target and the change already made to another file is undone.
/// (Before, a replacement recreated the file.)
#[test]
fn a_target_removed_after_the_check_is_not_recreated() {
    let (_tmp, dir) = canonical_tempdir();
    let (first, t) = (dir.join("first"), dir.join("t"));
    for change in [Change::Replace { path: t.clone(), bytes: b"ours".to_vec() }, Change::Delete { path: t.clone() }] {
        fs::write(&first, "1").unwrap();
        fs::write(&t, "checked").unwrap();
        let changes = [Change::Replace { path: first.clone(), bytes: b"2".to_vec() }, change.clone()];
        let err = commit_with_fault(&changes, &mut |i| {
            if i == 1 {
                fs::remove_file(&t).unwrap();
            }
            Ok(())
        })
        .unwrap_err();
        assert!(err.rolled_back && err.target_changed, "{change:?}: {err}");
        assert!(err.message.contains("was removed after it was checked; it was not recreated"), "{err}");
        assert_eq!(err.path, t);
        assert!(t.symlink_metadata().is_err(), "{change:?}: the removed file came back");
        assert_eq!(fs::read(&first).unwrap(), b"1", "{change:?}");
        assert!(leftovers(&dir).is_empty(), "{:?}", leftovers(&dir));
    }
}

/// A failure that is not about the tree (here a directory that does not exist)
/// is not reported as a changed target.
#[test]
fn other_failures_are_not_a_changed_target() {
    let (_tmp, dir) = canonical_tempdir();
    let err = commit(&[Change::Create { path: dir.join("nope/x"), bytes: b"X".to_vec() }]).unwrap_err();
    assert!(!err.target_changed, "{err}");
}
