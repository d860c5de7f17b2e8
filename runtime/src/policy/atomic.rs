//! All-or-nothing file changes (spec §2.6).
//!
//! 1. Stage: every new content goes to `.<name>.herdr-mcp-<txn>-<i>.tmp` in the target's
//!    own directory (same filesystem, so renames are atomic), with the old file's
//!    permissions, and is fsynced. A staging failure touches no target.
//! 2. Swap: each existing target is renamed to `.<name>.herdr-mcp-<txn>-<i>.bak`, then
//!    the temp file is renamed into place. If any step fails, every step already done
//!    is undone in reverse order, so the targets end byte-identical to before.
//! 3. Clean up: backups are removed and the directories fsynced.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// One change of a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Create or replace `path` with `bytes`.
    Write { path: PathBuf, bytes: Vec<u8> },
    /// Create `path` with `bytes` and the permissions of the file `like` (the
    /// source of a move, so an executable stays executable).
    WriteLike { path: PathBuf, bytes: Vec<u8>, like: PathBuf },
    /// Remove the file at `path`.
    Delete { path: PathBuf },
}

impl Change {
    pub fn path(&self) -> &Path {
        match self {
            Change::Write { path, .. } | Change::WriteLike { path, .. } | Change::Delete { path } => path,
        }
    }
}

/// A failed transaction. `rolled_back` is false only if undoing itself failed, in
/// which case `message` names what is left where.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct CommitError {
    pub path: PathBuf,
    pub message: String,
    pub rolled_back: bool,
}

/// Applies every change or none.
pub fn commit(changes: &[Change]) -> Result<(), CommitError> {
    commit_with_fault(changes, &mut |_| Ok(()))
}

/// [`commit`] with a hook run before swap step `i`; a hook error aborts the swap
/// there. Lets tests prove the rollback of steps already done.
pub fn commit_with_fault(
    changes: &[Change],
    fault: &mut dyn FnMut(usize) -> io::Result<()>,
) -> Result<(), CommitError> {
    let txn = txn_id();
    let mut temps: Vec<Option<PathBuf>> = Vec::with_capacity(changes.len());
    for (i, change) in changes.iter().enumerate() {
        let staged = match change {
            Change::Write { path, bytes } => Some((path, stage(path, bytes, path, &txn, i))),
            Change::WriteLike { path, bytes, like } => Some((path, stage(path, bytes, like, &txn, i))),
            Change::Delete { .. } => None,
        };
        match staged {
            Some((path, result)) => match result {
                Ok(tmp) => temps.push(Some(tmp)),
                Err(e) => {
                    remove_all(temps.iter().flatten());
                    return Err(CommitError {
                        path: path.clone(),
                        message: format!("cannot stage new content for {}: {e}", path.display()),
                        rolled_back: true,
                    });
                }
            },
            None => temps.push(None),
        }
    }

    let mut done: Vec<Step> = Vec::new();
    for (i, change) in changes.iter().enumerate() {
        if let Err(e) = swap(change, temps[i].as_deref(), &txn, i, fault, &mut done) {
            let undo_errors = undo(&done);
            remove_all(temps.iter().flatten());
            let rolled_back = undo_errors.is_empty();
            let mut message = format!("cannot apply the change to {}: {e}", change.path().display());
            if rolled_back {
                message.push_str("; every file was restored");
            } else {
                message.push_str(&format!("; rollback incomplete: {}", undo_errors.join("; ")));
            }
            return Err(CommitError { path: change.path().to_path_buf(), message, rolled_back });
        }
    }

    for step in &done {
        if let Step::Backed { backup, .. } = step {
            let _ = fs::remove_file(backup);
        }
    }
    let mut dirs: Vec<&Path> = changes.iter().filter_map(|c| c.path().parent()).collect();
    dirs.sort();
    dirs.dedup();
    for dir in dirs {
        // Best effort: the renames are already visible; this only hardens them
        // against a power loss.
        let _ = File::open(dir).and_then(|d| d.sync_all());
    }
    Ok(())
}

/// A swap step already performed, recorded so it can be undone.
enum Step {
    Backed { target: PathBuf, backup: PathBuf },
    Placed { target: PathBuf },
}

fn swap(
    change: &Change,
    temp: Option<&Path>,
    txn: &str,
    i: usize,
    fault: &mut dyn FnMut(usize) -> io::Result<()>,
    done: &mut Vec<Step>,
) -> io::Result<()> {
    fault(i)?;
    let target = change.path();
    let exists = fs::symlink_metadata(target).is_ok();
    if exists {
        let backup = sibling(target, txn, i, "bak");
        fs::rename(target, &backup)?;
        done.push(Step::Backed { target: target.to_path_buf(), backup });
    } else if matches!(change, Change::Delete { .. }) {
        return Err(io::Error::new(io::ErrorKind::NotFound, "the file to delete is gone"));
    }
    if let Some(temp) = temp {
        fs::rename(temp, target)?;
        done.push(Step::Placed { target: target.to_path_buf() });
    }
    Ok(())
}

fn undo(done: &[Step]) -> Vec<String> {
    let mut errors = Vec::new();
    for step in done.iter().rev() {
        let result = match step {
            Step::Placed { target } => fs::remove_file(target),
            Step::Backed { target, backup } => fs::rename(backup, target),
        };
        if let Err(e) = result {
            let what = match step {
                Step::Placed { target } => format!("new {} could not be removed: {e}", target.display()),
                Step::Backed { target, backup } => {
                    format!("{} could not be restored from {}: {e}", target.display(), backup.display())
                }
            };
            errors.push(what);
        }
    }
    errors
}

/// Writes `bytes` to a fresh temp file next to `target`, with the permissions of
/// `perms_of` when that file exists.
fn stage(target: &Path, bytes: &[u8], perms_of: &Path, txn: &str, i: usize) -> io::Result<PathBuf> {
    let tmp = sibling(target, txn, i, "tmp");
    let result = (|| {
        let mut file = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        file.write_all(bytes)?;
        if let Ok(meta) = fs::metadata(perms_of) {
            file.set_permissions(meta.permissions())?;
        }
        file.sync_all()
    })();
    match result {
        Ok(()) => Ok(tmp),
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Err(e)
        }
    }
}

fn sibling(target: &Path, txn: &str, i: usize, ext: &str) -> PathBuf {
    let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    target.with_file_name(format!(".{name}.herdr-mcp-{txn}-{i}.{ext}"))
}

fn remove_all<'a>(paths: impl Iterator<Item = &'a PathBuf>) {
    for p in paths {
        let _ = fs::remove_file(p);
    }
}

/// Unique per process and call: pid, clock and a counter.
fn txn_id() -> String {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    format!("{:x}-{:x}-{:x}", std::process::id(), nanos, SEQ.fetch_add(1, Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn leftovers(dir: &Path) -> Vec<String> {
        fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains("herdr-mcp-"))
            .collect()
    }

    #[test]
    fn writes_creates_deletes_and_keeps_permissions() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b, c) = (tmp.path().join("a"), tmp.path().join("b"), tmp.path().join("c"));
        fs::write(&a, "old a").unwrap();
        fs::set_permissions(&a, fs::Permissions::from_mode(0o751)).unwrap();
        fs::write(&c, "c").unwrap();
        commit(&[
            Change::Write { path: a.clone(), bytes: b"new a".to_vec() },
            Change::Write { path: b.clone(), bytes: b"new b".to_vec() },
            Change::Delete { path: c.clone() },
        ])
        .unwrap();
        assert_eq!(fs::read(&a).unwrap(), b"new a");
        assert_eq!(fs::metadata(&a).unwrap().permissions().mode() & 0o777, 0o751);
        assert_eq!(fs::read(&b).unwrap(), b"new b");
        assert!(!c.exists());
        let d = tmp.path().join("d");
        commit(&[Change::WriteLike { path: d.clone(), bytes: b"d".to_vec(), like: a.clone() }]).unwrap();
        assert_eq!(fs::metadata(&d).unwrap().permissions().mode() & 0o777, 0o751);
        assert!(leftovers(tmp.path()).is_empty());
    }

    #[test]
    fn a_failure_midway_restores_every_file() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b, c, d) =
            (tmp.path().join("a"), tmp.path().join("b"), tmp.path().join("c"), tmp.path().join("d"));
        fs::write(&a, "A").unwrap();
        fs::write(&c, "C").unwrap();
        let changes = [
            Change::Write { path: a.clone(), bytes: b"A2".to_vec() },
            Change::Write { path: b.clone(), bytes: b"B2".to_vec() },
            Change::Delete { path: c.clone() },
            Change::Write { path: d.clone(), bytes: b"D2".to_vec() },
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
            assert!(leftovers(tmp.path()).is_empty(), "{:?}", leftovers(tmp.path()));
        }
    }

    #[test]
    fn a_staging_failure_touches_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let a = tmp.path().join("a");
        fs::write(&a, "A").unwrap();
        let missing_dir = tmp.path().join("nope").join("x");
        let err = commit(&[
            Change::Write { path: a.clone(), bytes: b"A2".to_vec() },
            Change::Write { path: missing_dir, bytes: b"X".to_vec() },
        ])
        .unwrap_err();
        assert!(err.message.contains("cannot stage"), "{err}");
        assert_eq!(fs::read(&a).unwrap(), b"A");
        assert!(leftovers(tmp.path()).is_empty());
    }
}
