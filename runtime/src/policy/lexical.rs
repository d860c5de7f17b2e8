//! Lexical path work on bytes, for the per-call path check.
//!
//! `std::path` walks a path component by component each time it is asked anything
//! (`join`, `starts_with`, `strip_prefix`), and a tool call asked it several times
//! per path. Here a caller's path is normalized in one pass into one buffer, and a
//! path in *normal form* is compared with a root as bytes.
//!
//! Normal form is what normalization produces and what `canonicalize` returns: no
//! empty, `.` or `..` component and no trailing `/` (besides `/` itself). Between two
//! paths in normal form, a byte prefix ending at a `/` (or at the end) is exactly a
//! component-wise prefix. A root that is not in normal form (only a test policy
//! over a missing directory can have one) is compared the `std::path` way.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// A path in normal form (see the module documentation).
#[derive(Debug, Clone, Copy)]
pub(super) struct Normal<'a>(&'a [u8]);

impl<'a> Normal<'a> {
    /// Only for paths known to be in normal form: a canonical path, or one that
    /// [`normalize`] made.
    pub(super) fn trusted(path: &'a Path) -> Self {
        debug_assert!(is_normal_form(path.as_os_str().as_bytes()), "{} is not in normal form", path.display());
        Normal(path.as_os_str().as_bytes())
    }

    pub(super) fn as_path(self) -> &'a Path {
        Path::new(std::ffi::OsStr::from_bytes(self.0))
    }
}

/// `.` and `..` of `base` joined with `tail` removed without touching the disk, as
/// `Path::components` reads them; `..` never climbs above `/`. With `base`, `tail`
/// is relative to it (the caller checked that it is not absolute).
pub(super) fn normalize(base: Option<&Path>, tail: &[u8]) -> PathBuf {
    let base = base.map_or(&[][..], |b| b.as_os_str().as_bytes());
    let mut out = Vec::with_capacity(base.len() + 1 + tail.len());
    let first = if base.is_empty() { tail } else { base };
    if first.first() == Some(&b'/') {
        out.push(b'/');
    }
    let floor = out.len();
    push_components(&mut out, floor, base);
    push_components(&mut out, floor, tail);
    PathBuf::from(OsString::from_vec(out))
}

fn push_components(out: &mut Vec<u8>, floor: usize, path: &[u8]) {
    for part in path.split(|b| *b == b'/') {
        match part {
            b"" | b"." => {}
            b".." => {
                let cut = out[floor..].iter().rposition(|b| *b == b'/').map_or(floor, |i| floor + i);
                out.truncate(cut);
            }
            name => {
                if out.len() > floor {
                    out.push(b'/');
                }
                out.extend_from_slice(name);
            }
        }
    }
}

/// Whether `path` is in normal form (see the module documentation).
pub(super) fn is_normal_form(path: &[u8]) -> bool {
    if path == b"/" {
        return true;
    }
    let rest = path.strip_prefix(b"/").unwrap_or(path);
    !rest.is_empty() && rest.split(|b| *b == b'/').all(|part| !matches!(part, b"" | b"." | b".."))
}

/// `path.starts_with(root)` as `std::path` decides it, by bytes when `root` is in
/// normal form.
pub(super) fn within(path: Normal, root: &Path) -> bool {
    let root_bytes = root.as_os_str().as_bytes();
    if !is_normal_form(root_bytes) {
        return path.as_path().starts_with(root);
    }
    byte_prefix_len(path.0, root_bytes).is_some()
}

/// The part of `path` below `root` (`path.strip_prefix(root)`, or all of `path` if
/// it is not below `root`), by bytes when `root` is in normal form.
pub(super) fn below<'a>(path: Normal<'a>, root: &Path) -> &'a Path {
    let root_bytes = root.as_os_str().as_bytes();
    let whole = path.as_path();
    if !is_normal_form(root_bytes) {
        return whole.strip_prefix(root).unwrap_or(whole);
    }
    match byte_prefix_len(path.0, root_bytes) {
        Some(skip) => Path::new(std::ffi::OsStr::from_bytes(&path.0[skip..])),
        None => whole,
    }
}

/// How many bytes of `path` the component-wise prefix `root` and its separator
/// take, if `root` is one; both in normal form.
fn byte_prefix_len(path: &[u8], root: &[u8]) -> Option<usize> {
    let rest = path.strip_prefix(root)?;
    match rest.first() {
        None => Some(root.len()),
        Some(b'/') => Some(root.len() + 1),
        Some(_) if root == b"/" => Some(root.len()),
        Some(_) => None,
    }
}

#[cfg(test)]
#[path = "lexical_tests.rs"]
mod tests;
