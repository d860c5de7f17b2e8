//! Taking a full picture of Herdr: `session.snapshot` reconciled with the list
//! APIs, or the list APIs alone when the snapshot fails.

use serde_json::{Value, json};

use super::client::HerdrClient;
use super::error::HerdrError;
use super::topology::Topology;

/// Warning recorded when `session.snapshot` failed and the lists were used instead.
pub const SNAPSHOT_FALLBACK_WARNING: &str = "snapshot_failed_used_list_apis";

async fn lists(client: &HerdrClient) -> Result<(Value, Value, Value), HerdrError> {
    tokio::try_join!(
        client.call("workspace.list", json!({})),
        client.call("pane.list", json!({})),
        client.call("agent.list", json!({})),
    )
}

/// The current topology and any warnings. Fails only when neither the snapshot nor
/// the lists can be had.
pub async fn fetch_topology(client: &HerdrClient) -> Result<(Topology, Vec<String>), HerdrError> {
    match client.call("session.snapshot", json!({})).await {
        Ok(result) => {
            let mut topology = Topology::from_snapshot(&result);
            // The lists carry fields the snapshot may lack (agent details, rollups).
            if let Ok((w, p, a)) = lists(client).await {
                topology.replace_lists(&w, &p, &a);
            }
            Ok((topology, vec![]))
        }
        Err(e) if e.is_unavailable() => Err(e),
        Err(_) => {
            let (w, p, a) = lists(client).await?;
            let mut topology = Topology::default();
            topology.replace_lists(&w, &p, &a);
            if let Ok(tabs) = client.call("tab.list", json!({})).await {
                topology.tabs = tabs.get("tabs").and_then(Value::as_array).cloned().unwrap_or_default();
            }
            Ok((topology, vec![SNAPSHOT_FALLBACK_WARNING.to_string()]))
        }
    }
}
