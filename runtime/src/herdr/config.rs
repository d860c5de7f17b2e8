//! Settings of the Herdr integration: the socket, the CLI for the API schema, and
//! every time budget (tests shrink them; production uses the defaults).

use std::path::PathBuf;
use std::time::Duration;

use super::socket_path::{self, SocketEnv, SocketPathError};
use super::visibility::AgentVisibility;

/// Time budgets of Herdr calls and of the event cache's loops.
#[derive(Debug, Clone)]
pub struct Timeouts {
    /// Any method without a budget of its own.
    pub default: Duration,
    /// No call may wait longer than this, whatever a caller asks for.
    pub max: Duration,
    pub ping: Duration,
    pub snapshot: Duration,
    pub agent_get: Duration,
    pub pane_split: Duration,
    /// `herdr api schema --json`.
    pub schema_cli: Duration,
    /// The event cache renews its lifecycle subscription this often. Herdr replays its
    /// event ring to every new subscription (spec/herdr.md E.1), so this is rare
    /// (`HERDR_MCP_HERDR_RENEW_MS`).
    pub resubscribe: Duration,
    /// ... takes a fresh picture this often, which also bounds how long an agent renamed
    /// outside this runtime shows its old name (Herdr emits no event for a rename; see
    /// [`super::agent_names`]) (`HERDR_MCP_HERDR_RESNAPSHOT_MS`).
    pub resnapshot: Duration,
    /// ... and asks `pane.get` of every known pane this often: Herdr emits nothing when
    /// a pane's cwd changes (E.7) (`HERDR_MCP_HERDR_POLL_MS`).
    pub poll: Duration,
    /// First and largest delay between reconnect attempts.
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            default: Duration::from_secs(30),
            max: Duration::from_secs(60),
            ping: Duration::from_secs(5),
            snapshot: Duration::from_secs(8),
            agent_get: Duration::from_secs(5),
            pane_split: Duration::from_secs(10),
            schema_cli: Duration::from_secs(10),
            resubscribe: Duration::from_secs(600),
            resnapshot: Duration::from_secs(30),
            poll: Duration::from_millis(1500),
            backoff_initial: Duration::from_millis(250),
            backoff_max: Duration::from_secs(5),
        }
    }
}

impl Timeouts {
    /// The budget for `method`, never above `max`.
    pub fn for_method(&self, method: &str) -> Duration {
        let t = match method {
            "ping" => self.ping,
            "session.snapshot" => self.snapshot,
            "agent.get" => self.agent_get,
            "pane.split" => self.pane_split,
            _ => self.default,
        };
        self.clamp(t)
    }

    pub fn clamp(&self, t: Duration) -> Duration {
        t.min(self.max)
    }

    /// The defaults with the event cache's intervals taken from the environment
    /// (milliseconds, at least 50; tests shorten them).
    pub fn from_env() -> Self {
        let mut t = Timeouts::default();
        let ms = |var: &str| {
            std::env::var(var).ok().and_then(|v| v.trim().parse::<u64>().ok()).map(|ms| Duration::from_millis(ms.max(50)))
        };
        if let Some(d) = ms("HERDR_MCP_HERDR_RENEW_MS") {
            t.resubscribe = d;
        }
        if let Some(d) = ms("HERDR_MCP_HERDR_RESNAPSHOT_MS") {
            t.resnapshot = d;
        }
        if let Some(d) = ms("HERDR_MCP_HERDR_POLL_MS") {
            t.poll = d;
        }
        t
    }
}

#[derive(Debug, Clone)]
pub struct HerdrConfig {
    pub socket_path: PathBuf,
    /// The `herdr` executable used for `herdr api schema --json`; `None` when it is not
    /// installed (then the schema is unavailable).
    pub herdr_bin: Option<PathBuf>,
    pub timeouts: Timeouts,
    pub visibility: AgentVisibility,
}

impl HerdrConfig {
    /// A config for `socket_path` with default budgets, no CLI and every agent visible.
    pub fn new(socket_path: PathBuf) -> Self {
        HerdrConfig { socket_path, herdr_bin: None, timeouts: Timeouts::default(), visibility: AgentVisibility::All }
    }

    /// From the process environment: socket per Herdr's own rules, the CLI from
    /// `HERDR_BIN_PATH` or `PATH`, visibility from `HERDR_MCP_AGENT_ALLOW`.
    pub fn from_env() -> Result<Self, SocketPathError> {
        let env = SocketEnv::from_process();
        if let Some(name) = socket_path::ignored_session(&env) {
            tracing::warn!("HERDR_SESSION {name:?} is not a valid Herdr session name; using the default session, as Herdr does");
        }
        let socket_path = socket_path::resolve(&env)?;
        let herdr_bin =
            std::env::var_os("HERDR_BIN_PATH").map(PathBuf::from).filter(|p| p.is_file()).or_else(|| find_on_path("herdr"));
        let visibility = AgentVisibility::from_setting(std::env::var("HERDR_MCP_AGENT_ALLOW").ok().as_deref());
        Ok(HerdrConfig { socket_path, herdr_bin, timeouts: Timeouts::from_env(), visibility })
    }
}

/// The first executable file named `name` in `PATH`.
pub fn find_on_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| std::fs::metadata(candidate).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_method_budgets_are_capped() {
        let mut t = Timeouts::default();
        assert_eq!(t.for_method("ping"), Duration::from_secs(5));
        assert_eq!(t.for_method("session.snapshot"), Duration::from_secs(8));
        assert_eq!(t.for_method("pane.read"), Duration::from_secs(30));
        assert_eq!(t.clamp(Duration::from_secs(61)), Duration::from_secs(60));
        assert_eq!(t.clamp(Duration::from_secs(60)), Duration::from_secs(60));
        t.default = Duration::from_secs(90);
        assert_eq!(t.for_method("pane.read"), Duration::from_secs(60));
    }
}
