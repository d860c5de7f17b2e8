//! Dynamic client registration (RFC 7591) and the client records it creates.
//!
//! Limits (spec §3): body ≤ 256 KiB; `redirect_uris` 1..=32 entries of ≤ 4096
//! characters; `client_name` ≤ 256 characters (ours: it is shown on the approval
//! page and in `connector list`). Unapproved registrations expire after 60 min (the
//! hourly sweep removes them even when nobody registers) and at most 256 of them
//! may exist at once, so anonymous registration cannot fill the database; each
//! source address gets a token bucket ([`super::ratelimit`]: 10 at once, then one
//! a minute), so no single source can fill those 256 and lock others out.

use std::net::IpAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::extract::connect_info::ConnectInfo;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::{Extension, Router};
use axum::response::Response;
use axum::routing::post;
use rusqlite::{OptionalExtension, Transaction, params};
use serde_json::{Map, Value, json};

use super::http::{internal_error, is_json, json_response, oauth_error, read_body};
use super::ratelimit::PeerAddr;
use super::secrets::{hash_opaque, random_b64, random_hex};
use super::{EdgeState, SCOPE};

pub const MAX_BODY_BYTES: usize = 256 * 1024;
pub const MAX_REDIRECT_URIS: usize = 32;
pub const MAX_REDIRECT_URI_CHARS: usize = 4096;
pub const MAX_CLIENT_NAME_CHARS: usize = 256;
pub const UNAPPROVED_TTL_MS: i64 = 60 * 60 * 1000;
pub const MAX_UNAPPROVED_CLIENTS: i64 = 256;

pub const PATHS: &[&str] =
    &["/oauth/register", "/register", "/register/", "/mcp/register", "/mcp/register/", "/mcp/oauth/register"];

#[derive(Debug, Clone)]
pub struct Client {
    pub client_id: String,
    pub secret_hash: Option<String>,
    pub client_name: Option<String>,
    pub redirect_uris: Vec<String>,
    pub grant_types: Vec<String>,
    pub auth_method: String,
    pub auth_source: String,
}

impl Client {
    pub fn allows_code_grant(&self) -> bool {
        self.grant_types.iter().any(|g| g == "authorization_code")
    }
}

pub fn load_client(tx: &Transaction<'_>, client_id: &str) -> rusqlite::Result<Option<Client>> {
    tx.query_row(
        "SELECT client_id, secret_hash, client_name, redirect_uris, grant_types, auth_method, auth_source
         FROM clients WHERE client_id = ?1",
        [client_id],
        |r| {
            let id: String = r.get(0)?;
            let uris: String = r.get(3)?;
            let grants: String = r.get(4)?;
            Ok(Client {
                secret_hash: r.get(1)?,
                client_name: r.get(2)?,
                redirect_uris: stored_list(&id, "redirect_uris", &uris),
                grant_types: stored_list(&id, "grant_types", &grants),
                client_id: id,
                auth_method: r.get(5)?,
                auth_source: r.get(6)?,
            })
        },
    )
    .optional()
}

/// A JSON string list from a client row. A damaged one reads as empty, which
/// registers nothing (no redirect or grant matches it), and is logged so the
/// operator learns why that client is refused.
fn stored_list(client_id: &str, column: &str, raw: &str) -> Vec<String> {
    serde_json::from_str(raw).unwrap_or_else(|e| {
        tracing::error!(client_id, "stored {column} of the client is not a JSON string list ({e}); treated as empty");
        Vec::new()
    })
}

/// Drops unapproved registrations older than the TTL (they never got a connector).
pub fn purge_stale_clients(tx: &Transaction<'_>, now_ms: i64) -> rusqlite::Result<usize> {
    tx.execute(
        "DELETE FROM clients WHERE approved = 0 AND auth_source = 'dcr' AND created_at_ms < ?1
         AND client_id NOT IN (SELECT client_id FROM approvals WHERE status IN ('pending','approved'))",
        [now_ms - UNAPPROVED_TTL_MS],
    )
}

pub fn routes() -> Router<Arc<EdgeState>> {
    PATHS.iter().fold(Router::new(), |r, p| r.route(p, post(register)))
}

/// Accepted redirect URIs: absolute, no fragment; https anywhere, http only to
/// loopback, or a private-use scheme (native apps, RFC 8252 §7.1).
pub fn check_redirect_uri(uri: &str) -> Result<(), String> {
    let url = url::Url::parse(uri).map_err(|e| format!("redirect_uri {uri:?} is not an absolute URL: {e}"))?;
    if url.fragment().is_some() {
        return Err(format!("redirect_uri {uri:?} must not have a fragment"));
    }
    match url.scheme() {
        "https" => Ok(()),
        "http" if super::is_loopback_url(&url) => Ok(()),
        "http" => Err(format!("redirect_uri {uri:?} uses http on a non-loopback host")),
        "javascript" | "data" | "file" | "blob" | "vbscript" => Err(format!("redirect_uri {uri:?} uses a forbidden scheme")),
        s if s.contains('.') => Ok(()),
        _ => Err(format!("redirect_uri {uri:?} must be https, loopback http or a reverse-DNS private scheme")),
    }
}

struct Metadata {
    redirect_uris: Vec<String>,
    client_name: Option<String>,
    grant_types: Vec<String>,
    auth_method: String,
}

fn parse_metadata(headers: &HeaderMap, body: &[u8]) -> Result<Metadata, Box<Response>> {
    let bad = |msg: &str| Box::new(oauth_error(400, "invalid_client_metadata", msg));
    let obj: Map<String, Value> = if is_json(headers) {
        match serde_json::from_slice::<Value>(body) {
            Ok(Value::Object(o)) => o,
            Ok(_) => return Err(bad("body must be a JSON object")),
            Err(e) => return Err(bad(&format!("body is not JSON: {e}"))),
        }
    } else {
        // Form bodies: repeated keys become arrays, single values stay strings.
        let pairs: Vec<(String, String)> = serde_urlencoded::from_bytes(body).map_err(|e| bad(&format!("bad form body: {e}")))?;
        let mut o = Map::new();
        for (k, v) in pairs {
            match o.get_mut(&k) {
                Some(Value::Array(a)) => a.push(Value::String(v)),
                Some(prev) => *prev = Value::Array(vec![prev.take(), Value::String(v)]),
                None => {
                    let multi = k == "redirect_uris" || k == "grant_types";
                    o.insert(k, if multi { Value::Array(vec![Value::String(v)]) } else { Value::String(v) });
                }
            }
        }
        o
    };
    let ClientFields { redirect_uris, client_name, grant_types } = client_fields(&obj).map_err(|e| {
        let code = if e.bad_redirect_uri { "invalid_redirect_uri" } else { "invalid_client_metadata" };
        Box::new(oauth_error(400, code, &e.message))
    })?;
    let auth_method = match obj.get("token_endpoint_auth_method").and_then(Value::as_str) {
        Some("client_secret_post") => "client_secret_post",
        _ => "none",
    };
    Ok(Metadata { redirect_uris, client_name, grant_types, auth_method: auth_method.to_string() })
}

/// The client fields that registration (DCR) and metadata documents (CIMD) share.
pub(crate) struct ClientFields {
    pub redirect_uris: Vec<String>,
    pub client_name: Option<String>,
    pub grant_types: Vec<String>,
}

/// Why a shared client field was refused. `bad_redirect_uri` marks a URI that breaks the
/// redirect rules, which DCR reports as `invalid_redirect_uri`.
pub(crate) struct FieldError {
    pub message: String,
    pub bad_redirect_uri: bool,
}

impl From<String> for FieldError {
    fn from(message: String) -> Self {
        FieldError { message, bad_redirect_uri: false }
    }
}

/// Checks `redirect_uris`, `client_name` and `grant_types` the same way for every
/// kind of client, so a metadata document cannot slip past a rule DCR enforces.
pub(crate) fn client_fields(obj: &Map<String, Value>) -> Result<ClientFields, FieldError> {
    let uris = match obj.get("redirect_uris") {
        Some(Value::Array(a)) if !a.is_empty() => a,
        _ => return Err("redirect_uris is required: a non-empty array of URLs".to_string().into()),
    };
    if uris.len() > MAX_REDIRECT_URIS {
        return Err(format!("at most {MAX_REDIRECT_URIS} redirect_uris are accepted").into());
    }
    let mut redirect_uris = Vec::with_capacity(uris.len());
    for u in uris {
        let Some(s) = u.as_str() else { return Err("redirect_uris entries must be strings".to_string().into()) };
        if s.chars().count() > MAX_REDIRECT_URI_CHARS {
            return Err(format!("a redirect_uri exceeds {MAX_REDIRECT_URI_CHARS} characters").into());
        }
        check_redirect_uri(s).map_err(|message| FieldError { message, bad_redirect_uri: true })?;
        redirect_uris.push(s.to_string());
    }
    let client_name = match obj.get("client_name") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.chars().count() <= MAX_CLIENT_NAME_CHARS && !s.chars().any(char::is_control) => Some(s.clone()),
        Some(Value::String(_)) => {
            return Err(format!("client_name must be at most {MAX_CLIENT_NAME_CHARS} characters without control characters").into());
        }
        Some(_) => return Err("client_name must be a string".to_string().into()),
    };
    let grant_types = match obj.get("grant_types") {
        None | Some(Value::Null) => vec!["authorization_code".to_string(), "refresh_token".to_string()],
        Some(Value::Array(a)) => {
            let mut g: Vec<String> = a
                .iter()
                .filter_map(Value::as_str)
                .filter(|g| matches!(*g, "authorization_code" | "refresh_token"))
                .map(str::to_string)
                .collect();
            g.dedup();
            g
        }
        Some(_) => return Err("grant_types must be an array".to_string().into()),
    };
    Ok(ClientFields { redirect_uris, client_name, grant_types })
}

async fn register(
    State(s): State<Arc<EdgeState>>,
    peer: Option<Extension<ConnectInfo<PeerAddr>>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let body = match read_body(body, MAX_BODY_BYTES, "invalid_client_metadata").await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let meta = match parse_metadata(&headers, &body) {
        Ok(m) => m,
        Err(r) => return *r,
    };
    let now = s.store.now_ms();
    // Per source before the shared cap, so one address cannot fill it (see
    // `ratelimit`); a server without peer addresses counts everyone as one.
    let source = s.limits.source(peer.map(|Extension(ConnectInfo(PeerAddr(a)))| a.ip()), &headers);
    if let Err(retry) = s.limits.registration.take(source.unwrap_or(IpAddr::from([0, 0, 0, 0])), now) {
        let mut resp = oauth_error(429, "temporarily_unavailable", "registration_rate_limited");
        if let Ok(v) = HeaderValue::from_str(&retry.0.to_string()) {
            resp.headers_mut().insert(header::RETRY_AFTER, v);
        }
        return resp;
    }
    let client_id = format!("dcr-{}", random_hex::<8>());
    let secret = random_b64::<32>();
    let result = s.store.write(|tx| {
        purge_stale_clients(tx, now)?;
        let unapproved: i64 =
            tx.query_row("SELECT COUNT(*) FROM clients WHERE approved = 0 AND auth_source = 'dcr'", [], |r| r.get(0))?;
        if unapproved >= MAX_UNAPPROVED_CLIENTS {
            return Ok(false);
        }
        tx.execute(
            "INSERT INTO clients (client_id, secret_hash, client_name, redirect_uris, grant_types, auth_method, auth_source, created_at_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'dcr', ?7)",
            params![
                client_id,
                hash_opaque(&secret),
                meta.client_name,
                serde_json::to_string(&meta.redirect_uris).unwrap_or_default(),
                serde_json::to_string(&meta.grant_types).unwrap_or_default(),
                meta.auth_method,
                now
            ],
        )?;
        Ok::<_, rusqlite::Error>(true)
    });
    match result {
        Ok(true) => {
            let mut body = json!({
                "client_id": client_id,
                "client_secret": secret,
                "redirect_uris": meta.redirect_uris,
                "grant_types": meta.grant_types,
                "response_types": ["code"],
                "token_endpoint_auth_method": meta.auth_method,
                "scope": SCOPE,
                "client_id_issued_at": now / 1000,
                "client_secret_expires_at": 0,
            });
            if let Some(name) = meta.client_name {
                body["client_name"] = Value::String(name);
            }
            json_response(201, body)
        }
        Ok(false) => oauth_error(429, "temporarily_unavailable", "dcr_capacity_reached"),
        Err(e) => internal_error("cannot store the client registration", e),
    }
}
