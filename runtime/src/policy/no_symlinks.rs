//! Opening a checked path without following any symlink in it, and the way back
//! for kernels that cannot.
//!
//! `openat2` with `RESOLVE_NO_SYMLINKS` refuses a path that meets a symlink. The
//! paths opened here were checked to be symlink-free, so meeting one (ELOOP) means
//! the tree was changed after the check: the caller refuses, never follows.
//!
//! A kernel before Linux 5.6 answers ENOSYS, and a seccomp filter may answer EPERM.
//! Then the caller's legacy open (by path, trusting the directories on the way) is
//! used. The first such answer is remembered for the whole process, so later opens
//! go the legacy way at once instead of paying for a failed system call each time.
//! An EPERM is remembered only when `openat2` of `/` is refused too: a file's own
//! EPERM (a fanotify denial, say) must not turn the check off for every later call.

use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::atomic::{AtomicU8, Ordering};

/// What this process knows about `openat2`.
pub(crate) struct Openat2Support(AtomicU8);

const UNKNOWN: u8 = 0;
const AVAILABLE: u8 = 1;
const UNAVAILABLE: u8 = 2;

/// The process's answer, shared by every production open.
pub(crate) static OPENAT2: Openat2Support = Openat2Support::new();

impl Openat2Support {
    pub(crate) const fn new() -> Self {
        Openat2Support(AtomicU8::new(UNKNOWN))
    }

    /// Runs `openat2` on `path` with `call`, unless this process already knows the
    /// kernel refuses it; then answers ENOSYS without a system call. The first
    /// answer decides: a refusal (see the module documentation) for good, anything
    /// else as proof that `openat2` runs.
    pub(crate) fn call<T>(&self, path: &Path, call: &dyn Fn(&Path) -> io::Result<T>) -> io::Result<T> {
        let known = self.0.load(Ordering::Relaxed);
        if known == UNAVAILABLE {
            return Err(io::Error::from_raw_os_error(libc::ENOSYS));
        }
        let answer = call(path);
        if known == UNKNOWN {
            let refused = match &answer {
                Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => true,
                Err(e) if e.raw_os_error() == Some(libc::EPERM) => call(Path::new("/")).is_err_and(|e| unavailable(&e)),
                _ => false,
            };
            self.0.store(if refused { UNAVAILABLE } else { AVAILABLE }, Ordering::Relaxed);
        }
        answer
    }
}

/// `openat2` missing from the kernel, or denied by a seccomp filter.
pub(crate) fn unavailable(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM))
}

/// Which open answered [`open_checked`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Way {
    NoSymlinks,
    Legacy,
}

/// Why [`open_checked`] opened nothing.
#[derive(Debug)]
pub(crate) enum CheckedOpenError {
    /// `openat2` met a symlink on a path checked to have none.
    Swapped,
    Io(io::Error),
}

/// Opens the checked, symlink-free `path` with `no_symlinks` (an `openat2`), or with
/// `legacy` when `openat2` is unavailable.
pub(crate) fn open_checked<T>(
    path: &Path,
    no_symlinks: &dyn Fn(&Path) -> io::Result<T>,
    legacy: impl FnOnce(&Path) -> io::Result<T>,
) -> (Way, Result<T, CheckedOpenError>) {
    match no_symlinks(path) {
        Ok(opened) => (Way::NoSymlinks, Ok(opened)),
        Err(e) if unavailable(&e) => (Way::Legacy, legacy(path).map_err(CheckedOpenError::Io)),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => (Way::NoSymlinks, Err(CheckedOpenError::Swapped)),
        Err(e) => (Way::NoSymlinks, Err(CheckedOpenError::Io(e))),
    }
}

/// `openat2(path, flags, RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS)` through the
/// process's memory of whether the kernel has it: an absolute path opened only if
/// no component of it is a symlink (ELOOP otherwise).
pub(crate) fn openat2_no_symlinks_with(path: &Path, flags: nix::fcntl::OFlag) -> io::Result<OwnedFd> {
    OPENAT2.call(path, &|p| raw_openat2(p, flags))
}

#[cfg(target_os = "linux")]
fn raw_openat2(path: &Path, flags: nix::fcntl::OFlag) -> io::Result<OwnedFd> {
    use nix::fcntl::{OpenHow, ResolveFlag};
    let how = OpenHow::new().flags(flags).resolve(ResolveFlag::RESOLVE_NO_SYMLINKS | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    Ok(nix::fcntl::openat2(nix::fcntl::AT_FDCWD, path, how)?)
}

/// Only Linux has `openat2`; elsewhere (macOS) every open takes the legacy route,
/// as on a Linux kernel without it.
#[cfg(not(target_os = "linux"))]
fn raw_openat2(_path: &Path, _flags: nix::fcntl::OFlag) -> io::Result<OwnedFd> {
    Err(io::Error::from_raw_os_error(libc::ENOSYS))
}

#[cfg(test)]
#[path = "no_symlinks_tests.rs"]
mod tests;
