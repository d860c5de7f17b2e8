//! Operator actions on connectors and approvals — approve, inspect, list, revoke,
//! cancel — and the 30-day inactivity sweep. Two callers reach them: the
//! `connector` CLI on the edge host (the shared `edge.db`), and the
//! `/connectors/*` routes ([`super::connectors_http`]), which admit only an
//! enrolled device's credential, never a connector's bearer.

use std::sync::Arc;
use std::time::Duration;

use rusqlite::{OptionalExtension, Transaction, params};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::authorize::{MAX_ATTEMPTS, approval_code_hash, expire_approvals};
use super::secrets::same;
use super::store::EdgeStore;
// The inventory has its own module; callers that only need the rows keep
// reaching it here, beside the other connector actions.
pub use super::connectors_inventory::{ConnectorView, list};

pub const INACTIVITY_MS: i64 = 30 * 86_400 * 1000;
pub const INACTIVE_REASON: &str = "inactive_30d";
const SWEEP_EVERY: Duration = Duration::from_secs(3600);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ApprovalError {
    #[error("not_found: no approval request with that id")]
    NotFound,
    #[error("expired: the approval request expired; start the connection again from the application")]
    Expired,
    #[error("locked: too many wrong codes; start the connection again from the application")]
    Locked,
    #[error("invalid_code: the code does not match ({remaining} attempts left)")]
    InvalidCode { remaining: i64 },
    #[error("already_approved: this request was already approved")]
    AlreadyApproved,
    #[error("already_used: tokens were already issued for this connector; revoke it instead")]
    AlreadyUsed,
    #[error("rejected: this request can no longer be approved (its client was revoked, or its stored record was found damaged)")]
    Rejected,
    #[error("edge database: {0}")]
    Db(String),
}

impl From<rusqlite::Error> for ApprovalError {
    fn from(e: rusqlite::Error) -> Self {
        ApprovalError::Db(e.to_string())
    }
}

impl ApprovalError {
    /// The wire code (spec §4) of this failure.
    pub fn code(&self) -> &'static str {
        match self {
            ApprovalError::NotFound => "not_found",
            ApprovalError::Expired => "expired",
            ApprovalError::Locked => "locked",
            ApprovalError::InvalidCode { .. } => "invalid_code",
            ApprovalError::AlreadyApproved => "already_approved",
            ApprovalError::AlreadyUsed => "already_used",
            ApprovalError::Rejected => "rejected",
            ApprovalError::Db(_) => "internal_error",
        }
    }

    /// The HTTP status of this failure (spec §4.4).
    pub fn status(&self) -> u16 {
        match self {
            ApprovalError::InvalidCode { .. } => 403,
            ApprovalError::Locked => 423,
            ApprovalError::NotFound | ApprovalError::Expired => 404,
            ApprovalError::AlreadyApproved | ApprovalError::AlreadyUsed => 409,
            // As the approval page's poll answers a rejected request.
            ApprovalError::Rejected => 410,
            ApprovalError::Db(_) => 500,
        }
    }
}

/// What the operator sees before typing the code.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ApprovalInfo {
    pub request_id: String,
    pub client_id: String,
    pub client_name: Option<String>,
    pub redirect_uri: String,
    pub scope: String,
    pub connector_id: String,
    pub expires_at_ms: i64,
    /// What the request asks for and who sent it, so the operator can tell it
    /// from a stranger's. Absent in an older edge's answer.
    #[serde(default)]
    pub resource: Option<String>,
    #[serde(default)]
    pub created_at_ms: Option<i64>,
    #[serde(default)]
    pub requester_addr: Option<String>,
    #[serde(default)]
    pub requester_ua: Option<String>,
}

struct ApprovalRow {
    info: ApprovalInfo,
    status: String,
    code_hash: String,
    attempts: i64,
    resource: String,
    auth_source: String,
}

fn load_approval(tx: &Transaction<'_>, request_id: &str) -> rusqlite::Result<Option<ApprovalRow>> {
    tx.query_row(
        "SELECT a.request_id, a.client_id, c.client_name, a.redirect_uri, a.scope, a.connector_id, a.expires_at_ms,
                a.status, a.code_hash, a.attempts, a.resource, a.auth_source, a.created_at_ms, a.requester_addr, a.requester_ua
         FROM approvals a LEFT JOIN clients c ON c.client_id = a.client_id WHERE a.request_id = ?1",
        [request_id],
        |r| {
            Ok(ApprovalRow {
                info: ApprovalInfo {
                    request_id: r.get(0)?,
                    client_id: r.get(1)?,
                    client_name: r.get(2)?,
                    redirect_uri: r.get(3)?,
                    scope: r.get(4)?,
                    connector_id: r.get(5)?,
                    expires_at_ms: r.get(6)?,
                    resource: r.get(10)?,
                    created_at_ms: r.get(12)?,
                    requester_addr: r.get(13)?,
                    requester_ua: r.get(14)?,
                },
                status: r.get(7)?,
                code_hash: r.get(8)?,
                attempts: r.get(9)?,
                resource: r.get(10)?,
                auth_source: r.get(11)?,
            })
        },
    )
    .optional()
}

/// The approval request as the operator should review it; only pending ones.
pub fn inspect(store: &EdgeStore, request_id: &str) -> Result<ApprovalInfo, ApprovalError> {
    let now = store.now_ms();
    let row = store.read(|tx| load_approval(tx, request_id))?.ok_or(ApprovalError::NotFound)?;
    check_pending(&row, now)?;
    Ok(row.info)
}

fn check_pending(row: &ApprovalRow, now: i64) -> Result<(), ApprovalError> {
    match row.status.as_str() {
        "locked" => Err(ApprovalError::Locked),
        "approved" => Err(ApprovalError::AlreadyApproved),
        "rejected" => Err(ApprovalError::Rejected),
        _ if row.info.expires_at_ms <= now || row.status == "expired" => Err(ApprovalError::Expired),
        "pending" => Ok(()),
        _ => Err(ApprovalError::NotFound),
    }
}

/// Checks the code and, if it matches, approves this one request and creates its
/// own connector and the client's grant, all in one transaction. No other
/// request is approved with it, however alike (same client, redirect, resource,
/// scope): each has its own connector, PKCE challenge and poll, and a stranger's
/// look-alike must not ride on the operator's approval. A wrong code costs one
/// of five attempts.
pub fn approve(store: &EdgeStore, request_id: &str, code: &str, approved_by: &str) -> Result<ApprovalInfo, ApprovalError> {
    let now = store.now_ms();
    let pepper = store.pepper().to_vec();
    // The attempt counter must persist even when the answer is an error, so the
    // transaction always commits and carries the verdict out as a value.
    store.write(|tx| -> rusqlite::Result<Result<ApprovalInfo, ApprovalError>> {
        let Some(row) = load_approval(tx, request_id)? else { return Ok(Err(ApprovalError::NotFound)) };
        if let Err(e) = check_pending(&row, now) {
            return Ok(Err(e));
        }
        let well_formed = code.len() == 6 && code.bytes().all(|b| b.is_ascii_digit());
        if !well_formed || !same(&approval_code_hash(&pepper, request_id, code), &row.code_hash) {
            let attempts = row.attempts + 1;
            let status = if attempts >= MAX_ATTEMPTS { "locked" } else { "pending" };
            tx.execute("UPDATE approvals SET attempts = ?2, status = ?3 WHERE request_id = ?1", params![request_id, attempts, status])?;
            return Ok(Err(if attempts >= MAX_ATTEMPTS {
                ApprovalError::Locked
            } else {
                ApprovalError::InvalidCode { remaining: MAX_ATTEMPTS - attempts }
            }));
        }
        let i = &row.info;
        tx.execute(
            "UPDATE approvals SET status = 'approved', approved_at_ms = ?2, approved_by = ?3 WHERE request_id = ?1 AND status = 'pending'",
            params![request_id, now, approved_by],
        )?;
        tx.execute(
            "INSERT OR IGNORE INTO connectors (connector_id, client_id, status, resource, scope, redirect_uri, auth_source,
                grant_generation, approved_at_ms, approved_by, token_issue_count)
             VALUES (?1, ?2, 'active', ?3, ?4, ?5, ?6, 1, ?7, ?8, 0)",
            params![i.connector_id, i.client_id, row.resource, i.scope, i.redirect_uri, row.auth_source, now, approved_by],
        )?;
        tx.execute(
            "INSERT INTO grants (client_id, connector_id, status) VALUES (?1, ?2, 'active')
             ON CONFLICT(client_id) DO UPDATE SET connector_id = excluded.connector_id, status = 'active'",
            params![i.client_id, i.connector_id],
        )?;
        tx.execute("UPDATE clients SET approved = 1 WHERE client_id = ?1", [&i.client_id])?;
        Ok(Ok(row.info))
    })?
}

/// Withdraws a request. An approved one also loses its connector, unless tokens
/// were already issued (then it is a live connector: revoke it instead).
pub fn cancel(store: &EdgeStore, request_id: &str) -> Result<(), ApprovalError> {
    store.write(|tx| -> Result<(), ApprovalError> {
        let Some(row) = load_approval(tx, request_id)? else { return Err(ApprovalError::NotFound) };
        let issued: Option<i64> = tx
            .query_row("SELECT token_issue_count FROM connectors WHERE connector_id = ?1", [&row.info.connector_id], |r| r.get(0))
            .optional()?;
        if issued.is_some_and(|n| n > 0) {
            return Err(ApprovalError::AlreadyUsed);
        }
        tx.execute("DELETE FROM approvals WHERE request_id = ?1", [request_id])?;
        if issued.is_some() {
            let others: i64 = tx.query_row(
                "SELECT COUNT(*) FROM approvals WHERE connector_id = ?1",
                [&row.info.connector_id],
                |r| r.get(0),
            )?;
            if others == 0 {
                delete_connector(tx, &row.info.connector_id)?;
            }
        }
        Ok(())
    })
}

/// Deletes a connector with the grant that points at it and its authorization
/// codes: what approving its request created, once nothing stands on it (no token
/// issued, no other approval leading to it). A grant row is its client's, so the
/// one naming this connector is that of the connector's own client.
pub(super) fn delete_connector(tx: &Transaction<'_>, connector_id: &str) -> rusqlite::Result<()> {
    tx.execute("DELETE FROM connectors WHERE connector_id = ?1", [connector_id])?;
    tx.execute("DELETE FROM grants WHERE connector_id = ?1", [connector_id])?;
    tx.execute("DELETE FROM auth_codes WHERE connector_id = ?1", [connector_id])?;
    Ok(())
}

/// What a revocation was asked for: one connector (`connector revoke`) or every
/// connector of one OAuth client (`revoke-client`). Both fail the same ways, with
/// the same codes and statuses; only the message names what was not there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RevokeTarget {
    Connector,
    Client,
}

impl RevokeTarget {
    fn not_found(self) -> &'static str {
        match self {
            RevokeTarget::Connector => "no connector with that id",
            RevokeTarget::Client => "no OAuth client with that id is registered or has ever been approved",
        }
    }

    fn already_revoked(self) -> &'static str {
        match self {
            RevokeTarget::Connector => "the connector is already revoked",
            RevokeTarget::Client => "the client has no active connector and its grant is already revoked",
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RevokeError {
    #[error("not_found: {}", .0.not_found())]
    NotFound(RevokeTarget),
    #[error("already_revoked: {}", .0.already_revoked())]
    AlreadyRevoked(RevokeTarget),
    #[error("edge database: {0}")]
    Db(String),
}

impl RevokeError {
    pub fn code(&self) -> &'static str {
        match self {
            RevokeError::NotFound(_) => "not_found",
            RevokeError::AlreadyRevoked(_) => "already_revoked",
            RevokeError::Db(_) => "internal_error",
        }
    }

    pub fn status(&self) -> u16 {
        match self {
            RevokeError::NotFound(_) => 404,
            RevokeError::AlreadyRevoked(_) => 409,
            RevokeError::Db(_) => 500,
        }
    }
}

impl From<rusqlite::Error> for RevokeError {
    fn from(e: rusqlite::Error) -> Self {
        RevokeError::Db(e.to_string())
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Revoked {
    pub ok: bool,
    pub connector_id: String,
    pub revoked_at_ms: i64,
    pub deleted_tokens: usize,
}

pub(super) fn revoke_in(tx: &Transaction<'_>, connector_id: &str, by: &str, now: i64) -> Result<Revoked, RevokeError> {
    let status: Option<String> =
        tx.query_row("SELECT status FROM connectors WHERE connector_id = ?1", [connector_id], |r| r.get(0)).optional()?;
    match status.as_deref() {
        None => return Err(RevokeError::NotFound(RevokeTarget::Connector)),
        Some("revoked") => return Err(RevokeError::AlreadyRevoked(RevokeTarget::Connector)),
        _ => {}
    }
    // The generation bump fences any token minted under the old one, even one a
    // concurrent transaction might still hand out.
    tx.execute(
        "UPDATE connectors SET status = 'revoked', grant_generation = grant_generation + 1, revoked_at_ms = ?2, revoked_by = ?3
         WHERE connector_id = ?1",
        params![connector_id, now, by],
    )?;
    tx.execute(
        "UPDATE grants SET status = 'revoked', revoked_at_ms = ?2, revoked_by = ?3 WHERE connector_id = ?1",
        params![connector_id, now, by],
    )?;
    let deleted_tokens = tx.execute("DELETE FROM tokens WHERE connector_id = ?1", [connector_id])?;
    tx.execute("DELETE FROM auth_codes WHERE connector_id = ?1", [connector_id])?;
    Ok(Revoked { ok: true, connector_id: connector_id.to_string(), revoked_at_ms: now, deleted_tokens })
}

pub fn revoke(store: &EdgeStore, connector_id: &str, by: &str) -> Result<Revoked, RevokeError> {
    let now = store.now_ms();
    store.write(|tx| revoke_in(tx, connector_id, by, now))
}

/// Revokes every active connector idle for 30 days, counting MCP use, token
/// issuance (a refresh is the client showing up) and approval as activity;
/// keeping the audit row; also expires stale approvals. Returns the revoked ids.
pub fn sweep(store: &EdgeStore) -> Result<Vec<String>, RevokeError> {
    let now = store.now_ms();
    store.write(|tx| {
        expire_approvals(tx, now)?;
        // Unapproved registrations expire on their own too, not only when the
        // next registration happens to look.
        super::dcr::purge_stale_clients(tx, now)?;
        let ids: Vec<String> = {
            let mut stmt = tx.prepare(
                "SELECT connector_id FROM connectors WHERE status = 'active'
                 AND MAX(COALESCE(last_used_at_ms, 0), COALESCE(last_token_issued_at_ms, 0), approved_at_ms) + ?1 < ?2",
            )?;
            stmt.query_map(params![INACTIVITY_MS, now], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?
        };
        for id in &ids {
            revoke_in(tx, id, INACTIVE_REASON, now)?;
        }
        Ok(ids)
    })
}

/// Runs [`sweep`] at start and then hourly until `shutdown`.
pub fn spawn_sweeper(store: Arc<EdgeStore>, shutdown: CancellationToken) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(SWEEP_EVERY);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tick.tick() => match sweep(&store) {
                    Ok(ids) if !ids.is_empty() => tracing::info!(count = ids.len(), "revoked connectors idle for 30 days"),
                    Ok(_) => {}
                    Err(e) => tracing::warn!("inactivity sweep failed: {e}"),
                },
            }
        }
    })
}
