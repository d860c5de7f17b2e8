//! Operating systems this program refuses to start on, rather than half-work.

/// The refusal for `os` (a value of `std::env::consts::OS`), or `None` where
/// herdr-mcp runs. macOS: the native host installer knows no macOS manifest
/// folders and process control (exec sessions, their recovery) reads Linux's `/proc`.
pub fn unsupported(os: &str) -> Option<String> {
    match os {
        "macos" => Some(
            "macOS is not supported yet: herdr-mcp's command sessions rely on Linux's /proc \
             and herdr-nmhost knows no macOS browser folders; run it on Linux"
                .to_string(),
        ),
        _ => None,
    }
}
