//! `GET /oauth/authorize` and `GET /oauth/authorize/poll`.
//!
//! Only a confidential client (`client_secret_post`, whose token request needs its
//! secret) with an active grant gets a code at once. Every request of a public
//! client (DCR `none`, every CIMD client: their `client_id` is no secret, and
//! ChatGPT's is the same for every ChatGPT user) is its own connector instance and
//! becomes a pending approval: a record holding the request (client, redirect,
//! PKCE challenge, resource, scope, state, and who asked: source address and user
//! agent), a 6-digit code kept only as an HMAC, and a resume token for the page's
//! poll. The operator approves that very request from a terminal with
//! `herdr-mcp connector approve <request_id>`; the next poll of that request mints
//! the code, bound to its own challenge, redirect and resource. Refreshing the
//! resulting tokens needs no new approval.
//!
//! Errors go back to the client by redirect (with `iss`, RFC 9207) only once the
//! client is trusted: an operator approved it at least once. Before that
//! (unknown client, unregistered redirect, or any bad parameter of a client
//! nobody approved) the answer is a JSON 400 on the edge itself, so an anonymous
//! registration cannot turn the edge into an open redirector.
//!
//! Creating pending requests is rate limited per source address
//! ([`super::ratelimit`]), and one source may hold at most
//! [`MAX_PENDING_PER_SOURCE`] of the [`MAX_PENDING`] pending requests and
//! [`MAX_PENDING_PER_CLIENT`] of one client's.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::connect_info::ConnectInfo;
use axum::extract::{RawQuery, State};
use axum::{Extension, Router};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use rusqlite::{OptionalExtension, Transaction, params};
use serde_json::json;

use super::approval_page::{self, Lang, PageInput};
use super::approval_reject::reject_damaged;
use super::dcr::{Client, load_client};
use super::http::{internal_error, json_response, oauth_error};
use super::ratelimit::PeerAddr;
use super::secrets::{hash_opaque, hmac_hex, random_b64, same, six_digit_code};
use super::token::mint_code;
use super::{EdgeState, SCOPE};

pub const MAX_QUERY_BYTES: usize = 16 * 1024;
pub const MAX_PARAM_BYTES: usize = 4096;
pub const APPROVAL_TTL_MS: i64 = 10 * 60 * 1000;
pub const MAX_ATTEMPTS: i64 = 5;
pub const MAX_PENDING: i64 = 128;
/// Pending requests of one client from one source address. Counted per source
/// because a public `client_id` is shared: ChatGPT's is everyone's.
pub const MAX_PENDING_PER_CLIENT: i64 = 4;
/// Pending requests one source address may hold at once, of any client.
pub const MAX_PENDING_PER_SOURCE: i64 = 16;
/// Longest user agent kept with a request (it is shown, not parsed).
pub const MAX_USER_AGENT_CHARS: usize = 256;
/// Seconds between polls of the approval page.
pub const POLL_INTERVAL_MS: u64 = 1500;

pub fn routes() -> Router<Arc<EdgeState>> {
    Router::new().route("/oauth/authorize", get(authorize)).route("/oauth/authorize/poll", get(poll))
}

/// `approval_code_hash` per spec §4: the request id is inside the MAC so a code
/// cannot be replayed against another request.
pub fn approval_code_hash(pepper: &[u8], request_id: &str, code: &str) -> String {
    hmac_hex(pepper, &format!("herdr-mcp-oauth-approval:{request_id}:{code}"))
}

pub fn resume_hash(request_id: &str, resume_token: &str) -> String {
    hash_opaque(&format!("{request_id}:{resume_token}"))
}

/// Parses a query string with the size rules above; a repeated parameter is an error.
pub fn parse_query(raw: Option<&str>) -> Result<HashMap<String, String>, String> {
    let raw = raw.unwrap_or("");
    if raw.len() > MAX_QUERY_BYTES {
        return Err(format!("query exceeds {MAX_QUERY_BYTES} bytes"));
    }
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(raw).map_err(|e| format!("malformed query: {e}"))?;
    let mut out = HashMap::new();
    for (k, v) in pairs {
        if v.len() > MAX_PARAM_BYTES {
            return Err(format!("parameter {k:?} exceeds {MAX_PARAM_BYTES} bytes"));
        }
        if out.insert(k.clone(), v).is_some() {
            return Err(format!("parameter {k:?} is repeated"));
        }
    }
    Ok(out)
}

/// Who sent an authorization request, as the operator is shown it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Requester {
    /// The source address (see [`super::ratelimit::SourceLimits::source`]).
    pub addr: Option<IpAddr>,
    /// The `User-Agent`, cut to [`MAX_USER_AGENT_CHARS`] without control characters.
    pub user_agent: Option<String>,
}

impl Requester {
    pub fn from_request(s: &EdgeState, peer: Option<SocketAddr>, headers: &HeaderMap) -> Self {
        let user_agent = headers.get(header::USER_AGENT).and_then(|v| v.to_str().ok()).map(|ua| {
            ua.chars().filter(|c| !c.is_control()).take(MAX_USER_AGENT_CHARS).collect::<String>()
        });
        Self { addr: s.limits.source(peer.map(|p| p.ip()), headers), user_agent: user_agent.filter(|u| !u.is_empty()) }
    }

    /// The address as stored and shown; `unknown` when the server had none.
    pub fn addr_text(&self) -> String {
        self.addr.map(|a| a.to_string()).unwrap_or_else(|| "unknown".into())
    }
}

/// What the edge knows of a client before it answers an authorization request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Standing {
    /// An operator approved a request of this client at least once, so its
    /// registered redirect URIs have been seen by a human.
    pub approved: bool,
    pub grant: GrantState,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GrantState {
    None,
    /// An active grant; `generation` is its connector's, if that is still active.
    Active { connector_id: String, generation: Option<i64> },
    /// Revoked by the operator (`connector revoke`, `revoke-client`).
    Revoked,
}

/// What `/oauth/authorize` does with a valid request: decided from facts alone,
/// without IO, so the rule is tested apart from HTTP and SQLite.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// A code at once, for this connector and generation.
    Issue { connector_id: String, generation: i64 },
    /// A new pending request that only an explicit approval of it can complete.
    AwaitApproval,
    /// `access_denied`: the client is fenced.
    Deny,
}

/// The issuing rule. A public client's `client_id` proves nothing, so its
/// grant never lets a request skip approval; a confidential client's code is
/// useless without its secret, so its grant may.
pub fn decide(public_client: bool, grant: &GrantState) -> Decision {
    match grant {
        GrantState::Revoked | GrantState::Active { generation: None, .. } => Decision::Deny,
        GrantState::Active { connector_id, generation: Some(generation) } if !public_client => {
            Decision::Issue { connector_id: connector_id.clone(), generation: *generation }
        }
        GrantState::Active { .. } | GrantState::None => Decision::AwaitApproval,
    }
}

/// Whether errors may travel to the client's redirect URI: only once a human
/// approved the client (or fenced it after approving it).
pub fn errors_may_redirect(standing: &Standing) -> bool {
    standing.approved
}

pub fn load_standing(tx: &Transaction<'_>, client_id: &str) -> rusqlite::Result<Standing> {
    let approved: bool =
        tx.query_row("SELECT approved FROM clients WHERE client_id = ?1", [client_id], |r| r.get::<_, i64>(0)).optional()?.unwrap_or(0) != 0;
    let grant: Option<(String, String)> = tx
        .query_row("SELECT connector_id, status FROM grants WHERE client_id = ?1", [client_id], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    let grant = match grant {
        None => GrantState::None,
        Some((_, status)) if status != "active" => GrantState::Revoked,
        Some((connector_id, _)) => {
            let generation: Option<i64> = tx
                .query_row(
                    "SELECT grant_generation FROM connectors WHERE connector_id = ?1 AND status = 'active'",
                    [&connector_id],
                    |r| r.get(0),
                )
                .optional()?;
            GrantState::Active { connector_id, generation }
        }
    };
    Ok(Standing { approved, grant })
}

/// A failed authorization request, and where its answer goes.
#[derive(Debug)]
pub enum AuthorizeError {
    /// Answered on the edge itself (JSON 400): the client is not trusted with it.
    Local { error: &'static str, description: String },
    /// Sent to a trusted client's registered redirect URI (RFC 6749 §4.1.2.1).
    Redirect { redirect_uri: String, error: &'static str, description: String, state: Option<String>, iss: String },
    /// This source asked too often or holds too many pending requests.
    RateLimited { reason: &'static str, retry_after_secs: u64 },
    /// A shared cap is reached.
    Full(&'static str),
    Internal(String),
}

impl IntoResponse for AuthorizeError {
    fn into_response(self) -> Response {
        match self {
            AuthorizeError::Local { error, description } => oauth_error(400, error, &description),
            AuthorizeError::Redirect { redirect_uri, error, description, state, iss } => {
                redirect_to(&redirect_uri, &[("error", error), ("error_description", &description)], state.as_deref(), &iss)
            }
            AuthorizeError::RateLimited { reason, retry_after_secs } => {
                let mut resp = oauth_error(429, "temporarily_unavailable", reason);
                if let Ok(v) = HeaderValue::from_str(&retry_after_secs.to_string()) {
                    resp.headers_mut().insert(header::RETRY_AFTER, v);
                }
                resp
            }
            AuthorizeError::Full(reason) => oauth_error(429, "temporarily_unavailable", reason),
            AuthorizeError::Internal(e) => internal_error("cannot record the authorization request", e),
        }
    }
}

/// A validated authorization request.
#[derive(Debug, Clone)]
pub struct AuthRequest {
    pub client: Client,
    pub redirect_uri: String,
    pub code_challenge: String,
    pub resource: String,
    pub scope: String,
    pub state: Option<String>,
}

/// A 302 to the client's redirect URI with `extra` plus `state` and `iss`.
pub fn redirect_to(redirect_uri: &str, extra: &[(&str, &str)], state: Option<&str>, iss: &str) -> Response {
    let Ok(mut url) = url::Url::parse(redirect_uri) else {
        return oauth_error(400, "invalid_request", "redirect_uri is not a URL");
    };
    {
        let mut q = url.query_pairs_mut();
        for (k, v) in extra {
            q.append_pair(k, v);
        }
        if let Some(s) = state {
            q.append_pair("state", s);
        }
        q.append_pair("iss", iss);
    }
    let mut resp = StatusCode::FOUND.into_response();
    if let Ok(v) = HeaderValue::from_str(url.as_str()) {
        resp.headers_mut().insert(header::LOCATION, v);
    }
    resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

/// The redirect URI an approval recorded, if it still parses and is still one the
/// client registered. The row was checked when it was written, but the database can
/// be damaged or carried over from an older schema, and a code must never travel to
/// a URI nobody verified.
pub fn verified_redirect(client: &Client, stored: &str) -> Option<url::Url> {
    if !client.redirect_uris.iter().any(|u| u == stored) {
        return None;
    }
    url::Url::parse(stored).ok()
}

/// Builds the redirect URL (as a string) that carries a fresh code.
pub fn code_redirect_url(mut url: url::Url, code: &str, state: Option<&str>, iss: &str) -> String {
    {
        let mut q = url.query_pairs_mut();
        q.append_pair("code", code);
        if let Some(s) = state {
            q.append_pair("state", s);
        }
        q.append_pair("iss", iss);
    }
    url.into()
}

async fn authorize(
    State(s): State<Arc<EdgeState>>,
    peer: Option<Extension<ConnectInfo<PeerAddr>>>,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
) -> Response {
    let q = match parse_query(raw.as_deref()) {
        Ok(q) => q,
        Err(m) => return oauth_error(400, "invalid_request", &m),
    };
    let client_id = q.get("client_id").map(String::as_str).unwrap_or("");
    let client = match super::cimd::resolve_client(&s, client_id).await {
        Ok(Some(c)) => c,
        Ok(None) => return oauth_error(400, "invalid_request", "unknown client_id"),
        Err(e) => return super::cimd::error_response(e, 400),
    };
    if !client.allows_code_grant() {
        return oauth_error(400, "unauthorized_client", "client is not registered for the authorization_code grant");
    }
    let redirect_uri = match q.get("redirect_uri") {
        Some(r) if client.redirect_uris.iter().any(|u| u == r) => r.clone(),
        Some(_) => return oauth_error(400, "invalid_request", "redirect_uri is not registered for this client"),
        None if client.redirect_uris.len() == 1 => client.redirect_uris[0].clone(),
        None => return oauth_error(400, "invalid_request", "redirect_uri is required when several are registered"),
    };
    let standing = match s.store.read(|tx| load_standing(tx, &client.client_id)) {
        Ok(st) => st,
        Err(e) => return AuthorizeError::Internal(e.to_string()).into_response(),
    };
    let state = q.get("state").cloned();
    let iss = s.config.issuer.as_str();
    let trusted = errors_may_redirect(&standing);
    let fail = |error: &'static str, desc: &str| -> Response {
        if trusted {
            AuthorizeError::Redirect {
                redirect_uri: redirect_uri.clone(),
                error,
                description: desc.to_string(),
                state: state.clone(),
                iss: iss.to_string(),
            }
        } else {
            AuthorizeError::Local { error, description: desc.to_string() }
        }
        .into_response()
    };
    if q.get("response_type").map(String::as_str) != Some("code") {
        return fail("unsupported_response_type", "response_type must be code");
    }
    let Some(challenge) = q.get("code_challenge").filter(|c| !c.is_empty()) else {
        return fail("invalid_request", "PKCE code_challenge is required (S256)");
    };
    if q.get("code_challenge_method").map(String::as_str) != Some("S256") {
        return fail("invalid_request", "only code_challenge_method=S256 is supported");
    }
    // A S256 challenge is base64url(SHA-256) = 43 characters.
    if challenge.len() != 43 || !challenge.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
        return fail("invalid_request", "code_challenge must be a base64url SHA-256 digest (43 characters)");
    }
    if let Some(scope) = q.get("scope") {
        let mut tokens = scope.split_ascii_whitespace().peekable();
        if tokens.peek().is_none() || !tokens.all(|t| t == SCOPE) {
            return fail("invalid_scope", "the only scope is mcp");
        }
    }
    let Some(resource) = s.config.normalize_resource(q.get("resource").map(String::as_str).unwrap_or("")) else {
        return fail("invalid_target", &format!("resource must be {iss} or {}", s.config.resource));
    };
    let requester = Requester::from_request(&s, peer.map(|Extension(ConnectInfo(PeerAddr(a)))| a), &headers);
    let req = AuthRequest {
        client,
        redirect_uri: redirect_uri.clone(),
        code_challenge: challenge.clone(),
        resource,
        scope: SCOPE.to_string(),
        state: state.clone(),
    };
    let lang = Lang::from_accept_language(headers.get(header::ACCEPT_LANGUAGE).and_then(|v| v.to_str().ok()));
    match start_or_issue(&s, &req, &requester) {
        Ok(Outcome::Code(code)) => redirect_to(&redirect_uri, &[("code", &code)], state.as_deref(), iss),
        Ok(Outcome::GrantRevoked) => fail("access_denied", "client grant is revoked"),
        Ok(Outcome::Pending { request_id, code, resume_token, expires_at_ms, created_at_ms }) => approval_page::pending(
            lang,
            &PageInput {
                request_id: &request_id,
                code: &code,
                resume_token: &resume_token,
                expires_at_ms,
                now_ms: s.store.now_ms(),
                client_name: req.client.client_name.as_deref(),
                client_id: &req.client.client_id,
                redirect_uri: &req.redirect_uri,
                resource: &req.resource,
                created_at_ms,
                requester: &requester,
            },
        ),
        Ok(Outcome::Duplicate { request_id, expires_at_ms }) => {
            approval_page::duplicate(lang, &request_id, ((expires_at_ms - s.store.now_ms()) / 1000).max(1))
        }
        Ok(Outcome::Refused(e)) => e.into_response(),
        Err(e) => AuthorizeError::Internal(e.to_string()).into_response(),
    }
}

pub enum Outcome {
    Code(String),
    GrantRevoked,
    Pending { request_id: String, code: String, resume_token: String, expires_at_ms: i64, created_at_ms: i64 },
    Duplicate { request_id: String, expires_at_ms: i64 },
    /// Over a cap or a rate limit.
    Refused(AuthorizeError),
}

/// Decides, in one transaction, between an immediate code (a confidential client
/// with an active grant only, see [`decide`]) and a new pending approval.
pub fn start_or_issue(s: &EdgeState, req: &AuthRequest, requester: &Requester) -> rusqlite::Result<Outcome> {
    let now = s.store.now_ms();
    let pepper = s.store.pepper().to_vec();
    let public_client = req.client.auth_method != "client_secret_post";
    let source = requester.addr_text();
    s.store.write(|tx| {
        let standing = load_standing(tx, &req.client.client_id)?;
        match decide(public_client, &standing.grant) {
            Decision::Deny => return Ok(Outcome::GrantRevoked),
            Decision::Issue { connector_id, generation } => {
                return Ok(Outcome::Code(mint_code(tx, req, &connector_id, generation, now)?));
            }
            Decision::AwaitApproval => {}
        }
        expire_approvals(tx, now)?;
        let dup: Option<(String, i64)> = tx
            .query_row(
                "SELECT request_id, expires_at_ms FROM approvals WHERE status = 'pending' AND client_id = ?1
                 AND redirect_uri = ?2 AND code_challenge = ?3 AND resource = ?4 AND scope = ?5 AND state IS ?6",
                params![req.client.client_id, req.redirect_uri, req.code_challenge, req.resource, req.scope, req.state],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        if let Some((request_id, expires_at_ms)) = dup {
            return Ok(Outcome::Duplicate { request_id, expires_at_ms });
        }
        // Per source first: a source over its own share is told so, whatever the
        // shared cap says, and can never fill that cap alone.
        if let Err(retry) = s.limits.authorization.take(requester.addr.unwrap_or(IpAddr::from([0, 0, 0, 0])), now) {
            return Ok(Outcome::Refused(AuthorizeError::RateLimited {
                reason: "authorization_rate_limited",
                retry_after_secs: retry.0,
            }));
        }
        let count = |sql: &str, p: &[&dyn rusqlite::ToSql]| tx.query_row(sql, p, |r| r.get::<_, i64>(0));
        let retry_after_secs = |oldest: Option<i64>| ((oldest.unwrap_or(now + APPROVAL_TTL_MS) - now) / 1000).max(1) as u64;
        let mine = count(
            "SELECT COUNT(*) FROM approvals WHERE status = 'pending' AND requester_addr IS ?1",
            &[&source],
        )?;
        if mine >= MAX_PENDING_PER_SOURCE {
            let oldest: Option<i64> = tx.query_row(
                "SELECT MIN(expires_at_ms) FROM approvals WHERE status = 'pending' AND requester_addr IS ?1",
                [&source],
                |r| r.get(0),
            )?;
            return Ok(Outcome::Refused(AuthorizeError::RateLimited {
                reason: "source_pending_limit",
                retry_after_secs: retry_after_secs(oldest),
            }));
        }
        let of_client = count(
            "SELECT COUNT(*) FROM approvals WHERE status = 'pending' AND client_id = ?1 AND requester_addr IS ?2",
            &[&req.client.client_id, &source],
        )?;
        if of_client >= MAX_PENDING_PER_CLIENT {
            let oldest: Option<i64> = tx.query_row(
                "SELECT MIN(expires_at_ms) FROM approvals WHERE status = 'pending' AND client_id = ?1 AND requester_addr IS ?2",
                params![req.client.client_id, source],
                |r| r.get(0),
            )?;
            return Ok(Outcome::Refused(AuthorizeError::RateLimited {
                reason: "client_pending_limit",
                retry_after_secs: retry_after_secs(oldest),
            }));
        }
        let total = count("SELECT COUNT(*) FROM approvals WHERE status = 'pending'", &[])?;
        if total >= MAX_PENDING {
            return Ok(Outcome::Refused(AuthorizeError::Full("pending_capacity_reached")));
        }
        // Its own connector: approving this request can never complete another.
        let connector_id = format!("conn_{}", random_b64::<16>());
        let request_id = format!("req_{}", random_b64::<16>());
        let code = six_digit_code();
        let resume_token = random_b64::<32>();
        let expires_at_ms = now + APPROVAL_TTL_MS;
        tx.execute(
            "INSERT INTO approvals (request_id, client_id, connector_id, auth_source, redirect_uri, code_challenge, resource,
                scope, state, code_hash, resume_hash, created_at_ms, expires_at_ms, attempts, status, requester_addr, requester_ua)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, 0, 'pending', ?14, ?15)",
            params![
                request_id,
                req.client.client_id,
                connector_id,
                req.client.auth_source,
                req.redirect_uri,
                req.code_challenge,
                req.resource,
                req.scope,
                req.state,
                approval_code_hash(&pepper, &request_id, &code),
                resume_hash(&request_id, &resume_token),
                now,
                expires_at_ms,
                source,
                requester.user_agent,
            ],
        )?;
        Ok(Outcome::Pending { request_id, code, resume_token, expires_at_ms, created_at_ms: now })
    })
}

/// Pending approvals past their expiry become `expired`, and expired rows that
/// never led to tokens are deleted (they hold nothing worth auditing).
pub fn expire_approvals(tx: &Transaction<'_>, now_ms: i64) -> rusqlite::Result<()> {
    tx.execute("UPDATE approvals SET status = 'expired' WHERE status IN ('pending','locked') AND expires_at_ms <= ?1", [now_ms])?;
    tx.execute(
        "DELETE FROM approvals WHERE status IN ('expired','approved','rejected') AND expires_at_ms <= ?1 - 86400000",
        [now_ms],
    )?;
    Ok(())
}

async fn poll(State(s): State<Arc<EdgeState>>, RawQuery(raw): RawQuery) -> Response {
    let q = match parse_query(raw.as_deref()) {
        Ok(q) => q,
        Err(m) => return poll_error(400, "invalid_request", &m),
    };
    let request_id = q.get("request_id").map(String::as_str).unwrap_or("");
    let resume_token = q.get("resume_token").map(String::as_str).unwrap_or("");
    let now = s.store.now_ms();
    let iss = s.config.issuer.clone();
    let result = s.store.write(|tx| -> rusqlite::Result<Response> {
        type Row = (String, String, String, i64, String, String, String, String, String, Option<String>);
        let row: Option<Row> = tx
            .query_row(
                "SELECT resume_hash, status, connector_id, expires_at_ms, client_id, redirect_uri, code_challenge, resource, scope, state
                 FROM approvals WHERE request_id = ?1",
                [request_id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?, r.get(8)?, r.get(9)?)),
            )
            .optional()?;
        let Some((rhash, status, connector_id, expires_at_ms, client_id, redirect_uri, challenge, resource, scope, state)) = row else {
            return Ok(poll_error(410, "not_found", "no such approval request"));
        };
        if !same(&rhash, &resume_hash(request_id, resume_token)) {
            return Ok(poll_error(403, "invalid_resume", "the resume token does not match this request"));
        }
        if status == "locked" {
            return Ok(poll_error(423, "locked", "too many wrong codes; start the connection again"));
        }
        if expires_at_ms <= now || status == "expired" {
            return Ok(poll_error(410, "expired", "the approval request expired; start the connection again"));
        }
        match status.as_str() {
            "pending" => Ok(json_response(202, json!({"status": "pending"}))),
            "approved" => {
                let generation: Option<i64> = tx
                    .query_row(
                        "SELECT grant_generation FROM connectors WHERE connector_id = ?1 AND status = 'active'",
                        [&connector_id],
                        |r| r.get(0),
                    )
                    .optional()?;
                let Some(generation) = generation else {
                    return Ok(poll_error(410, "revoked", "the connector was revoked"));
                };
                let Some(client) = load_client(tx, &client_id)? else {
                    return Ok(poll_error(410, "not_found", "the client no longer exists"));
                };
                // Checked before a code is minted, so a damaged row leaves no code behind.
                let Some(target) = verified_redirect(&client, &redirect_uri) else {
                    // The damage will not heal by itself: rejected in this same
                    // transaction, the request gets the terminal `rejected` answer from
                    // the next poll on, and the operator reads this line once, not
                    // once per poll until it expires. Its unused connector and grant
                    // go too, so the client's next authorize asks for approval again.
                    let withdrawal = reject_damaged(tx, request_id, &connector_id, now)?;
                    tracing::error!(
                        request_id,
                        client_id,
                        connector_id,
                        ?withdrawal,
                        "approved request holds a redirect_uri that is not a registered URL of its client ({redirect_uri:?}); \
                         no code issued, request rejected"
                    );
                    return Ok(poll_error(500, "server_error", "the stored authorization request is damaged; start the connection again"));
                };
                let req = AuthRequest { client, redirect_uri, code_challenge: challenge, resource, scope, state: state.clone() };
                let code = mint_code(tx, &req, &connector_id, generation, now)?;
                let redirect = code_redirect_url(target, &code, state.as_deref(), &iss);
                Ok(json_response(200, json!({"status": "approved", "redirect": redirect})))
            }
            _ => Ok(poll_error(410, "rejected", "the approval request is no longer valid")),
        }
    });
    result.unwrap_or_else(|e| internal_error("cannot read the approval", e))
}

fn poll_error(status: u16, code: &str, message: &str) -> Response {
    json_response(status, json!({"status": "error", "code": code, "message": message}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn active(generation: Option<i64>) -> GrantState {
        GrantState::Active { connector_id: "conn_x".into(), generation }
    }

    #[test]
    fn a_public_clients_grant_never_skips_approval() {
        assert_eq!(decide(true, &GrantState::None), Decision::AwaitApproval);
        assert_eq!(decide(true, &active(Some(3))), Decision::AwaitApproval);
        assert_eq!(decide(true, &GrantState::Revoked), Decision::Deny);
        assert_eq!(decide(true, &active(None)), Decision::Deny);
    }

    #[test]
    fn a_confidential_clients_grant_issues_at_once() {
        assert_eq!(decide(false, &active(Some(3))), Decision::Issue { connector_id: "conn_x".into(), generation: 3 });
        assert_eq!(decide(false, &GrantState::None), Decision::AwaitApproval);
        assert_eq!(decide(false, &GrantState::Revoked), Decision::Deny);
        assert_eq!(decide(false, &active(None)), Decision::Deny);
    }

    #[test]
    fn errors_redirect_only_for_an_approved_client() {
        assert!(!errors_may_redirect(&Standing { approved: false, grant: GrantState::None }));
        // A tombstone fences a client nobody approved: still not trusted with redirects.
        assert!(!errors_may_redirect(&Standing { approved: false, grant: GrantState::Revoked }));
        assert!(errors_may_redirect(&Standing { approved: true, grant: GrantState::Revoked }));
        assert!(errors_may_redirect(&Standing { approved: true, grant: active(Some(1)) }));
    }
}
