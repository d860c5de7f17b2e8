//! Startup configuration of managed roots, read-only mode and write roots.
//!
//! - Managed roots: `--root DIR` (repeatable) wins; else `HERDR_MCP_ROOTS`, a list
//!   separated by `:` or `,` (either works, like `PATH` or a CSV); else the git
//!   top-level of the working directory.
//! - `HERDR_MCP_READONLY=1` turns on read-only mode; unset, empty, `0`, `false`, `no`
//!   or `off` leave it off. Any other value (`true`, `yes`, a typo) stops the start:
//!   the contract reads only `1` as read-only, yet whoever wrote `true` surely meant
//!   it, and silently serving read-write would betray that.
//! - `HERDR_MCP_WRITE_ROOTS`: comma-separated; empty or unset means every managed root,
//!   a list of commas alone is refused (as `HERDR_MCP_ROOTS` of separators alone is).
//!
//! A root must be an existing directory and is never `/`, `$HOME` nor a parent of
//! `$HOME`: serving a whole disk or home directory would expose far more than one
//! project (the same rule as for the roots Herdr's panes add).

use std::path::{Component, Path, PathBuf};
use std::process::Command;

use super::{Policy, PolicyError};

/// Raw startup inputs, separated from the process env so tests can pass them directly.
pub struct Settings<'a> {
    pub cli_roots: &'a [PathBuf],
    pub env_roots: Option<&'a str>,
    pub readonly: Option<&'a str>,
    pub write_roots: Option<&'a str>,
    pub cwd: &'a Path,
    pub home: Option<&'a Path>,
}

/// Builds a [`Policy`] or explains exactly which setting is wrong.
pub fn build(s: &Settings<'_>) -> Result<Policy, PolicyError> {
    let raw: Vec<(PathBuf, &str)> = if !s.cli_roots.is_empty() {
        s.cli_roots.iter().map(|r| (r.clone(), "--root")).collect()
    } else if let Some(list) = s.env_roots.filter(|v| !v.trim().is_empty()) {
        let listed: Vec<_> = split_list(list, &[':', ',']).map(|r| (PathBuf::from(r), "HERDR_MCP_ROOTS")).collect();
        // Only separators: serving with no root at all would refuse every call.
        if listed.is_empty() {
            return Err(invalid(format!(
                "HERDR_MCP_ROOTS={list:?} names no directory; list project directories separated by ':' or ',', or unset it"
            )));
        }
        listed
    } else {
        vec![(git_toplevel(s.cwd)?, "the git top-level of the working directory")]
    };
    let readonly = readonly_mode(s.readonly)?;
    let home = s.home.and_then(|h| h.canonicalize().ok());
    let mut roots = Vec::new();
    for (root, origin) in raw {
        let root = if root.is_relative() { s.cwd.join(root) } else { root };
        let canonical = canonical_dir(&root, origin)?;
        if canonical.parent().is_none() {
            return Err(invalid(format!("managed root {} ({origin}) is the filesystem root; choose a project directory", root.display())));
        }
        if home.as_deref() == Some(canonical.as_path()) {
            return Err(invalid(format!(
                "managed root {} ({origin}) is your home directory; choose a project directory inside it",
                root.display()
            )));
        }
        if home.as_deref().is_some_and(|h| h.starts_with(&canonical)) {
            return Err(invalid(format!(
                "managed root {} ({origin}) contains your home directory; choose a project directory",
                root.display()
            )));
        }
        if !roots.contains(&canonical) {
            roots.push(canonical);
        }
    }
    let relative_base = roots.first().cloned();
    let write_roots = match s.write_roots.filter(|v| !v.trim().is_empty()) {
        None => None,
        // Only commas: an empty list would refuse every change, the opposite of "unset".
        Some(list) if split_list(list, &[',']).next().is_none() => {
            return Err(invalid(format!(
                "HERDR_MCP_WRITE_ROOTS={list:?} names no directory; list the writable directories separated by ',', or unset it"
            )));
        }
        Some(list) => Some(
            split_list(list, &[','])
                .map(|w| {
                    let w = PathBuf::from(w);
                    let w = if w.is_relative() { s.cwd.join(w) } else { w };
                    canonical_dir(&w, "HERDR_MCP_WRITE_ROOTS")
                })
                .collect::<Result<Vec<_>, _>>()?,
        ),
    };
    Ok(Policy::assemble(deepest_first(roots), readonly, write_roots, relative_base))
}

/// `HERDR_MCP_READONLY`: `1` is on; unset, empty, `0`, `false`, `no` or `off` (any
/// case) is off; anything else is refused.
fn readonly_mode(value: Option<&str>) -> Result<bool, PolicyError> {
    let Some(value) = value.map(str::trim) else { return Ok(false) };
    if value == "1" {
        return Ok(true);
    }
    if ["", "0", "false", "no", "off"].iter().any(|off| value.eq_ignore_ascii_case(off)) {
        return Ok(false);
    }
    Err(invalid(format!(
        "HERDR_MCP_READONLY={value:?} is not understood: set it to 1 for read-only mode, or to 0 (or unset it) to allow changes"
    )))
}

/// Sorts roots so that a path is matched by its innermost root first.
pub fn deepest_first(mut roots: Vec<PathBuf>) -> Vec<PathBuf> {
    roots.sort_by(|a, b| depth(b).cmp(&depth(a)).then_with(|| a.cmp(b)));
    roots.dedup();
    roots
}

fn depth(p: &Path) -> usize {
    p.components().filter(|c| matches!(c, Component::Normal(_))).count()
}

fn split_list<'a>(list: &'a str, seps: &'a [char]) -> impl Iterator<Item = &'a str> + 'a {
    list.split(seps).map(str::trim).filter(|s| !s.is_empty())
}

fn canonical_dir(path: &Path, origin: &str) -> Result<PathBuf, PolicyError> {
    let canonical = path
        .canonicalize()
        .map_err(|e| invalid(format!("root {} ({origin}) cannot be used: {e}", path.display())))?;
    if !canonical.is_dir() {
        return Err(invalid(format!("root {} ({origin}) is not a directory", path.display())));
    }
    Ok(canonical)
}

/// `git rev-parse --show-toplevel` in `cwd`.
fn git_toplevel(cwd: &Path) -> Result<PathBuf, PolicyError> {
    let out = Command::new("git")
        .arg("-C")
        .arg(cwd)
        .args(["rev-parse", "--show-toplevel"])
        .env("GIT_PAGER", "cat")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .output()
        .map_err(|e| invalid(format!("cannot run git to find the project root of {}: {e}", cwd.display())))?;
    if !out.status.success() {
        return Err(invalid(format!(
            "{} is not inside a git repository; pass --root DIR or set HERDR_MCP_ROOTS",
            cwd.display()
        )));
    }
    let top = String::from_utf8_lossy(&out.stdout).trim().to_string();
    Ok(PathBuf::from(top))
}

fn invalid(msg: String) -> PolicyError {
    PolicyError::Invalid(msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings<'a>(cli: &'a [PathBuf], cwd: &'a Path, home: Option<&'a Path>) -> Settings<'a> {
        Settings { cli_roots: cli, env_roots: None, readonly: None, write_roots: None, cwd, home }
    }

    #[test]
    fn refuses_filesystem_root_and_home() {
        let tmp = tempfile::tempdir().unwrap();
        let err = build(&settings(&[PathBuf::from("/")], tmp.path(), None)).unwrap_err();
        assert!(err.to_string().contains("filesystem root"), "{err}");
        let cli = [tmp.path().to_path_buf()];
        let err = build(&settings(&cli, tmp.path(), Some(tmp.path()))).unwrap_err();
        assert!(err.to_string().contains("home directory"), "{err}");
    }

    #[test]
    fn refuses_a_parent_of_home_but_not_a_sibling() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("users").join("me");
        let sibling = tmp.path().join("users").join("me-project");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&sibling).unwrap();
        let cli = [tmp.path().join("users")];
        let err = build(&settings(&cli, tmp.path(), Some(&home))).unwrap_err();
        assert!(err.to_string().contains("contains your home directory"), "{err}");
        // A shared name prefix is no parenthood: users/me-project does not hold users/me.
        let cli = [sibling];
        assert!(build(&settings(&cli, tmp.path(), Some(&home))).is_ok());
    }

    #[test]
    fn env_roots_of_separators_alone_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        for list in [":", " , : ", "::,"] {
            let mut s = settings(&[], tmp.path(), None);
            s.env_roots = Some(list);
            let err = build(&s).unwrap_err().to_string();
            assert!(err.contains("HERDR_MCP_ROOTS") && err.contains("names no directory"), "{list:?}: {err}");
        }
    }

    #[test]
    fn readonly_is_one_or_an_off_word_and_anything_else_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let cli = [tmp.path().to_path_buf()];
        let off = [None, Some(""), Some("0"), Some("false"), Some("No"), Some("OFF")].map(|v| (v, false));
        for (value, on) in off.into_iter().chain([(Some("1"), true), (Some(" 1 "), true)]) {
            let mut s = settings(&cli, tmp.path(), None);
            s.readonly = value;
            assert_eq!(build(&s).unwrap().readonly, on, "{value:?}");
        }
        for value in ["true", "yes", "on", "2", "TRUE", "1x"] {
            let mut s = settings(&cli, tmp.path(), None);
            s.readonly = Some(value);
            let err = build(&s).unwrap_err().to_string();
            assert!(err.contains("HERDR_MCP_READONLY") && err.contains("set it to 1"), "{value}: {err}");
        }
    }

    #[test]
    fn refuses_missing_and_non_directory_roots() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("f");
        std::fs::write(&file, "x").unwrap();
        let err = build(&settings(&[tmp.path().join("nope")], tmp.path(), None)).unwrap_err();
        assert!(err.to_string().contains("cannot be used"), "{err}");
        let err = build(&settings(&[file], tmp.path(), None)).unwrap_err();
        assert!(err.to_string().contains("not a directory"), "{err}");
    }

    #[test]
    fn env_roots_accept_colon_and_comma_and_sort_deepest_first() {
        let tmp = tempfile::tempdir().unwrap();
        let a = tmp.path().join("a");
        let b = a.join("b");
        std::fs::create_dir_all(&b).unwrap();
        let list = format!("{}:{} , {}", a.display(), b.display(), a.display());
        let mut s = settings(&[], tmp.path(), None);
        s.env_roots = Some(&list);
        s.readonly = Some("1");
        let p = build(&s).unwrap();
        let (a, b) = (a.canonicalize().unwrap(), b.canonicalize().unwrap());
        assert_eq!(p.roots, vec![b.clone(), a.clone()]);
        assert_eq!(p.relative_base.as_deref(), Some(a.as_path()));
        assert!(p.readonly);
        assert_eq!(p.root_of(&b.join("x")), Some(b.clone()));
        assert_eq!(p.root_of(&a.join("x")), Some(a.clone()));
    }

    #[test]
    fn write_roots_are_csv_and_empty_means_all() {
        let tmp = tempfile::tempdir().unwrap();
        let cli = [tmp.path().to_path_buf()];
        let mut s = settings(&cli, tmp.path(), None);
        s.write_roots = Some(" ");
        assert_eq!(build(&s).unwrap().write_roots, None);
        let list = tmp.path().display().to_string();
        s.write_roots = Some(&list);
        assert_eq!(build(&s).unwrap().write_roots, Some(vec![tmp.path().canonicalize().unwrap()]));
        s.write_roots = Some("/definitely/not/here");
        assert!(build(&s).unwrap_err().to_string().contains("HERDR_MCP_WRITE_ROOTS"));
        s.write_roots = Some(" , ,");
        let err = build(&s).unwrap_err().to_string();
        assert!(err.contains("HERDR_MCP_WRITE_ROOTS") && err.contains("names no directory"), "{err}");
    }

    #[test]
    fn default_root_is_the_git_toplevel_or_a_clear_error() {
        let tmp = tempfile::tempdir().unwrap();
        let err = build(&settings(&[], tmp.path(), None)).unwrap_err();
        assert!(err.to_string().contains("not inside a git repository"), "{err}");
        let ok = Command::new("git").arg("init").arg("-q").arg(tmp.path()).status().unwrap();
        assert!(ok.success());
        let sub = tmp.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        let p = build(&settings(&[], &sub, None)).unwrap();
        assert_eq!(p.roots, vec![tmp.path().canonicalize().unwrap()]);
    }
}
