//! Resolving a caller's path to a real path inside a managed root (spec §2.1).
//!
//! Order: reject control, zero-width and bidi characters and over-long input → anchor relative paths at
//! the policy's relative base → lexical normalization (`.`/`..`, never above `/`) →
//! secret check → canonicalize (`not_found`) → the real path must stay inside the root
//! the lexical path belongs to (`symlink_escape`) → secret check again on the real path.
//!
//! The secret check looks at the components *below* the managed root, so a project
//! that happens to live under e.g. `/srv/tokens/` stays usable. A path outside every
//! root is refused as `outside_managed_roots` whatever its name.

use std::io::ErrorKind;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde_json::json;

use super::lexical::{self, Normal};
use super::secret::is_secret_path;
use super::{Policy, Refusal};

/// Longest path accepted, in bytes (Linux `PATH_MAX`).
pub const MAX_PATH_BYTES: usize = 4096;

/// What a model can do about a path outside every root (spec §2.1 gives the refusal a `hint`).
pub const OUTSIDE_HINT: &str =
    "Use a path inside one of managed_roots (herdr_inspect lists them); a file elsewhere is out of reach unless the user serves its project as a root.";

/// An existing path inside a managed root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// Canonical (symlink-free) path.
    pub real: PathBuf,
    /// The managed root containing it.
    pub root: PathBuf,
}

/// What [`Policy::resolve_target`] found at a target's name, reported only after
/// the root gate.
enum Entry {
    Missing,
    /// `lstat` failed for another reason than absence (no search permission, …).
    Uninspectable(std::io::Error),
    /// A symlink (`link`) to a path inside the root; `file`: a regular file is there.
    Linked { file: bool, link: PathBuf },
    /// Not a symlink; `file`: a regular file.
    Present { file: bool },
}

/// A caller's path after [`Policy::locate_existing`].
pub(super) enum Located {
    /// Normalized and inside `root` by its letters; symlinks not yet looked at.
    Lexical { lexical: PathBuf, root: PathBuf },
    /// Outside every root by its letters, but inside one once canonicalized (a
    /// root reached through a symlinked directory, such as macOS `/tmp`).
    Aliased(Resolved),
}

/// The disk half of [`Policy::resolve_existing`] for a path inside `root` by its
/// letters: canonicalize (`not_found`), stay inside the root (`symlink_escape`) and
/// the secret check again on the real path.
pub(super) fn resolve_lexical(lexical: &Path, root: PathBuf) -> Result<Resolved, Refusal> {
    let real = canonicalize(lexical)?;
    if !lexical::within(Normal::trusted(&real), &root) {
        return Err(escape(lexical, &real, &root));
    }
    deny_secret(Normal::trusted(&real), &root)?;
    Ok(Resolved { real, root })
}

/// Where a write lands: an existing or new file inside a managed root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The path to write: canonical parent joined with the file name (or, when the
    /// name is a symlink to a file inside the root, that file's real path).
    pub path: PathBuf,
    pub root: PathBuf,
    /// A regular file already exists there.
    pub exists: bool,
}

impl Policy {
    /// Resolves an existing file or directory.
    pub fn resolve_existing(&self, raw: &str) -> Result<Resolved, Refusal> {
        match self.locate_existing(raw)? {
            Located::Lexical { lexical, root } => resolve_lexical(&lexical, root),
            Located::Aliased(resolved) => Ok(resolved),
        }
    }

    /// The checks of [`Policy::resolve_existing`] that need no look at the disk:
    /// characters and length, anchoring, normalization, the root and the secret
    /// check on the lexical path. Only a path outside every root is canonicalized
    /// here, to see whether it reaches a root through an alias.
    pub(super) fn locate_existing(&self, raw: &str) -> Result<Located, Refusal> {
        let lexical = self.normalize(raw)?;
        let Some(root) = self.root_of_normal(Normal::trusted(&lexical)) else {
            return self.outside_or_aliased(raw, &lexical).map(Located::Aliased);
        };
        deny_secret(Normal::trusted(&lexical), &root)?;
        Ok(Located::Lexical { lexical, root })
    }

    /// Resolves where a new or replaced file would be written. The parent directory
    /// must exist (`parent_not_found`) and be a directory (`parent_not_directory`).
    pub fn resolve_target(&self, raw: &str) -> Result<Target, Refusal> {
        self.resolve_target_gated(raw, &super::open::no_gate)
    }

    /// [`Policy::resolve_target`] with `gate` run on the target's managed root once
    /// the path is known to lead to a place inside it (the path refusals come
    /// first), and before anything about the entry at that place is reported
    /// (`invalid_target`, `target_unresolvable` for an entry that cannot be
    /// inspected). A gate refusal is returned as it is.
    ///
    /// What is checked here by path, and why the commit cannot be led elsewhere
    /// by a change made after the check:
    /// - the parent directory: the commit opens the canonical parent found here
    ///   with `RESOLVE_NO_SYMLINKS` and works relative to that descriptor only
    ///   (`dir_fd`), so a directory swapped for a symlink refuses the commit;
    /// - the final name: the commit never follows it. A symlink found here is
    ///   resolved once and the write goes to the real file's own directory; a
    ///   symlink put there later is moved aside like any entry, not followed;
    /// - what the name holds (nothing, or a regular file): `exists` is recorded in
    ///   the [`Target`] and the commit verifies it again on the entry itself, in
    ///   the directory descriptor ([`crate::policy::atomic::Change::Create`] never
    ///   replaces anything; a replacement refuses an entry that is not a regular
    ///   file), so a file or directory appearing in between is never destroyed.
    pub fn resolve_target_gated(&self, raw: &str, gate: super::open::RootGate) -> Result<Target, Refusal> {
        let lexical = self.normalize(raw)?;
        let root = match self.root_of_normal(Normal::trusted(&lexical)) {
            Some(root) => root,
            None => {
                // A parent reached through an alias (e.g. /tmp → /private/tmp) may
                // still be inside a root once canonicalized.
                let parent_real = lexical.parent().and_then(|p| p.canonicalize().ok());
                match parent_real.as_deref().and_then(|p| self.root_of_normal(Normal::trusted(p))) {
                    Some(root) => root,
                    None => return Err(self.outside(raw)),
                }
            }
        };
        deny_secret(Normal::trusted(&lexical), &root)?;
        let (Some(parent), Some(name)) = (lexical.parent(), lexical.file_name()) else {
            return Err(invalid_target(&lexical, "the path names no file"));
        };
        if lexical == root {
            return Err(invalid_target(&lexical, "the path is a managed root, not a file"));
        }
        let parent_real = match parent.canonicalize() {
            Ok(p) => p,
            Err(e) if e.kind() == ErrorKind::NotADirectory => return Err(parent_not_directory(parent)),
            Err(e) => {
                return Err(Refusal::new(
                    "parent_not_found",
                    format!("parent directory {} does not exist: {e}", parent.display()),
                    json!({"path": lexical.display().to_string()}),
                ));
            }
        };
        if !parent_real.is_dir() {
            return Err(parent_not_directory(parent));
        }
        if !lexical::within(Normal::trusted(&parent_real), &root) {
            return Err(escape(parent, &parent_real, &root));
        }
        let candidate = parent_real.join(name);
        let (path, entry) = match std::fs::symlink_metadata(&candidate) {
            Err(e) if e.kind() == ErrorKind::NotFound => (candidate, Entry::Missing),
            Err(e) => (candidate, Entry::Uninspectable(e)),
            Ok(meta) if meta.file_type().is_symlink() => {
                let real = candidate.canonicalize().map_err(|e| {
                    Refusal::new(
                        "target_unresolvable",
                        format!("{} is a symlink that cannot be resolved: {e}", candidate.display()),
                        json!({"path": candidate.display().to_string()}),
                    )
                })?;
                if !lexical::within(Normal::trusted(&real), &root) {
                    return Err(escape(&candidate, &real, &root));
                }
                let file = real.is_file();
                (real, Entry::Linked { file, link: candidate })
            }
            Ok(meta) => (candidate, Entry::Present { file: meta.is_file() }),
        };
        deny_secret(Normal::trusted(&path), &root)?;
        gate(&root)?;
        let exists = match entry {
            Entry::Missing => false,
            Entry::Uninspectable(e) => {
                return Err(Refusal::new(
                    "target_unresolvable",
                    format!("cannot inspect {}: {e}", path.display()),
                    json!({"path": path.display().to_string()}),
                ));
            }
            Entry::Linked { file: false, link } => {
                return Err(invalid_target(&link, "the symlink does not point to a regular file"));
            }
            Entry::Present { file: false } => {
                return Err(invalid_target(&path, "a directory or special file is in the way"));
            }
            Entry::Linked { file: true, .. } | Entry::Present { file: true } => true,
        };
        Ok(Target { path, root, exists })
    }

    /// Control-character check, anchoring and lexical normalization.
    pub fn normalize(&self, raw: &str) -> Result<PathBuf, Refusal> {
        if raw.is_empty() {
            return Err(Refusal::code("invalid_params", "path must not be empty", json!({})));
        }
        if raw.len() > MAX_PATH_BYTES {
            return Err(Refusal::code(
                "invalid_params",
                format!("path must be at most {MAX_PATH_BYTES} bytes long; it is {} bytes", raw.len()),
                json!({}),
            ));
        }
        if has_deceptive(raw) {
            return Err(Refusal::code(
                "invalid_params",
                "path contains a NUL, control, zero-width or text-direction character",
                json!({"path": raw.escape_debug().to_string()}),
            ));
        }
        if raw.starts_with('/') {
            return Ok(lexical::normalize(None, raw.as_bytes()));
        }
        match &self.relative_base {
            Some(base) => Ok(lexical::normalize(Some(base), raw.as_bytes())),
            None => Err(self.outside(raw)),
        }
    }

    /// The managed root that contains `path` (component-wise prefix), deepest
    /// first. A path not in normal form is normalized lexically first, so a `..`
    /// cannot take it out of a root that its letters start with.
    pub fn root_of(&self, path: &Path) -> Option<PathBuf> {
        if lexical::is_normal_form(path.as_os_str().as_bytes()) {
            return self.root_of_normal(Normal::trusted(path));
        }
        let normal = lexical_normalize(path);
        if normal.as_os_str().is_empty() {
            return None;
        }
        self.root_of_normal(Normal::trusted(&normal))
    }

    /// The managed root that contains a path in normal form, compared by bytes.
    fn root_of_normal(&self, path: Normal) -> Option<PathBuf> {
        self.live.with(|roots| roots.iter().find(|r| lexical::within(path, r)).cloned())
    }

    fn outside(&self, raw: &str) -> Refusal {
        Refusal::new(
            "outside_managed_roots",
            format!("{raw} is outside every managed root"),
            json!({"path": raw, "managed_roots": self.roots_json(), "hint": OUTSIDE_HINT}),
        )
    }

    /// A lexical path outside every root: refused unless it is an alias (a symlinked
    /// directory such as macOS `/tmp`) whose real path is inside a root.
    fn outside_or_aliased(&self, raw: &str, lexical: &Path) -> Result<Resolved, Refusal> {
        let Ok(real) = lexical.canonicalize() else { return Err(self.outside(raw)) };
        let Some(root) = self.root_of_normal(Normal::trusted(&real)) else { return Err(self.outside(raw)) };
        deny_secret(Normal::trusted(&real), &root)?;
        Ok(Resolved { real, root })
    }
}

/// Whether `raw` holds a character [`is_deceptive`] refuses. Every such character
/// below U+0080 is a control, so ASCII text needs no decoding.
fn has_deceptive(raw: &str) -> bool {
    raw.bytes().any(|b| b < 0x20 || b == 0x7f) || (!raw.is_ascii() && raw.chars().any(is_deceptive))
}

/// Characters no honest path needs: C0/C1 controls (NUL, newline, escape…),
/// zero-width characters and bidirectional overrides that make a path display as
/// something other than what it is.
fn is_deceptive(c: char) -> bool {
    c.is_control() || matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}')
}

/// `.` and `..` removed without touching the disk; `..` never climbs above `/`.
pub fn lexical_normalize(path: &Path) -> PathBuf {
    lexical::normalize(None, path.as_os_str().as_bytes())
}

fn deny_secret(path: Normal, root: &Path) -> Result<(), Refusal> {
    if is_secret_path(lexical::below(path, root)) {
        return Err(secret(path.as_path()));
    }
    Ok(())
}

fn secret(path: &Path) -> Refusal {
    Refusal::new(
        "secret_path_denied",
        format!("{} looks like a secret (keys, tokens, .env files…) and is never accessed", path.display()),
        json!({"path": path.display().to_string()}),
    )
}

fn canonicalize(lexical: &Path) -> Result<PathBuf, Refusal> {
    lexical.canonicalize().map_err(|e| {
        let why = match e.raw_os_error() {
            Some(libc::ELOOP) => "a symlink loop".to_string(),
            _ => e.to_string(),
        };
        Refusal::new(
            "not_found",
            format!("{} does not exist or cannot be resolved ({why})", lexical.display()),
            json!({"path": lexical.display().to_string()}),
        )
    })
}

fn escape(lexical: &Path, real: &Path, root: &Path) -> Refusal {
    Refusal::new(
        "symlink_escape",
        format!("{} resolves to {}, outside its managed root {}", lexical.display(), real.display(), root.display()),
        json!({"path": lexical.display().to_string(), "root": root.display().to_string()}),
    )
}

fn invalid_target(path: &Path, why: &str) -> Refusal {
    Refusal::new(
        "invalid_target",
        format!("cannot write {}: {why}", path.display()),
        json!({"path": path.display().to_string()}),
    )
}

fn parent_not_directory(parent: &Path) -> Refusal {
    Refusal::new(
        "parent_not_directory",
        format!("{} is not a directory", parent.display()),
        json!({"path": parent.display().to_string()}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deceptive_characters_are_found_in_ascii_and_beyond() {
        for raw in ["a\0b", "a\nb", "a\u{7f}", "é\u{85}", "a\u{200B}b", "\u{202E}txt", "\u{FEFF}"] {
            assert!(has_deceptive(raw), "{raw:?}");
        }
        for raw in ["a/b c.txt", "é/ü~", "\u{2070}"] {
            assert!(!has_deceptive(raw), "{raw:?}");
        }
    }

    /// Nested roots: the deepest one holding the path wins, component-wise (not
    /// by letters), and a path not in normal form is judged by where it leads.
    #[test]
    fn root_of_finds_the_deepest_root_holding_a_path() {
        let policy = Policy::for_tests(vec![PathBuf::from("/srv/h2-a"), PathBuf::from("/srv/h2-a/b")]);
        let (a, b) = (Some(PathBuf::from("/srv/h2-a")), Some(PathBuf::from("/srv/h2-a/b")));
        let cases = [
            ("/srv/h2-a", &a),
            ("/srv/h2-a/x", &a),
            ("/srv/h2-a/b", &b),
            ("/srv/h2-a/b/x/y", &b),
            ("/srv/h2-a/bx", &a),
            ("/srv/h2-ab", &None),
            ("/srv", &None),
            ("/", &None),
            ("", &None),
            ("h2-a/x", &None),
            ("/srv/h2-a/./b/x", &b),
            ("/srv/h2-a/b/../x", &a),
            ("/srv/h2-a/../h2-c", &None),
            ("/srv/h2-a/", &a),
        ];
        for (path, want) in cases {
            assert_eq!(&policy.root_of(Path::new(path)), want, "{path:?}");
        }
    }

    #[test]
    fn lexical_normalization_never_climbs_above_root() {
        assert_eq!(lexical_normalize(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
        assert_eq!(lexical_normalize(Path::new("/../../etc")), PathBuf::from("/etc"));
        assert_eq!(lexical_normalize(Path::new("/a/b/")), PathBuf::from("/a/b"));
    }
}
