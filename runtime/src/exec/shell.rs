//! Which shell runs commands, and the PATH it starts with.
//!
//! Order (spec §1.14): `HERDR_MCP_EXEC_SHELL`, then `$SHELL`, then zsh, bash, sh found
//! on PATH. Only zsh, bash and sh are accepted: commands are written for a POSIX-ish
//! `-lc`, and fish or nu would parse them differently.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

const ACCEPTED: [&str; 3] = ["zsh", "bash", "sh"];

/// Directories where user tools commonly live but which a service's PATH often lacks.
const EXTRA_PATH_DIRS: [&str; 4] = ["~/.local/bin", "~/.cargo/bin", "/opt/homebrew/bin", "/usr/local/bin"];

#[derive(Debug, thiserror::Error)]
#[error("no usable shell: {0}")]
pub struct ShellError(String);

fn is_accepted(path: &Path) -> bool {
    path.file_name().and_then(|n| n.to_str()).is_some_and(|n| ACCEPTED.contains(&n))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.is_absolute() && std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Picks the shell from the two variables and a PATH (all passed in for tests).
pub fn resolve_shell(exec_shell: Option<&str>, shell: Option<&str>, path: Option<&str>) -> Result<PathBuf, ShellError> {
    for candidate in [exec_shell, shell].into_iter().flatten().filter(|s| !s.is_empty()) {
        let p = PathBuf::from(candidate);
        if is_accepted(&p) && is_executable(&p) {
            return Ok(p);
        }
    }
    let dirs: Vec<PathBuf> = path.map(|p| std::env::split_paths(p).collect()).unwrap_or_default();
    let fallback = [PathBuf::from("/bin"), PathBuf::from("/usr/bin")];
    for name in ACCEPTED {
        if let Some(found) = dirs.iter().chain(fallback.iter()).map(|d| d.join(name)).find(|p| is_executable(p)) {
            return Ok(found);
        }
    }
    Err(ShellError(
        "neither HERDR_MCP_EXEC_SHELL nor $SHELL names zsh, bash or sh, and none of them is on PATH".into(),
    ))
}

/// The process environment's choice.
pub fn shell_from_env() -> Result<PathBuf, ShellError> {
    let var = |k| std::env::var(k).ok();
    resolve_shell(var("HERDR_MCP_EXEC_SHELL").as_deref(), var("SHELL").as_deref(), var("PATH").as_deref())
}

/// `path` with the usual user tool directories appended when missing (appended, so
/// they never shadow what the user's PATH already picks).
pub fn enriched_path(path: Option<&str>, home: Option<&Path>) -> OsString {
    let mut dirs: Vec<PathBuf> = path.map(|p| std::env::split_paths(p).collect()).unwrap_or_default();
    if dirs.is_empty() {
        dirs = vec!["/usr/bin".into(), "/bin".into()];
    }
    for extra in EXTRA_PATH_DIRS {
        let dir = match (extra.strip_prefix("~/"), home) {
            (Some(rest), Some(home)) => home.join(rest),
            (Some(_), None) => continue,
            (None, _) => PathBuf::from(extra),
        };
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    std::env::join_paths(dirs).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_choice_wins_only_for_accepted_shells() {
        let sh = resolve_shell(Some("/bin/sh"), Some("/usr/bin/fish"), None).unwrap();
        assert_eq!(sh, PathBuf::from("/bin/sh"));
        // fish is not accepted, and a missing file is skipped: fall back to PATH.
        let picked = resolve_shell(Some("/usr/bin/fish"), Some("/nope/bash"), Some("/bin:/usr/bin")).unwrap();
        assert!(is_accepted(&picked), "{picked:?}");
        assert!(resolve_shell(Some("sh"), None, Some("")).unwrap().is_absolute(), "relative names are not trusted");
    }

    #[test]
    fn path_gains_missing_tool_dirs_without_reordering() {
        let p = enriched_path(Some("/usr/local/bin:/usr/bin"), Some(Path::new("/home/u")));
        let dirs: Vec<PathBuf> = std::env::split_paths(&p).collect();
        assert_eq!(dirs[0], PathBuf::from("/usr/local/bin"));
        assert_eq!(dirs[1], PathBuf::from("/usr/bin"));
        assert!(dirs.contains(&PathBuf::from("/home/u/.cargo/bin")));
        assert_eq!(dirs.iter().filter(|d| d.as_path() == Path::new("/usr/local/bin")).count(), 1);
    }
}
