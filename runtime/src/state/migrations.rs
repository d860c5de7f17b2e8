//! Schema migrations, versioned in code through SQLite's `user_version`.
//!
//! Each entry of [`MIGRATIONS`] moves the schema from version `i` to `i + 1` and runs
//! in one transaction together with the version bump, so a crash mid-migration leaves
//! the previous version intact. Never edit a shipped migration; append a new one.

use std::path::Path;

use rusqlite::{Connection, TransactionBehavior};

use super::StateError;

/// The ordered migrations; the schema version is the number applied.
pub const MIGRATIONS: &[&str] = &[
    // v1: runtime boots, exec sessions, the operations ledger, the prompt registry.
    r#"
    -- One row per runtime process that opened the database: several runtimes may
    -- share a state dir, and recovery must only touch what a dead one left behind.
    CREATE TABLE boots (
        boot_id      TEXT PRIMARY KEY,
        pid          INTEGER NOT NULL,
        start_ticks  INTEGER,
        started_at   INTEGER NOT NULL
    );

    CREATE TABLE exec_sessions (
        session_id       TEXT PRIMARY KEY,
        boot_id          TEXT NOT NULL,
        pid              INTEGER NOT NULL,
        pgid             INTEGER NOT NULL,
        -- field 22 of /proc/<pid>/stat; with pgid it proves a pid is still ours
        proc_start_ticks INTEGER,
        root             TEXT NOT NULL,
        cwd              TEXT NOT NULL,
        command          TEXT NOT NULL,
        started_at_ms    INTEGER NOT NULL,
        state            TEXT NOT NULL CHECK (state IN ('running', 'completed', 'recovered')),
        exit_code        INTEGER,
        signal           TEXT,
        ended_at_ms      INTEGER,
        recovery_state   TEXT
    );
    CREATE INDEX exec_sessions_state ON exec_sessions (state, boot_id);

    CREATE TABLE operations (
        op_id              TEXT PRIMARY KEY,
        kind               TEXT NOT NULL,
        idempotency_key    TEXT NOT NULL,
        request_hash       TEXT NOT NULL,
        phase              TEXT NOT NULL,
        state              TEXT NOT NULL,
        runtime_generation TEXT,
        boot_id            TEXT NOT NULL,
        created_at         INTEGER NOT NULL,
        updated_at         INTEGER NOT NULL,
        expires_at         INTEGER NOT NULL,
        result_json        TEXT,
        UNIQUE (kind, idempotency_key)
    );

    CREATE TABLE prompt_registry (
        key_digest   TEXT PRIMARY KEY,
        fingerprint  TEXT NOT NULL,
        state        TEXT NOT NULL CHECK (state IN ('pending', 'completed')),
        boot_id      TEXT NOT NULL,
        created_at   INTEGER NOT NULL,
        updated_at   INTEGER NOT NULL,
        expires_at   INTEGER NOT NULL,
        result_json  TEXT
    );
    "#,
    // v2: the edge link's kept mutation answers (link_answers.rs), so that a
    // restarted runtime can still send the edge an answer it listed in `resume`.
    r#"
    CREATE TABLE link_answers (
        -- insertion order: the oldest answer is the first to go when over a cap
        seq            INTEGER PRIMARY KEY AUTOINCREMENT,
        workstation_id TEXT NOT NULL,
        request_id     TEXT NOT NULL,
        -- the exact frame text sent to the edge
        frame          TEXT NOT NULL,
        bytes          INTEGER NOT NULL,
        kept_at_ms     INTEGER NOT NULL,
        UNIQUE (workstation_id, request_id)
    );
    "#,
    // v3: the caps are checked on every kept answer; this index holds all that
    // check reads, so it never walks the frames' overflow pages (up to 1 MiB each).
    r#"
    CREATE INDEX link_answers_sizes ON link_answers (workstation_id, seq, bytes, kept_at_ms);
    "#,
    // v4: the activity log (crate::activity): one row per served tools/call,
    // arguments redacted, pruned to 30 days and 50,000 rows.
    r#"
    CREATE TABLE activity (
        seq           INTEGER PRIMARY KEY AUTOINCREMENT,
        at_ms         INTEGER NOT NULL,
        caller        TEXT NOT NULL,
        caller_detail TEXT,
        tool          TEXT NOT NULL,
        root          TEXT,
        args          TEXT NOT NULL,
        outcome       TEXT NOT NULL CHECK (outcome IN ('ok', 'error')),
        code          TEXT,
        duration_ms   INTEGER NOT NULL
    );
    CREATE INDEX activity_at ON activity (at_ms);
    "#,
];

/// The schema version this build writes.
pub fn current_version() -> i64 {
    MIGRATIONS.len() as i64
}

/// Brings the database up to [`current_version`]; refuses a newer schema rather than
/// guessing what a later release meant by it.
///
/// Another process may open the same new file at the same moment (a runtime and a
/// standalone `link` started together). Each step therefore reads the version
/// again inside an immediate transaction, which holds the write lock from its
/// start: the second process waits, then finds the step done and skips it,
/// instead of running it twice and failing on a table that already exists.
pub fn apply(conn: &mut Connection, path: &Path) -> Result<(), StateError> {
    let known = current_version();
    loop {
        // Unlocked first, so an up-to-date database costs no write lock.
        let found = user_version(conn)?;
        if found < 0 {
            return Err(StateError::BadVersion { path: path.display().to_string(), found });
        }
        if found > known {
            return Err(StateError::TooNew { path: path.display().to_string(), found, known });
        }
        if found == known {
            return Ok(());
        }
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let locked = user_version(&tx)?;
        if locked == found {
            tx.execute_batch(MIGRATIONS[found as usize])?;
            tx.pragma_update(None, "user_version", found + 1)?;
        }
        tx.commit()?;
    }
}

fn user_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.pragma_query_value(None, "user_version", |r| r.get(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_run_once_and_a_newer_schema_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("state.db");
        let mut conn = Connection::open(&path).unwrap();
        apply(&mut conn, &path).unwrap();
        apply(&mut conn, &path).unwrap();
        let v: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap();
        assert_eq!(v, current_version());
        conn.pragma_update(None, "user_version", current_version() + 1).unwrap();
        let err = apply(&mut conn, &path).unwrap_err();
        assert!(matches!(err, StateError::TooNew { .. }), "{err}");
        // SQLite's user_version is signed; a negative one was never written by us.
        conn.pragma_update(None, "user_version", -1).unwrap();
        let err = apply(&mut conn, &path).unwrap_err();
        assert!(matches!(err, StateError::BadVersion { found: -1, .. }), "{err}");
    }

    /// Processes that open a new database together (a runtime and a standalone
    /// link started at once) each find it migrated, none fails half-way.
    #[test]
    fn connections_opening_a_new_database_together_all_succeed() {
        for round in 0..50 {
            let tmp = tempfile::tempdir().unwrap();
            let start = std::sync::Barrier::new(4);
            std::thread::scope(|s| {
                let openers: Vec<_> = (0..4)
                    .map(|i| {
                        let (dir, start) = (tmp.path(), &start);
                        s.spawn(move || {
                            start.wait();
                            crate::state::StateDb::open(dir, &format!("b{i}")).map(|_| ())
                        })
                    })
                    .collect();
                for (i, o) in openers.into_iter().enumerate() {
                    o.join().unwrap().unwrap_or_else(|e| panic!("round {round}, opener {i}: {e}"));
                }
            });
            let conn = Connection::open(tmp.path().join("state.db")).unwrap();
            assert_eq!(user_version(&conn).unwrap(), current_version());
            let boots: i64 = conn.query_row("SELECT COUNT(*) FROM boots", [], |r| r.get(0)).unwrap();
            assert_eq!(boots, 4, "round {round}: every opener registered once");
        }
    }
}
