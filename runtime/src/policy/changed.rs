//! An error that means the tree is no longer what the policy checked: an entry
//! appeared at a new file's name, a file to replace or delete vanished or became
//! something else, or a checked directory became a symlink. It travels inside an
//! `io::Error` through the commit, so the tools can tell the user to look at the
//! file again instead of reporting a failed write.

use std::io;

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct ChangedAfterCheck(String);

/// An `io::Error` of `kind` carrying the marker; displays as `message`.
pub(crate) fn changed(kind: io::ErrorKind, message: String) -> io::Error {
    io::Error::new(kind, ChangedAfterCheck(message))
}

pub(crate) fn is_changed(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<ChangedAfterCheck>())
}
