//! Automation clients (spec edge.md §3 `client_credentials`, §5): a script or CI
//! job that reaches exactly one enrolled device with no person in the loop.
//!
//! The operator creates one with `herdr-mcp edge automation create` on the edge
//! host; it gets a `svc_` client id and a secret shown once (only its SHA-256 is
//! kept, as for DCR secrets). The client trades id and secret for a 1-hour opaque
//! access token at `/oauth/token` (`grant_type=client_credentials`, no refresh
//! token: it can always ask again). The grant is `principal_type:"automation"`
//! and bound to one `device_id`; every token carries that binding, and the router
//! refuses any other device. Rotating the secret or revoking the client deletes
//! its tokens in the same transaction, so both take effect on the next request.

use rusqlite::{OptionalExtension, Transaction, params};
use serde::Serialize;

use super::secrets::{hash_opaque, random_b64, random_hex, same};
use super::store::EdgeStore;

pub const CLIENT_PREFIX: &str = "svc_";
pub const SECRET_PREFIX: &str = "svcsec_";
pub const TOKEN_PREFIX: &str = "hst_";
pub const PRINCIPAL_TYPE: &str = "automation";
/// Automation tokens live at most an hour (spec §5) and are never refreshed.
pub const ACCESS_TTL_MS: i64 = 3600 * 1000;
/// Longest client name, as for device names.
pub const MAX_NAME_CHARS: usize = 64;
/// Live tokens one client may hold; the next one issued ends the oldest. Each
/// token request adds a row for an hour, so a script asking in a loop would
/// otherwise grow the store without bound. 64 covers parallel jobs sharing a
/// client, each with its own token.
pub const MAX_LIVE_TOKENS: i64 = 64;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AutomationError {
    #[error("invalid_name: the name must be 1 to {MAX_NAME_CHARS} printable characters")]
    InvalidName,
    #[error(
        "device_not_found: no enrolled device has the id or name {0:?}; see `herdr-mcp device list`"
    )]
    DeviceNotFound(String),
    #[error("device_ambiguous: several devices are called {0:?}; pass the device_id instead")]
    DeviceAmbiguous(String),
    #[error(
        "device_not_active: device {0} is {1}; an automation client can only be bound to an active device"
    )]
    DeviceNotActive(String, String),
    #[error("not_found: no automation client {0}; see `herdr-mcp edge automation list`")]
    NotFound(String),
    #[error("already_revoked: automation client {0} is already revoked")]
    AlreadyRevoked(String),
    #[error("edge database: {0}")]
    Db(String),
}

impl From<rusqlite::Error> for AutomationError {
    fn from(e: rusqlite::Error) -> Self {
        AutomationError::Db(e.to_string())
    }
}

/// One automation client as `automation list` shows it; never its secret.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct AutomationClient {
    pub client_id: String,
    pub name: String,
    pub principal_type: &'static str,
    pub device_id: String,
    pub status: String,
    pub created_at_ms: i64,
    pub secret_rotated_at_ms: Option<i64>,
    pub last_token_issued_at_ms: Option<i64>,
    pub revoked_at_ms: Option<i64>,
    pub active_access_tokens: i64,
}

/// What `create` and `rotate` hand out once.
#[derive(Debug, Clone)]
pub struct Issued {
    pub client: AutomationClient,
    pub client_secret: String,
}

pub fn is_automation_client(client_id: &str) -> bool {
    client_id.starts_with(CLIENT_PREFIX)
}

fn new_secret() -> String {
    format!("{SECRET_PREFIX}{}", random_hex::<32>())
}

/// The active, non-revoked device `selector` names (id first, then unique name).
fn resolve_device(tx: &Transaction<'_>, selector: &str) -> Result<String, AutomationError> {
    let by_id: Option<(String, String)> = tx
        .query_row(
            "SELECT device_id, authorization FROM devices WHERE device_id = ?1",
            [selector],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    let (id, auth) = match by_id {
        Some(found) => found,
        None => {
            let mut stmt = tx.prepare("SELECT device_id, authorization FROM devices WHERE name = ?1 AND authorization != 'revoked'")?;
            let named: Vec<(String, String)> = stmt
                .query_map([selector], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<rusqlite::Result<_>>()?;
            match named.len() {
                0 => return Err(AutomationError::DeviceNotFound(selector.to_string())),
                1 => named.into_iter().next().unwrap_or_default(),
                _ => return Err(AutomationError::DeviceAmbiguous(selector.to_string())),
            }
        }
    };
    if auth != "active" {
        return Err(AutomationError::DeviceNotActive(id, auth));
    }
    Ok(id)
}

const COLUMNS: &str = "a.client_id, a.name, a.device_id, a.status, a.created_at_ms, a.secret_rotated_at_ms, a.last_token_issued_at_ms,
    a.revoked_at_ms, (SELECT COUNT(*) FROM automation_tokens t WHERE t.client_id = a.client_id AND t.expires_at_ms > ?1)";

fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<AutomationClient> {
    Ok(AutomationClient {
        client_id: r.get(0)?,
        name: r.get(1)?,
        principal_type: PRINCIPAL_TYPE,
        device_id: r.get(2)?,
        status: r.get(3)?,
        created_at_ms: r.get(4)?,
        secret_rotated_at_ms: r.get(5)?,
        last_token_issued_at_ms: r.get(6)?,
        revoked_at_ms: r.get(7)?,
        active_access_tokens: r.get(8)?,
    })
}

fn load(
    tx: &Transaction<'_>,
    client_id: &str,
    now: i64,
) -> rusqlite::Result<Option<AutomationClient>> {
    tx.query_row(
        &format!("SELECT {COLUMNS} FROM automation_clients a WHERE a.client_id = ?2"),
        params![now, client_id],
        from_row,
    )
    .optional()
}

/// Creates a client bound to the device `device` names; the secret is returned
/// here and nowhere else.
pub fn create(store: &EdgeStore, name: &str, device: &str) -> Result<Issued, AutomationError> {
    let name = name.trim();
    if name.is_empty()
        || name.chars().count() > MAX_NAME_CHARS
        || name.chars().any(char::is_control)
    {
        return Err(AutomationError::InvalidName);
    }
    let now = store.now_ms();
    let client_id = format!("{CLIENT_PREFIX}{}", random_hex::<16>());
    let secret = new_secret();
    store.write(|tx| {
        let device_id = resolve_device(tx, device)?;
        tx.execute(
            "INSERT INTO automation_clients (client_id, name, secret_hash, device_id, status, created_at_ms)
             VALUES (?1, ?2, ?3, ?4, 'active', ?5)",
            params![client_id, name, hash_opaque(&secret), device_id, now],
        )?;
        let client = load(tx, &client_id, now)?.ok_or_else(|| AutomationError::NotFound(client_id.clone()))?;
        Ok(Issued { client, client_secret: secret.clone() })
    })
}

/// Every automation client, newest first, without secrets.
pub fn list(store: &EdgeStore) -> Result<Vec<AutomationClient>, AutomationError> {
    let now = store.now_ms();
    Ok(store.read(|tx| {
        let mut stmt = tx.prepare(&format!(
            "SELECT {COLUMNS} FROM automation_clients a ORDER BY a.created_at_ms DESC, a.client_id"
        ))?;
        stmt.query_map([now], from_row)?
            .collect::<rusqlite::Result<Vec<_>>>()
    })?)
}

fn active(
    tx: &Transaction<'_>,
    client_id: &str,
    now: i64,
) -> Result<AutomationClient, AutomationError> {
    let client = load(tx, client_id, now)?
        .ok_or_else(|| AutomationError::NotFound(client_id.to_string()))?;
    if client.status != "active" {
        return Err(AutomationError::AlreadyRevoked(client_id.to_string()));
    }
    Ok(client)
}

/// Replaces the secret: the old one and every token it earned stop working now.
pub fn rotate(store: &EdgeStore, client_id: &str) -> Result<Issued, AutomationError> {
    let now = store.now_ms();
    let secret = new_secret();
    store.write(|tx| {
        active(tx, client_id, now)?;
        tx.execute(
            "UPDATE automation_clients SET secret_hash = ?2, secret_rotated_at_ms = ?3 WHERE client_id = ?1",
            params![client_id, hash_opaque(&secret), now],
        )?;
        tx.execute("DELETE FROM automation_tokens WHERE client_id = ?1", [client_id])?;
        let client = active(tx, client_id, now)?;
        Ok(Issued { client, client_secret: secret.clone() })
    })
}

/// Revokes the client; returns how many live tokens were deleted with it.
pub fn revoke(store: &EdgeStore, client_id: &str, by: &str) -> Result<usize, AutomationError> {
    let now = store.now_ms();
    store.write(|tx| {
        active(tx, client_id, now)?;
        tx.execute(
            "UPDATE automation_clients SET status = 'revoked', revoked_at_ms = ?2, revoked_by = ?3 WHERE client_id = ?1",
            params![client_id, now, by],
        )?;
        Ok(tx.execute("DELETE FROM automation_tokens WHERE client_id = ?1 AND expires_at_ms > ?2", params![client_id, now])?)
    })
}

/// Why `/oauth/token` refused a `client_credentials` request.
#[derive(Debug, PartialEq, Eq)]
pub enum GrantRefusal {
    /// Unknown, revoked, or wrong secret: `invalid_client`, never saying which.
    InvalidClient,
}

/// Checks the secret (constant-time) and issues a 1-hour access token.
pub fn issue_token(
    store: &EdgeStore,
    client_id: &str,
    secret: &str,
) -> rusqlite::Result<Result<String, GrantRefusal>> {
    let now = store.now_ms();
    store.write(|tx| {
        let row: Option<(String, String)> = tx
            .query_row(
                "SELECT secret_hash, device_id FROM automation_clients WHERE client_id = ?1 AND status = 'active'",
                [client_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        let Some((_, device_id)) = row.filter(|(h, _)| same(&hash_opaque(secret), h)) else {
            return Ok(Err(GrantRefusal::InvalidClient));
        };
        let token = format!("{TOKEN_PREFIX}{}", random_b64::<32>());
        tx.execute("DELETE FROM automation_tokens WHERE expires_at_ms <= ?1", [now])?;
        tx.execute(
            "INSERT INTO automation_tokens (token_hash, client_id, device_id, expires_at_ms) VALUES (?1, ?2, ?3, ?4)",
            params![hash_opaque(&token), client_id, device_id, now + ACCESS_TTL_MS],
        )?;
        tx.execute(
            "DELETE FROM automation_tokens WHERE client_id = ?1 AND rowid NOT IN
             (SELECT rowid FROM automation_tokens WHERE client_id = ?1 ORDER BY rowid DESC LIMIT ?2)",
            params![client_id, MAX_LIVE_TOKENS],
        )?;
        tx.execute("UPDATE automation_clients SET last_token_issued_at_ms = ?2 WHERE client_id = ?1", params![client_id, now])?;
        Ok(Ok(token))
    })
}

/// (client_id, bound device_id) of a live automation token: unexpired, its client
/// active, and the client still bound to the device the token was issued for.
pub fn verify_token(
    tx: &Transaction<'_>,
    token: &str,
    now: i64,
) -> rusqlite::Result<Option<(String, String)>> {
    tx.query_row(
        "SELECT t.client_id, t.device_id FROM automation_tokens t JOIN automation_clients a ON a.client_id = t.client_id
         WHERE t.token_hash = ?1 AND t.expires_at_ms > ?2 AND a.status = 'active' AND a.device_id = t.device_id",
        params![hash_opaque(token), now],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .optional()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::edge::clock::ManualClock;
    use crate::edge::devices::enroll;

    fn live(store: &EdgeStore, token: &str) -> bool {
        let now = store.now_ms();
        store.read(|tx| verify_token(tx, token, now)).unwrap().is_some()
    }

    #[test]
    fn a_client_holds_at_most_max_live_tokens_and_the_oldest_goes_first() {
        let tmp = tempfile::tempdir().unwrap();
        EdgeStore::init(tmp.path()).unwrap();
        let store = EdgeStore::open(tmp.path(), Arc::new(ManualClock::new(1_800_000_000_000))).unwrap();
        let device = store.write(|tx| enroll(tx, Some("ci-box".into()), store.now_ms())).unwrap();
        let issued = create(&store, "nightly", &device.device.device_id).unwrap();
        let secret = issued.client_secret;
        let id = issued.client.client_id;
        let tokens: Vec<String> =
            (0..MAX_LIVE_TOKENS).map(|_| issue_token(&store, &id, &secret).unwrap().unwrap()).collect();
        assert!(tokens.iter().all(|t| live(&store, t)), "all {MAX_LIVE_TOKENS} tokens stay live");
        let one_more = issue_token(&store, &id, &secret).unwrap().unwrap();
        assert!(live(&store, &one_more));
        assert!(!live(&store, &tokens[0]), "the oldest token ends when one more is issued");
        assert!(tokens[1..].iter().all(|t| live(&store, t)), "only the oldest ends");
        assert_eq!(list(&store).unwrap()[0].active_access_tokens, MAX_LIVE_TOKENS);
    }
}
