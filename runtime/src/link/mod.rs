//! `herdr-mcp link`: the workstation side of the edge link. Holds one outbound
//! WebSocket to the edge's `/ws/<workstation_id>` (Relay protocol v1, see
//! [`crate::edge::relay`]) and answers each `tool_request` by calling the local
//! runtime over its Unix socket. Requests keep running across a reconnect and
//! mutations' answers are resumed on the next socket ([`outbox`]).
//!
//! Reconnects with exponential backoff; stops for good when the edge refuses the
//! credential or closes with 4401 (device revoked), since retrying could never
//! succeed and would only hammer the edge. A suspended device is the exception:
//! the operator may resume it, so the link keeps retrying at the backoff's pace.

pub mod answer_store;
pub mod backoff;
pub mod cli;
pub mod connect;
pub mod holder_lock;
pub mod local;
pub mod outbox;
pub mod session;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use answer_store::ClaimedState;
use local::LocalRuntime;
use outbox::Outbox;
use session::{End, run_session};

pub use backoff::{MAX_BACKOFF, MIN_BACKOFF};

#[derive(Clone)]
pub struct LinkConfig {
    /// The edge's base URL (http(s)://host[:port]).
    pub edge: String,
    pub workstation_id: String,
    /// The device secret; sent only inside the WebSocket handshake.
    pub secret: String,
    pub socket: PathBuf,
    /// Offered as the device name on first registration.
    pub name: Option<String>,
    /// An extra CA (PEM) trusted for a `https` edge besides the public roots.
    pub ca_file: Option<PathBuf>,
    /// Heartbeat pace and edge-silence limit; spec §8's 30 s / 90 s by default.
    pub timings: LinkTimings,
}

/// How often a linked session heartbeats, and how long it lets the edge stay
/// silent before it drops the socket and links again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkTimings {
    pub heartbeat_every: Duration,
    pub edge_silence: Duration,
}

impl Default for LinkTimings {
    fn default() -> Self {
        Self { heartbeat_every: session::HEARTBEAT_EVERY, edge_silence: session::EDGE_SILENCE }
    }
}

impl std::fmt::Debug for LinkConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinkConfig")
            .field("edge", &self.edge)
            .field("workstation_id", &self.workstation_id)
            .field("socket", &self.socket)
            .finish_non_exhaustive()
    }
}

/// Links until `stop` (Ok) or a fatal refusal (Err with the reason), keeping
/// mutation answers in memory only.
pub async fn run(cfg: LinkConfig, stop: CancellationToken) -> Result<(), String> {
    run_with_state(cfg, stop, None).await
}

/// As [`run`]; with `state` (the runtime's state database, claimed for this
/// workstation by `serve --link` or a standalone `link`) kept answers also
/// survive a restart of the process. The claim is held until this returns.
pub async fn run_with_state(cfg: LinkConfig, stop: CancellationToken, state: Option<ClaimedState>) -> Result<(), String> {
    crate::edge::relay::check_id("workstation id", &cfg.workstation_id, crate::edge::relay::MAX_WORKSTATION_ID)?;
    if let Some(claim) = &state
        && claim.workstation_id() != cfg.workstation_id
    {
        return Err(format!("the state database was claimed for workstation {}, not {}", claim.workstation_id(), cfg.workstation_id));
    }
    if let Some(name) = &cfg.name {
        crate::edge::devices::validate_name(name).map_err(|e| format!("device name {name:?}: {e}"))?;
    }
    let tls = connect::tls_config(cfg.ca_file.as_deref())?;
    let local = LocalRuntime::new(cfg.socket.clone());
    let started = Instant::now();
    let boot_id = crate::edge::secrets::random_hex::<8>();
    // Outlives the sessions: requests keep running across a reconnect, and
    // their answers are resumed on the next socket.
    let outbox = Arc::new(match &state {
        Some(claim) => Outbox::with_store(claim.store()),
        None => Outbox::default(),
    });
    let restored = outbox.restore().await;
    if restored > 0 {
        tracing::info!(restored, "answers kept by an earlier process wait for the edge's resume");
    }
    let mut backoff = backoff::Backoff::default();
    loop {
        match run_session(&cfg, &tls, &local, &outbox, &boot_id, started, &stop).await {
            End::Stopped => {
                outbox.abort_all();
                return Ok(());
            }
            End::Fatal(reason) => {
                // Answers on disk stay: a process started after the cause is
                // fixed may still deliver them, and load drops them after 10 min.
                outbox.abort_all();
                return Err(reason);
            }
            End::Retry { reason, linked } => {
                let wait = backoff.after_session(linked);
                tracing::warn!("link interrupted: {reason}; retrying in {} ms", wait.as_millis());
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = stop.cancelled() => return Ok(()),
                }
            }
        }
    }
}
