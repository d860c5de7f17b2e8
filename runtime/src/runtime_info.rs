//! Facts about this runtime process that tools and `/health` report.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Identity and start time of the running runtime, shared by every tool call.
#[derive(Debug, Clone)]
pub struct RuntimeInfo {
    pub name: &'static str,
    pub version: &'static str,
    /// `HERDR_MCP_BUILD_COMMIT` at build time, else `"dev"`.
    pub build_commit: &'static str,
    /// RFC 3339 time the process started.
    pub started_at: String,
    pub started: Instant,
    pub pid: u32,
    /// `hex(pid)-hex(nanos)`, created once per process (spec §1.5).
    pub boot_id: String,
}

impl RuntimeInfo {
    pub fn new() -> Self {
        let now = SystemTime::now();
        let nanos = now.duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        let pid = std::process::id();
        RuntimeInfo {
            name: "herdr-mcp",
            version: env!("CARGO_PKG_VERSION"),
            build_commit: option_env!("HERDR_MCP_BUILD_COMMIT").unwrap_or("dev"),
            started_at: rfc3339(now),
            started: Instant::now(),
            pid,
            boot_id: format!("{pid:x}-{nanos:x}"),
        }
    }

    pub fn uptime_ms(&self) -> u128 {
        self.started.elapsed().as_millis()
    }
}

impl Default for RuntimeInfo {
    fn default() -> Self {
        Self::new()
    }
}

/// Formats a system time as RFC 3339 in UTC (seconds precision).
pub fn rfc3339(t: SystemTime) -> String {
    let dt = time::OffsetDateTime::from(t);
    dt.replace_nanosecond(0)
        .ok()
        .and_then(|d| d.format(&time::format_description::well_known::Rfc3339).ok())
        .unwrap_or_else(|| "1970-01-01T00:00:00Z".to_string())
}
