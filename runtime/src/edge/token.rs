//! `POST /oauth/token` (authorization_code and refresh_token grants; the
//! automation clients' client_credentials is [`super::automation_grant`]), the
//! authorization codes it redeems, and bearer verification for `/mcp`.
//!
//! Codes live 5 minutes and are deleted before they are checked, so a failed or
//! replayed redemption can never be retried. Refresh tokens rotate: the old one is
//! kept as a `used` tombstone so that presenting it again (a sign it leaked) revokes
//! its whole family. Every token row carries `connector_id` and `grant_generation`;
//! revoking a connector bumps the generation and deletes its rows, so the next
//! request with any earlier token fails.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::Response;
use axum::routing::post;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rusqlite::{OptionalExtension, Transaction, params};
use serde_json::json;

use super::authorize::AuthRequest;
use super::automation::{self, is_automation_client};
use super::connectors_revoke_client::client_grant_revoked;
use super::http::{flat_params, internal_error, json_response, oauth_error, read_body};
use super::secrets::{hash_opaque, pkce_s256_matches, random_b64, same};
use super::store::EdgeStore;
use super::{EdgeState, SCOPE};

pub const CODE_TTL_MS: i64 = 5 * 60 * 1000;
pub const ACCESS_TTL_MS: i64 = 86_400 * 1000;
pub const REFRESH_TTL_MS: i64 = 30 * 86_400 * 1000;
pub const MAX_BODY_BYTES: usize = 64 * 1024;
/// `last_used_at_ms` is written at most this often per connector.
pub const LAST_USED_THROTTLE_MS: i64 = 86_400 * 1000;

const REFRESH_FAILED: &str = "unknown, expired or already-used refresh_token";
const CODE_FAILED: &str = "unknown, expired or already-used authorization code";
/// The words `/oauth/authorize` uses for the same refusal (spec §3).
const GRANT_REVOKED: &str = "client grant is revoked";

pub fn routes() -> Router<Arc<EdgeState>> {
    Router::new().route("/oauth/token", post(token)).route("/token", post(token)).route("/mcp/oauth/token", post(token))
}

/// Stores a fresh single-use code for `req` and returns it.
pub fn mint_code(tx: &Transaction<'_>, req: &AuthRequest, connector_id: &str, generation: i64, now_ms: i64) -> rusqlite::Result<String> {
    let code = format!("hac_{}", random_b64::<32>());
    tx.execute("DELETE FROM auth_codes WHERE expires_at_ms <= ?1", [now_ms])?;
    tx.execute(
        "INSERT INTO auth_codes (code_hash, client_id, redirect_uri, code_challenge, resource, scope, connector_id, grant_generation, expires_at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        params![
            hash_opaque(&code),
            req.client.client_id,
            req.redirect_uri,
            req.code_challenge,
            req.resource,
            req.scope,
            connector_id,
            generation,
            now_ms + CODE_TTL_MS
        ],
    )?;
    Ok(code)
}

enum Grant {
    Issued { access: String, refresh: String },
    Denied(&'static str, String),
}

/// Client credentials from the body, else from HTTP Basic (RFC 6749 §2.3.1).
fn client_credentials(p: &HashMap<String, String>, headers: &HeaderMap) -> (Option<String>, Option<String>) {
    let basic = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "))
        .and_then(|b| STANDARD.decode(b.trim()).ok())
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|s| {
            let (id, secret) = s.split_once(':')?;
            let dec = |x: &str| url::form_urlencoded::parse(format!("v={x}").as_bytes()).next().map(|(_, v)| v.into_owned());
            Some((dec(id)?, dec(secret)?))
        });
    let id = p.get("client_id").cloned().or_else(|| basic.as_ref().map(|b| b.0.clone()));
    let secret = p.get("client_secret").cloned().or_else(|| basic.map(|b| b.1));
    (id, secret)
}

async fn token(State(s): State<Arc<EdgeState>>, headers: HeaderMap, body: Body) -> Response {
    let body = match read_body(body, MAX_BODY_BYTES, "invalid_request").await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let p = match flat_params(&headers, &body) {
        Ok(p) => p,
        Err(m) => return oauth_error(400, "invalid_request", &m),
    };
    let grant_type = match p.get("grant_type").map(String::as_str) {
        Some(g @ ("authorization_code" | "refresh_token" | "client_credentials")) => g.to_string(),
        Some(_) => {
            return oauth_error(400, "unsupported_grant_type", "grant_type must be authorization_code, refresh_token or client_credentials");
        }
        None => return oauth_error(400, "invalid_request", "grant_type is required"),
    };
    let (client_id, secret) = client_credentials(&p, &headers);
    let Some(client_id) = client_id else {
        return oauth_error(401, "invalid_client", "client_id is required");
    };
    if grant_type == "client_credentials" {
        return super::automation_grant::grant(&s, &p, &client_id, secret.as_deref());
    }
    if is_automation_client(&client_id) {
        return oauth_error(400, "unauthorized_client", "automation clients (svc_…) may only use grant_type=client_credentials");
    }
    let client = match super::cimd::resolve_client(&s, &client_id).await {
        Ok(Some(c)) => c,
        Ok(None) => return oauth_error(401, "invalid_client", "unknown client"),
        Err(e) => return super::cimd::error_response(e, 401),
    };
    if client.auth_method == "client_secret_post" {
        let ok = match (&secret, &client.secret_hash) {
            (Some(sec), Some(h)) => same(&hash_opaque(sec), h),
            _ => false,
        };
        if !ok {
            return oauth_error(401, "invalid_client", "client authentication failed");
        }
    }
    if !client.grant_types.contains(&grant_type) {
        return oauth_error(400, "unauthorized_client", "client is not registered for this grant_type");
    }
    let iss = &s.config.issuer;
    // Required here (spec §3), unlike at /authorize where absent means the default.
    let Some(resource) = p.get("resource").and_then(|r| s.config.normalize_resource(r)) else {
        return oauth_error(400, "invalid_target", &format!("resource must be {iss} or {iss}/mcp"));
    };
    let now = s.store.now_ms();
    let outcome = if grant_type == "authorization_code" {
        s.store.write(|tx| redeem_code(tx, &p, &client_id, &resource, now))
    } else {
        s.store.write(|tx| rotate_refresh(tx, &p, &client_id, now))
    };
    match outcome {
        Ok(Grant::Issued { access, refresh }) => json_response(
            200,
            json!({
                "access_token": access,
                "token_type": "Bearer",
                "expires_in": ACCESS_TTL_MS / 1000,
                "refresh_token": refresh,
                "scope": SCOPE,
            }),
        ),
        Ok(Grant::Denied(error, desc)) => oauth_error(400, error, &desc),
        Err(e) => internal_error("cannot issue tokens", e),
    }
}

fn redeem_code(tx: &Transaction<'_>, p: &HashMap<String, String>, client_id: &str, resource: &str, now: i64) -> rusqlite::Result<Grant> {
    let denied = |m: &str| Ok(Grant::Denied("invalid_grant", m.to_string()));
    let Some(code) = p.get("code") else {
        return Ok(Grant::Denied("invalid_request", "code is required".into()));
    };
    type Row = (String, String, String, String, String, i64, i64);
    // Consumed before it is checked: whatever follows, this code is spent.
    let row: Option<Row> = tx
        .query_row(
            "DELETE FROM auth_codes WHERE code_hash = ?1
             RETURNING client_id, redirect_uri, code_challenge, resource, connector_id, grant_generation, expires_at_ms",
            [hash_opaque(code)],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?)),
        )
        .optional()?;
    // A fenced client is told so whatever it sends (spent code included).
    if client_grant_revoked(tx, client_id)? {
        return denied(GRANT_REVOKED);
    }
    let Some((c_client, c_redirect, challenge, c_resource, connector_id, generation, expires)) = row else {
        return denied(CODE_FAILED);
    };
    if expires <= now {
        return denied(CODE_FAILED);
    }
    if c_client != client_id {
        return denied("the code was issued to another client");
    }
    if p.get("redirect_uri").map(String::as_str) != Some(c_redirect.as_str()) {
        return denied("redirect_uri does not match the authorization request");
    }
    if c_resource != resource {
        return denied("resource does not match the authorization request");
    }
    if !p.get("code_verifier").is_some_and(|v| pkce_s256_matches(v, &challenge)) {
        return denied("PKCE verification failed");
    }
    if !connector_is_current(tx, &connector_id, generation)? {
        return denied("the connector for this code has been revoked");
    }
    // A fresh pair replaces every earlier credential of this connector.
    tx.execute("DELETE FROM tokens WHERE connector_id = ?1", [&connector_id])?;
    let family = random_b64::<16>();
    issue_pair(tx, &connector_id, client_id, generation, &family, now)
}

fn rotate_refresh(tx: &Transaction<'_>, p: &HashMap<String, String>, client_id: &str, now: i64) -> rusqlite::Result<Grant> {
    let denied = || Ok(Grant::Denied("invalid_grant", REFRESH_FAILED.to_string()));
    let Some(refresh) = p.get("refresh_token") else {
        return Ok(Grant::Denied("invalid_request", "refresh_token is required".into()));
    };
    let hash = hash_opaque(refresh);
    type Row = (String, String, i64, String, i64, i64);
    let row: Option<Row> = tx
        .query_row(
            "SELECT connector_id, client_id, grant_generation, family_id, expires_at_ms, used FROM tokens
             WHERE token_hash = ?1 AND kind = 'refresh'",
            [&hash],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?)),
        )
        .optional()?;
    let Some((connector_id, t_client, generation, family, expires, used)) = row else {
        return denied();
    };
    if used != 0 {
        // A rotated token came back: someone holds a copy. Kill the whole family.
        tx.execute("DELETE FROM tokens WHERE family_id = ?1", [&family])?;
        return denied();
    }
    if expires <= now || t_client != client_id || !connector_is_current(tx, &connector_id, generation)? {
        return denied();
    }
    tx.execute("UPDATE tokens SET used = 1 WHERE token_hash = ?1", [&hash])?;
    tx.execute("DELETE FROM tokens WHERE family_id = ?1 AND kind = 'access'", [&family])?;
    issue_pair(tx, &connector_id, client_id, generation, &family, now)
}

fn connector_is_current(tx: &Transaction<'_>, connector_id: &str, generation: i64) -> rusqlite::Result<bool> {
    let g: Option<i64> = tx
        .query_row(
            "SELECT grant_generation FROM connectors WHERE connector_id = ?1 AND status = 'active'",
            [connector_id],
            |r| r.get(0),
        )
        .optional()?;
    Ok(g == Some(generation))
}

fn issue_pair(tx: &Transaction<'_>, connector_id: &str, client_id: &str, generation: i64, family: &str, now: i64) -> rusqlite::Result<Grant> {
    let access = format!("hat_{}", random_b64::<32>());
    let refresh = format!("hrt_{}", random_b64::<32>());
    let insert = "INSERT INTO tokens (token_hash, kind, connector_id, client_id, grant_generation, family_id, expires_at_ms)
                  VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";
    tx.execute(insert, params![hash_opaque(&access), "access", connector_id, client_id, generation, family, now + ACCESS_TTL_MS])?;
    tx.execute(insert, params![hash_opaque(&refresh), "refresh", connector_id, client_id, generation, family, now + REFRESH_TTL_MS])?;
    tx.execute(
        "UPDATE connectors SET token_issue_count = token_issue_count + 1, last_token_issued_at_ms = ?2 WHERE connector_id = ?1",
        params![connector_id, now],
    )?;
    Ok(Grant::Issued { access, refresh })
}

/// Who a valid bearer belongs to.
#[derive(Debug, Clone)]
pub struct Principal {
    /// The connector, or for an automation client its `svc_` client id.
    pub connector_id: String,
    pub client_id: String,
    /// For an automation token (`principal_type:"automation"`), the one device
    /// it may reach; `None` for a connector, which may reach any device.
    pub device_id: Option<String>,
}

/// Checks an access token against the store on every call: it must exist, be
/// unexpired, and belong to an active connector of the same grant generation.
/// Also refreshes `last_used_at_ms` when it is older than the throttle.
pub fn verify_bearer(store: &EdgeStore, token: &str) -> rusqlite::Result<Option<Principal>> {
    let now = store.now_ms();
    if token.starts_with(automation::TOKEN_PREFIX) {
        let found = store.read(|tx| automation::verify_token(tx, token, now))?;
        return Ok(found.map(|(client_id, device_id)| Principal { connector_id: client_id.clone(), client_id, device_id: Some(device_id) }));
    }
    let found: Option<(String, String, Option<i64>)> = store.read(|tx| {
        tx.query_row(
            "SELECT t.connector_id, t.client_id, c.last_used_at_ms FROM tokens t JOIN connectors c ON c.connector_id = t.connector_id
             WHERE t.token_hash = ?1 AND t.kind = 'access' AND t.expires_at_ms > ?2
               AND c.status = 'active' AND c.grant_generation = t.grant_generation",
            params![hash_opaque(token), now],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .optional()
    })?;
    let Some((connector_id, client_id, last_used)) = found else { return Ok(None) };
    if last_used.is_none_or(|t| now - t >= LAST_USED_THROTTLE_MS) {
        store.write(|tx| {
            tx.execute("UPDATE connectors SET last_used_at_ms = ?2 WHERE connector_id = ?1", params![connector_id, now])
        })?;
    }
    Ok(Some(Principal { connector_id, client_id, device_id: None }))
}
