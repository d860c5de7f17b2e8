//! Durable rows for forwarded mutations (table `link_requests`). A row is
//! written in state `sent` *before* the frame leaves, so even an edge crash
//! leaves evidence that a change may have reached a workstation; the edge never
//! sends a request twice, so a lost answer becomes `uncertain`, not a retry.
//!
//! States: `sent` → `settled` (an answer came back) | `uncertain` (link lost or
//! timed out after sending) | `not_delivered` (the frame could not be queued).

use rusqlite::{OptionalExtension, params};

use super::store::EdgeStore;

/// Most unsettled mutations per workstation (spec §8: 256 pending).
pub const MAX_PENDING: i64 = 256;
/// Finished rows are kept this long for inspection (spec §8: 10-min replay TTL).
pub const KEEP_FINISHED_MS: i64 = 10 * 60 * 1000;
/// Most finished rows kept per workstation (spec §8: 512 completed).
pub const MAX_FINISHED: i64 = 512;

#[derive(Debug, thiserror::Error)]
pub enum PendingError {
    #[error("workstation {0} already has {MAX_PENDING} unsettled mutations")]
    Full(String),
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
}

/// Records a mutation as `sent`; refuses past [`MAX_PENDING`] unsettled rows.
pub fn record_sent(store: &EdgeStore, request_id: &str, workstation_id: &str, operation: &str, idempotency_key: Option<&str>) -> Result<(), PendingError> {
    let now = store.now_ms();
    store.write(|tx| {
        let unsettled: i64 = tx.query_row(
            "SELECT COUNT(*) FROM link_requests WHERE workstation_id = ?1 AND state = 'sent'",
            params![workstation_id],
            |r| r.get(0),
        )?;
        if unsettled >= MAX_PENDING {
            return Err(PendingError::Full(workstation_id.into()));
        }
        tx.execute(
            "INSERT INTO link_requests (request_id, workstation_id, operation, idempotency_key, state, created_at_ms, updated_at_ms)
             VALUES (?1, ?2, ?3, ?4, 'sent', ?5, ?5)",
            params![request_id, workstation_id, operation, idempotency_key, now],
        )?;
        Ok(())
    })
}

/// Moves a `sent` row to its final state and prunes old finished rows.
pub fn finish(store: &EdgeStore, request_id: &str, state: &str, outcome: &str) -> Result<(), rusqlite::Error> {
    let now = store.now_ms();
    store.write(|tx| {
        let ws: Option<String> = tx
            .query_row("SELECT workstation_id FROM link_requests WHERE request_id = ?1", params![request_id], |r| r.get(0))
            .optional()?;
        tx.execute(
            "UPDATE link_requests SET state = ?2, outcome = ?3, updated_at_ms = ?4 WHERE request_id = ?1 AND state = 'sent'",
            params![request_id, state, outcome, now],
        )?;
        if let Some(ws) = ws {
            tx.execute(
                "DELETE FROM link_requests WHERE workstation_id = ?1 AND state != 'sent' AND (updated_at_ms < ?2 OR request_id IN (
                    SELECT request_id FROM link_requests WHERE workstation_id = ?1 AND state != 'sent'
                    ORDER BY updated_at_ms DESC LIMIT -1 OFFSET ?3))",
                params![ws, now - KEEP_FINISHED_MS, MAX_FINISHED],
            )?;
        }
        Ok(())
    })
}

/// At edge start: rows left `sent` by a previous process can no longer be
/// answered; they become `uncertain`. Returns how many.
pub fn settle_orphans(store: &EdgeStore) -> Result<usize, rusqlite::Error> {
    let now = store.now_ms();
    store.write(|tx| {
        tx.execute(
            "UPDATE link_requests SET state = 'uncertain', outcome = 'edge_restarted', updated_at_ms = ?1 WHERE state = 'sent'",
            params![now],
        )
    })
}

/// (state, outcome) of one row, for tests and diagnostics.
pub fn state_of(store: &EdgeStore, request_id: &str) -> Result<Option<(String, Option<String>)>, rusqlite::Error> {
    store.read(|tx| {
        tx.query_row("SELECT state, outcome FROM link_requests WHERE request_id = ?1", params![request_id], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()
    })
}

/// Every row of one workstation as (request_id, operation, state), oldest first.
pub fn rows_of(store: &EdgeStore, workstation_id: &str) -> Result<Vec<(String, String, String)>, rusqlite::Error> {
    store.read(|tx| {
        let mut stmt = tx.prepare(
            "SELECT request_id, operation, state FROM link_requests WHERE workstation_id = ?1 ORDER BY created_at_ms, rowid",
        )?;
        let rows = stmt.query_map(params![workstation_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        rows.collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edge::clock::ManualClock;
    use std::sync::Arc;

    fn store() -> (tempfile::TempDir, EdgeStore, ManualClock) {
        let tmp = tempfile::tempdir().unwrap();
        EdgeStore::init(tmp.path()).unwrap();
        let clock = ManualClock::new(1_000_000);
        let store = EdgeStore::open(tmp.path(), Arc::new(clock.clone())).unwrap();
        (tmp, store, clock)
    }

    #[test]
    fn sent_then_finished_and_capacity() {
        let (_t, s, _c) = store();
        for i in 0..MAX_PENDING {
            record_sent(&s, &format!("r{i}"), "ws", "herdr_fs_write", None).unwrap();
        }
        assert!(matches!(record_sent(&s, "over", "ws", "herdr_fs_write", None), Err(PendingError::Full(_))));
        record_sent(&s, "other", "ws2", "herdr_fs_write", Some("k")).unwrap();
        finish(&s, "r0", "settled", "tool_result").unwrap();
        assert_eq!(state_of(&s, "r0").unwrap(), Some(("settled".into(), Some("tool_result".into()))));
        record_sent(&s, "room", "ws", "herdr_exec", None).unwrap();
        // A finished row is final.
        finish(&s, "r0", "uncertain", "late").unwrap();
        assert_eq!(state_of(&s, "r0").unwrap().unwrap().0, "settled");
        assert_eq!(settle_orphans(&s).unwrap(), MAX_PENDING as usize + 1);
        assert_eq!(state_of(&s, "other").unwrap().unwrap().0, "uncertain");
    }

    #[test]
    fn finished_rows_expire() {
        let (_t, s, c) = store();
        record_sent(&s, "old", "ws", "herdr_exec", None).unwrap();
        finish(&s, "old", "settled", "tool_result").unwrap();
        c.advance_ms(KEEP_FINISHED_MS + 1);
        record_sent(&s, "new", "ws", "herdr_exec", None).unwrap();
        finish(&s, "new", "uncertain", "link_lost").unwrap();
        assert_eq!(state_of(&s, "old").unwrap(), None);
        assert_eq!(rows_of(&s, "ws").unwrap(), vec![("new".into(), "herdr_exec".into(), "uncertain".into())]);
    }
}
