//! Keeps the link hub in step with changes the hub did not make itself: the
//! operator's `device revoke|suspend|resume` and a pairing that re-keys a device
//! write the registry (possibly from another process), and raise its generation.
//! Polling that one counter is a single-row read, cheap enough to do every second,
//! and when it moves the hub re-checks all its live links
//! ([`LinkHub::recheck`]).

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::link_hub::LinkHub;

/// How often the registry generation is read: the longest a revoked or suspended
/// device's link stays open after the change.
pub const WATCH_EVERY: Duration = Duration::from_secs(1);

/// Watches until `stop`; returns at once for a registry without a generation.
pub fn watch_registry(hub: Arc<LinkHub>, every: Duration, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut seen: Option<i64> = None;
        let mut failing = false;
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            let generation = match hub.authenticator().registry_generation() {
                Ok(None) => return,
                Ok(Some(g)) => g,
                Err(e) => {
                    // Logged once per outage, not once a second.
                    if !failing {
                        tracing::warn!("device registry unreadable; live links are not re-checked until it is: {e}");
                    }
                    failing = true;
                    continue;
                }
            };
            failing = false;
            if seen == Some(generation) {
                continue;
            }
            // The first reading re-checks too: a change made while this edge was
            // starting must not wait for the next one.
            match hub.recheck() {
                Ok(_) => seen = Some(generation),
                Err(e) => tracing::warn!("device registry unreadable during a re-check: {e}"),
            }
        }
    })
}
