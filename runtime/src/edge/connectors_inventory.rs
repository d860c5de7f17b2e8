//! The connector inventory (spec §5): what `GET /connectors` answers and
//! `herdr-mcp connector list` prints.
//!
//! - `connectors`: every connector an operator approved, active or revoked, with
//!   its client's name, approval time (`created_at_ms`), throttled last use and the
//!   number of its live tokens; `grant_origin` is always `explicit_approval`.
//! - `legacy_clients`: clients holding a grant with no connector. Upstream those
//!   are pre-v0.4.6 grants that still work; this edge never grants without an
//!   approval, so its only such grants are the tombstones `revoke-client` leaves on
//!   a client that was never approved. They are listed (`pre_v0_4_6_legacy`, status
//!   `revoked`) so the operator can see which clients are fenced and since when;
//!   they can hold no token, hence no token counts.
//! - `token_counts`: live tokens over all connectors, listed or not.
//!
//! A token is live while it can still be used: unexpired, its connector active and
//! of the token's grant generation, and for a refresh token not yet rotated away —
//! the same tests `/mcp` and `/oauth/token` apply. Each list holds at most
//! [`MAX_ENTRIES`], newest first; `total_connectors` and `total_legacy_clients`
//! say how many exist, so a cut list is visible as such.

use rusqlite::{Transaction, params};
use serde::{Deserialize, Serialize};

use super::connectors_revoke_client::NO_CONNECTOR;
use super::store::EdgeStore;

/// The most entries in each of `connectors` and `legacy_clients`.
pub const MAX_ENTRIES: i64 = 256;
pub const EXPLICIT_APPROVAL: &str = "explicit_approval";
pub const LEGACY_ORIGIN: &str = "pre_v0_4_6_legacy";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConnectorView {
    pub connector_id: String,
    pub client_id: String,
    /// The name the client registered with, if it gave one.
    pub client_name: Option<String>,
    pub status: String,
    pub grant_origin: String,
    pub grant_generation: i64,
    /// When the operator approved it (the connector's birth).
    pub created_at_ms: i64,
    pub approved_at_ms: i64,
    pub last_used_at_ms: Option<i64>,
    pub revoked_at_ms: Option<i64>,
    pub revoked_by: Option<String>,
    pub active_access_tokens: i64,
    pub active_refresh_tokens: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LegacyClient {
    pub client_id: String,
    pub client_name: Option<String>,
    pub grant_origin: String,
    /// The grant's status; `revoked` for every tombstone.
    pub status: String,
    /// When the client registered, if known.
    pub created_at_ms: Option<i64>,
    /// Never known: a client without a connector has no use to record.
    pub last_used_at_ms: Option<i64>,
    pub revoked_at_ms: Option<i64>,
    pub revoked_by: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenCounts {
    pub active_access_tokens: i64,
    pub active_refresh_tokens: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Inventory {
    pub connectors: Vec<ConnectorView>,
    pub total_connectors: i64,
    pub legacy_clients: Vec<LegacyClient>,
    pub total_legacy_clients: i64,
    pub token_counts: TokenCounts,
    pub observed_at_ms: i64,
}

/// Live tokens of connector `k` (an alias in the enclosing query); `?1` is now.
const LIVE_ACCESS: &str = "SELECT COUNT(*) FROM tokens t WHERE t.connector_id = k.connector_id AND t.kind = 'access'
     AND t.expires_at_ms > ?1 AND k.status = 'active' AND t.grant_generation = k.grant_generation";
const LIVE_REFRESH: &str = "SELECT COUNT(*) FROM tokens t WHERE t.connector_id = k.connector_id AND t.kind = 'refresh'
     AND t.used = 0 AND t.expires_at_ms > ?1 AND k.status = 'active' AND t.grant_generation = k.grant_generation";

/// The whole inventory, read in one snapshot.
pub fn inventory(store: &EdgeStore) -> rusqlite::Result<Inventory> {
    let now = store.now_ms();
    store.read(|tx| {
        Ok(Inventory {
            connectors: connectors(tx, now)?,
            total_connectors: tx.query_row("SELECT COUNT(*) FROM connectors", [], |r| r.get(0))?,
            legacy_clients: legacy_clients(tx)?,
            total_legacy_clients: tx.query_row("SELECT COUNT(*) FROM grants WHERE connector_id = ?1", [NO_CONNECTOR], |r| r.get(0))?,
            token_counts: token_counts(tx, now)?,
            observed_at_ms: now,
        })
    })
}

/// The connectors alone: newest approval first, at most [`MAX_ENTRIES`].
pub fn list(store: &EdgeStore) -> rusqlite::Result<Vec<ConnectorView>> {
    let now = store.now_ms();
    store.read(|tx| connectors(tx, now))
}

fn connectors(tx: &Transaction<'_>, now: i64) -> rusqlite::Result<Vec<ConnectorView>> {
    let mut stmt = tx.prepare(&format!(
        "SELECT k.connector_id, k.client_id, c.client_name, k.status, k.grant_generation, k.approved_at_ms,
                k.last_used_at_ms, k.revoked_at_ms, k.revoked_by, ({LIVE_ACCESS}), ({LIVE_REFRESH})
         FROM connectors k LEFT JOIN clients c ON c.client_id = k.client_id
         ORDER BY k.approved_at_ms DESC, k.connector_id LIMIT ?2"
    ))?;
    let rows = stmt.query_map(params![now, MAX_ENTRIES], |r| {
        let approved_at_ms = r.get(5)?;
        Ok(ConnectorView {
            connector_id: r.get(0)?,
            client_id: r.get(1)?,
            client_name: r.get(2)?,
            status: r.get(3)?,
            grant_origin: EXPLICIT_APPROVAL.to_string(),
            grant_generation: r.get(4)?,
            created_at_ms: approved_at_ms,
            approved_at_ms,
            last_used_at_ms: r.get(6)?,
            revoked_at_ms: r.get(7)?,
            revoked_by: r.get(8)?,
            active_access_tokens: r.get(9)?,
            active_refresh_tokens: r.get(10)?,
        })
    })?;
    rows.collect()
}

/// Newest registration first; tombstones from before their time was recorded last.
fn legacy_clients(tx: &Transaction<'_>) -> rusqlite::Result<Vec<LegacyClient>> {
    let mut stmt = tx.prepare(
        "SELECT g.client_id, COALESCE(c.client_name, g.client_name), g.status,
                COALESCE(c.created_at_ms, g.client_created_at_ms) AS created, g.revoked_at_ms, g.revoked_by
         FROM grants g LEFT JOIN clients c ON c.client_id = g.client_id
         WHERE g.connector_id = ?1
         ORDER BY created DESC NULLS LAST, g.revoked_at_ms DESC NULLS LAST, g.client_id LIMIT ?2",
    )?;
    let rows = stmt.query_map(params![NO_CONNECTOR, MAX_ENTRIES], |r| {
        Ok(LegacyClient {
            client_id: r.get(0)?,
            client_name: r.get(1)?,
            grant_origin: LEGACY_ORIGIN.to_string(),
            status: r.get(2)?,
            created_at_ms: r.get(3)?,
            last_used_at_ms: None,
            revoked_at_ms: r.get(4)?,
            revoked_by: r.get(5)?,
        })
    })?;
    rows.collect()
}

fn token_counts(tx: &Transaction<'_>, now: i64) -> rusqlite::Result<TokenCounts> {
    tx.query_row(
        "SELECT COUNT(*) FILTER (WHERE t.kind = 'access'), COUNT(*) FILTER (WHERE t.kind = 'refresh' AND t.used = 0)
         FROM tokens t JOIN connectors k ON k.connector_id = t.connector_id
         WHERE t.expires_at_ms > ?1 AND k.status = 'active' AND t.grant_generation = k.grant_generation",
        [now],
        |r| Ok(TokenCounts { active_access_tokens: r.get(0)?, active_refresh_tokens: r.get(1)? }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edge::clock::ManualClock;
    use std::sync::Arc;

    /// Tombstones written before their times were recorded (schema 5) carry none;
    /// they come after the dated ones, and a connector's own grant is no legacy client.
    #[test]
    fn undated_tombstones_list_last_and_connector_grants_not_at_all() {
        let tmp = tempfile::tempdir().unwrap();
        EdgeStore::init(tmp.path()).unwrap();
        let store = EdgeStore::open(tmp.path(), Arc::new(ManualClock::new(1_000))).unwrap();
        store
            .write(|tx| {
                let insert = "INSERT INTO grants (client_id, connector_id, status, client_created_at_ms) VALUES (?1, ?2, ?3, ?4)";
                tx.execute(insert, params!["undated", NO_CONNECTOR, "revoked", None::<i64>])?;
                tx.execute(insert, params!["older", NO_CONNECTOR, "revoked", 10])?;
                tx.execute(insert, params!["newer", NO_CONNECTOR, "revoked", 20])?;
                tx.execute(insert, params!["approved", "conn_AAAAAAAAAAAA", "active", 30])
            })
            .unwrap();
        let inv = inventory(&store).unwrap();
        let ids: Vec<&str> = inv.legacy_clients.iter().map(|c| c.client_id.as_str()).collect();
        assert_eq!((ids, inv.total_legacy_clients), (vec!["newer", "older", "undated"], 3));
        assert!(inv.legacy_clients.iter().all(|c| c.grant_origin == LEGACY_ORIGIN && c.last_used_at_ms.is_none()));
        assert_eq!((inv.total_connectors, inv.token_counts, inv.observed_at_ms), (0, TokenCounts::default(), 1_000));
    }
}
