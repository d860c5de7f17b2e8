//! Which backend runs a `herdr_exec` command (spec §1.17).
//!
//! `native` (the default) spawns the command from this runtime. `utility_pane` types
//! it into a Herdr pane instead: on macOS the folders Documents, Desktop and Downloads
//! are privacy-protected, and a terminal the user granted access can work there while
//! a background runtime cannot. `HERDR_MCP_EXEC_BACKEND` (`auto`, `native`,
//! `utility_pane`) overrides the automatic choice, e.g. to route every command
//! through a visible pane.

use std::path::Path;

/// Folders under the home directory that macOS shields from background processes.
pub const PROTECTED_DIRS: [&str; 3] = ["Documents", "Desktop", "Downloads"];
/// The setting that overrides the choice.
pub const BACKEND_ENV: &str = "HERDR_MCP_EXEC_BACKEND";

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum BackendChoice {
    /// `utility_pane` for protected roots on macOS, else `native`.
    #[default]
    Auto,
    Native,
    UtilityPane,
}

impl BackendChoice {
    pub fn parse(value: Option<&str>) -> Result<BackendChoice, String> {
        match value.map(str::trim).filter(|v| !v.is_empty()) {
            None | Some("auto") => Ok(BackendChoice::Auto),
            Some("native") => Ok(BackendChoice::Native),
            Some("utility_pane") => Ok(BackendChoice::UtilityPane),
            Some(other) => Err(format!("{BACKEND_ENV}={other:?} is not one of auto, native, utility_pane")),
        }
    }

    /// From the environment; a bad value is reported and treated as `auto`.
    pub fn from_env() -> BackendChoice {
        let value = std::env::var(BACKEND_ENV).ok();
        BackendChoice::parse(value.as_deref()).unwrap_or_else(|e| {
            tracing::warn!("{e}; using auto");
            BackendChoice::Auto
        })
    }
}

/// Whether `root` lies in a protected folder of `home`.
pub fn is_protected(root: &Path, home: Option<&Path>) -> bool {
    home.is_some_and(|h| PROTECTED_DIRS.iter().any(|d| root.starts_with(h.join(d))))
}

/// Whether a command in `root` goes through the utility pane.
pub fn uses_utility_pane(choice: BackendChoice, root: &Path, home: Option<&Path>) -> bool {
    match choice {
        BackendChoice::Native => false,
        BackendChoice::UtilityPane => true,
        BackendChoice::Auto => cfg!(target_os = "macos") && is_protected(root, home),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_accepts_the_three_names_and_rejects_others() {
        assert_eq!(BackendChoice::parse(None), Ok(BackendChoice::Auto));
        assert_eq!(BackendChoice::parse(Some(" ")), Ok(BackendChoice::Auto));
        assert_eq!(BackendChoice::parse(Some("native")), Ok(BackendChoice::Native));
        assert_eq!(BackendChoice::parse(Some("utility_pane")), Ok(BackendChoice::UtilityPane));
        assert!(BackendChoice::parse(Some("pane")).unwrap_err().contains("auto, native, utility_pane"));
    }

    #[test]
    fn auto_picks_the_pane_only_for_protected_roots_on_macos() {
        let home = Path::new("/Users/u");
        assert!(is_protected(Path::new("/Users/u/Documents/proj"), Some(home)));
        assert!(is_protected(Path::new("/Users/u/Downloads"), Some(home)));
        assert!(!is_protected(Path::new("/Users/u/DocumentsX/proj"), Some(home)));
        assert!(!is_protected(Path::new("/Users/u/src/proj"), Some(home)));
        let protected = Path::new("/Users/u/Desktop/p");
        assert_eq!(uses_utility_pane(BackendChoice::Auto, protected, Some(home)), cfg!(target_os = "macos"));
        assert!(!uses_utility_pane(BackendChoice::Native, protected, Some(home)));
        assert!(uses_utility_pane(BackendChoice::UtilityPane, Path::new("/srv/p"), None));
    }
}
