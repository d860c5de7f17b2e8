//! Keeps the policy's managed roots in step with Herdr (spec §2.1): while the event
//! cache is live, the git roots its panes and agents work in are managed alongside the
//! configured ones; when a pane goes, so does its root; when Herdr goes away, only
//! the configured roots remain.
//!
//! The work happens off the tool path: a task wakes on every cache change, and only
//! re-derives the roots when the set of pane working directories (or liveness)
//! actually changed, since deriving may ask git.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::cache::EventCache;
use super::roots::{derive_projects, pane_cwd};
use super::topology::Topology;
use crate::policy::Policy;

/// The working directories that decide the derived roots.
fn cwds(topology: &Topology) -> BTreeSet<String> {
    topology.panes.iter().filter_map(|p| pane_cwd(topology, p)).collect()
}

/// The managed project roots of a topology (git repos that are neither `/` nor home).
pub async fn derived_roots(topology: &Topology, home: Option<&Path>) -> Vec<PathBuf> {
    derive_projects(topology, home).await.into_iter().filter(|p| p.managed).map(|p| p.root).collect()
}

/// Follows `cache` until `cancel` fires, updating `policy`'s managed roots.
pub fn spawn(cache: Arc<EventCache>, policy: Policy, home: Option<PathBuf>, cancel: CancellationToken) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut changes = cache.changes();
        // `None`: Herdr not live, so no derived roots.
        let mut followed: Option<BTreeSet<String>> = None;
        let mut first = true;
        loop {
            let view = cache.live_view();
            let now = view.as_ref().map(|v| cwds(&v.topology));
            if first || now != followed {
                let derived = match &view {
                    Some(v) => derived_roots(&v.topology, home.as_deref()).await,
                    None => Vec::new(),
                };
                if policy.set_derived_roots(&derived, home.as_deref()) {
                    tracing::info!(roots = ?policy.managed_roots(), "managed roots changed");
                }
                followed = now;
                first = false;
            }
            tokio::select! {
                _ = cancel.cancelled() => break,
                changed = changes.changed() => if changed.is_err() { break },
            }
        }
        // Herdr is no longer followed: its roots stop being managed.
        policy.set_derived_roots(&[], home.as_deref());
    })
}
