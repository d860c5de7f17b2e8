//! Client ID Metadata Documents (spec §3): a `client_id` that is an https URL names
//! a JSON document describing the client, so it can use the flow without DCR.
//!
//! The fetched client is stored in `clients` (`auth_source = 'cimd'`) so the
//! approval, connector and token code treat it exactly like a registered client.
//! A stored document younger than [`CACHE_TTL_MS`] is reused instead of fetched
//! again, which bounds how often one client_id makes the edge reach out; unapproved
//! CIMD rows expire like DCR ones and are capped, so anonymous callers cannot grow
//! the table.

use std::sync::Arc;

use rusqlite::{OptionalExtension, params};
use serde_json::{Map, Value};

use super::EdgeState;
use super::http::{internal_error, oauth_error};
use super::cimd_fetch::{check_url, fetch, is_metadata_url};
use super::dcr::{Client, ClientFields, UNAPPROVED_TTL_MS, client_fields, load_client};

pub const AUTH_SOURCE: &str = "cimd";
/// How long a fetched document is trusted before the next request refetches it.
pub const CACHE_TTL_MS: i64 = 5 * 60 * 1000;
/// At most this many unapproved CIMD clients are kept at once.
pub const MAX_UNAPPROVED_CIMD_CLIENTS: i64 = 256;

#[derive(Debug)]
pub enum CimdError {
    /// The URL or its document breaks a rule: the client is refused.
    Invalid(String),
    /// Too many unapproved CIMD clients are stored.
    Full,
    Store(rusqlite::Error),
}

impl From<rusqlite::Error> for CimdError {
    fn from(e: rusqlite::Error) -> Self {
        Self::Store(e)
    }
}

/// Checks a fetched document against its URL and turns it into a public client.
pub fn parse_document(client_id: &str, body: &[u8]) -> Result<Client, String> {
    let obj: Map<String, Value> = match serde_json::from_slice(body) {
        Ok(Value::Object(o)) => o,
        Ok(_) => return Err("the client metadata document must be a JSON object".into()),
        Err(e) => return Err(format!("the client metadata document is not JSON: {e}")),
    };
    if obj.get("client_id").and_then(Value::as_str) != Some(client_id) {
        return Err("the document's client_id does not equal its URL".into());
    }
    // A document is public: a secret in it would be known to everyone.
    if obj.contains_key("client_secret") || obj.contains_key("client_secret_expires_at") {
        return Err("the client metadata document must not contain a client secret".into());
    }
    match obj.get("token_endpoint_auth_method") {
        None => {}
        Some(Value::String(m)) if m == "none" => {}
        Some(_) => return Err("token_endpoint_auth_method must be \"none\"".into()),
    }
    let ClientFields { redirect_uris, client_name, grant_types } = client_fields(&obj).map_err(|e| e.message)?;
    Ok(Client {
        client_id: client_id.to_string(),
        secret_hash: None,
        client_name,
        redirect_uris,
        grant_types,
        auth_method: "none".to_string(),
        auth_source: AUTH_SOURCE.to_string(),
    })
}

/// The client a request names: a stored client as is, or for a metadata URL the
/// cached or freshly fetched document. `Ok(None)` means an unknown non-URL client.
pub async fn resolve_client(s: &Arc<EdgeState>, client_id: &str) -> Result<Option<Client>, CimdError> {
    let allow_loopback = s.allow_loopback_cimd;
    if !is_metadata_url(client_id, allow_loopback) {
        return Ok(s.store.read(|tx| load_client(tx, client_id))?);
    }
    let now = s.store.now_ms();
    let cached = s.store.read(|tx| {
        let fetched_at: Option<i64> = tx
            .query_row("SELECT created_at_ms FROM clients WHERE client_id = ?1 AND auth_source = ?2", params![client_id, AUTH_SOURCE], |r| {
                r.get(0)
            })
            .optional()?;
        match fetched_at {
            Some(t) if now - t < CACHE_TTL_MS => load_client(tx, client_id),
            _ => Ok(None),
        }
    })?;
    if let Some(c) = cached {
        return Ok(Some(c));
    }
    let url = check_url(client_id, allow_loopback).map_err(CimdError::Invalid)?;
    let tls = crate::link::connect::tls_config(None).map_err(CimdError::Invalid)?;
    let body = fetch(&url, allow_loopback, tls).await.map_err(CimdError::Invalid)?;
    let client = parse_document(client_id, &body).map_err(CimdError::Invalid)?;
    store_client(s, &client, now)?;
    Ok(Some(client))
}

/// The answer for a refused or failed resolution; `status` is 400 at /authorize and
/// 401 at /token (RFC 6749 §5.2 `invalid_client`).
pub fn error_response(e: CimdError, status: u16) -> axum::response::Response {
    match e {
        CimdError::Invalid(m) => oauth_error(status, "invalid_client", &format!("client metadata document refused: {m}")),
        CimdError::Full => oauth_error(429, "temporarily_unavailable", "cimd_capacity_reached"),
        CimdError::Store(e) => internal_error("cannot read or store the client", e),
    }
}

fn store_client(s: &EdgeState, c: &Client, now: i64) -> Result<(), CimdError> {
    s.store.write(|tx| {
        tx.execute(
            "DELETE FROM clients WHERE approved = 0 AND auth_source = ?1 AND created_at_ms < ?2
             AND client_id NOT IN (SELECT client_id FROM approvals WHERE status IN ('pending','approved'))",
            params![AUTH_SOURCE, now - UNAPPROVED_TTL_MS],
        )?;
        let known: bool = tx.query_row("SELECT COUNT(*) > 0 FROM clients WHERE client_id = ?1", [&c.client_id], |r| r.get(0))?;
        if !known {
            let unapproved: i64 = tx.query_row(
                "SELECT COUNT(*) FROM clients WHERE approved = 0 AND auth_source = ?1",
                [AUTH_SOURCE],
                |r| r.get(0),
            )?;
            if unapproved >= MAX_UNAPPROVED_CIMD_CLIENTS {
                return Err(CimdError::Full);
            }
        }
        // created_at_ms doubles as the fetch time: it drives the cache and the expiry.
        tx.execute(
            "INSERT INTO clients (client_id, secret_hash, client_name, redirect_uris, grant_types, auth_method, auth_source, created_at_ms)
             VALUES (?1, NULL, ?2, ?3, ?4, 'none', ?5, ?6)
             ON CONFLICT(client_id) DO UPDATE SET client_name = excluded.client_name, redirect_uris = excluded.redirect_uris,
               grant_types = excluded.grant_types, auth_method = 'none', created_at_ms = excluded.created_at_ms
             WHERE clients.auth_source = excluded.auth_source",
            params![
                c.client_id,
                c.client_name,
                serde_json::to_string(&c.redirect_uris).unwrap_or_default(),
                serde_json::to_string(&c.grant_types).unwrap_or_default(),
                AUTH_SOURCE,
                now
            ],
        )?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edge::dcr::{MAX_REDIRECT_URI_CHARS, MAX_REDIRECT_URIS};

    const URL: &str = "https://app.example.com/client.json";

    fn doc(v: Value) -> Vec<u8> {
        serde_json::to_vec(&v).unwrap()
    }

    #[test]
    fn accepts_a_minimal_document() {
        let c = parse_document(URL, &doc(serde_json::json!({"client_id": URL, "redirect_uris": ["https://app.example.com/cb"]}))).unwrap();
        assert_eq!(c.auth_method, "none");
        assert_eq!(c.auth_source, "cimd");
        assert!(c.allows_code_grant());
    }

    #[test]
    fn refuses_bad_documents() {
        let cb = ["https://app.example.com/cb"];
        let cases = [
            (serde_json::json!({"client_id": "https://app.example.com/other.json", "redirect_uris": cb}), "does not equal"),
            (serde_json::json!({"redirect_uris": cb}), "does not equal"),
            (serde_json::json!({"client_id": URL}), "redirect_uris is required"),
            (serde_json::json!({"client_id": URL, "redirect_uris": []}), "redirect_uris is required"),
            (serde_json::json!({"client_id": URL, "redirect_uris": ["http://evil.example/cb"]}), "non-loopback"),
            (serde_json::json!({"client_id": URL, "redirect_uris": ["javascript:alert(1)"]}), "forbidden scheme"),
            (serde_json::json!({"client_id": URL, "redirect_uris": cb, "token_endpoint_auth_method": "client_secret_post"}), "must be \"none\""),
            (serde_json::json!({"client_id": URL, "redirect_uris": cb, "client_secret": "x"}), "client secret"),
            (serde_json::json!({"client_id": URL, "redirect_uris": vec!["https://a.example/cb"; MAX_REDIRECT_URIS + 1]}), "at most"),
            (serde_json::json!([URL]), "JSON object"),
        ];
        for (v, why) in cases {
            let err = parse_document(URL, &doc(v.clone())).expect_err(&v.to_string());
            assert!(err.contains(why), "{v}: {err}");
        }
        let long = format!("https://a.example/{}", "x".repeat(MAX_REDIRECT_URI_CHARS));
        let err = parse_document(URL, &doc(serde_json::json!({"client_id": URL, "redirect_uris": [long]}))).unwrap_err();
        assert!(err.contains("exceeds"), "{err}");
        assert!(parse_document(URL, b"not json").unwrap_err().contains("not JSON"));
    }
}
