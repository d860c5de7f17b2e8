//! Durable state: one SQLite database (`state.db`) in a private directory.
//!
//! It holds exec session metadata ([`sessions`]), the operations ledger that makes
//! `herdr_exec` idempotent ([`ledger`]), the prompt registry ([`prompts`]) and the
//! edge link's kept mutation answers ([`link_answers`]). A runtime and a standalone
//! `herdr-mcp link` may have it open at the same time.
//! Output never goes to disk; only what is needed to answer truthfully after a restart.
//!
//! rusqlite is blocking, so async code goes through [`StateDb::run`], which moves the
//! work onto tokio's blocking pool. One connection behind a mutex is plenty: every
//! statement is tiny, and WAL keeps readers of other processes unblocked.

pub mod boots;
pub mod dir;
pub mod ledger;
pub mod link_answers;
pub mod migrations;
pub mod prompts;
pub mod sessions;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::Connection;

pub use dir::{StateDirError, resolve_state_dir, state_dir_from_env};

/// File name of the database inside the state directory.
pub const DB_FILE: &str = "state.db";

/// How long a statement waits for another process's lock before it fails.
pub const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Why the state database could not be opened or used.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error(transparent)]
    Dir(#[from] StateDirError),
    #[error("state database {path}: {source}")]
    Open { path: String, source: rusqlite::Error },
    #[error("state database {path} is damaged ({cause}); move it aside (its exec records, idempotency ledger and kept link answers go with it) or use another --state-dir")]
    Damaged { path: String, cause: rusqlite::Error },
    #[error("state database {path} has schema version {found}, newer than this herdr-mcp understands ({known}); upgrade herdr-mcp or use another --state-dir")]
    TooNew { path: String, found: i64, known: i64 },
    #[error("state database {path} has schema version {found}, which no herdr-mcp writes; move the file aside or use another --state-dir")]
    BadVersion { path: String, found: i64 },
    #[error("state database: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("state database task failed: {0}")]
    Task(String),
}

/// The open state database of this runtime process.
pub struct StateDb {
    conn: Mutex<Connection>,
    path: PathBuf,
    boot_id: String,
}

impl StateDb {
    /// Opens (creating when needed) `<dir>/state.db`: the directory is made private
    /// (0700), WAL is switched on and pending migrations run. `boot_id` identifies this
    /// process, so rows written by an earlier process can be told apart.
    pub fn open(dir: &Path, boot_id: &str) -> Result<StateDb, StateError> {
        let path = dir.join(DB_FILE);
        Self::open_at(dir, path.clone(), boot_id).map_err(|e| {
            let damage = |e: &rusqlite::Error| {
                matches!(e.sqlite_error_code(), Some(rusqlite::ErrorCode::NotADatabase | rusqlite::ErrorCode::DatabaseCorrupt))
            };
            match e {
                StateError::Open { source, .. } | StateError::Sql(source) if damage(&source) => {
                    StateError::Damaged { path: path.display().to_string(), cause: source }
                }
                other => other,
            }
        })
    }

    fn open_at(dir: &Path, path: PathBuf, boot_id: &str) -> Result<StateDb, StateError> {
        dir::ensure_private_dir(dir)?;
        let open_err = |source| StateError::Open { path: path.display().to_string(), source };
        let mut conn = Connection::open(&path).map_err(open_err)?;
        // Several processes share this file (a runtime, a standalone `link`, a CLI
        // status call): the busy timeout covers the short moments when another
        // connection holds the lock. WAL lets readers of other processes go on
        // while one of them writes.
        conn.busy_timeout(BUSY_TIMEOUT).map_err(open_err)?;
        switch_to_wal(&conn).map_err(open_err)?;
        conn.pragma_update(None, "synchronous", "NORMAL").map_err(open_err)?;
        migrations::apply(&mut conn, &path)?;
        boots::register(&conn, boot_id, now_ms())?;
        Ok(StateDb { conn: Mutex::new(conn), path, boot_id: boot_id.to_string() })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The boot id this handle writes into new rows.
    pub fn boot_id(&self) -> &str {
        &self.boot_id
    }

    /// Runs `f` on the connection, on the calling thread. For startup code and
    /// blocking tool handlers; async code uses [`StateDb::run`].
    pub fn with<T>(&self, f: impl FnOnce(&mut Connection) -> rusqlite::Result<T>) -> Result<T, StateError> {
        // A panic while holding the lock cannot leave SQLite half-written (statements
        // are atomic), so a poisoned lock is safe to keep using.
        let mut conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        Ok(f(&mut conn)?)
    }

    /// Runs `f` on tokio's blocking pool so that SQLite never stalls an async worker.
    pub async fn run<T, F>(self: &Arc<Self>, f: F) -> Result<T, StateError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        let db = Arc::clone(self);
        tokio::task::spawn_blocking(move || db.with(f)).await.map_err(|e| StateError::Task(e.to_string()))?
    }
}

/// Puts the database in WAL mode. Switching a new file needs its exclusive lock,
/// and when another connection is opening it at the same moment SQLite answers
/// "locked" at once instead of calling the busy handler (waiting could deadlock
/// two switchers), so the switch is retried here until [`BUSY_TIMEOUT`]. Once
/// the file is in WAL mode the pragma needs no lock and succeeds first time.
fn switch_to_wal(conn: &Connection) -> rusqlite::Result<()> {
    let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
    loop {
        match conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get::<_, String>(0)) {
            Ok(_) => return Ok(()),
            Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy) && std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Err(e) => return Err(e),
        }
    }
}

/// Milliseconds since the Unix epoch; the time unit of every timestamp column.
pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}
