//! Opening an existing regular file for reading, so that the file checked is the
//! file read.
//!
//! Resolving a path and then opening it again by name leaves a gap: a component
//! swapped for a symlink in between would be followed out of the root. Here the
//! open itself refuses symlinks (`openat2` with `RESOLVE_NO_SYMLINKS`), and the
//! size and type come from the open descriptor.
//!
//! - Direct: managed roots are canonical, so a path inside one by its letters that
//!   opens without meeting a symlink *is* its real path. One `openat2`, no
//!   canonicalization.
//! - Resolved: the direct open failed (a symlink on the way, a missing file, …).
//!   The path goes through [`Policy::resolve_existing`]'s own checks, so every
//!   refusal keeps its reason and text, and the real path is opened, again without
//!   following symlinks. If that open meets a symlink, the tree changed between
//!   the check and the open: the read is refused, never followed.
//! - Legacy: the kernel has no `openat2` (before Linux 5.6, or not Linux) or a
//!   seccomp filter denies it. Resolve as above, then a plain open of the real
//!   path (with `O_NOFOLLOW`, so only a swapped *directory* could still race).
//!   Once the process knows this, no open tries `openat2` again (`no_symlinks`).
//!
//! Every open is non-blocking, so a FIFO or device inside a root is opened without
//! waiting for a writer and then refused by its type (`not_a_file`).
//!
//! A caller may pass a gate on the root (the mutation gate, a same-project check):
//! it runs on every route once the path is known to name an existing entry inside
//! that root, and before the entry's type or readability is reported. So a path
//! refusal (`not_found`, `symlink_escape`, …) still comes first, but a gate refusal
//! wins over `not_a_file`, `stat_failed` and `read_failed`, and the path is resolved
//! once for both.

use std::fs::{File, Metadata, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use serde_json::json;

use super::no_symlinks::{CheckedOpenError, Way, open_checked, openat2_no_symlinks_with};
use super::paths::{Located, resolve_lexical};
use super::{Policy, Refusal, Resolved};

/// An existing regular file inside a managed root, open for reading.
#[derive(Debug)]
pub struct OpenedFile {
    pub file: File,
    /// From the open descriptor, so it describes the file that will be read.
    pub meta: Metadata,
    pub resolved: Resolved,
}

/// Which way a file was opened (see the module documentation); tests use it to
/// prove that the direct way does without canonicalization.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    Direct,
    Resolved,
    Legacy,
}

/// Opens an absolute path read-only without following any symlink in it.
/// Production uses [`openat2_no_symlinks`]; tests pass their own to count calls or
/// to act as a kernel without `openat2`.
pub(crate) type NoSymlinkOpen<'a> = &'a dyn Fn(&Path) -> io::Result<File>;

/// A check on a file's managed root (see the module documentation). Taken by
/// reference rather than generically, so the open is compiled once for every
/// gate, as it was before gates existed, and the inlining of its hot path stays.
pub type RootGate<'a> = &'a dyn Fn(&Path) -> Result<(), Refusal>;

/// The gate of callers that have none.
pub(super) fn no_gate(_: &Path) -> Result<(), Refusal> {
    Ok(())
}

impl Policy {
    /// Opens an existing regular file for reading, with the checks of
    /// [`Policy::resolve_existing`] and the same refusals, plus `not_a_file` and
    /// `stat_failed` for what the open descriptor shows, and `read_failed` when the
    /// file cannot be opened.
    pub fn open_existing_file(&self, raw: &str) -> Result<OpenedFile, Refusal> {
        self.open_existing_gated_via(raw, &openat2_no_symlinks, &no_gate).map(|(opened, _)| opened)
    }

    /// [`Policy::open_existing_file`] with `gate` run on the file's managed root
    /// after the path checks and before the file's type or readability is
    /// reported; a gate refusal is returned as it is.
    pub fn open_existing_file_gated(
        &self,
        raw: &str,
        gate: RootGate,
    ) -> Result<OpenedFile, Refusal> {
        self.open_existing_gated_via(raw, &openat2_no_symlinks, gate).map(|(opened, _)| opened)
    }

    /// [`Policy::open_existing_file`] with the no-symlink open given, reporting the
    /// route taken.
    #[cfg(test)]
    pub(crate) fn open_existing_via(&self, raw: &str, open: NoSymlinkOpen) -> Result<(OpenedFile, Route), Refusal> {
        self.open_existing_gated_via(raw, open, &no_gate)
    }

    /// [`Policy::open_existing_file_gated`] with the no-symlink open given,
    /// reporting the route taken.
    pub(crate) fn open_existing_gated_via(
        &self,
        raw: &str,
        open: NoSymlinkOpen,
        gate: RootGate,
    ) -> Result<(OpenedFile, Route), Refusal> {
        let (lexical, root) = match self.locate_existing(raw)? {
            Located::Lexical { lexical, root } => (lexical, root),
            Located::Aliased(resolved) => return open_real(resolved, open, gate),
        };
        match open(&lexical) {
            Ok(file) => {
                // Opened without meeting a symlink: the lexical path is the real one.
                gate(&root)?;
                Ok((describe(file, Resolved { real: lexical, root })?, Route::Direct))
            }
            // Any failure, not only a symlink on the way (ELOOP): resolving gives a
            // missing file or a bad component the refusal it has always had.
            Err(_) => open_real(resolve_lexical(&lexical, root)?, open, gate),
        }
    }
}

/// `openat2(path, O_RDONLY|O_CLOEXEC|O_NOCTTY|O_NONBLOCK, RESOLVE_NO_SYMLINKS)`.
pub(crate) fn openat2_no_symlinks(path: &Path) -> io::Result<File> {
    use nix::fcntl::OFlag;
    let fd = openat2_no_symlinks_with(path, OFlag::O_RDONLY | OFlag::O_CLOEXEC | OFlag::O_NOCTTY | OFlag::O_NONBLOCK)?;
    Ok(File::from(fd))
}

/// A plain read-only open whose final component must not be a symlink, with
/// directories on the way followed: the open of kernels without `openat2` (the
/// real path has no symlink), and of files a directory walk found (fs_grep).
/// Non-blocking, so a FIFO is opened without waiting for a writer.
pub fn open_following_directories(path: &Path) -> io::Result<File> {
    OpenOptions::new().read(true).custom_flags(libc::O_NOCTTY | libc::O_NONBLOCK | libc::O_NOFOLLOW).open(path)
}

/// Opens the canonical path of a resolved file, once `gate` let its root pass.
fn open_real(
    resolved: Resolved,
    open: NoSymlinkOpen,
    gate: RootGate,
) -> Result<(OpenedFile, Route), Refusal> {
    gate(&resolved.root)?;
    let (way, opened) = open_checked(&resolved.real, open, open_following_directories);
    let route = match way {
        Way::NoSymlinks => Route::Resolved,
        Way::Legacy => Route::Legacy,
    };
    match opened {
        Ok(file) => Ok((describe(file, resolved)?, route)),
        Err(CheckedOpenError::Swapped) => Err(swapped(&resolved.real)),
        Err(CheckedOpenError::Io(e)) => Err(open_failure(&resolved.real, e)),
    }
}

/// The open file if it is a regular file.
fn describe(file: File, resolved: Resolved) -> Result<OpenedFile, Refusal> {
    let path = &resolved.real;
    let meta = file.metadata().map_err(|e| refusal("stat_failed", path, format!("cannot stat {}: {e}", path.display())))?;
    if !meta.is_file() {
        return Err(not_a_file(path));
    }
    Ok(OpenedFile { file, meta, resolved })
}

/// Why an existing path could not be opened. A socket (ENXIO) and other special
/// files are reported by type, as a look at the path would; anything else is the
/// open's own error.
fn open_failure(path: &Path, e: io::Error) -> Refusal {
    match std::fs::metadata(path) {
        Ok(meta) if !meta.is_file() => not_a_file(path),
        _ => refusal("read_failed", path, format!("cannot read {}: {e}", path.display())),
    }
}

fn swapped(path: &Path) -> Refusal {
    refusal(
        "read_failed",
        path,
        format!(
            "cannot read {}: a directory on the way was replaced by a symlink while the file was being opened; it was not followed",
            path.display()
        ),
    )
}

fn not_a_file(path: &Path) -> Refusal {
    refusal("not_a_file", path, format!("{} is not a regular file", path.display()))
}

fn refusal(reason: &'static str, path: &Path, message: String) -> Refusal {
    Refusal::new(reason, message, json!({"path": path.display().to_string()}))
}

#[cfg(test)]
#[path = "open_tests.rs"]
mod tests;
