//! Startup configuration of `herdr-mcp serve`: where to listen and with which
//! credentials, resolved from flags and environment once, before anything binds.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use super::token_strength;

/// Environment variable naming the trusted Unix socket (the native host uses it too).
pub const SOCKET_ENV: &str = "HERDR_EXTENSION_IPC_SOCKET";
/// Environment variable holding the bearer that TCP clients must present.
pub const TOKEN_ENV: &str = "HERDR_MCP_TOKEN";
/// Largest accepted JSON-RPC POST body (spec §3).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;
/// `sun_path` holds 108 bytes including the terminating NUL.
pub const MAX_SOCKET_PATH_BYTES: usize = 107;

/// Why the server refuses to start; each message is one line meant for the user.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot find a home directory for the default socket path; pass --socket PATH or set {SOCKET_ENV}")]
    NoHome,
    #[error("--listen {0}: TCP is only served on loopback addresses (127.0.0.0/8 or ::1)")]
    NotLoopback(SocketAddr),
    #[error("--listen needs a bearer token: set {TOKEN_ENV} to a secret of at least 32 random characters before starting TCP; {}", token_strength::HOW_TO_MAKE)]
    MissingToken,
    #[error("{TOKEN_ENV} is too weak to guard TCP: {why}; {how}", why = .0, how = token_strength::HOW_TO_MAKE)]
    WeakToken(String),
    #[error("{TOKEN_ENV} must be printable ASCII with no spaces at either end: no Authorization header could carry it, so every TCP request would be refused")]
    UnusableToken,
    #[error("socket path {path} is {len} bytes long; Unix sockets allow at most {MAX_SOCKET_PATH_BYTES}")]
    SocketPathTooLong { path: String, len: usize },
}

/// Everything the listeners need, validated.
#[derive(Debug, Clone)]
pub struct ListenConfig {
    pub socket_path: PathBuf,
    /// Loopback TCP address and its bearer, when `--listen` was given.
    pub tcp: Option<TcpConfig>,
}

#[derive(Clone)]
pub struct TcpConfig {
    pub addr: SocketAddr,
    pub token: String,
}

impl std::fmt::Debug for TcpConfig {
    // The token never reaches a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpConfig").field("addr", &self.addr).field("token", &"<redacted>").finish()
    }
}

/// The default socket: `$XDG_CONFIG_HOME/herdr-mcp/extension.sock`, else
/// `$HOME/.config/herdr-mcp/extension.sock`. Empty variables count as unset.
pub fn default_socket_path(xdg_config_home: Option<&str>, home: Option<&str>) -> Result<PathBuf, ConfigError> {
    let base = match (xdg_config_home.filter(|s| !s.is_empty()), home.filter(|s| !s.is_empty())) {
        (Some(xdg), _) => PathBuf::from(xdg),
        (None, Some(home)) => Path::new(home).join(".config"),
        (None, None) => return Err(ConfigError::NoHome),
    };
    Ok(base.join("herdr-mcp").join("extension.sock"))
}

/// Validates the listen settings. `socket` is the flag or environment value (clap
/// merges both); `token` is `HERDR_MCP_TOKEN`.
pub fn resolve(
    socket: Option<PathBuf>,
    listen: Option<SocketAddr>,
    token: Option<String>,
    xdg_config_home: Option<&str>,
    home: Option<&str>,
) -> Result<ListenConfig, ConfigError> {
    let socket_path = match socket {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => default_socket_path(xdg_config_home, home)?,
    };
    let len = socket_path.as_os_str().len();
    if len > MAX_SOCKET_PATH_BYTES {
        return Err(ConfigError::SocketPathTooLong { path: socket_path.display().to_string(), len });
    }
    let tcp = match listen {
        None => None,
        Some(addr) => {
            if !addr.ip().is_loopback() {
                return Err(ConfigError::NotLoopback(addr));
            }
            let token = token.filter(|t| !t.trim().is_empty()).ok_or(ConfigError::MissingToken)?;
            // A client's header value is trimmed and must be visible ASCII (or spaces).
            if token.trim() != token || !token.chars().all(|c| c == ' ' || c.is_ascii_graphic()) {
                return Err(ConfigError::UnusableToken);
            }
            token_strength::check(&token).map_err(ConfigError::WeakToken)?;
            Some(TcpConfig { addr, token })
        }
    };
    Ok(ListenConfig { socket_path, tcp })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_socket_prefers_xdg_then_home() {
        assert_eq!(
            default_socket_path(Some("/x"), Some("/h")).unwrap(),
            PathBuf::from("/x/herdr-mcp/extension.sock")
        );
        assert_eq!(
            default_socket_path(Some(""), Some("/h")).unwrap(),
            PathBuf::from("/h/.config/herdr-mcp/extension.sock")
        );
        assert!(matches!(default_socket_path(None, None), Err(ConfigError::NoHome)));
    }

    const STRONG: &str = "3f9a1c7e5b2d8046a1e9c3b7d5f20864";

    #[test]
    fn tcp_needs_loopback_and_a_token() {
        let lo: SocketAddr = "127.0.0.1:8772".parse().unwrap();
        let any: SocketAddr = "0.0.0.0:8772".parse().unwrap();
        let sock = Some(PathBuf::from("/tmp/s.sock"));
        assert!(matches!(resolve(sock.clone(), Some(lo), None, None, None), Err(ConfigError::MissingToken)));
        assert!(matches!(
            resolve(sock.clone(), Some(lo), Some("  ".into()), None, None),
            Err(ConfigError::MissingToken)
        ));
        assert!(matches!(
            resolve(sock.clone(), Some(any), Some("t".into()), None, None),
            Err(ConfigError::NotLoopback(_))
        ));
        for unusable in ["secret\n", " secret", "se\tcret", "sécret"] {
            assert!(
                matches!(resolve(sock.clone(), Some(lo), Some(unusable.into()), None, None), Err(ConfigError::UnusableToken)),
                "{unusable:?}"
            );
        }
        assert!(resolve(sock.clone(), Some(lo), Some(format!("{STRONG} with spaces")), None, None).is_ok());
        assert!(matches!(resolve(sock.clone(), Some(lo), Some("t".into()), None, None), Err(ConfigError::WeakToken(_))));
        let v6: SocketAddr = "[::1]:1".parse().unwrap();
        assert!(resolve(sock.clone(), Some(v6), Some(STRONG.into()), None, None).unwrap().tcp.is_some());
        assert!(resolve(sock, None, None, None, None).unwrap().tcp.is_none());
    }

    #[test]
    fn socket_path_length_limit_is_enforced_at_its_edge() {
        let at_limit = format!("/{}", "a".repeat(MAX_SOCKET_PATH_BYTES - 1));
        assert!(resolve(Some(at_limit.into()), None, None, None, None).is_ok());
        let over = format!("/{}", "a".repeat(MAX_SOCKET_PATH_BYTES));
        assert!(matches!(
            resolve(Some(over.into()), None, None, None, None),
            Err(ConfigError::SocketPathTooLong { .. })
        ));
    }
}
