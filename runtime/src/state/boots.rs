//! Which processes opened this database, and which of them still run. Runtimes
//! register here, and so does a standalone `herdr-mcp link`, which owns no
//! session or ledger row and is simply forgotten once it is gone.
//!
//! A row left "running" by another boot is an orphan only if that boot's process
//! is gone: two runtimes may share a state directory, and one must never reap the
//! other's live sessions. A boot is alive when its pid still runs with the start
//! time recorded when it registered.

use std::collections::HashSet;

use rusqlite::{Connection, params};

/// Records this process as `boot_id`.
pub fn register(conn: &Connection, boot_id: &str, now_ms: i64) -> rusqlite::Result<()> {
    let pid = std::process::id() as i32;
    let ticks = crate::exec::procfs::stat(pid).map(|s| s.start_ticks as i64);
    conn.execute(
        "INSERT OR REPLACE INTO boots (boot_id, pid, start_ticks, started_at) VALUES (?1, ?2, ?3, ?4)",
        params![boot_id, pid, ticks, now_ms],
    )?;
    Ok(())
}

/// Boot ids whose process still runs (this process included).
pub fn alive(conn: &Connection) -> rusqlite::Result<HashSet<String>> {
    let mut stmt = conn.prepare("SELECT boot_id, pid, start_ticks FROM boots")?;
    let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?, r.get::<_, Option<i64>>(2)?)))?;
    let mut alive = HashSet::new();
    for row in rows {
        let (boot_id, pid, ticks) = row?;
        let running = crate::exec::procfs::stat(pid as i32)
            .is_some_and(|s| !s.is_zombie() && ticks.is_none_or(|t| t as u64 == s.start_ticks));
        if running {
            alive.insert(boot_id);
        }
    }
    Ok(alive)
}

/// Forgets boots that are gone and no longer referenced by any open row.
pub fn forget_dead(conn: &Connection, alive: &HashSet<String>) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare("SELECT boot_id FROM boots")?;
    let all: Vec<String> = stmt.query_map([], |r| r.get(0))?.collect::<Result<_, _>>()?;
    for boot in all.iter().filter(|b| !alive.contains(*b)) {
        conn.execute(
            "DELETE FROM boots WHERE boot_id = ?1
               AND NOT EXISTS (SELECT 1 FROM exec_sessions WHERE boot_id = ?1 AND state = 'running')
               AND NOT EXISTS (SELECT 1 FROM operations WHERE boot_id = ?1 AND state IN ('reserved', 'delivered'))",
            [boot],
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::StateDb;

    #[test]
    fn this_process_is_alive_and_a_dead_or_reused_pid_is_not() {
        let tmp = tempfile::tempdir().unwrap();
        let db = StateDb::open(tmp.path(), "me").unwrap();
        db.with(|c| {
            c.execute("INSERT INTO boots VALUES ('dead', 999999999, 1, 0)", [])?;
            // Our own pid with a different start time: a reused pid, not that boot.
            c.execute("INSERT INTO boots VALUES ('reused', ?1, 1, 0)", [std::process::id()])?;
            Ok(())
        })
        .unwrap();
        let alive = db.with(|c| alive(c)).unwrap();
        assert!(alive.contains("me"));
        assert!(!alive.contains("dead") && !alive.contains("reused"), "{alive:?}");
        db.with(|c| forget_dead(c, &alive)).unwrap();
        let left: i64 = db.with(|c| c.query_row("SELECT COUNT(*) FROM boots", [], |r| r.get(0))).unwrap();
        assert_eq!(left, 1);
    }
}
