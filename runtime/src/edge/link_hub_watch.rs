//! Keeps the link hub in step with changes the hub did not make itself: the
//! operator's `device revoke|suspend|resume` and a pairing that re-keys a device
//! write the registry (possibly from another process), and raise its generation.
//! Polling that one counter is a single-row read, cheap enough to do every second,
//! and when it moves the hub re-checks all its live links
//! ([`LinkHub::recheck`]: one read of the registry, one pass over the links). A
//! link admitted just before a change the watcher already saw is checked by
//! [`LinkHub::register`] itself, for that one device, so a burst of links
//! connecting costs no fleet-wide re-check.

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
            let now = generation;
            // The first reading re-checks too: a change made while this edge was
            // starting must not wait for the next one.
            match hub.recheck() {
                Ok(_) => seen = Some(now),
                Err(e) => tracing::warn!("device registry unreadable during a re-check: {e}"),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use tokio::sync::mpsc;

    use super::*;
    use crate::edge::link_hub::{LinkConn, Outbound};
    use crate::edge::link_hub_auth::{DeviceInfo, LinkAuthError, LinkAuthenticator};
    use crate::edge::relay::{Hello, close};

    /// A registry whose generation never moves: only registrations can prompt a re-check.
    struct Fixed(Mutex<Vec<DeviceInfo>>);

    impl LinkAuthenticator for Fixed {
        fn verify_link(&self, _: &str, _: &str) -> Result<DeviceInfo, LinkAuthError> {
            Err(LinkAuthError::Rejected)
        }
        fn list_devices(&self) -> Result<Vec<DeviceInfo>, String> {
            Ok(self.0.lock().unwrap().clone())
        }
        fn registry_generation(&self) -> Result<Option<i64>, String> {
            Ok(Some(7))
        }
    }

    fn device(authorization: &str) -> DeviceInfo {
        DeviceInfo {
            device_id: "dev_a".into(),
            workstation_id: "dev_a".into(),
            name: "a".into(),
            aliases: Vec::new(),
            authorization: authorization.into(),
            scheduling: "enabled".into(),
            credential_id: None,
            last_seen_ms: None,
        }
    }

    #[tokio::test]
    async fn a_link_admitted_after_an_unseen_change_is_checked_when_it_registers() {
        let registry = Arc::new(Fixed(Mutex::new(vec![device("active")])));
        let tmp = tempfile::tempdir().unwrap();
        crate::edge::store::EdgeStore::init(tmp.path()).unwrap();
        let store = crate::edge::store::EdgeStore::open(tmp.path(), Arc::new(crate::edge::clock::SystemClock)).unwrap();
        let hub = LinkHub::new(registry.clone(), (1, "sha256:x".into()), Arc::new(store));
        let stop = CancellationToken::new();
        let watcher = watch_registry(Arc::clone(&hub), Duration::from_millis(10), stop.clone());
        // The watcher's first re-check happens while the device is still active;
        // then it is suspended without the generation moving (the change raced it).
        tokio::time::sleep(Duration::from_millis(50)).await;
        *registry.0.lock().unwrap() = vec![device("suspended")];
        let (tx, mut rx) = mpsc::unbounded_channel();
        let hello = Hello {
            workstation_id: "dev_a".into(),
            boot_id: "b".into(),
            link_version: "t".into(),
            connected_at_ms: None,
            capabilities: vec![],
            runtime: None,
        };
        hub.register(Arc::new(LinkConn::new(hub.next_conn_id(), device("active"), hello, tx, hub.now_ms())));
        let closed = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await.expect("closed in time");
        assert!(matches!(closed, Some(Outbound::Close(code, ref why)) if code == close::DEVICE_REVOKED && why == "device suspended"));
        assert!(hub.link("dev_a").is_none());
        stop.cancel();
        watcher.await.unwrap();
    }
}
