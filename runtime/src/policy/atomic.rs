//! All-or-nothing file changes (spec §2.6).
//!
//! 0. Open: every target's directory (and that of a `WriteLike` model) is opened once
//!    as a descriptor without following symlinks ([`Dir`]); every later step is
//!    relative to it, so a directory swapped for a symlink after the policy check
//!    cannot carry the change out of the managed root. A symlink met here refuses
//!    the whole transaction before anything is written.
//! 1. Stage: every new content goes to `.<name>.herdr-mcp-<txn>-<i>.tmp` in the target's
//!    own directory (same filesystem, so renames are atomic), with the old file's
//!    permissions, and is fsynced. A staging failure touches no target.
//! 2. Swap: each existing target is renamed to `.<name>.herdr-mcp-<txn>-<i>.bak`, then
//!    the temp file is renamed into place. If any step fails, every step already done
//!    is undone in reverse order, so the targets end byte-identical to before. The
//!    policy checked the targets by path; the swap checks them again on the entries
//!    themselves: a new file (`Create`, `WriteLike`) takes its name only while
//!    nothing has it (see [`super::new_name`]), an entry moved aside to be replaced
//!    or deleted must be a regular file, else it is put back, and one that is gone
//!    is not recreated. Each of these refuses the transaction as changed after the
//!    check ([`CommitError::target_changed`]).
//! 3. Clean up: backups are removed and the directories fsynced.

use std::ffi::OsString;
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use super::changed::{changed, is_changed};
use super::dir_fd::{Dir, DirOpen, EntryKind, openat2_dir};
use super::new_name::{KERNEL, Naming, place_new};

/// One change of a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Replace the regular file at `path` with `bytes`, keeping its permissions.
    /// The new content was computed against that file (or the caller saw it and
    /// chose to replace it), so anything else found at `path` by then, nothing
    /// included, refuses the transaction: a file deleted meanwhile is not recreated.
    Replace { path: PathBuf, bytes: Vec<u8> },
    /// Create `path` with `bytes`; refused if anything is named `path` by then.
    Create { path: PathBuf, bytes: Vec<u8> },
    /// Create `path` with `bytes` and the permissions of the file `like` (the
    /// source of a move, so an executable stays executable); refused, as
    /// `Create`, if anything is named `path` by then.
    WriteLike { path: PathBuf, bytes: Vec<u8>, like: PathBuf },
    /// Remove the regular file at `path`.
    Delete { path: PathBuf },
}

impl Change {
    pub fn path(&self) -> &Path {
        match self {
            Change::Replace { path, .. }
            | Change::Create { path, .. }
            | Change::WriteLike { path, .. }
            | Change::Delete { path } => path,
        }
    }

    /// Whether the change makes a new file, which must never replace an entry
    /// that appeared after the policy check.
    fn creates(&self) -> bool {
        matches!(self, Change::Create { .. } | Change::WriteLike { .. })
    }
}

/// A failed transaction. `rolled_back` is false only if undoing itself failed, in
/// which case `message` names what is left where. `target_changed` says the cause
/// is a target or directory that is no longer what the policy checked (appeared,
/// vanished, or became a directory or symlink): worth looking again before a retry.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct CommitError {
    pub path: PathBuf,
    pub message: String,
    pub rolled_back: bool,
    pub target_changed: bool,
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
    commit_via(changes, fault, &openat2_dir, KERNEL)
}

/// [`commit_with_fault`] with the directory open and the naming of new files
/// given (tests act as a kernel without `openat2`, a filesystem without hard
/// links, or a tree changed after the check).
pub(crate) fn commit_via(
    changes: &[Change],
    fault: &mut dyn FnMut(usize) -> io::Result<()>,
    open: DirOpen,
    naming: Naming,
) -> Result<(), CommitError> {
    let mut txn = Txn::open(changes, open)?;
    txn.stage(changes)?;
    let mut done: Vec<Step> = Vec::new();
    for (i, change) in changes.iter().enumerate() {
        if let Err(e) = fault(i).and_then(|()| txn.swap(i, change, naming, &mut done)) {
            let undo_errors = txn.undo(&done);
            txn.remove_temps();
            let rolled_back = undo_errors.is_empty();
            let mut message = format!("cannot apply the change to {}: {e}", change.path().display());
            if rolled_back {
                message.push_str("; every file was restored");
            } else {
                message.push_str(&format!("; rollback incomplete: {}", undo_errors.join("; ")));
            }
            let target_changed = is_changed(&e);
            return Err(CommitError { path: change.path().to_path_buf(), message, rolled_back, target_changed });
        }
    }
    txn.finish(&done);
    Ok(())
}

/// One transaction: its id, the directories it works in (each opened once), and
/// per change where its target lives, whose permissions it takes and its temp file.
struct Txn {
    id: String,
    dirs: Vec<Dir>,
    targets: Vec<Entry>,
    /// The file whose permissions new content takes: the one it replaces, or the
    /// `WriteLike` model. None for a deletion.
    models: Vec<Option<Entry>>,
    temps: Vec<Option<OsString>>,
}

/// A name in one of the transaction's directories (an index into `Txn::dirs`).
#[derive(Clone)]
struct Entry {
    dir: usize,
    name: OsString,
}

/// A swap step already performed (by change index), recorded so it can be undone.
enum Step {
    Backed { i: usize, backup: OsString },
    Placed { i: usize },
}

impl Txn {
    /// Opens every directory the changes touch, before anything is written.
    fn open(changes: &[Change], open: DirOpen) -> Result<Txn, CommitError> {
        let mut txn = Txn { id: txn_id(), dirs: Vec::new(), targets: Vec::new(), models: Vec::new(), temps: Vec::new() };
        for change in changes {
            let target = txn.locate(change.path(), open).map_err(|e| staging_failed(change.path(), e))?;
            let model = match change {
                Change::Replace { .. } => Some(target.clone()),
                Change::WriteLike { like, .. } => {
                    Some(txn.locate(like, open).map_err(|e| staging_failed(change.path(), e))?)
                }
                Change::Create { .. } | Change::Delete { .. } => None,
            };
            txn.targets.push(target);
            txn.models.push(model);
        }
        Ok(txn)
    }

    fn locate(&mut self, path: &Path, open: DirOpen) -> io::Result<Entry> {
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "the path names no file in a directory"));
        };
        let dir = match self.dirs.iter().position(|d| d.path == parent) {
            Some(i) => i,
            None => {
                self.dirs.push(Dir::open(parent, open)?);
                self.dirs.len() - 1
            }
        };
        Ok(Entry { dir, name: name.to_os_string() })
    }

    fn dir(&self, entry: &Entry) -> &Dir {
        &self.dirs[entry.dir]
    }

    /// Writes every new content to its temp file; on a failure removes those
    /// already written, so no target and no directory has changed.
    fn stage(&mut self, changes: &[Change]) -> Result<(), CommitError> {
        for (i, change) in changes.iter().enumerate() {
            let staged = match change {
                Change::Replace { bytes, .. } | Change::Create { bytes, .. } | Change::WriteLike { bytes, .. } => {
                    let model = self.models[i].as_ref();
                    let mode = model.and_then(|m| self.dir(m).file_mode(Path::new(&m.name)));
                    stage(self.dir(&self.targets[i]), &self.targets[i].name, bytes, mode, &self.id, i).map(Some)
                }
                Change::Delete { .. } => Ok(None),
            };
            match staged {
                Ok(tmp) => self.temps.push(tmp),
                Err(e) => {
                    self.remove_temps();
                    return Err(staging_failed(change.path(), e));
                }
            }
        }
        Ok(())
    }

    /// Moves an existing target aside to its backup, then the temp file into place.
    /// What the policy check saw at the target is verified again here, on the
    /// entry in the opened directory: a new file replaces nothing, and only a
    /// regular file is replaced or deleted (a directory or symlink put there
    /// since the check is put back and refuses the transaction), and a file gone
    /// since the check is not recreated.
    fn swap(&self, i: usize, change: &Change, naming: Naming, done: &mut Vec<Step>) -> io::Result<()> {
        let dir = self.dir(&self.targets[i]);
        let target = Path::new(&self.targets[i].name);
        if change.creates() {
            let temp = self.temps[i].as_ref().ok_or_else(|| io::Error::other("a new file has no staged content"))?;
            place_new(dir, Path::new(temp), target, naming)?;
            done.push(Step::Placed { i });
            return Ok(());
        }
        // Moved aside first and looked at under the backup name, which nobody
        // else uses: what is checked is then what was moved, with no gap between.
        let backup = sibling(&self.targets[i].name, &self.id, i, "bak");
        match dir.rename(target, Path::new(&backup)) {
            Ok(()) => {
                done.push(Step::Backed { i, backup: backup.clone() });
                if dir.entry(Path::new(&backup))? != EntryKind::File {
                    // The undo of the step just recorded puts it back.
                    return Err(changed(io::ErrorKind::Other, format!(
                        "{} is no longer a regular file (a directory, symlink or special file took its place after the check); it was left as it is",
                        dir.path.join(target).display()
                    )));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                // Whoever removed it meant something by that; content computed
                // against the old file must not bring it back.
                let what = if matches!(change, Change::Delete { .. }) { "to delete" } else { "to replace" };
                return Err(changed(
                    io::ErrorKind::NotFound,
                    format!("the file {what}, {}, was removed after it was checked; it was not recreated", dir.path.join(target).display()),
                ));
            }
            Err(e) => return Err(e),
        }
        if let Some(temp) = &self.temps[i] {
            dir.rename(Path::new(temp), target)?;
            done.push(Step::Placed { i });
        }
        Ok(())
    }

    /// Undoes `done` in reverse order; returns what could not be undone.
    fn undo(&self, done: &[Step]) -> Vec<String> {
        let mut errors = Vec::new();
        for step in done.iter().rev() {
            let (Step::Placed { i } | Step::Backed { i, .. }) = step;
            let dir = self.dir(&self.targets[*i]);
            let name = Path::new(&self.targets[*i].name);
            let target = dir.path.join(name);
            let result = match step {
                Step::Placed { .. } => dir.unlink(name),
                Step::Backed { backup, .. } => dir.rename(Path::new(backup), name),
            };
            if let Err(e) = result {
                errors.push(match step {
                    Step::Placed { .. } => format!("new {} could not be removed: {e}", target.display()),
                    Step::Backed { backup, .. } => {
                        format!("{} could not be restored from {}: {e}", target.display(), dir.path.join(backup).display())
                    }
                });
            }
        }
        errors
    }

    fn remove_temps(&self) {
        for (i, tmp) in self.temps.iter().enumerate() {
            if let Some(tmp) = tmp {
                let _ = self.dir(&self.targets[i]).unlink(Path::new(tmp));
            }
        }
    }

    /// Removes the backups and syncs the directories.
    fn finish(&self, done: &[Step]) {
        for step in done {
            if let Step::Backed { i, backup } = step {
                let _ = self.dir(&self.targets[*i]).unlink(Path::new(backup));
            }
        }
        for dir in &self.dirs {
            // Best effort: the renames are already visible; this only hardens them
            // against a power loss.
            let _ = dir.sync();
        }
    }
}

fn staging_failed(path: &Path, e: io::Error) -> CommitError {
    CommitError {
        path: path.to_path_buf(),
        message: format!("cannot stage new content for {}: {e}", path.display()),
        rolled_back: true,
        target_changed: is_changed(&e),
    }
}

/// Writes `bytes` to a fresh temp file next to `name` in `dir`, with the
/// permission bits `mode` when given (those of the file replaced or copied).
fn stage(dir: &Dir, name: &OsString, bytes: &[u8], mode: Option<u32>, txn: &str, i: usize) -> io::Result<OsString> {
    let tmp = sibling(name, txn, i, "tmp");
    let result = (|| {
        let mut file = dir.create_new(Path::new(&tmp))?;
        file.write_all(bytes)?;
        if let Some(mode) = mode {
            file.set_permissions(std::fs::Permissions::from_mode(mode))?;
        }
        file.sync_all()
    })();
    match result {
        Ok(()) => Ok(tmp),
        Err(e) => {
            let _ = dir.unlink(Path::new(&tmp));
            Err(e)
        }
    }
}

fn sibling(name: &OsString, txn: &str, i: usize, ext: &str) -> OsString {
    OsString::from(format!(".{}.herdr-mcp-{txn}-{i}.{ext}", name.to_string_lossy()))
}

/// Unique per process and call: pid, clock and a counter.
fn txn_id() -> String {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    format!("{:x}-{:x}-{:x}", std::process::id(), nanos, SEQ.fetch_add(1, Ordering::Relaxed))
}

#[cfg(test)]
#[path = "atomic_tests.rs"]
pub(crate) mod tests;
