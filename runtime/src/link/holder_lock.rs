//! One link holder per workstation and state directory. `serve --link` and a
//! standalone `link` both keep a workstation's answers to changes in the same
//! `link_answers` rows; two holders at once would replay or forget answers that
//! belong to the other's socket. So whoever keeps answers there first takes an
//! exclusive `flock` on `<state dir>/link-<workstation id>.lock`. The kernel
//! drops that lock when the holder's process ends, however it ends (SIGKILL
//! too), so no stale row or pid check can block the next start.
//!
//! The file also names its holder (pid and command) for the refusal message;
//! that text is advice only, the lock alone decides.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

/// Which command holds (or wants) the link; named in the refusal message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HolderKind {
    Serve,
    Standalone,
}

impl HolderKind {
    fn command(self) -> &'static str {
        match self {
            HolderKind::Serve => "herdr-mcp serve --link",
            HolderKind::Standalone => "herdr-mcp link",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum HolderLockError {
    #[error(
        "the link of workstation {workstation_id} with state directory {dir} is already held by {holder}; \
         stop that process, or run only one of `herdr-mcp serve --link` and `herdr-mcp link` for this workstation"
    )]
    Held { workstation_id: String, dir: String, holder: String },
    #[error("{0}")]
    BadId(String),
    #[error("link lock file {path}: {message}")]
    Io { path: String, message: String },
}

/// Held for as long as this process may keep the workstation's answers;
/// dropping it (or the process ending) frees the link for another holder.
#[derive(Debug)]
pub struct HolderLock {
    _file: Flock<File>,
    path: PathBuf,
}

impl HolderLock {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The lock file of `workstation_id` in `state_dir`. Workstation ids are
/// checked ids (letters, digits, `.`, `_`, `:`, `-`, at most 64 bytes, not
/// starting with a dot), so they are safe as one file-name component.
pub fn lock_path(state_dir: &Path, workstation_id: &str) -> PathBuf {
    state_dir.join(format!("link-{workstation_id}.lock"))
}

/// Takes the link of `workstation_id` in `state_dir` without waiting, or says
/// who holds it.
pub fn acquire(state_dir: &Path, workstation_id: &str, kind: HolderKind) -> Result<HolderLock, HolderLockError> {
    crate::edge::relay::check_id("workstation id", workstation_id, crate::edge::relay::MAX_WORKSTATION_ID)
        .map_err(HolderLockError::BadId)?;
    let path = lock_path(state_dir, workstation_id);
    let io = |what: &str, e: &dyn std::fmt::Display| HolderLockError::Io { path: path.display().to_string(), message: format!("{what}: {e}") };
    // Not truncated on open: until the lock is ours, the text belongs to the holder.
    // No following a planted symlink out of the private state directory.
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .map_err(|e| io("cannot open it", &e))?;
    let mut file = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(locked) => locked,
        Err((mut file, Errno::EWOULDBLOCK)) => {
            return Err(HolderLockError::Held {
                workstation_id: workstation_id.to_string(),
                dir: state_dir.display().to_string(),
                holder: describe_holder(&mut file),
            });
        }
        Err((_, errno)) => return Err(io("cannot lock it", &errno)),
    };
    let note = format!("{} {}\n", std::process::id(), kind.command());
    file.set_len(0).and_then(|()| file.rewind()).and_then(|()| file.write_all(note.as_bytes())).map_err(|e| io("cannot write it", &e))?;
    Ok(HolderLock { _file: file, path })
}

/// "pid N (command)" from the holder's note; the holder may be between taking
/// the lock and writing it, so an unreadable note is "another process".
fn describe_holder(file: &mut File) -> String {
    let mut note = String::new();
    let read = file.take(256).read_to_string(&mut note);
    let parsed = read.ok().and_then(|_| {
        let (pid, command) = note.trim().split_once(' ')?;
        Some((pid.parse::<u32>().ok()?, command.to_string()))
    });
    match parsed {
        Some((pid, command)) => format!("`{command}` (pid {pid})"),
        None => "another process (pid unknown)".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_second_holder_is_refused_with_the_first_ones_pid_until_it_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let first = acquire(dir.path(), "ws_a", HolderKind::Standalone).unwrap();
        let mode = std::fs::metadata(first.path()).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let err = acquire(dir.path(), "ws_a", HolderKind::Serve).unwrap_err().to_string();
        let me = std::process::id();
        assert!(err.contains(&format!("`herdr-mcp link` (pid {me})")), "{err}");
        assert!(err.contains("ws_a") && !err.contains('\n'), "{err}");
        // Another workstation in the same directory is a separate link.
        let other = acquire(dir.path(), "ws_b", HolderKind::Serve).unwrap();
        drop(first);
        let again = acquire(dir.path(), "ws_a", HolderKind::Serve).unwrap();
        let note = std::fs::read_to_string(again.path()).unwrap();
        assert_eq!(note, format!("{me} herdr-mcp serve --link\n"), "the new holder's note replaces the old one");
        drop(other);
    }

    #[test]
    fn commands_the_holder_runs_do_not_inherit_the_lock() {
        // A runtime's exec children may outlive it; holding the lock they would
        // block every later link start after the runtime was killed.
        let dir = tempfile::tempdir().unwrap();
        let held = acquire(dir.path(), "ws_a", HolderKind::Serve).unwrap();
        let flags = nix::fcntl::fcntl(&*held._file, nix::fcntl::FcntlArg::F_GETFD).unwrap();
        assert_ne!(flags & libc::FD_CLOEXEC, 0);
    }

    #[test]
    fn an_unreadable_note_still_refuses_without_a_pid() {
        let dir = tempfile::tempdir().unwrap();
        let held = acquire(dir.path(), "ws_a", HolderKind::Serve).unwrap();
        std::fs::write(held.path(), "garbage").unwrap();
        let err = acquire(dir.path(), "ws_a", HolderKind::Standalone).unwrap_err().to_string();
        assert!(err.contains("another process (pid unknown)"), "{err}");
    }

    #[test]
    fn an_id_that_is_not_a_file_name_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        for bad in ["../x", "a/b", ".hidden", ""] {
            assert!(matches!(acquire(dir.path(), bad, HolderKind::Serve), Err(HolderLockError::BadId(_))), "{bad}");
        }
        // The relay's limit on workstation ids, at its edge.
        let longest = "w".repeat(crate::edge::relay::MAX_WORKSTATION_ID);
        assert!(acquire(dir.path(), &longest, HolderKind::Serve).is_ok());
        let too_long = format!("{longest}w");
        assert!(matches!(acquire(dir.path(), &too_long, HolderKind::Serve), Err(HolderLockError::BadId(_))));
    }

    #[test]
    fn a_symlinked_lock_file_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        std::os::unix::fs::symlink(&target, lock_path(dir.path(), "ws_a")).unwrap();
        assert!(matches!(acquire(dir.path(), "ws_a", HolderKind::Serve), Err(HolderLockError::Io { .. })));
        assert!(!target.exists());
    }
}
