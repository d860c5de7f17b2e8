//! A checked directory held open, so that a write lands in the directory that was
//! checked and not wherever its path leads a moment later.
//!
//! [`Policy::resolve_target`](super::Policy::resolve_target) verifies a target's
//! canonical parent directory by path. Doing the write by path afterwards would let
//! a directory on the way, swapped for a symlink in between, carry the write out of
//! the managed root. So the commit opens each canonical parent once with `openat2`
//! and `RESOLVE_NO_SYMLINKS` (a canonical path has no symlink: meeting one means the
//! tree changed since the check, and the write is refused, never followed), then
//! creates, renames and removes entries relative to that descriptor only.
//!
//! Kernels without `openat2` (or a seccomp filter denying it) open the directory by
//! path as before; every later step is still relative to that one descriptor, so
//! the whole commit happens in one directory even there.

use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{Mode, SFlag};
use nix::unistd::UnlinkatFlags;

use super::changed::changed;
use super::no_symlinks::{CheckedOpenError, open_checked, openat2_no_symlinks_with};

/// Opens an absolute directory path without following any symlink in it.
/// Production uses [`openat2_dir`]; tests pass their own to act as a kernel
/// without `openat2` or to simulate a directory swapped after the check.
pub(crate) type DirOpen<'a> = &'a dyn Fn(&Path) -> io::Result<OwnedFd>;

/// Only a handle for `*at` calls: no read permission on the directory is needed.
#[cfg(target_os = "linux")]
fn dir_flags() -> OFlag {
    OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC
}

#[cfg(not(target_os = "linux"))]
fn dir_flags() -> OFlag {
    OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC
}

/// `openat2(path, O_PATH|O_DIRECTORY|O_CLOEXEC, RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS)`.
pub(crate) fn openat2_dir(path: &Path) -> io::Result<OwnedFd> {
    openat2_no_symlinks_with(path, dir_flags())
}

/// What a name in a [`Dir`] holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EntryKind {
    Missing,
    File,
    /// A directory, symlink, FIFO, socket or device.
    Other,
}

/// A directory open by descriptor, with the path it was checked under (for messages).
#[derive(Debug)]
pub(crate) struct Dir {
    pub path: PathBuf,
    fd: OwnedFd,
}

impl Dir {
    /// Opens the checked directory `path` with `open`; falls back to an open by path
    /// when `openat2` is unavailable. A symlink met on the way is an error that says
    /// the tree changed after the check.
    pub fn open(path: &Path, open: DirOpen) -> io::Result<Dir> {
        let by_path = |p: &Path| nix::fcntl::open(p, dir_flags(), Mode::empty()).map_err(io::Error::from);
        match open_checked(path, open, by_path).1 {
            Ok(fd) => Ok(Dir { path: path.to_path_buf(), fd }),
            Err(CheckedOpenError::Swapped) => Err(changed(
                io::ErrorKind::Other,
                format!("the directory {} was replaced by a symlink after it was checked; it was not followed", path.display()),
            )),
            Err(CheckedOpenError::Io(e)) => {
                Err(io::Error::new(e.kind(), format!("cannot open the directory {}: {e}", path.display())))
            }
        }
    }

    /// The descriptor, for the `*at` calls of [`super::new_name`].
    pub(super) fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// Creates `name` new (never through a symlink, never over an existing entry)
    /// for writing, with the default mode the umask trims.
    pub fn create_new(&self, name: &Path) -> io::Result<File> {
        let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let fd = nix::fcntl::openat(&self.fd, name, flags, Mode::from_bits_truncate(0o666))?;
        Ok(File::from(fd))
    }

    /// What is named `name` (a symlink is not followed, so it is `Other`).
    pub fn entry(&self, name: &Path) -> io::Result<EntryKind> {
        match nix::sys::stat::fstatat(&self.fd, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(st) if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFREG => Ok(EntryKind::File),
            Ok(_) => Ok(EntryKind::Other),
            Err(nix::errno::Errno::ENOENT) => Ok(EntryKind::Missing),
            Err(e) => Err(e.into()),
        }
    }

    /// The permission bits of the regular file `name`; None for anything else
    /// (missing, or a symlink, which is not followed).
    pub fn file_mode(&self, name: &Path) -> Option<u32> {
        let st = nix::sys::stat::fstatat(&self.fd, name, AtFlags::AT_SYMLINK_NOFOLLOW).ok()?;
        let is_file = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFREG;
        is_file.then_some(st.st_mode as u32 & 0o7777)
    }

    /// Renames `from` to `to`, both in this directory.
    pub fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        Ok(nix::fcntl::renameat(&self.fd, from, &self.fd, to)?)
    }

    /// Removes the non-directory entry `name`.
    pub fn unlink(&self, name: &Path) -> io::Result<()> {
        Ok(nix::unistd::unlinkat(&self.fd, name, UnlinkatFlags::NoRemoveDir)?)
    }

    /// Flushes the directory's entries. An `O_PATH` descriptor cannot be synced, so
    /// the directory is reopened through it for reading.
    pub fn sync(&self) -> io::Result<()> {
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        let fd = nix::fcntl::openat(&self.fd, ".", flags, Mode::empty())?;
        File::from(fd).sync_all()
    }
}
