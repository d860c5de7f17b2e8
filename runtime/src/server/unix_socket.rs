//! The trusted Unix socket: bound with the safety rules of spec §3 (no symlinks, no
//! clobbering a live server or a non-socket, 0600 socket in a 0700 directory we
//! create) and removed on shutdown only if the inode is still ours.

use std::io;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener as StdUnixListener, UnixStream as StdUnixStream};
use std::path::{Path, PathBuf};

/// Why the socket could not be bound; one line for the user each.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    #[error("socket path {0} is a symlink; refusing to follow it (remove it or pick another --socket)")]
    Symlink(PathBuf),
    #[error("{0} exists and is not a socket; refusing to replace it (remove it or pick another --socket)")]
    NotASocket(PathBuf),
    #[error("another server is already accepting connections on {0}; stop it first or pick another --socket")]
    InUse(PathBuf),
    #[error("socket directory {0} is a symlink; refusing to use it (pick a --socket in a real directory)")]
    ParentSymlink(PathBuf),
    /// The cause is part of this one line and deliberately not an error `source`:
    /// `{:#}` would print it a second time.
    #[error("{what} {path}: {cause}")]
    Io { what: &'static str, path: PathBuf, cause: io::Error },
}

fn io_err(what: &'static str, path: &Path) -> impl FnOnce(io::Error) -> BindError + use<> {
    let path = path.to_path_buf();
    move |cause| BindError::Io { what, path, cause }
}

/// Removes the socket file on drop, but only when the path still names the inode
/// this process bound (a successor may have replaced it).
#[derive(Debug)]
pub struct SocketGuard {
    path: PathBuf,
    dev: u64,
    ino: u64,
}

impl SocketGuard {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SocketGuard {
    fn drop(&mut self) {
        match std::fs::symlink_metadata(&self.path) {
            Ok(meta) if meta.dev() == self.dev && meta.ino() == self.ino => {
                if let Err(e) = std::fs::remove_file(&self.path) {
                    tracing::warn!(path = %self.path.display(), error = %e, "could not remove socket");
                }
            }
            Ok(_) => tracing::info!(path = %self.path.display(), "socket was replaced by someone else; leaving it"),
            Err(_) => {}
        }
    }
}

/// Binds `path` following the rules above and returns a listener ready for tokio.
pub fn bind(path: &Path) -> Result<(tokio::net::UnixListener, SocketGuard), BindError> {
    prepare_parent(path)?;
    clear_stale(path)?;

    // Created 0600 from the start: the umask closes the window between bind and
    // chmod in which another user could connect. Startup is single-purpose here, so
    // changing the process umask briefly affects nothing else.
    let old_mask = unsafe { libc::umask(0o177) };
    let bound = StdUnixListener::bind(path);
    unsafe { libc::umask(old_mask) };
    let listener = bound.map_err(|e| {
        if e.kind() == io::ErrorKind::AddrInUse {
            BindError::InUse(path.to_path_buf())
        } else {
            BindError::Io { what: "cannot bind socket", path: path.to_path_buf(), cause: e }
        }
    })?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(io_err("cannot chmod socket", path))?;
    let meta = std::fs::symlink_metadata(path).map_err(io_err("cannot stat socket", path))?;
    if !meta.file_type().is_socket() {
        return Err(BindError::NotASocket(path.to_path_buf()));
    }
    let guard = SocketGuard { path: path.to_path_buf(), dev: meta.dev(), ino: meta.ino() };
    listener.set_nonblocking(true).map_err(io_err("cannot configure socket", path))?;
    let listener = tokio::net::UnixListener::from_std(listener).map_err(io_err("cannot register socket", path))?;
    Ok((listener, guard))
}

/// Creates a missing parent directory as 0700; refuses a symlinked parent.
fn prepare_parent(path: &Path) -> Result<(), BindError> {
    let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) else {
        return Ok(());
    };
    match std::fs::symlink_metadata(parent) {
        Ok(meta) if meta.file_type().is_symlink() => Err(BindError::ParentSymlink(parent.to_path_buf())),
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(BindError::Io {
            what: "socket directory is not a directory",
            path: parent.to_path_buf(),
            cause: io::Error::from(io::ErrorKind::NotADirectory),
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)
            .map_err(io_err("cannot create socket directory", parent)),
        Err(e) => Err(BindError::Io { what: "cannot inspect socket directory", path: parent.to_path_buf(), cause: e }),
    }
}

/// Leaves the path free for bind: nothing there, or a dead socket that is removed.
fn clear_stale(path: &Path) -> Result<(), BindError> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(BindError::Io { what: "cannot inspect socket path", path: path.to_path_buf(), cause: e }),
    };
    if meta.file_type().is_symlink() {
        return Err(BindError::Symlink(path.to_path_buf()));
    }
    if !meta.file_type().is_socket() {
        return Err(BindError::NotASocket(path.to_path_buf()));
    }
    match StdUnixStream::connect(path) {
        Ok(_) => Err(BindError::InUse(path.to_path_buf())),
        // Nobody listens: a leftover of a crashed run.
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
            tracing::info!(path = %path.display(), "replacing stale socket");
            std::fs::remove_file(path).map_err(io_err("cannot remove stale socket", path))
        }
        Err(e) => Err(BindError::Io { what: "cannot probe existing socket", path: path.to_path_buf(), cause: e }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn short_tempdir() -> tempfile::TempDir {
        tempfile::Builder::new().prefix("hmu").tempdir_in("/tmp").unwrap()
    }

    #[tokio::test]
    async fn guard_removes_only_its_own_inode() {
        let dir = short_tempdir();
        let path = dir.path().join("s.sock");
        let (listener, guard) = bind(&path).unwrap();
        drop(listener);
        // Someone else takes the path over: our guard must leave theirs alone. (The
        // old inode is kept alive under another name so the new one cannot reuse
        // its number.)
        std::fs::rename(&path, dir.path().join("old.sock")).unwrap();
        let (_other, other_guard) = bind(&path).unwrap();
        drop(guard);
        assert!(path.exists(), "foreign socket was removed");
        drop(other_guard);
        assert!(!path.exists());
    }

    #[tokio::test]
    async fn parent_symlink_is_refused() {
        let dir = short_tempdir();
        std::fs::create_dir(dir.path().join("real")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("real"), dir.path().join("link")).unwrap();
        let err = bind(&dir.path().join("link").join("s.sock")).unwrap_err();
        assert!(matches!(err, BindError::ParentSymlink(_)), "{err}");
        assert!(err.to_string().contains("--socket"), "the refusal says what to do: {err}");
    }
}
