//! The edge link's kept mutation answers, on disk (spec edge.md §8 `resume`).
//!
//! The link keeps each mutation's answer frame until the edge's `hello_ack`
//! says it is no longer wanted ([`crate::link::outbox`]). In memory alone, a
//! runtime restarted after a change ran but before the edge got its answer
//! would lose it, and the edge could only ever report `delivery_uncertain`.
//! These rows carry the answers over to the next process. A workstation's rows
//! have one writer at a time: the process holding its
//! [`crate::link::holder_lock`], which `serve --link` and `link` both take
//! before they read or write them.
//!
//! The limits are the in-memory ones and are enforced on every write and on
//! load, oldest answer first, so a database that outlived a crash, a longer
//! downtime or an older build never yields more than the link may keep.

use rusqlite::{Connection, params};

use crate::link::outbox::{KEEP_FOR, MAX_KEPT, MAX_KEPT_BYTES};

/// One kept answer: the exact frame text that was (or was to be) sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredAnswer {
    pub request_id: String,
    pub frame: String,
    pub kept_at_ms: i64,
}

fn keep_for_ms() -> i64 {
    KEEP_FOR.as_millis() as i64
}

/// Stores `frame` as the answer to `request_id` of `workstation_id` (replacing
/// an earlier one of the same id), then applies the TTL and the caps.
pub fn keep(conn: &mut Connection, workstation_id: &str, request_id: &str, frame: &str, now_ms: i64) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    // Delete then insert, so a replaced answer counts as the newest.
    tx.execute("DELETE FROM link_answers WHERE workstation_id = ?1 AND request_id = ?2", params![workstation_id, request_id])?;
    tx.execute(
        "INSERT INTO link_answers (workstation_id, request_id, frame, bytes, kept_at_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![workstation_id, request_id, frame, frame.len() as i64, now_ms],
    )?;
    trim(&tx, workstation_id, now_ms)?;
    tx.commit()
}

/// The answers still within the TTL and the caps, oldest first; the others are
/// deleted on the way.
pub fn load(conn: &mut Connection, workstation_id: &str, now_ms: i64) -> rusqlite::Result<Vec<StoredAnswer>> {
    let tx = conn.transaction()?;
    trim(&tx, workstation_id, now_ms)?;
    let rows = {
        let mut stmt = tx.prepare(
            "SELECT request_id, frame, kept_at_ms FROM link_answers WHERE workstation_id = ?1 ORDER BY seq",
        )?;
        stmt.query_map([workstation_id], |r| Ok(StoredAnswer { request_id: r.get(0)?, frame: r.get(1)?, kept_at_ms: r.get(2)? }))?
            .collect::<rusqlite::Result<Vec<_>>>()?
    };
    tx.commit()?;
    Ok(rows)
}

/// Deletes the named answers (the edge no longer wants them).
pub fn forget(conn: &mut Connection, workstation_id: &str, request_ids: &[String]) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    {
        let mut stmt = tx.prepare("DELETE FROM link_answers WHERE workstation_id = ?1 AND request_id = ?2")?;
        for id in request_ids {
            stmt.execute(params![workstation_id, id])?;
        }
    }
    tx.commit()
}

/// TTL first (an answer exactly [`KEEP_FOR`] old is still kept, as in memory),
/// then the oldest answers until both caps hold.
fn trim(conn: &Connection, workstation_id: &str, now_ms: i64) -> rusqlite::Result<()> {
    conn.execute(
        "DELETE FROM link_answers WHERE workstation_id = ?1 AND kept_at_ms < ?2",
        params![workstation_id, now_ms - keep_for_ms()],
    )?;
    // Newest first, the running totals tell which older rows no longer fit.
    conn.execute(
        "DELETE FROM link_answers WHERE seq IN (
            SELECT seq FROM (
                SELECT seq,
                       ROW_NUMBER() OVER (ORDER BY seq DESC) AS n,
                       SUM(bytes) OVER (ORDER BY seq DESC ROWS UNBOUNDED PRECEDING) AS total
                FROM link_answers WHERE workstation_id = ?1)
            WHERE n > ?2 OR total > ?3)",
        params![workstation_id, MAX_KEPT as i64, MAX_KEPT_BYTES as i64],
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::StateDb;

    const WS: &str = "dev_ws";

    fn db() -> (tempfile::TempDir, StateDb) {
        let tmp = tempfile::tempdir().unwrap();
        let db = StateDb::open(tmp.path(), "b1").unwrap();
        (tmp, db)
    }

    fn ids(db: &StateDb, now: i64) -> Vec<String> {
        db.with(|c| load(c, WS, now)).unwrap().into_iter().map(|a| a.request_id).collect()
    }

    #[test]
    fn answers_round_trip_exactly_and_per_workstation() {
        let (_tmp, db) = db();
        let frame = r#"{"protocol_version":1,"kind":"tool_result","request_id":"r1","ünïcode":"✓"}"#;
        db.with(|c| keep(c, WS, "r1", frame, 1000)).unwrap();
        db.with(|c| keep(c, "dev_other", "r2", "other", 1000)).unwrap();
        let got = db.with(|c| load(c, WS, 1000)).unwrap();
        assert_eq!(got, [StoredAnswer { request_id: "r1".into(), frame: frame.into(), kept_at_ms: 1000 }]);
        db.with(|c| forget(c, WS, &["r1".into(), "unknown".into()])).unwrap();
        assert!(ids(&db, 1000).is_empty());
        assert_eq!(db.with(|c| load(c, "dev_other", 1000)).unwrap().len(), 1, "another workstation's answers are untouched");
    }

    #[test]
    fn the_65th_answer_pushes_out_the_oldest() {
        let (_tmp, db) = db();
        for i in 0..MAX_KEPT {
            db.with(|c| keep(c, WS, &format!("m{i}"), "x", 1000)).unwrap();
        }
        let kept = ids(&db, 1000);
        assert_eq!((kept.len(), kept[0].as_str()), (MAX_KEPT, "m0"), "64 answers all fit");
        db.with(|c| keep(c, WS, &format!("m{MAX_KEPT}"), "x", 1000)).unwrap();
        let kept = ids(&db, 1000);
        assert_eq!(kept.len(), MAX_KEPT);
        assert_eq!((kept[0].as_str(), kept[MAX_KEPT - 1].as_str()), ("m1", "m64"));
    }

    #[test]
    fn load_applies_the_caps_to_rows_written_without_them() {
        let (_tmp, db) = db();
        // As an older or damaged database might hold: more rows than the cap.
        db.with(|c| {
            for i in 0..MAX_KEPT + 6 {
                c.execute(
                    "INSERT INTO link_answers (workstation_id, request_id, frame, bytes, kept_at_ms) VALUES (?1, ?2, 'x', 1, 1000)",
                    params![WS, format!("m{i}")],
                )?;
            }
            Ok(())
        })
        .unwrap();
        let kept = ids(&db, 1000);
        assert_eq!((kept.len(), kept[0].as_str()), (MAX_KEPT, "m6"));
    }

    #[test]
    fn the_byte_cap_holds_to_the_last_byte() {
        let (_tmp, db) = db();
        db.with(|c| keep(c, WS, "small", "z", 1000)).unwrap();
        let half = "y".repeat(MAX_KEPT_BYTES / 2);
        db.with(|c| keep(c, WS, "big1", &half, 1000)).unwrap();
        // 1 + half + (half - 1) = exactly the cap: everything stays.
        db.with(|c| keep(c, WS, "big2", &half[1..], 1000)).unwrap();
        assert_eq!(ids(&db, 1000), ["small", "big1", "big2"]);
        // One byte more and the oldest goes.
        db.with(|c| keep(c, WS, "one", "o", 1000)).unwrap();
        assert_eq!(ids(&db, 1000), ["big1", "big2", "one"]);
    }

    #[test]
    fn an_answer_expires_on_load_one_millisecond_after_keep_for() {
        let (_tmp, db) = db();
        db.with(|c| keep(c, WS, "old", "x", 0)).unwrap();
        db.with(|c| keep(c, WS, "new", "x", 1)).unwrap();
        let limit = keep_for_ms();
        assert_eq!(ids(&db, limit - 1), ["old", "new"]);
        assert_eq!(ids(&db, limit), ["old", "new"], "exactly KEEP_FOR old is still kept");
        assert_eq!(ids(&db, limit + 1), ["new"]);
        let left: i64 = db.with(|c| c.query_row("SELECT COUNT(*) FROM link_answers", [], |r| r.get(0))).unwrap();
        assert_eq!(left, 1, "the expired row was deleted, not just skipped");
    }

    #[test]
    fn a_write_also_drops_expired_answers() {
        let (_tmp, db) = db();
        db.with(|c| keep(c, WS, "old", "x", 0)).unwrap();
        db.with(|c| keep(c, WS, "new", "x", keep_for_ms() + 1)).unwrap();
        let left: Vec<String> =
            db.with(|c| c.prepare("SELECT request_id FROM link_answers")?.query_map([], |r| r.get(0))?.collect()).unwrap();
        assert_eq!(left, ["new"]);
    }
}
