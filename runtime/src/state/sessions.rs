//! Exec session metadata rows (never output): enough to answer a read of a session
//! that outlived the process which started it, and to find orphans after a crash.

use rusqlite::{Connection, OptionalExtension, Row, params};

/// One row of `exec_sessions`.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRow {
    pub session_id: String,
    pub boot_id: String,
    pub pid: i64,
    pub pgid: i64,
    pub proc_start_ticks: Option<i64>,
    pub root: String,
    pub cwd: String,
    pub command: String,
    pub started_at_ms: i64,
    /// `running`, `completed` or `recovered`.
    pub state: String,
    pub exit_code: Option<i64>,
    pub signal: Option<String>,
    pub ended_at_ms: Option<i64>,
    pub recovery_state: Option<String>,
}

const COLUMNS: &str = "session_id, boot_id, pid, pgid, proc_start_ticks, root, cwd, command, started_at_ms, \
                       state, exit_code, signal, ended_at_ms, recovery_state";

fn from_row(r: &Row<'_>) -> rusqlite::Result<SessionRow> {
    Ok(SessionRow {
        session_id: r.get(0)?,
        boot_id: r.get(1)?,
        pid: r.get(2)?,
        pgid: r.get(3)?,
        proc_start_ticks: r.get(4)?,
        root: r.get(5)?,
        cwd: r.get(6)?,
        command: r.get(7)?,
        started_at_ms: r.get(8)?,
        state: r.get(9)?,
        exit_code: r.get(10)?,
        signal: r.get(11)?,
        ended_at_ms: r.get(12)?,
        recovery_state: r.get(13)?,
    })
}

pub fn insert(conn: &Connection, row: &SessionRow) -> rusqlite::Result<()> {
    conn.execute(
        &format!("INSERT INTO exec_sessions ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"),
        params![
            row.session_id,
            row.boot_id,
            row.pid,
            row.pgid,
            row.proc_start_ticks,
            row.root,
            row.cwd,
            row.command,
            row.started_at_ms,
            row.state,
            row.exit_code,
            row.signal,
            row.ended_at_ms,
            row.recovery_state
        ],
    )?;
    Ok(())
}

pub fn mark_completed(
    conn: &Connection,
    session_id: &str,
    exit_code: Option<i32>,
    signal: Option<&str>,
    ended_at_ms: i64,
) -> rusqlite::Result<()> {
    conn.execute(
        "UPDATE exec_sessions SET state = 'completed', exit_code = ?2, signal = ?3, ended_at_ms = ?4 WHERE session_id = ?1",
        params![session_id, exit_code, signal, ended_at_ms],
    )?;
    Ok(())
}

pub fn mark_recovered(conn: &Connection, session_id: &str, recovery_state: &str, at_ms: i64) -> rusqlite::Result<()> {
    conn.execute(
        "UPDATE exec_sessions SET state = 'recovered', recovery_state = ?2, ended_at_ms = ?3 WHERE session_id = ?1",
        params![session_id, recovery_state, at_ms],
    )?;
    Ok(())
}

pub fn get(conn: &Connection, session_id: &str) -> rusqlite::Result<Option<SessionRow>> {
    conn.query_row(&format!("SELECT {COLUMNS} FROM exec_sessions WHERE session_id = ?1"), [session_id], from_row)
        .optional()
}

/// Sessions another process left marked as running (it died without closing them).
pub fn running_from_other_boots(conn: &Connection, boot_id: &str) -> rusqlite::Result<Vec<SessionRow>> {
    let mut stmt =
        conn.prepare(&format!("SELECT {COLUMNS} FROM exec_sessions WHERE state = 'running' AND boot_id != ?1"))?;
    stmt.query_map([boot_id], from_row)?.collect()
}

pub fn delete(conn: &Connection, session_id: &str) -> rusqlite::Result<()> {
    conn.execute("DELETE FROM exec_sessions WHERE session_id = ?1", [session_id])?;
    Ok(())
}

/// Drops rows of sessions that ended before `cutoff_ms` (pruning outlives restarts).
pub fn delete_ended_before(conn: &Connection, cutoff_ms: i64) -> rusqlite::Result<usize> {
    conn.execute("DELETE FROM exec_sessions WHERE state != 'running' AND ended_at_ms < ?1", [cutoff_ms])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::StateDb;

    fn row(id: &str, boot: &str) -> SessionRow {
        SessionRow {
            session_id: id.into(),
            boot_id: boot.into(),
            pid: 42,
            pgid: 42,
            proc_start_ticks: Some(7),
            root: "/r".into(),
            cwd: "/r".into(),
            command: "true".into(),
            started_at_ms: 1,
            state: "running".into(),
            exit_code: None,
            signal: None,
            ended_at_ms: None,
            recovery_state: None,
        }
    }

    #[test]
    fn rows_round_trip_and_only_other_boots_count_as_left_running() {
        let tmp = tempfile::tempdir().unwrap();
        let db = StateDb::open(tmp.path(), "b2").unwrap();
        db.with(|c| {
            insert(c, &row("es_a", "b1"))?;
            insert(c, &row("es_b", "b2"))?;
            insert(c, &row("es_c", "b1"))?;
            mark_completed(c, "es_c", Some(0), None, 5)
        })
        .unwrap();
        let left = db.with(|c| running_from_other_boots(c, "b2")).unwrap();
        assert_eq!(left.iter().map(|r| r.session_id.as_str()).collect::<Vec<_>>(), vec!["es_a"]);
        let c = db.with(|c| get(c, "es_c")).unwrap().unwrap();
        assert_eq!((c.state.as_str(), c.exit_code, c.ended_at_ms), ("completed", Some(0), Some(5)));
        db.with(|c| mark_recovered(c, "es_a", "reaped_on_restart", 9)).unwrap();
        assert_eq!(db.with(|c| get(c, "es_a")).unwrap().unwrap().recovery_state.as_deref(), Some("reaped_on_restart"));
        assert_eq!(db.with(|c| delete_ended_before(c, 6)).unwrap(), 1);
        assert!(db.with(|c| get(c, "es_c")).unwrap().is_none());
        assert!(db.with(|c| get(c, "es_a")).unwrap().is_some());
    }
}
