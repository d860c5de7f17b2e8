//! Rejecting an approved request whose stored record turned out damaged, and
//! taking back what its approval created.
//!
//! [`super::connectors::approve`] made a connector and an active grant for the
//! request's client. Left behind, that grant would answer the client's next
//! authorize with a code at once, so the operator's approval of a request that
//! never completed would stand for good. In the same transaction that rejects
//! the request, the connector, its grant and its authorization codes go too,
//! and the client's next authorize asks for approval afresh. They stay when
//! something else stands on them: tokens already issued (a live connector, as
//! for `connector cancel`), or an approval of the same connector that can
//! still be polled (an identical request approved together with this one).

use rusqlite::{OptionalExtension, Transaction, params};

/// What rejecting the damaged request did to its connector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Withdrawal {
    /// The connector, its grant and its codes were deleted.
    Withdrawn,
    /// Kept: it has issued tokens or another approval still leads to it.
    InUse,
    /// There was no connector (already gone, or never created).
    Absent,
}

/// Marks `request_id` rejected and withdraws its connector unless it is in use.
pub fn reject_damaged(
    tx: &Transaction<'_>,
    request_id: &str,
    connector_id: &str,
    now_ms: i64,
) -> rusqlite::Result<Withdrawal> {
    tx.execute("UPDATE approvals SET status = 'rejected' WHERE request_id = ?1", [request_id])?;
    let issued: Option<i64> = tx
        .query_row("SELECT token_issue_count FROM connectors WHERE connector_id = ?1", [connector_id], |r| r.get(0))
        .optional()?;
    let Some(issued) = issued else { return Ok(Withdrawal::Absent) };
    // The poll of an approved request past its expiry answers `expired`, so
    // only unexpired ones could still mint a code under this connector.
    let pollable: i64 = tx.query_row(
        "SELECT COUNT(*) FROM approvals WHERE connector_id = ?1 AND request_id != ?2 AND status = 'approved' AND expires_at_ms > ?3",
        params![connector_id, request_id, now_ms],
        |r| r.get(0),
    )?;
    if issued > 0 || pollable > 0 {
        return Ok(Withdrawal::InUse);
    }
    // A code an earlier poll of this request minted, before the damage, dies
    // with the request (its exchange would find no connector anyway).
    super::connectors::delete_connector(tx, connector_id)?;
    // `clients.approved` stays set, as after `connector cancel`: it only spares
    // the registration from the purge of never-approved clients, and the client
    // must stay registered to ask again.
    Ok(Withdrawal::Withdrawn)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::edge::clock::ManualClock;
    use crate::edge::store::EdgeStore;

    const NOW: i64 = 1_800_000_000_000;

    fn store() -> (tempfile::TempDir, EdgeStore) {
        let tmp = tempfile::tempdir().unwrap();
        EdgeStore::init(tmp.path()).unwrap();
        let store = EdgeStore::open(tmp.path(), Arc::new(ManualClock::new(NOW))).unwrap();
        (tmp, store)
    }

    /// An approved request `rid` of client `cl` for connector `conn`, as `approve` leaves it.
    fn approved(store: &EdgeStore, rid: &str, expires_at_ms: i64) {
        store
            .write(|tx| {
                tx.execute(
                    "INSERT INTO approvals (request_id, client_id, connector_id, auth_source, redirect_uri, code_challenge,
                        resource, scope, code_hash, resume_hash, created_at_ms, expires_at_ms, status)
                     VALUES (?1, 'cl', 'conn', 'dcr', 'https://a.example/cb', 'ch', 'r', 'mcp', 'h', 'h', 0, ?2, 'approved')",
                    params![rid, expires_at_ms],
                )?;
                tx.execute(
                    "INSERT OR IGNORE INTO connectors (connector_id, client_id, status, resource, scope, redirect_uri, auth_source,
                        grant_generation, approved_at_ms, approved_by, token_issue_count)
                     VALUES ('conn', 'cl', 'active', 'r', 'mcp', 'https://a.example/cb', 'dcr', 1, 0, 't', 0)",
                    [],
                )?;
                tx.execute("INSERT OR IGNORE INTO grants (client_id, connector_id, status) VALUES ('cl', 'conn', 'active')", [])
            })
            .unwrap();
    }

    fn count(store: &EdgeStore, table: &str) -> i64 {
        store.read(|tx| tx.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))).unwrap()
    }

    fn reject(store: &EdgeStore, rid: &str) -> Withdrawal {
        store.write(|tx| reject_damaged(tx, rid, "conn", NOW)).unwrap()
    }

    #[test]
    fn an_unused_connector_goes_with_its_grant() {
        let (_t, store) = store();
        approved(&store, "req_a", NOW + 1);
        assert_eq!(reject(&store, "req_a"), Withdrawal::Withdrawn);
        assert_eq!((count(&store, "connectors"), count(&store, "grants")), (0, 0));
        let status: String =
            store.read(|tx| tx.query_row("SELECT status FROM approvals WHERE request_id = 'req_a'", [], |r| r.get(0))).unwrap();
        assert_eq!(status, "rejected");
        assert_eq!(reject(&store, "req_a"), Withdrawal::Absent, "a second rejection finds nothing left");
    }

    #[test]
    fn a_sibling_that_can_still_be_polled_keeps_the_connector_until_it_expires() {
        let (_t, store) = store();
        approved(&store, "req_a", NOW + 1);
        approved(&store, "req_b", NOW + 1);
        assert_eq!(reject(&store, "req_a"), Withdrawal::InUse);
        assert_eq!((count(&store, "connectors"), count(&store, "grants")), (1, 1));

        // A sibling expiring exactly now can no longer be polled.
        let (_t, store) = self::store();
        approved(&store, "req_a", NOW + 1);
        approved(&store, "req_b", NOW);
        assert_eq!(reject(&store, "req_a"), Withdrawal::Withdrawn);
    }

    #[test]
    fn a_connector_with_issued_tokens_stays() {
        let (_t, store) = store();
        approved(&store, "req_a", NOW + 1);
        store.write(|tx| tx.execute("UPDATE connectors SET token_issue_count = 1", [])).unwrap();
        assert_eq!(reject(&store, "req_a"), Withdrawal::InUse);
        assert_eq!((count(&store, "connectors"), count(&store, "grants")), (1, 1));
    }
}
