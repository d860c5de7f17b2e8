//! Operating systems this program refuses to start on, rather than half-work.

/// The refusal for `os` (a value of `std::env::consts::OS`), or `None` where the host
/// runs. macOS: the installer knows no macOS manifest folders
/// (`~/Library/Application Support/<browser>/NativeMessagingHosts`) and the runtime it
/// relays to relies on Linux's `/proc`.
pub fn unsupported(os: &str) -> Option<String> {
    match os {
        "macos" => Some(
            "macOS is not supported yet: herdr-nmhost knows no macOS browser folders and the \
             herdr-mcp runtime relies on Linux's /proc; run it on Linux"
                .to_string(),
        ),
        _ => None,
    }
}
