//! Reading files that report a size of 0.
//!
//! Pseudo-files (procfs, sysfs) report 0 whatever they hold, so their size bounds
//! nothing: one that never ends, or one appended to faster than it is read, would
//! hold a call and a pool thread for good. Every tool that reads such a file
//! stops at the same limit, with the same refusal. They read on the blocking pool
//! (fs_read sends files that report 0 there; fs_edit and fs_patch run there
//! whole), since producing a pseudo-file's text can take the kernel a while.

use std::fs::File;
use std::io::{self, Read};

/// Most bytes read from a file that reports a size of 0. The largest pseudo-files
/// one may want to read (`/proc/kallsyms`, some MiB) stay well below.
pub const UNSIZED_READ_MAX_BYTES: u64 = 64 << 20;

/// A reader that fails once `inner` has given more than `max` bytes.
pub struct Bounded<R> {
    inner: R,
    max: u64,
    read: u64,
}

impl<R: Read> Bounded<R> {
    pub fn new(inner: R, max: u64) -> Self {
        Bounded { inner, max, read: 0 }
    }
}

impl<R: Read> Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // One byte past the limit is asked for: it tells a file of exactly `max`
        // bytes from a longer one. `read <= max` here, so there is room for it.
        let room = usize::try_from(self.max.saturating_add(1) - self.read).unwrap_or(usize::MAX);
        let want = buf.len().min(room);
        let n = self.inner.read(&mut buf[..want])?;
        self.read += n as u64;
        if self.read > self.max {
            return Err(io::Error::other(format!(
                "it reports a size of 0 but holds more than {} bytes, the most read from such a file",
                self.max
            )));
        }
        Ok(n)
    }
}

/// The whole content of `file`, whose descriptor reported `len` bytes; a file
/// that reported 0 must end within [`UNSIZED_READ_MAX_BYTES`].
pub fn read_whole(file: &mut File, len: u64) -> io::Result<Vec<u8>> {
    read_whole_within(file, len, UNSIZED_READ_MAX_BYTES)
}

/// [`read_whole`] with the limit for a file that reports 0 given.
fn read_whole_within(file: &mut File, len: u64, unsized_max: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::with_capacity(len as usize);
    if len == 0 {
        Bounded::new(file, unsized_max).read_to_end(&mut bytes)?;
    } else {
        // A regular file that grew since its size was taken is read to its end,
        // so an edit never drops what was appended.
        file.read_to_end(&mut bytes)?;
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pseudo-file of known length is read whole at a limit of exactly its
    /// length and refused one byte below it.
    #[test]
    fn a_pseudo_file_is_read_up_to_the_limit_and_refused_past_it() {
        let text = std::fs::read("/proc/filesystems").unwrap();
        let open = || File::open("/proc/filesystems").unwrap();
        assert_eq!(open().metadata().unwrap().len(), 0);
        let len = text.len() as u64;
        assert_eq!(read_whole_within(&mut open(), 0, len).unwrap(), text);
        let err = read_whole_within(&mut open(), 0, len - 1).unwrap_err();
        assert!(err.to_string().contains(&format!("holds more than {} bytes", len - 1)), "{err}");
    }

    /// The limit applies only to files that report 0: a regular file is read
    /// whole whatever the limit, even when it grew after its size was taken.
    #[test]
    fn a_sized_file_is_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"0123456789").unwrap();
        assert_eq!(read_whole_within(&mut File::open(&path).unwrap(), 4, 2).unwrap(), b"0123456789");
    }

    /// Small reads at the edge: exactly `max` bytes pass in pieces, the byte past
    /// them fails.
    #[test]
    fn bounded_counts_across_reads() {
        let mut r = Bounded::new(&b"abcd"[..], 4);
        let mut one = [0u8; 1];
        for _ in 0..4 {
            assert_eq!(r.read(&mut one).unwrap(), 1);
        }
        assert_eq!(r.read(&mut one).unwrap(), 0);
        let mut r = Bounded::new(&b"abcde"[..], 4);
        let mut out = Vec::new();
        assert!(r.read_to_end(&mut out).is_err());
    }

    /// Through the registry, fs_edit and fs_patch read a pseudo-file's content
    /// (it reports 0 bytes) and judge their text against it.
    #[tokio::test]
    async fn fs_edit_and_fs_patch_read_a_pseudo_file() {
        use serde_json::json;
        let ctx = std::sync::Arc::new(super::super::ToolContext::new(
            crate::runtime_info::RuntimeInfo::new(),
            crate::policy::Policy::for_tests(vec![std::path::PathBuf::from("/proc/self")]),
        ));
        let lines = std::fs::read_to_string("/proc/self/status").unwrap().lines().count();
        let registry = super::super::ToolRegistry::from_specs(vec![super::super::fs_edit::spec(), super::super::fs_patch::spec()]);
        let edit = json!({"path": "status", "old_string": "\n", "new_string": ""});
        let out = registry.call(&ctx, "herdr_fs_edit", Some(edit)).await;
        assert_eq!(out.payload["reason"], "old_string_not_unique", "{}", out.payload);
        // The thread count may differ by a line or two between the two reads.
        let occurrences = out.payload["occurrences"].as_u64().unwrap() as usize;
        assert!(occurrences.abs_diff(lines) <= 2 && occurrences > 10, "{occurrences} vs {lines}");
        let root = std::path::PathBuf::from("/proc/self").canonicalize().unwrap();
        let patch = "*** Begin Patch\n*** Update File: status\n-no such line\n+x\n*** End Patch";
        let args = json!({"root": root.display().to_string(), "patch": patch, "dry_run": true});
        let out = registry.call(&ctx, "herdr_fs_patch", Some(args)).await;
        assert_eq!(out.payload["code"], "PATCH_CONTEXT_NOT_FOUND", "{}", out.payload);
    }
}
