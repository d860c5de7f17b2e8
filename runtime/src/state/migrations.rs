//! Schema migrations, versioned in code through SQLite's `user_version`.
//!
//! Each entry of [`MIGRATIONS`] moves the schema from version `i` to `i + 1` and runs
//! in one transaction together with the version bump, so a crash mid-migration leaves
//! the previous version intact. Never edit a shipped migration; append a new one.

use std::path::Path;

use rusqlite::Connection;

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
];

/// The schema version this build writes.
pub fn current_version() -> i64 {
    MIGRATIONS.len() as i64
}

/// Brings the database up to [`current_version`]; refuses a newer schema rather than
/// guessing what a later release meant by it.
pub fn apply(conn: &mut Connection, path: &Path) -> Result<(), StateError> {
    let found: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    let known = current_version();
    if found > known {
        return Err(StateError::TooNew { path: path.display().to_string(), found, known });
    }
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        let tx = conn.transaction()?;
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", index as i64 + 1)?;
        tx.commit()?;
    }
    Ok(())
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
    }
}
