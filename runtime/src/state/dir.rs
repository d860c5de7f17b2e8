//! Where the state directory lives and how it is protected.
//!
//! Order: `--state-dir`, then `HERDR_MCP_STATE_DIR`, then `$XDG_STATE_HOME/herdr-mcp`,
//! then `~/.local/state/herdr-mcp`. Empty values count as unset.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum StateDirError {
    #[error("cannot find a home directory for the state database; pass --state-dir DIR or set HERDR_MCP_STATE_DIR")]
    NoHome,
    #[error("state directory {path}: {message}")]
    Unusable { path: String, message: String },
}

/// Picks the state directory from the flag and environment values (passed in, so
/// tests need no process environment).
pub fn resolve_state_dir(
    flag: Option<&Path>,
    env_state_dir: Option<&str>,
    xdg_state_home: Option<&str>,
    home: Option<&str>,
) -> Result<PathBuf, StateDirError> {
    let set = |v: Option<&str>| v.filter(|s| !s.is_empty()).map(PathBuf::from);
    if let Some(dir) = flag.filter(|p| !p.as_os_str().is_empty()) {
        return Ok(dir.to_path_buf());
    }
    if let Some(dir) = set(env_state_dir) {
        return Ok(dir);
    }
    if let Some(xdg) = set(xdg_state_home) {
        return Ok(xdg.join("herdr-mcp"));
    }
    match set(home) {
        Some(home) => Ok(home.join(".local").join("state").join("herdr-mcp")),
        None => Err(StateDirError::NoHome),
    }
}

/// The state directory from `--state-dir` (`flag`) and this process's
/// environment, and whether the user chose it (the flag or HERDR_MCP_STATE_DIR,
/// not empty) rather than getting the default. `serve` and `link` both treat a
/// chosen directory that cannot be used as an error, and a default one as a
/// warning about what goes without it.
pub fn state_dir_from_env(flag: Option<&Path>) -> (Result<PathBuf, StateDirError>, bool) {
    let env = |n: &str| std::env::var(n).ok();
    let chosen = flag.is_some_and(|p| !p.as_os_str().is_empty()) || env("HERDR_MCP_STATE_DIR").is_some_and(|v| !v.is_empty());
    let dir = resolve_state_dir(flag, env("HERDR_MCP_STATE_DIR").as_deref(), env("XDG_STATE_HOME").as_deref(), env("HOME").as_deref());
    (dir, chosen)
}

/// Creates `dir` if needed and makes it 0700. The directory must be a real directory
/// owned by us: a symlink or someone else's directory could redirect our ledger.
pub fn ensure_private_dir(dir: &Path) -> Result<(), StateDirError> {
    let unusable = |message: String| StateDirError::Unusable { path: dir.display().to_string(), message };
    fs::create_dir_all(dir).map_err(|e| match e.kind() {
        // create_dir_all says only "File exists" for a file in the way.
        std::io::ErrorKind::AlreadyExists => unusable("exists and is not a directory; point --state-dir at a directory".into()),
        _ => unusable(format!("cannot create it: {e}")),
    })?;
    let meta = fs::symlink_metadata(dir).map_err(|e| unusable(format!("cannot stat it: {e}")))?;
    if meta.file_type().is_symlink() {
        return Err(unusable("is a symlink; point --state-dir at a real directory".into()));
    }
    if !meta.is_dir() {
        return Err(unusable("is not a directory".into()));
    }
    let uid = nix::unistd::geteuid().as_raw();
    if meta.uid() != uid {
        return Err(unusable(format!("is owned by uid {}, not by this user (uid {uid})", meta.uid())));
    }
    if meta.permissions().mode() & 0o777 != 0o700 {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
            .map_err(|e| unusable(format!("cannot make it private (0700): {e}")))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolution_order_is_flag_env_xdg_home() {
        let flag = PathBuf::from("/f");
        let r = |f, e, x, h| resolve_state_dir(f, e, x, h).unwrap();
        assert_eq!(r(Some(flag.as_path()), Some("/e"), Some("/x"), Some("/h")), flag);
        assert_eq!(r(None, Some("/e"), Some("/x"), Some("/h")), PathBuf::from("/e"));
        assert_eq!(r(None, Some(""), Some("/x"), Some("/h")), PathBuf::from("/x/herdr-mcp"));
        assert_eq!(r(None, None, Some(""), Some("/h")), PathBuf::from("/h/.local/state/herdr-mcp"));
        assert!(matches!(resolve_state_dir(None, None, None, Some("")), Err(StateDirError::NoHome)));
    }

    #[test]
    fn directory_is_created_private_and_loose_modes_are_tightened() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b");
        ensure_private_dir(&dir).unwrap();
        assert_eq!(fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        ensure_private_dir(&dir).unwrap();
        assert_eq!(fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
    }

    #[test]
    fn symlinks_and_files_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().join("real");
        fs::create_dir(&real).unwrap();
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let err = ensure_private_dir(&link).unwrap_err();
        assert!(err.to_string().contains("symlink"), "{err}");
        let file = tmp.path().join("file");
        fs::write(&file, "x").unwrap();
        let err = ensure_private_dir(&file).unwrap_err();
        assert!(err.to_string().contains("exists and is not a directory"), "{err}");
    }
}
