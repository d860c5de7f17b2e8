//! The prompt registry behind `herdr_prompt`'s `idempotency_key`: a short-lived,
//! bounded record of which keyed prompts were sent and what they answered.
//!
//! Entries live [`PROMPT_TTL_MS`] (10 min) and at most [`PROMPT_REGISTRY_MAX`] (512) are
//! kept; when full, the oldest completed entry makes room. Pending entries are never
//! evicted (that would allow a second delivery), so 512 prompts in flight at once
//! refuse a new key with [`PromptReservation::Full`].

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::Value;

pub const PROMPT_TTL_MS: i64 = 10 * 60 * 1000;
pub const PROMPT_REGISTRY_MAX: i64 = 512;

/// The stored form of a prompt idempotency key.
pub fn key_digest(key: &str) -> String {
    super::ledger::key_digest("prompt", key)
}

/// One registry entry.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptEntry {
    pub fingerprint: String,
    /// `pending` or `completed`.
    pub state: String,
    pub boot_id: String,
    pub created_at: i64,
    pub result: Option<Value>,
}

/// What [`reserve`] found.
#[derive(Debug, Clone, PartialEq)]
pub enum PromptReservation {
    /// The key is ours: deliver the prompt, then [`complete`] (or [`release`] when
    /// nothing was sent).
    Fresh,
    /// Same key, same fingerprint, already answered: return this result as a replay.
    Replay(Value),
    /// Same key, same fingerprint, not answered yet (`idempotency_in_flight`).
    InFlight(PromptEntry),
    /// Same key, different fingerprint (`idempotency_key_conflict`).
    Conflict(PromptEntry),
    /// 512 prompts are pending; nothing may be evicted safely.
    Full,
}

pub fn reserve(
    conn: &mut Connection,
    key_digest: &str,
    fingerprint: &str,
    boot_id: &str,
    now_ms: i64,
) -> rusqlite::Result<PromptReservation> {
    let tx = conn.transaction()?;
    tx.execute("DELETE FROM prompt_registry WHERE expires_at <= ?1", [now_ms])?;
    if let Some(entry) = select(&tx, key_digest)? {
        let outcome = if entry.fingerprint != fingerprint {
            PromptReservation::Conflict(entry)
        } else if entry.state == "completed" {
            PromptReservation::Replay(entry.result.unwrap_or(Value::Null))
        } else {
            PromptReservation::InFlight(entry)
        };
        tx.commit()?;
        return Ok(outcome);
    }
    let count: i64 = tx.query_row("SELECT COUNT(*) FROM prompt_registry", [], |r| r.get(0))?;
    if count >= PROMPT_REGISTRY_MAX {
        let evicted = tx.execute(
            "DELETE FROM prompt_registry WHERE key_digest IN (SELECT key_digest FROM prompt_registry \
             WHERE state = 'completed' ORDER BY created_at, key_digest LIMIT ?1)",
            [count - PROMPT_REGISTRY_MAX + 1],
        )?;
        if (count - evicted as i64) >= PROMPT_REGISTRY_MAX {
            tx.commit()?;
            return Ok(PromptReservation::Full);
        }
    }
    tx.execute(
        "INSERT INTO prompt_registry (key_digest, fingerprint, state, boot_id, created_at, updated_at, expires_at, result_json)
         VALUES (?1, ?2, 'pending', ?3, ?4, ?4, ?5, NULL)",
        params![key_digest, fingerprint, boot_id, now_ms, now_ms + PROMPT_TTL_MS],
    )?;
    tx.commit()?;
    Ok(PromptReservation::Fresh)
}

/// Records the answer of a delivered prompt; replays return it until the entry expires.
pub fn complete(conn: &Connection, key_digest: &str, result: &Value, now_ms: i64) -> rusqlite::Result<()> {
    conn.execute(
        "UPDATE prompt_registry SET state = 'completed', result_json = ?2, updated_at = ?3 WHERE key_digest = ?1",
        params![key_digest, result.to_string(), now_ms],
    )?;
    Ok(())
}

/// Forgets a reservation whose prompt was provably never sent, so a retry may send it.
pub fn release(conn: &Connection, key_digest: &str) -> rusqlite::Result<()> {
    conn.execute("DELETE FROM prompt_registry WHERE key_digest = ?1 AND state = 'pending'", [key_digest])?;
    Ok(())
}

/// The live entry for a key (expired entries count as absent).
pub fn get(conn: &Connection, key_digest: &str, now_ms: i64) -> rusqlite::Result<Option<PromptEntry>> {
    Ok(select(conn, key_digest)?.filter(|_| {
        conn.query_row("SELECT expires_at FROM prompt_registry WHERE key_digest = ?1", [key_digest], |r| {
            r.get::<_, i64>(0)
        })
        .map(|exp| exp > now_ms)
        .unwrap_or(false)
    }))
}

fn select(conn: &Connection, key_digest: &str) -> rusqlite::Result<Option<PromptEntry>> {
    conn.query_row(
        "SELECT fingerprint, state, boot_id, created_at, result_json FROM prompt_registry WHERE key_digest = ?1",
        [key_digest],
        |r| {
            let result: Option<String> = r.get(4)?;
            Ok(PromptEntry {
                fingerprint: r.get(0)?,
                state: r.get(1)?,
                boot_id: r.get(2)?,
                created_at: r.get(3)?,
                result: result.and_then(|s| serde_json::from_str(&s).ok()),
            })
        },
    )
    .optional()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::StateDb;
    use serde_json::json;

    fn db() -> (tempfile::TempDir, StateDb) {
        let tmp = tempfile::tempdir().unwrap();
        let db = StateDb::open(tmp.path(), "b").unwrap();
        (tmp, db)
    }

    #[test]
    fn replay_in_flight_conflict_and_expiry() {
        let (_t, db) = db();
        let k = key_digest("k");
        assert_eq!(db.with(|c| reserve(c, &k, "f1", "b", 0)).unwrap(), PromptReservation::Fresh);
        assert!(matches!(db.with(|c| reserve(c, &k, "f1", "b", 1)).unwrap(), PromptReservation::InFlight(_)));
        assert!(matches!(db.with(|c| reserve(c, &k, "f2", "b", 1)).unwrap(), PromptReservation::Conflict(_)));
        db.with(|c| complete(c, &k, &json!({"ok": true}), 2)).unwrap();
        assert_eq!(db.with(|c| reserve(c, &k, "f1", "b", 3)).unwrap(), PromptReservation::Replay(json!({"ok": true})));
        assert!(db.with(|c| get(c, &k, PROMPT_TTL_MS - 1)).unwrap().is_some());
        assert!(db.with(|c| get(c, &k, PROMPT_TTL_MS)).unwrap().is_none());
        assert_eq!(db.with(|c| reserve(c, &k, "f2", "b", PROMPT_TTL_MS)).unwrap(), PromptReservation::Fresh);
    }

    #[test]
    fn release_frees_only_pending_keys() {
        let (_t, db) = db();
        let k = key_digest("k");
        db.with(|c| reserve(c, &k, "f", "b", 0)).unwrap();
        db.with(|c| release(c, &k)).unwrap();
        assert_eq!(db.with(|c| reserve(c, &k, "f", "b", 1)).unwrap(), PromptReservation::Fresh);
        db.with(|c| complete(c, &k, &json!(1), 2)).unwrap();
        db.with(|c| release(c, &k)).unwrap();
        assert_eq!(db.with(|c| reserve(c, &k, "f", "b", 3)).unwrap(), PromptReservation::Replay(json!(1)));
    }

    #[test]
    fn at_the_cap_the_oldest_completed_entry_makes_room_and_pending_ones_never_do() {
        let (_t, db) = db();
        for i in 0..PROMPT_REGISTRY_MAX {
            let k = key_digest(&format!("k{i}"));
            assert_eq!(db.with(|c| reserve(c, &k, "f", "b", i)).unwrap(), PromptReservation::Fresh);
        }
        // 512 pending: a 513th key is refused, nothing evicted.
        assert_eq!(db.with(|c| reserve(c, &key_digest("new"), "f", "b", 600)).unwrap(), PromptReservation::Full);
        db.with(|c| complete(c, &key_digest("k5"), &json!(5), 601)).unwrap();
        db.with(|c| complete(c, &key_digest("k3"), &json!(3), 601)).unwrap();
        assert_eq!(db.with(|c| reserve(c, &key_digest("new"), "f", "b", 602)).unwrap(), PromptReservation::Fresh);
        // k3 was the oldest completed entry; k5 survives.
        assert!(db.with(|c| get(c, &key_digest("k3"), 603)).unwrap().is_none());
        assert!(db.with(|c| get(c, &key_digest("k5"), 603)).unwrap().is_some());
        let n: i64 = db.with(|c| c.query_row("SELECT COUNT(*) FROM prompt_registry", [], |r| r.get(0))).unwrap();
        assert_eq!(n, PROMPT_REGISTRY_MAX);
    }
}
