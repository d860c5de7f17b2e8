//! The fallbacks of [`place_new`] on filesystems without hard links or without
//! RENAME_NOREPLACE, walked through a whole commit by failing the naming calls
//! with the errnos those filesystems give.

use std::cell::Cell;
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use nix::errno::Errno;

use super::*;
use crate::policy::atomic::tests::{canonical_tempdir, leftovers};
use crate::policy::atomic::{Change, CommitError, commit_via};
use crate::policy::dir_fd::openat2_dir;

fn refuse(e: Errno) -> impl Fn(&Dir, &Path, &Path) -> nix::Result<()> {
    move |_, _, _| Err(e)
}

/// Replaces `first`, then creates `new` like `first`, with `naming`.
fn replace_and_create(dir: &Path, naming: Naming) -> Result<(), CommitError> {
    let (first, new) = (dir.join("first"), dir.join("new"));
    fs::write(&first, "1").unwrap();
    fs::set_permissions(&first, fs::Permissions::from_mode(0o750)).unwrap();
    let changes = [
        Change::Replace { path: first.clone(), bytes: b"2".to_vec() },
        Change::WriteLike { path: new, bytes: b"ours".to_vec(), like: first },
    ];
    commit_via(&changes, &mut |_| Ok::<(), io::Error>(()), &openat2_dir, naming)
}

fn assert_created(dir: &Path, why: &str) {
    assert_eq!(fs::read(dir.join("new")).unwrap(), b"ours", "{why}");
    assert_eq!(fs::metadata(dir.join("new")).unwrap().permissions().mode() & 0o777, 0o750, "{why}");
    assert_eq!(fs::read(dir.join("first")).unwrap(), b"2", "{why}");
    assert!(leftovers(dir).is_empty(), "{why}: {:?}", leftovers(dir));
}

/// Where `linkat` is refused, the new file is named by a rename that does not
/// replace; where that is refused too, by a look and a rename.
#[test]
fn without_hard_links_the_new_file_is_still_created() {
    for link_errno in NO_HARD_LINKS {
        let (_tmp, dir) = canonical_tempdir();
        let link = refuse(link_errno);
        replace_and_create(&dir, Naming { link: &link, ..KERNEL }).unwrap();
        assert_created(&dir, &format!("link {link_errno}"));
        for rename_errno in NO_RENAME_NOREPLACE {
            let (_tmp, dir) = canonical_tempdir();
            let rename_noreplace = refuse(rename_errno);
            replace_and_create(&dir, Naming { link: &link, rename_noreplace: &rename_noreplace }).unwrap();
            assert_created(&dir, &format!("link {link_errno}, rename without replace {rename_errno}"));
        }
    }
}

/// An entry that takes the new file's name just before the fallback names it
/// (the other process wins between the link and the rename) is kept: the rename
/// without replace fails on it. Where that rename is refused, the look before
/// the plain rename finds an entry that came before it; one that comes between
/// the look and the rename is the gap described in the module.
#[test]
fn without_hard_links_an_entry_that_appeared_is_never_replaced() {
    let plant = |dir: &Dir, to: &Path| fs::write(dir.path.join(to), "theirs").unwrap();
    let planting_rename = |dir: &Dir, from: &Path, to: &Path| {
        plant(dir, to);
        (KERNEL.rename_noreplace)(dir, from, to)
    };
    let planting_then_unsupported = |dir: &Dir, _: &Path, to: &Path| {
        plant(dir, to);
        Err(Errno::EINVAL)
    };
    let link = refuse(Errno::EPERM);
    let steps: [(&str, NameOp); 2] =
        [("rename without replace", &planting_rename), ("look and rename", &planting_then_unsupported)];
    for (step, rename_noreplace) in steps {
        let (_tmp, dir) = canonical_tempdir();
        let err = replace_and_create(&dir, Naming { link: &link, rename_noreplace }).unwrap_err();
        assert!(err.rolled_back && err.target_changed, "{step}: {err}");
        assert!(err.message.contains("appeared after the target was checked"), "{step}: {err}");
        assert_eq!(fs::read(dir.join("new")).unwrap(), b"theirs", "{step}");
        assert_eq!(fs::read(dir.join("first")).unwrap(), b"1", "{step}");
        assert!(leftovers(&dir).is_empty(), "{step}: {:?}", leftovers(&dir));
    }
}

/// A link refused for a reason that is not a missing feature (no space, no
/// permission, a read-only filesystem) fails the commit as it is: another way
/// of naming would fail alike or hide the cause. (Before, any link error fell
/// back to the look and the rename.)
#[test]
fn other_link_errors_fail_the_commit_without_a_fallback() {
    for link_errno in [Errno::ENOSPC, Errno::EACCES, Errno::EROFS, Errno::EMLINK] {
        let (_tmp, dir) = canonical_tempdir();
        let link = refuse(link_errno);
        let renamed = Cell::new(false);
        let rename_noreplace = |dir: &Dir, from: &Path, to: &Path| {
            renamed.set(true);
            (KERNEL.rename_noreplace)(dir, from, to)
        };
        let err = replace_and_create(&dir, Naming { link: &link, rename_noreplace: &rename_noreplace }).unwrap_err();
        assert!(!renamed.get(), "{link_errno}: fell back to a rename");
        assert!(err.rolled_back && !err.target_changed, "{link_errno}: {err}");
        assert!(err.message.contains(&io::Error::from(link_errno).to_string()), "{link_errno}: {err}");
        assert!(!dir.join("new").exists(), "{link_errno}");
        assert_eq!(fs::read(dir.join("first")).unwrap(), b"1", "{link_errno}");
        assert!(leftovers(&dir).is_empty(), "{link_errno}: {:?}", leftovers(&dir));
    }
}
