//! Walking a directory tree by descriptors, so that a walk stays where it was
//! checked: `herdr_fs_list` and `herdr_fs_grep` open every directory and file
//! relative to the descriptor of its parent, never following a symlink.
//!
//! A walk by path (`read_dir(path)`, then `open(path/name)`) follows a directory
//! that was swapped for a symlink between the two steps, out of the managed root.
//! Here the start directory is opened once without meeting a symlink (`openat2`
//! with `RESOLVE_NO_SYMLINKS`, or `O_NOFOLLOW` where the kernel lacks it), and
//! each child with `openat(parent, name, O_NOFOLLOW | O_DIRECTORY)`: a name that
//! is a symlink by then fails to open (ELOOP / ENOTDIR) and is skipped, never
//! followed. Files are opened the same way, non-blocking, so a FIFO cannot hold
//! the walk.

use std::ffi::{CStr, OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, IntoRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{FileStat, Mode, SFlag};

use super::no_symlinks::{CheckedOpenError, open_checked, openat2_no_symlinks_with};

/// How many directories deep a walk goes below its start. Each level holds one
/// open descriptor, and no real project nests this deep.
pub const MAX_WALK_DEPTH: usize = 128;

/// A directory open for reading its entries.
#[derive(Debug)]
pub struct WalkDir {
    fd: OwnedFd,
}

/// What an entry is, seen without following a symlink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    Other,
}

/// One entry of a directory, with its `lstat`.
#[derive(Debug)]
pub struct Entry {
    pub name: OsString,
    pub kind: Kind,
    pub stat: FileStat,
}

fn dir_flags() -> OFlag {
    OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK
}

impl WalkDir {
    /// Opens the checked, canonical directory `path` without following a symlink
    /// anywhere in it.
    pub fn open(path: &Path) -> io::Result<WalkDir> {
        let legacy = |p: &Path| nix::fcntl::open(p, dir_flags() | OFlag::O_NOFOLLOW, Mode::empty()).map_err(io::Error::from);
        match open_checked(path, &|p| openat2_no_symlinks_with(p, dir_flags()), legacy).1 {
            Ok(fd) => Ok(WalkDir { fd }),
            Err(CheckedOpenError::Swapped) => Err(io::Error::other(format!(
                "{} was replaced by a symlink after it was checked; it was not followed",
                path.display()
            ))),
            Err(CheckedOpenError::Io(e)) => Err(e),
        }
    }

    /// Opens the subdirectory `name`; fails (and follows nothing) when `name` is
    /// no longer a directory, a symlink to one included.
    pub fn open_dir(&self, name: &OsStr) -> io::Result<WalkDir> {
        let fd = nix::fcntl::openat(&self.fd, name, dir_flags() | OFlag::O_NOFOLLOW, Mode::empty())?;
        Ok(WalkDir { fd })
    }

    /// Opens the entry `name` for reading if it is a regular file now (not a
    /// symlink, FIFO, device or directory), with its size.
    pub fn open_file(&self, name: &OsStr) -> io::Result<(File, u64)> {
        let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_NOCTTY | OFlag::O_CLOEXEC;
        let file = File::from(nix::fcntl::openat(&self.fd, name, flags, Mode::empty())?);
        let meta = file.metadata()?;
        if !meta.is_file() {
            return Err(io::Error::other("not a regular file"));
        }
        Ok((file, meta.len()))
    }

    /// Opens the file at `rel` (relative, plain components) below this directory,
    /// one directory at a time.
    pub fn open_file_below(&self, rel: &Path) -> io::Result<(File, u64)> {
        let mut parts: Vec<&OsStr> = rel.iter().collect();
        let Some(name) = parts.pop() else { return Err(io::Error::from(io::ErrorKind::NotFound)) };
        let mut held: Option<WalkDir> = None;
        for part in parts {
            let next = held.as_ref().unwrap_or(self).open_dir(part)?;
            held = Some(next);
        }
        held.as_ref().unwrap_or(self).open_file(name)
    }

    /// The entries (without `.` and `..`), sorted by name, each `lstat`ed relative
    /// to this directory. An entry that vanished meanwhile is left out.
    pub fn entries(&self) -> io::Result<Vec<Entry>> {
        let mut entries: Vec<Entry> = self
            .names()?
            .into_iter()
            .filter_map(|name| {
                let stat = nix::sys::stat::fstatat(&self.fd, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW).ok()?;
                let kind = match SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT {
                    SFlag::S_IFREG => Kind::File,
                    SFlag::S_IFDIR => Kind::Dir,
                    SFlag::S_IFLNK => Kind::Symlink,
                    _ => Kind::Other,
                };
                Some(Entry { name, kind, stat })
            })
            .collect();
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(entries)
    }

    /// `readdir` over a second descriptor of this directory (`fdopendir` takes
    /// the descriptor it is given).
    fn names(&self) -> io::Result<Vec<OsString>> {
        let fd = nix::fcntl::openat(self.fd.as_fd(), ".", dir_flags(), Mode::empty())?;
        let raw = fd.into_raw_fd();
        // SAFETY: `raw` is an open directory descriptor that we own; on success
        // fdopendir owns it and closedir closes it, on failure we close it.
        let dir = unsafe { libc::fdopendir(raw) };
        if dir.is_null() {
            let e = io::Error::last_os_error();
            unsafe { libc::close(raw) };
            return Err(e);
        }
        let mut names = Vec::new();
        let result = loop {
            nix::errno::Errno::clear();
            // SAFETY: `dir` is a valid DIR* until closedir below.
            let entry = unsafe { libc::readdir(dir) };
            if entry.is_null() {
                let errno = nix::errno::Errno::last_raw();
                break if errno == 0 { Ok(()) } else { Err(io::Error::from_raw_os_error(errno)) };
            }
            // SAFETY: readdir returned a valid dirent whose d_name is NUL-terminated.
            let name = unsafe { CStr::from_ptr((*entry).d_name.as_ptr()) }.to_bytes();
            if name != b"." && name != b".." {
                names.push(OsStr::from_bytes(name).to_os_string());
            }
        };
        // SAFETY: `dir` came from fdopendir and is closed once.
        unsafe { libc::closedir(dir) };
        result.map(|()| names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_swapped_directory_is_not_followed() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("o.txt"), "outside").unwrap();
        std::fs::create_dir(root.path().join("sub")).unwrap();
        std::fs::write(root.path().join("sub/i.txt"), "inside").unwrap();
        let dir = WalkDir::open(&root.path().canonicalize().unwrap()).unwrap();
        let names: Vec<_> = dir.entries().unwrap().into_iter().map(|e| (e.name, e.kind)).collect();
        assert_eq!(names, [(OsString::from("sub"), Kind::Dir)]);
        assert!(dir.open_file_below(Path::new("sub/i.txt")).is_ok());
        std::fs::rename(root.path().join("sub"), root.path().join("real")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.path().join("sub")).unwrap();
        assert!(dir.open_dir(OsStr::new("sub")).is_err());
        assert!(dir.open_file_below(Path::new("sub/o.txt")).is_err());
        assert!(dir.open_file(OsStr::new("sub")).is_err());
    }
}
