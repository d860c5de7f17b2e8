//! `revoke-client` (spec §5): revokes every connector of one OAuth client at
//! once and fences the client itself, so that it cannot come back through a
//! fresh approval. Each active connector is revoked exactly as
//! [`super::connectors::revoke`] does it (generation bumped, tokens and codes
//! deleted), all in one transaction with the fence.
//!
//! A client that never got a connector (registered, perhaps with a pending
//! request, never approved) has nothing to revoke; it gets a tombstone instead: a
//! revoked grant row with no connector, which `/oauth/authorize` answers with
//! `access_denied` "client grant is revoked" and `/oauth/token` refuses. The reply
//! says so with `legacy_tombstone_created`.

use rusqlite::{OptionalExtension, Transaction, params};
use serde::Serialize;

use super::connectors::{RevokeError, RevokeTarget, revoke_in};
use super::store::EdgeStore;

/// The longest `client_id` looked up: `/oauth/authorize` takes no parameter
/// longer than this, so no client can have a longer id.
pub const MAX_CLIENT_ID_CHARS: usize = super::authorize::MAX_PARAM_BYTES;

/// The grant's `connector_id` on a tombstone: the column is mandatory, and no
/// connector id is empty.
pub(super) const NO_CONNECTOR: &str = "";

/// The receipt of [`revoke_client`].
#[derive(Debug, Clone, Serialize)]
pub struct ClientRevoked {
    pub ok: bool,
    pub client_id: String,
    /// The connectors this call revoked, oldest approval first.
    pub revoked_connectors: Vec<String>,
    /// Access and refresh tokens deleted, over all of them.
    pub deleted_tokens: usize,
    /// Pending approval requests of the client that can no longer be approved.
    pub rejected_requests: usize,
    pub revoked_at_ms: i64,
    /// True when the client had no connector at all and was fenced by a tombstone.
    pub legacy_tombstone_created: bool,
}

fn active_connectors(tx: &Transaction<'_>, client_id: &str) -> rusqlite::Result<(usize, Vec<String>)> {
    let mut stmt = tx.prepare("SELECT connector_id, status FROM connectors WHERE client_id = ?1 ORDER BY approved_at_ms, connector_id")?;
    let rows: Vec<(String, String)> = stmt.query_map([client_id], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<rusqlite::Result<_>>()?;
    let total = rows.len();
    Ok((total, rows.into_iter().filter(|(_, status)| status == "active").map(|(id, _)| id).collect()))
}

/// Revokes every active connector of `client_id`, rejects its pending requests
/// and leaves its grant revoked; `by` is recorded as `revoked_by`.
pub fn revoke_client(store: &EdgeStore, client_id: &str, by: &str) -> Result<ClientRevoked, RevokeError> {
    let now = store.now_ms();
    store.write(|tx| {
        let registered: bool = tx.query_row("SELECT COUNT(*) > 0 FROM clients WHERE client_id = ?1", [client_id], |r| r.get(0))?;
        let grant: Option<String> =
            tx.query_row("SELECT status FROM grants WHERE client_id = ?1", [client_id], |r| r.get(0)).optional()?;
        let (connectors, active) = active_connectors(tx, client_id)?;
        if !registered && connectors == 0 && grant.is_none() {
            return Err(RevokeError::NotFound(RevokeTarget::Client));
        }
        // A request still pending could otherwise be approved later and hand the
        // client a new, active grant.
        let rejected_requests = tx.execute(
            "UPDATE approvals SET status = 'rejected' WHERE client_id = ?1 AND status = 'pending' AND expires_at_ms > ?2",
            params![client_id, now],
        )?;
        if active.is_empty() && grant.as_deref() == Some("revoked") && rejected_requests == 0 {
            return Err(RevokeError::AlreadyRevoked(RevokeTarget::Client));
        }
        let mut deleted_tokens = 0;
        // The connectors were just read as active in this transaction, so only a
        // database failure can come back from revoking them.
        for id in &active {
            deleted_tokens += revoke_in(tx, id, by, now)?.deleted_tokens;
        }
        // Tokens and codes of connectors revoked earlier are gone already; these
        // catch any a client holds under no active connector.
        deleted_tokens += tx.execute("DELETE FROM tokens WHERE client_id = ?1", [client_id])?;
        tx.execute("DELETE FROM auth_codes WHERE client_id = ?1", [client_id])?;
        // The tombstone keeps the client's name and registration time: the
        // inventory lists it among `legacy_clients` after the client row is purged.
        tx.execute(
            "INSERT INTO grants (client_id, connector_id, status, revoked_at_ms, revoked_by, client_name, client_created_at_ms)
             VALUES (?1, ?2, 'revoked', ?3, ?4,
                     (SELECT client_name FROM clients WHERE client_id = ?1),
                     (SELECT created_at_ms FROM clients WHERE client_id = ?1))
             ON CONFLICT(client_id) DO UPDATE SET status = 'revoked', revoked_at_ms = excluded.revoked_at_ms,
                 revoked_by = excluded.revoked_by",
            params![client_id, NO_CONNECTOR, now, by],
        )?;
        Ok(ClientRevoked {
            ok: true,
            client_id: client_id.to_string(),
            revoked_connectors: active,
            deleted_tokens,
            rejected_requests,
            revoked_at_ms: now,
            legacy_tombstone_created: connectors == 0 && grant.is_none(),
        })
    })
}

/// Whether `client_id`'s grant is revoked (by a connector revocation or a
/// tombstone): such a client gets no code and no token.
pub fn client_grant_revoked(tx: &Transaction<'_>, client_id: &str) -> rusqlite::Result<bool> {
    let status: Option<String> =
        tx.query_row("SELECT status FROM grants WHERE client_id = ?1", [client_id], |r| r.get(0)).optional()?;
    Ok(status.as_deref() == Some("revoked"))
}
