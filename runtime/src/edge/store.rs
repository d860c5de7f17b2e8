//! The edge's durable state: one SQLite file, `<state dir>/edge.db`, beside the
//! pepper file `<state dir>/edge.pepper` (0600) that keys the HMAC of 6-digit codes.
//!
//! The `edge serve` process and the `connector` CLI open the same file (WAL mode,
//! busy timeout), so an approval or revocation made from a terminal is visible to
//! the very next HTTP request without any admin endpoint: whoever can read this
//! 0700 directory is the operator. Every multi-step change (approve, rotate,
//! revoke) runs in one `IMMEDIATE` transaction so consume-and-issue is atomic
//! across both processes.
//!
//! Secrets never land here in clear: client secrets, codes, refresh and access
//! tokens are stored as [`super::secrets::hash_opaque`]; approval codes as HMACs.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::{Connection, Transaction, TransactionBehavior};

use super::clock::SharedClock;
use super::secrets::{PEPPER_BYTES, random_bytes};

pub const DB_FILE: &str = "edge.db";
pub const PEPPER_FILE: &str = "edge.pepper";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("edge state in {0} is not initialised; run `herdr-mcp edge init` first")]
    NotInitialised(String),
    #[error("edge state {path}: {message}")]
    Io { path: String, message: String },
    /// Not an error `source`: rusqlite's own source repeats its message, and `{:#}`
    /// would print it two more times.
    #[error("edge database: {0}")]
    Sqlite(rusqlite::Error),
    #[error("edge database schema version {found} is newer than this binary knows ({known})")]
    TooNew { found: i64, known: i64 },
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        StoreError::Sqlite(e)
    }
}

/// Opens and migrates the database file, naming it and what to do when it is not
/// (or no longer) an SQLite database.
fn open_db(path: &Path) -> Result<Connection, StoreError> {
    let conn = open_conn(path).and_then(|c| migrate(&c).map(|()| c));
    conn.map_err(|e| match e {
        StoreError::Sqlite(e)
            if matches!(e.sqlite_error_code(), Some(rusqlite::ErrorCode::NotADatabase | rusqlite::ErrorCode::DatabaseCorrupt)) =>
        {
            StoreError::Io {
                path: path.display().to_string(),
                message: format!(
                    "is damaged ({e}); restore it from a backup, or move it aside and run `herdr-mcp edge init` (every device then pairs again)"
                ),
            }
        }
        other => other,
    })
}

/// Schema migrations, applied in order; `PRAGMA user_version` records how many ran.
/// Append only: a shipped migration is never edited.
const MIGRATIONS: &[&str] = &[
    // 1: OAuth clients, pending approvals, connectors, grants, codes, tokens.
    "CREATE TABLE clients (
        client_id TEXT PRIMARY KEY,
        secret_hash TEXT,
        client_name TEXT,
        redirect_uris TEXT NOT NULL,
        grant_types TEXT NOT NULL,
        auth_method TEXT NOT NULL,
        auth_source TEXT NOT NULL,
        created_at_ms INTEGER NOT NULL,
        approved INTEGER NOT NULL DEFAULT 0
    );
    CREATE TABLE approvals (
        request_id TEXT PRIMARY KEY,
        client_id TEXT NOT NULL,
        connector_id TEXT NOT NULL,
        auth_source TEXT NOT NULL,
        redirect_uri TEXT NOT NULL,
        code_challenge TEXT NOT NULL,
        resource TEXT NOT NULL,
        scope TEXT NOT NULL,
        state TEXT,
        code_hash TEXT NOT NULL,
        resume_hash TEXT NOT NULL,
        created_at_ms INTEGER NOT NULL,
        expires_at_ms INTEGER NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        status TEXT NOT NULL,
        approved_at_ms INTEGER,
        approved_by TEXT
    );
    CREATE INDEX approvals_client ON approvals(client_id, status);
    CREATE TABLE connectors (
        connector_id TEXT PRIMARY KEY,
        client_id TEXT NOT NULL,
        status TEXT NOT NULL,
        resource TEXT NOT NULL,
        scope TEXT NOT NULL,
        redirect_uri TEXT NOT NULL,
        auth_source TEXT NOT NULL,
        grant_generation INTEGER NOT NULL,
        approved_at_ms INTEGER NOT NULL,
        approved_by TEXT NOT NULL,
        last_used_at_ms INTEGER,
        last_token_issued_at_ms INTEGER,
        token_issue_count INTEGER NOT NULL DEFAULT 0,
        revoked_at_ms INTEGER,
        revoked_by TEXT
    );
    CREATE TABLE grants (
        client_id TEXT PRIMARY KEY,
        connector_id TEXT NOT NULL,
        status TEXT NOT NULL
    );
    CREATE TABLE auth_codes (
        code_hash TEXT PRIMARY KEY,
        client_id TEXT NOT NULL,
        redirect_uri TEXT NOT NULL,
        code_challenge TEXT NOT NULL,
        resource TEXT NOT NULL,
        scope TEXT NOT NULL,
        connector_id TEXT NOT NULL,
        grant_generation INTEGER NOT NULL,
        expires_at_ms INTEGER NOT NULL
    );
    CREATE TABLE tokens (
        token_hash TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        connector_id TEXT NOT NULL,
        client_id TEXT NOT NULL,
        grant_generation INTEGER NOT NULL,
        family_id TEXT NOT NULL,
        expires_at_ms INTEGER NOT NULL,
        used INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX tokens_connector ON tokens(connector_id);
    CREATE INDEX tokens_family ON tokens(family_id);",
    // 2: forwarded mutations, recorded before they are sent (see `forward_pending`).
    "CREATE TABLE link_requests (
        request_id TEXT PRIMARY KEY,
        workstation_id TEXT NOT NULL,
        operation TEXT NOT NULL,
        idempotency_key TEXT,
        state TEXT NOT NULL,
        created_at_ms INTEGER NOT NULL,
        updated_at_ms INTEGER NOT NULL,
        outcome TEXT
    );
    CREATE INDEX link_requests_ws ON link_requests(workstation_id, state);",
    // 3: enrolled devices, their credentials (verifiers only) and the one live pairing.
    "CREATE TABLE devices (
        device_id TEXT PRIMARY KEY,
        workstation_id TEXT NOT NULL UNIQUE,
        name TEXT NOT NULL,
        aliases TEXT NOT NULL DEFAULT '[]',
        authorization TEXT NOT NULL,
        scheduling TEXT NOT NULL,
        credential_id TEXT,
        enrolled_at_ms INTEGER NOT NULL,
        updated_at_ms INTEGER NOT NULL,
        revoked_at_ms INTEGER,
        revoked_by TEXT
    );
    CREATE TABLE device_credentials (
        credential_id TEXT PRIMARY KEY,
        device_id TEXT NOT NULL,
        workstation_id TEXT NOT NULL,
        verifier_sha256 TEXT NOT NULL,
        created_at_ms INTEGER NOT NULL
    );
    CREATE INDEX device_credentials_device ON device_credentials(device_id);
    CREATE TABLE pairings (
        pairing_key TEXT PRIMARY KEY,
        verifier TEXT NOT NULL,
        name TEXT,
        created_by TEXT NOT NULL,
        created_at_ms INTEGER NOT NULL,
        expires_at_ms INTEGER NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        status TEXT NOT NULL
    );",
    // 4: idempotent replay of forwarded mutations: the request's fingerprint and,
    // for keyed ones, the answer frame a retry with the same key gets back.
    "ALTER TABLE link_requests ADD COLUMN request_hash TEXT;
    ALTER TABLE link_requests ADD COLUMN answer TEXT;
    CREATE INDEX link_requests_key ON link_requests(workstation_id, idempotency_key);",
    // 5: who chose a device's name (a link may only replace a generated one), and the
    // registry generation the serving hub polls to see other processes' changes.
    "ALTER TABLE devices ADD COLUMN name_source TEXT NOT NULL DEFAULT 'pairing';
    CREATE TABLE device_registry_state (id INTEGER PRIMARY KEY CHECK (id = 1), generation INTEGER NOT NULL);
    INSERT INTO device_registry_state (id, generation) VALUES (1, 0);",
    // 6: when and by whom a grant was revoked, and, for a client fenced with no
    // connector (`revoke-client`'s tombstone), its name and registration time: the
    // client row of a never-approved client is purged an hour after it registered,
    // and the inventory still has to say which client the fence is for.
    "ALTER TABLE grants ADD COLUMN revoked_at_ms INTEGER;
    ALTER TABLE grants ADD COLUMN revoked_by TEXT;
    ALTER TABLE grants ADD COLUMN client_name TEXT;
    ALTER TABLE grants ADD COLUMN client_created_at_ms INTEGER;",
    // 7: when a device's link was last heard (spec §8: persisted at most every
    // 5 minutes), so an offline device still says how long it has been away.
    "ALTER TABLE devices ADD COLUMN last_seen_ms INTEGER;",
    // 8: automation clients (`svc_…`, spec §5), each bound to one device, with its
    // secret as a SHA-256 verifier, and their 1-hour access tokens (hashed).
    "CREATE TABLE automation_clients (
        client_id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        secret_hash TEXT NOT NULL,
        principal_type TEXT NOT NULL DEFAULT 'automation',
        device_id TEXT NOT NULL,
        status TEXT NOT NULL,
        created_at_ms INTEGER NOT NULL,
        secret_rotated_at_ms INTEGER,
        last_token_issued_at_ms INTEGER,
        revoked_at_ms INTEGER,
        revoked_by TEXT
    );
    CREATE TABLE automation_tokens (
        token_hash TEXT PRIMARY KEY,
        client_id TEXT NOT NULL,
        device_id TEXT NOT NULL,
        expires_at_ms INTEGER NOT NULL
    );
    CREATE INDEX automation_tokens_client ON automation_tokens(client_id);",
    // 9: who sent each authorization request (source address, user agent), shown
    // to the operator before approving, and counted against per-source limits.
    "ALTER TABLE approvals ADD COLUMN requester_addr TEXT;
    ALTER TABLE approvals ADD COLUMN requester_ua TEXT;
    CREATE INDEX approvals_requester ON approvals(requester_addr, status);",
    // 10: routing a call by a device's name or earlier name, and picking the routable
    // devices, read only the matching rows: an index on the current name, the earlier
    // names (kept as JSON in `devices.aliases` too) one row each, and the enrollment order.
    "CREATE INDEX devices_name ON devices(name);
    CREATE INDEX devices_enrolled ON devices(enrolled_at_ms, device_id);
    CREATE TABLE device_aliases (
        alias TEXT NOT NULL,
        device_id TEXT NOT NULL,
        PRIMARY KEY (alias, device_id)
    ) WITHOUT ROWID;
    CREATE INDEX device_aliases_device ON device_aliases(device_id);
    INSERT OR IGNORE INTO device_aliases (alias, device_id)
        SELECT j.value, d.device_id FROM devices d, json_each(d.aliases) j WHERE j.type = 'text';",
];

pub struct EdgeStore {
    conn: Mutex<Connection>,
    pepper: Vec<u8>,
    pub clock: SharedClock,
    dir: PathBuf,
}

impl EdgeStore {
    /// Creates the state directory (0700), the pepper (0600, kept if present) and
    /// the database. Idempotent: a second init keeps the existing pepper, since a
    /// new one would invalidate every pending code.
    pub fn init(dir: &Path) -> Result<bool, StoreError> {
        crate::state::dir::ensure_private_dir(dir)
            .map_err(|e| StoreError::Io { path: dir.display().to_string(), message: e.to_string() })?;
        let pepper_path = dir.join(PEPPER_FILE);
        let created = !pepper_path.exists();
        if created {
            let io = |e: std::io::Error| StoreError::Io { path: pepper_path.display().to_string(), message: e.to_string() };
            let mut f = fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&pepper_path).map_err(io)?;
            f.write_all(hex::encode(random_bytes::<PEPPER_BYTES>()).as_bytes()).map_err(io)?;
            f.sync_all().map_err(io)?;
        }
        open_db(&dir.join(DB_FILE))?;
        Ok(created)
    }

    /// Opens an initialised state directory.
    pub fn open(dir: &Path, clock: SharedClock) -> Result<Self, StoreError> {
        let pepper_path = dir.join(PEPPER_FILE);
        if !pepper_path.exists() || !dir.join(DB_FILE).exists() {
            return Err(StoreError::NotInitialised(dir.display().to_string()));
        }
        let io = |m: String| StoreError::Io { path: pepper_path.display().to_string(), message: m };
        let meta = fs::metadata(&pepper_path).map_err(|e| io(e.to_string()))?;
        if meta.permissions().mode() & 0o077 != 0 {
            return Err(io("is readable by others; it must be 0600".into()));
        }
        let text = fs::read_to_string(&pepper_path).map_err(|e| io(e.to_string()))?;
        let pepper = hex::decode(text.trim()).map_err(|_| io("is not hex".into()))?;
        if pepper.len() != PEPPER_BYTES {
            return Err(io(format!("holds {} bytes, expected {PEPPER_BYTES}", pepper.len())));
        }
        let conn = open_db(&dir.join(DB_FILE))?;
        Ok(Self { conn: Mutex::new(conn), pepper, clock, dir: dir.to_path_buf() })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    pub(crate) fn pepper(&self) -> &[u8] {
        &self.pepper
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock leaves SQLite consistent (the transaction
        // rolls back on drop), so a poisoned mutex is safe to reuse.
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` in one write transaction; it commits only when `f` returns Ok.
    pub fn write<T, E: From<rusqlite::Error>>(&self, f: impl FnOnce(&Transaction<'_>) -> Result<T, E>) -> Result<T, E> {
        let mut conn = self.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let out = f(&tx)?;
        tx.commit()?;
        Ok(out)
    }

    /// Runs a read-only `f` (a deferred transaction, so it sees one snapshot).
    pub fn read<T, E: From<rusqlite::Error>>(&self, f: impl FnOnce(&Transaction<'_>) -> Result<T, E>) -> Result<T, E> {
        let mut conn = self.lock();
        let tx = conn.transaction()?;
        f(&tx)
    }
}

fn open_conn(path: &Path) -> Result<Connection, StoreError> {
    let conn = Connection::open(path)?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o600))
        .map_err(|e| StoreError::Io { path: path.display().to_string(), message: e.to_string() })?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.busy_timeout(Duration::from_secs(5))?;
    Ok(conn)
}

fn migrate(conn: &Connection) -> Result<(), StoreError> {
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    let known = MIGRATIONS.len() as i64;
    if version > known {
        return Err(StoreError::TooNew { found: version, known });
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
        let tx = conn.unchecked_transaction()?;
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", (i + 1) as i64)?;
        tx.commit()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edge::clock::SystemClock;
    use std::sync::Arc;

    #[test]
    fn init_is_private_and_idempotent() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("edge");
        assert!(EdgeStore::init(&dir).unwrap());
        let pepper = fs::read_to_string(dir.join(PEPPER_FILE)).unwrap();
        assert!(!EdgeStore::init(&dir).unwrap());
        assert_eq!(pepper, fs::read_to_string(dir.join(PEPPER_FILE)).unwrap());
        assert_eq!(fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
        assert_eq!(fs::metadata(dir.join(PEPPER_FILE)).unwrap().permissions().mode() & 0o777, 0o600);
        let store = EdgeStore::open(&dir, Arc::new(SystemClock)).unwrap();
        let v: i64 = store.read(|tx| tx.pragma_query_value(None, "user_version", |r| r.get(0))).unwrap();
        assert_eq!(v, MIGRATIONS.len() as i64);
    }

    #[test]
    fn open_refuses_uninitialised_and_loose_pepper() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(matches!(EdgeStore::open(tmp.path(), Arc::new(SystemClock)), Err(StoreError::NotInitialised(_))));
        EdgeStore::init(tmp.path()).unwrap();
        fs::set_permissions(tmp.path().join(PEPPER_FILE), fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(EdgeStore::open(tmp.path(), Arc::new(SystemClock)), Err(StoreError::Io { .. })));
    }
}
