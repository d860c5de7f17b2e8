//! Where the runtime's extension socket lives; must resolve exactly as `herdr-mcp serve` does.

use std::path::PathBuf;

pub const SOCKET_ENV: &str = "HERDR_EXTENSION_IPC_SOCKET";

/// `HERDR_EXTENSION_IPC_SOCKET`, else `$XDG_CONFIG_HOME/herdr-mcp/extension.sock`, else
/// `~/.config/herdr-mcp/extension.sock`; empty variables count as unset, as in the runtime's
/// `server::config::default_socket_path`.
pub fn resolve(socket_env: Option<&str>, xdg_config_home: Option<&str>, home: Option<&str>) -> Option<PathBuf> {
    if let Some(explicit) = socket_env.filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(explicit));
    }
    let config = match xdg_config_home.filter(|v| !v.is_empty()) {
        Some(xdg) => PathBuf::from(xdg),
        None => PathBuf::from(home.filter(|h| !h.is_empty())?).join(".config"),
    };
    Some(config.join("herdr-mcp").join("extension.sock"))
}

pub fn resolve_from_env() -> Option<PathBuf> {
    let get = |k: &str| std::env::var(k).ok();
    resolve(get(SOCKET_ENV).as_deref(), get("XDG_CONFIG_HOME").as_deref(), get("HOME").as_deref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolution_order() {
        assert_eq!(resolve(Some("/s"), Some("/x"), Some("/h")), Some("/s".into()));
        assert_eq!(resolve(Some(""), Some("/x"), Some("/h")), Some("/x/herdr-mcp/extension.sock".into()));
        assert_eq!(resolve(None, Some(""), Some("/h")), Some("/h/.config/herdr-mcp/extension.sock".into()));
        assert_eq!(resolve(None, None, Some("/h")), Some("/h/.config/herdr-mcp/extension.sock".into()));
        assert_eq!(resolve(None, None, None), None);
    }
}
