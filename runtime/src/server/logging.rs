//! `tracing` output: stderr by default, or appended to `--log-file`. The level
//! comes from `HERDR_MCP_LOG` (or `RUST_LOG`), default [`DEFAULT_FILTER`].

use std::fs::OpenOptions;
use std::path::Path;
use std::sync::Mutex;

use tracing_subscriber::EnvFilter;

/// The filter without `HERDR_MCP_LOG`/`RUST_LOG`: our own info lines, and rmcp only
/// from warnings up, since its info line at each session start is a Debug dump of
/// the client's whole initialize request.
pub const DEFAULT_FILTER: &str = "info,rmcp=warn";

pub fn init(log_file: Option<&Path>) -> Result<(), String> {
    let filter = std::env::var("HERDR_MCP_LOG")
        .ok()
        .or_else(|| std::env::var("RUST_LOG").ok())
        .and_then(|spec| EnvFilter::try_new(spec).ok())
        .unwrap_or_else(|| EnvFilter::new(DEFAULT_FILTER));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_target(false);
    let result = match log_file {
        Some(path) => {
            let file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| format!("cannot open log file {}: {e}", path.display()))?;
            builder.with_ansi(false).with_writer(Mutex::new(file)).try_init()
        }
        None => builder.with_ansi(stderr_wants_colour()).with_writer(std::io::stderr).try_init(),
    };
    result.map_err(|e| format!("cannot start logging: {e}"))
}

/// Colour escapes help a person at a terminal and garble everything else (a log
/// file of a service manager, a test's capture, a pipe to grep); `NO_COLOR` turns
/// them off at a terminal too (https://no-color.org).
pub fn stderr_wants_colour() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}
