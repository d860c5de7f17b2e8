//! The operations ledger (spec §2.5): one row per idempotency key and kind of
//! operation, reserved before anything is delivered, settled with the result that a
//! replay returns.
//!
//! The raw key never reaches the database: rows hold a SHA-256 digest of the kind
//! and key, so a leaked `state.db` does not reveal the caller's keys.
//!
//! Row `state` moves `reserved` → `delivered` → `settled`; a row a dead process left
//! `reserved` or `delivered` becomes `interrupted` on the next start, with a result
//! that says truthfully what is known.

use rusqlite::{Connection, OptionalExtension, Row, params};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// How long a ledger row answers replays. Keys are derived per conversation turn,
/// so a day comfortably covers a client's retries without growing forever.
pub const LEDGER_TTL_MS: i64 = 24 * 60 * 60 * 1000;

pub const STATE_RESERVED: &str = "reserved";
pub const STATE_DELIVERED: &str = "delivered";
pub const STATE_SETTLED: &str = "settled";
pub const STATE_INTERRUPTED: &str = "interrupted";

/// The stored form of an idempotency key: `sha256(kind NUL key)` in hex.
pub fn key_digest(kind: &str, key: &str) -> String {
    let mut h = Sha256::new();
    h.update(kind.as_bytes());
    h.update([0u8]);
    h.update(key.as_bytes());
    hex::encode(h.finalize())
}

/// One row of `operations`.
#[derive(Debug, Clone, PartialEq)]
pub struct OpRecord {
    pub op_id: String,
    pub kind: String,
    pub request_hash: String,
    pub phase: String,
    pub state: String,
    pub runtime_generation: Option<String>,
    pub boot_id: String,
    pub created_at: i64,
    pub updated_at: i64,
    pub expires_at: i64,
    pub result: Option<Value>,
}

/// A reservation request.
pub struct NewOp<'a> {
    pub op_id: &'a str,
    pub kind: &'a str,
    pub key_digest: &'a str,
    pub request_hash: &'a str,
    pub phase: &'a str,
    pub boot_id: &'a str,
    pub runtime_generation: Option<&'a str>,
    pub now_ms: i64,
    pub ttl_ms: i64,
}

/// The outcome of [`reserve`].
#[derive(Debug, Clone, PartialEq)]
pub enum Reservation {
    /// This call owns the key now; deliver, then settle.
    Fresh,
    /// The key was already taken (by this request or another one).
    Existing(Box<OpRecord>),
}

const COLUMNS: &str =
    "op_id, kind, request_hash, phase, state, runtime_generation, boot_id, created_at, updated_at, expires_at, result_json";

fn from_row(r: &Row<'_>) -> rusqlite::Result<OpRecord> {
    let result: Option<String> = r.get(10)?;
    Ok(OpRecord {
        op_id: r.get(0)?,
        kind: r.get(1)?,
        request_hash: r.get(2)?,
        phase: r.get(3)?,
        state: r.get(4)?,
        runtime_generation: r.get(5)?,
        boot_id: r.get(6)?,
        created_at: r.get(7)?,
        updated_at: r.get(8)?,
        expires_at: r.get(9)?,
        // A row whose JSON no longer parses is reported as having no result rather
        // than failing the lookup: the caller still learns the key is taken.
        result: result.and_then(|s| serde_json::from_str(&s).ok()),
    })
}

/// Atomically takes the key for `op`, or returns the row that already holds it. An
/// expired row is replaced: its replay window is over.
pub fn reserve(conn: &mut Connection, op: &NewOp<'_>) -> rusqlite::Result<Reservation> {
    let tx = conn.transaction()?;
    tx.execute(
        "DELETE FROM operations WHERE kind = ?1 AND idempotency_key = ?2 AND expires_at <= ?3",
        params![op.kind, op.key_digest, op.now_ms],
    )?;
    let inserted = tx.execute(
        "INSERT INTO operations (op_id, kind, idempotency_key, request_hash, phase, state, runtime_generation, boot_id, \
                                 created_at, updated_at, expires_at, result_json)
         VALUES (?1, ?2, ?3, ?4, ?5, 'reserved', ?6, ?7, ?8, ?8, ?9, NULL)
         ON CONFLICT (kind, idempotency_key) DO NOTHING",
        params![
            op.op_id,
            op.kind,
            op.key_digest,
            op.request_hash,
            op.phase,
            op.runtime_generation,
            op.boot_id,
            op.now_ms,
            op.now_ms + op.ttl_ms
        ],
    )?;
    let outcome = if inserted == 1 {
        Reservation::Fresh
    } else {
        let existing = tx.query_row(
            &format!("SELECT {COLUMNS} FROM operations WHERE kind = ?1 AND idempotency_key = ?2"),
            params![op.kind, op.key_digest],
            from_row,
        )?;
        Reservation::Existing(Box::new(existing))
    };
    tx.commit()?;
    Ok(outcome)
}

/// Moves a row to a new phase/state, optionally recording the result a replay returns.
pub fn update(
    conn: &Connection,
    op_id: &str,
    phase: &str,
    state: &str,
    result: Option<&Value>,
    now_ms: i64,
) -> rusqlite::Result<()> {
    conn.execute(
        "UPDATE operations SET phase = ?2, state = ?3, result_json = COALESCE(?4, result_json), updated_at = ?5 WHERE op_id = ?1",
        params![op_id, phase, state, result.map(Value::to_string), now_ms],
    )?;
    Ok(())
}

/// Drops a reservation that was provably never delivered (a refusal came first), so
/// the same key can be used once the cause is fixed.
pub fn release(conn: &Connection, op_id: &str) -> rusqlite::Result<()> {
    conn.execute("DELETE FROM operations WHERE op_id = ?1 AND state = 'reserved'", [op_id])?;
    Ok(())
}

pub fn get(conn: &Connection, op_id: &str) -> rusqlite::Result<Option<OpRecord>> {
    conn.query_row(&format!("SELECT {COLUMNS} FROM operations WHERE op_id = ?1"), [op_id], from_row).optional()
}

/// Rows that another process reserved or delivered but never settled.
pub fn unsettled_from_other_boots(conn: &Connection, boot_id: &str) -> rusqlite::Result<Vec<OpRecord>> {
    let mut stmt = conn.prepare(&format!(
        "SELECT {COLUMNS} FROM operations WHERE state IN ('reserved', 'delivered') AND boot_id != ?1"
    ))?;
    stmt.query_map([boot_id], from_row)?.collect()
}

pub fn delete_expired(conn: &Connection, now_ms: i64) -> rusqlite::Result<usize> {
    conn.execute("DELETE FROM operations WHERE expires_at <= ?1", [now_ms])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::StateDb;

    fn op<'a>(op_id: &'a str, digest: &'a str, hash: &'a str, now: i64) -> NewOp<'a> {
        NewOp {
            op_id,
            kind: "exec",
            key_digest: digest,
            request_hash: hash,
            phase: "pending",
            boot_id: "b1",
            runtime_generation: None,
            now_ms: now,
            ttl_ms: 100,
        }
    }

    #[test]
    fn digest_hides_the_key_and_separates_kinds() {
        let d = key_digest("exec", "my-key");
        assert_eq!(d.len(), 64);
        assert!(!d.contains("my-key"));
        assert_ne!(d, key_digest("prompt", "my-key"));
    }

    #[test]
    fn second_reservation_sees_the_first_until_it_expires() {
        let tmp = tempfile::tempdir().unwrap();
        let db = StateDb::open(tmp.path(), "b1").unwrap();
        let d = key_digest("exec", "k");
        assert_eq!(db.with(|c| reserve(c, &op("op1", &d, "h1", 1000))).unwrap(), Reservation::Fresh);
        let Reservation::Existing(rec) = db.with(|c| reserve(c, &op("op2", &d, "h2", 1050))).unwrap() else {
            panic!("second reservation must see the first")
        };
        assert_eq!((rec.op_id.as_str(), rec.request_hash.as_str(), rec.state.as_str()), ("op1", "h1", "reserved"));
        let result = serde_json::json!({"ok": true, "n": 1});
        db.with(|c| update(c, "op1", "completed", STATE_SETTLED, Some(&result), 1060)).unwrap();
        assert_eq!(db.with(|c| get(c, "op1")).unwrap().unwrap().result, Some(result));
        // Expiry is exclusive of the last millisecond: created 1000 + ttl 100.
        assert!(matches!(db.with(|c| reserve(c, &op("op3", &d, "h3", 1099))).unwrap(), Reservation::Existing(_)));
        assert_eq!(db.with(|c| reserve(c, &op("op3", &d, "h3", 1100))).unwrap(), Reservation::Fresh);
    }

    #[test]
    fn raw_key_is_never_stored() {
        let tmp = tempfile::tempdir().unwrap();
        let db = StateDb::open(tmp.path(), "b1").unwrap();
        let d = key_digest("exec", "visible-raw-key");
        db.with(|c| reserve(c, &op("op1", &d, "h", 1))).unwrap();
        let stored: String = db.with(|c| c.query_row("SELECT idempotency_key FROM operations", [], |r| r.get(0))).unwrap();
        assert_eq!(stored, d);
        drop(db);
        let bytes = std::fs::read(tmp.path().join("state.db")).unwrap();
        let wal = std::fs::read(tmp.path().join("state.db-wal")).unwrap_or_default();
        let needle = b"visible-raw-key";
        assert!(!bytes.windows(needle.len()).any(|w| w == needle));
        assert!(!wal.windows(needle.len()).any(|w| w == needle));
    }

    #[test]
    fn unsettled_rows_of_other_boots_are_listed() {
        let tmp = tempfile::tempdir().unwrap();
        let db = StateDb::open(tmp.path(), "b1").unwrap();
        let (d1, d2) = (key_digest("exec", "a"), key_digest("exec", "b"));
        db.with(|c| reserve(c, &op("op1", &d1, "h", 1))).unwrap();
        db.with(|c| reserve(c, &op("op2", &d2, "h", 1))).unwrap();
        db.with(|c| update(c, "op2", "completed", STATE_SETTLED, None, 2)).unwrap();
        let left = db.with(|c| unsettled_from_other_boots(c, "b2")).unwrap();
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].op_id, "op1");
        assert!(db.with(|c| unsettled_from_other_boots(c, "b1")).unwrap().is_empty());
    }
}
