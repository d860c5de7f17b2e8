//! Where Herdr's JSON API socket lives, resolved like Herdr itself does
//! (`session::active_api_socket_path`): `HERDR_SOCKET_PATH` verbatim, else
//! `HERDR_SESSION` under the config dir, else the default session's socket.

use std::path::PathBuf;

/// Inputs of the resolution, read from the environment by [`SocketEnv::from_process`]
/// and built by hand in tests.
#[derive(Debug, Clone, Default)]
pub struct SocketEnv {
    pub herdr_socket_path: Option<String>,
    pub herdr_session: Option<String>,
    pub xdg_config_home: Option<String>,
    pub home: Option<String>,
}

impl SocketEnv {
    pub fn from_process() -> Self {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        SocketEnv {
            herdr_socket_path: var("HERDR_SOCKET_PATH"),
            herdr_session: var("HERDR_SESSION"),
            xdg_config_home: var("XDG_CONFIG_HOME"),
            home: var("HOME"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SocketPathError {
    #[error("cannot locate Herdr's config directory: neither XDG_CONFIG_HOME nor HOME is set")]
    NoConfigDir,
}

/// Herdr's config directory: `$XDG_CONFIG_HOME/herdr`, else `$HOME/.config/herdr`
/// (on macOS too; Herdr never uses `~/Library`).
pub fn config_dir(env: &SocketEnv) -> Result<PathBuf, SocketPathError> {
    if let Some(xdg) = &env.xdg_config_home {
        return Ok(PathBuf::from(xdg).join("herdr"));
    }
    match &env.home {
        Some(home) => Ok(PathBuf::from(home).join(".config").join("herdr")),
        None => Err(SocketPathError::NoConfigDir),
    }
}

/// Session names Herdr accepts: 1–64 bytes of `[A-Za-z0-9._-]`, not `.` or `..`.
/// Checked so that a hostile `HERDR_SESSION` cannot walk out of the sessions dir.
pub fn valid_session_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name != "."
        && name != ".."
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// A `HERDR_SESSION` that Herdr itself ignores (it is not a valid session name), so
/// the default session's socket is used, as Herdr's own CLI would.
pub fn ignored_session(env: &SocketEnv) -> Option<&str> {
    env.herdr_session.as_deref().filter(|name| !valid_session_name(name))
}

pub fn resolve(env: &SocketEnv) -> Result<PathBuf, SocketPathError> {
    if let Some(path) = &env.herdr_socket_path {
        return Ok(PathBuf::from(path));
    }
    let dir = config_dir(env)?;
    // Herdr's `session::active_name` drops `default` and any name it would refuse,
    // and then uses the default session (whose socket sits in the config dir).
    match env.herdr_session.as_deref() {
        Some(name) if name != "default" && valid_session_name(name) => Ok(dir.join("sessions").join(name).join("herdr.sock")),
        _ => Ok(dir.join("herdr.sock")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(sock: Option<&str>, session: Option<&str>, xdg: Option<&str>, home: Option<&str>) -> SocketEnv {
        SocketEnv {
            herdr_socket_path: sock.map(str::to_string),
            herdr_session: session.map(str::to_string),
            xdg_config_home: xdg.map(str::to_string),
            home: home.map(str::to_string),
        }
    }

    #[test]
    fn explicit_socket_path_wins_verbatim() {
        let p = resolve(&env(Some("/x/y.sock"), Some("s1"), Some("/xdg"), Some("/h"))).unwrap();
        assert_eq!(p, PathBuf::from("/x/y.sock"));
    }

    #[test]
    fn session_maps_under_config_dir() {
        let p = resolve(&env(None, Some("work.1"), Some("/xdg"), Some("/h"))).unwrap();
        assert_eq!(p, PathBuf::from("/xdg/herdr/sessions/work.1/herdr.sock"));
        let p = resolve(&env(None, Some("default"), None, Some("/h"))).unwrap();
        assert_eq!(p, PathBuf::from("/h/.config/herdr/herdr.sock"));
    }

    #[test]
    fn default_prefers_xdg_then_home() {
        assert_eq!(resolve(&env(None, None, Some("/xdg"), Some("/h"))).unwrap(), PathBuf::from("/xdg/herdr/herdr.sock"));
        assert_eq!(resolve(&env(None, None, None, Some("/h"))).unwrap(), PathBuf::from("/h/.config/herdr/herdr.sock"));
        assert_eq!(resolve(&env(None, None, None, None)), Err(SocketPathError::NoConfigDir));
    }

    #[test]
    fn session_names_are_validated_at_their_edges() {
        assert!(valid_session_name(&"a".repeat(64)));
        assert!(!valid_session_name(&"a".repeat(65)));
        assert!(!valid_session_name(""));
        assert!(!valid_session_name("."));
        assert!(!valid_session_name(".."));
        assert!(valid_session_name("..."));
        assert!(!valid_session_name("a/b"));
        assert!(!valid_session_name("a b"));
    }

    #[test]
    fn a_session_name_herdr_refuses_means_the_default_session_as_in_herdr() {
        for bad in ["../etc", "a/b", "", ".", "..", &"a".repeat(65)] {
            let e = env(None, Some(bad), Some("/xdg"), Some("/h"));
            assert_eq!(resolve(&e).unwrap(), PathBuf::from("/xdg/herdr/herdr.sock"), "{bad:?}");
            assert_eq!(ignored_session(&e), Some(bad));
        }
        let e = env(None, Some(&"a".repeat(64)), None, Some("/h"));
        assert_eq!(resolve(&e).unwrap(), PathBuf::from(format!("/h/.config/herdr/sessions/{}/herdr.sock", "a".repeat(64))));
        assert_eq!(ignored_session(&e), None);
    }
}
