//! Giving a staged file its name only while nothing has that name, so a file that
//! appeared after the policy check is never replaced.
//!
//! In order of preference:
//! 1. `linkat`: fails atomically with EEXIST on a taken name. Filesystems without
//!    hard links (FAT, exFAT, many FUSE and network mounts) refuse it with one of
//!    [`NO_HARD_LINKS`].
//! 2. `renameat2(RENAME_NOREPLACE)`: also atomic, and offered by most of those
//!    filesystems. Kernels before 3.15, filesystems that reject the flag, and
//!    seccomp filters answer with one of [`NO_RENAME_NOREPLACE`].
//! 3. Look, then rename. The only step with a gap: an entry created between the
//!    look and the rename is replaced by it, and nothing tells afterwards (the
//!    rename unlinks what it replaces atomically, and no call renames only onto a
//!    free name without step 2's flag). It is reached only where neither hard
//!    links nor RENAME_NOREPLACE exist.

use std::io;
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::AtFlags;

use super::changed::changed;
use super::dir_fd::{Dir, EntryKind};

/// One way of naming a file in `dir`: `(dir, from, to)`.
pub(crate) type NameOp<'a> = &'a dyn Fn(&Dir, &Path, &Path) -> nix::Result<()>;

/// The two atomic ways of naming a new file. Production uses [`KERNEL`]; tests
/// fail them with the errnos real filesystems give, to walk the fallbacks here.
#[derive(Clone, Copy)]
pub(crate) struct Naming<'a> {
    pub link: NameOp<'a>,
    pub rename_noreplace: NameOp<'a>,
}

pub(crate) const KERNEL: Naming<'static> = Naming { link: &link_at, rename_noreplace: &rename_noreplace_at };

/// What `linkat` answers where the filesystem has no hard links (vfat: EPERM;
/// FUSE and network filesystems: EOPNOTSUPP, ENOSYS or EXDEV). Any other error
/// (no space, no permission, read-only) is the commit's failure, not a reason
/// to try another way.
pub(crate) const NO_HARD_LINKS: [Errno; 4] = [Errno::EPERM, Errno::EOPNOTSUPP, Errno::ENOSYS, Errno::EXDEV];

/// What `renameat2(RENAME_NOREPLACE)` answers where the flag is not supported:
/// EINVAL from a filesystem, ENOSYS from an old kernel, EPERM or EOPNOTSUPP from
/// a seccomp filter.
pub(crate) const NO_RENAME_NOREPLACE: [Errno; 4] = [Errno::EINVAL, Errno::ENOSYS, Errno::EPERM, Errno::EOPNOTSUPP];

fn link_at(dir: &Dir, from: &Path, to: &Path) -> nix::Result<()> {
    nix::unistd::linkat(dir.fd(), from, dir.fd(), to, AtFlags::empty())
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn rename_noreplace_at(dir: &Dir, from: &Path, to: &Path) -> nix::Result<()> {
    nix::fcntl::renameat2(dir.fd(), from, dir.fd(), to, nix::fcntl::RenameFlags::RENAME_NOREPLACE)
}

/// nix offers `renameat2` on Linux with glibc only; elsewhere step 3 is used.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn rename_noreplace_at(_: &Dir, _: &Path, _: &Path) -> nix::Result<()> {
    Err(Errno::ENOSYS)
}

fn appeared(dir: &Dir, name: &Path) -> io::Error {
    changed(
        io::ErrorKind::AlreadyExists,
        format!("{} appeared after the target was checked; it was left as it is", dir.path.join(name).display()),
    )
}

fn failed(dir: &Dir, name: &Path, how: &str, e: Errno) -> io::Error {
    let e = io::Error::from(e);
    io::Error::new(e.kind(), format!("cannot create {} ({how}): {e}", dir.path.join(name).display()))
}

/// Renames the staged file `from` to `to` in `dir`, never replacing an entry
/// named `to`; on success `from` is gone.
pub(crate) fn place_new(dir: &Dir, from: &Path, to: &Path, naming: Naming) -> io::Result<()> {
    match (naming.link)(dir, from, to) {
        Ok(()) => {
            return dir.unlink(from).map_err(|e| {
                // Undone here, so the caller sees either the file placed or nothing.
                let _ = dir.unlink(to);
                io::Error::new(e.kind(), format!("cannot remove the staged file after linking it: {e}"))
            });
        }
        Err(Errno::EEXIST) => return Err(appeared(dir, to)),
        Err(e) if !NO_HARD_LINKS.contains(&e) => return Err(failed(dir, to, "link", e)),
        Err(_) => {}
    }
    match (naming.rename_noreplace)(dir, from, to) {
        Ok(()) => return Ok(()),
        Err(Errno::EEXIST) => return Err(appeared(dir, to)),
        Err(e) if !NO_RENAME_NOREPLACE.contains(&e) => return Err(failed(dir, to, "rename without replace", e)),
        Err(_) => {}
    }
    if dir.entry(to)? != EntryKind::Missing {
        return Err(appeared(dir, to));
    }
    dir.rename(from, to)
}

#[cfg(test)]
#[path = "new_name_tests.rs"]
mod tests;
