//! Connector administration over HTTP (spec §2, §4.4, §4.5, §5), so that
//! `herdr-mcp connector …` works on any enrolled computer, not only the edge host:
//! - `POST /connectors/inspect {request_id}` → the pending request to review;
//! - `POST /connectors/approve {request_id, code}` → approves it (403
//!   `invalid_code` with `attempts_remaining`, 423 `locked`, 404 `expired`/`not_found`,
//!   410 `rejected` once `revoke-client` fenced its client or a poll found its
//!   stored record damaged);
//! - `POST /connectors/cancel {request_id}` → withdraws it (409 `already_used`
//!   once tokens were issued);
//! - `GET /connectors` → `{ok, …}` plus the inventory
//!   ([`super::connectors_inventory::Inventory`]); `POST /connectors/revoke {connector_id,
//!   confirm: true}` → revokes one connector;
//! - `POST /connectors/revoke-client {client_id, confirm: true}` → revokes every
//!   connector of one OAuth client, or fences a client that has none (spec §5's
//!   `revoke-client`; the spec's route table names no route for it, so it sits
//!   beside `/connectors/revoke` under the command's name).
//!
//! Every route takes only an enrolled device's credential (see
//! [`super::devices_http`]): a connector's OAuth bearer, a revoked device or no
//! credential gets 401 `device_auth_required`, because an approved connector has
//! ordinary MCP rights only. Bodies are JSON objects with only the listed keys,
//! at most [`super::devices_http::MAX_BODY_BYTES`].

// Helpers return the finished error `Response` as their `Err` (see devices_http).
#![allow(clippy::result_large_err)]

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::{get, post};
use serde_json::{Map, Value, json};

use super::EdgeState;
use super::connectors::{self, ApprovalError, RevokeError};
use super::connectors_inventory::inventory;
use super::connectors_revoke_client::{MAX_CLIENT_ID_CHARS, revoke_client};
use super::devices::Device;
use super::devices_http::{caller, fail, object_body, string_param};
use super::http::json_response;

/// Request ids are `req_` + 22 base64url characters; the cap leaves room for
/// other generators without letting a caller send an arbitrary blob.
pub const MAX_REQUEST_ID_CHARS: usize = 128;
/// `conn_` + 8 to 128 characters (spec §5).
pub const MAX_CONNECTOR_ID_CHARS: usize = 5 + 128;
const UNAUTHORIZED: &str = "device_auth_required";

pub fn routes() -> Router<Arc<EdgeState>> {
    Router::new()
        .route("/connectors", get(list))
        .route("/connectors/inspect", post(inspect))
        .route("/connectors/approve", post(approve))
        .route("/connectors/cancel", post(cancel))
        .route("/connectors/revoke", post(revoke))
        .route("/connectors/revoke-client", post(revoke_client_route))
}

fn base64url_id(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn request_id(obj: &Map<String, Value>) -> Result<&str, Response> {
    let id = string_param(obj, "request_id")?;
    if id.is_empty() || id.len() > MAX_REQUEST_ID_CHARS || !base64url_id(id) {
        return Err(fail(
            400,
            "invalid_params",
            &format!("request_id must be 1 to {MAX_REQUEST_ID_CHARS} characters of A-Z, a-z, 0-9, '_' or '-'"),
        ));
    }
    Ok(id)
}

fn connector_id(obj: &Map<String, Value>) -> Result<&str, Response> {
    let id = string_param(obj, "connector_id")?;
    let rest = id.strip_prefix("conn_").unwrap_or("");
    if !(8..=128).contains(&rest.len()) || !base64url_id(rest) {
        return Err(fail(400, "invalid_params", "connector_id must look like conn_ followed by 8 to 128 base64url characters"));
    }
    Ok(id)
}

/// OAuth client ids are `dcr-` + hex or an https URL (CIMD): visible ASCII.
fn client_id(obj: &Map<String, Value>) -> Result<&str, Response> {
    let id = string_param(obj, "client_id")?;
    if id.is_empty() || id.len() > MAX_CLIENT_ID_CHARS || !id.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(fail(
            400,
            "invalid_params",
            &format!("client_id must be 1 to {MAX_CLIENT_ID_CHARS} visible ASCII characters, as `connector list` shows it"),
        ));
    }
    Ok(id)
}

/// Revocation cannot be undone, so the body must say `confirm: true` in so many words.
fn confirmed(obj: &Map<String, Value>) -> Result<(), Response> {
    if obj.get("confirm") != Some(&Value::Bool(true)) {
        return Err(fail(400, "confirmation_required", "revocation cannot be undone; send confirm: true"));
    }
    Ok(())
}

fn approval_error(e: ApprovalError) -> Response {
    if let ApprovalError::Db(db) = &e {
        tracing::error!("connector approval: {db}");
    }
    let mut body = json!({"ok": false, "code": e.code(), "message": e.to_string()});
    if let ApprovalError::InvalidCode { remaining } = e {
        body["attempts_remaining"] = json!(remaining);
    }
    json_response(e.status(), body)
}

/// The refusal of either revocation route; `what` names it in the log.
fn revoke_error(what: &str, e: RevokeError) -> Response {
    if let RevokeError::Db(db) = &e {
        tracing::error!("{what} revocation: {db}");
    }
    fail(e.status(), e.code(), &e.to_string())
}

/// The caller's device and its body restricted to `allowed` keys; authentication
/// first, so an unauthenticated caller learns nothing about body rules.
async fn authorized(s: &EdgeState, headers: &HeaderMap, body: Body, allowed: &[&str]) -> Result<(Device, Map<String, Value>), Response> {
    let me = caller(s, headers, UNAUTHORIZED)?;
    let obj = object_body(headers, body, allowed).await?;
    Ok((me, obj))
}

fn info_json(info: &connectors::ApprovalInfo) -> Value {
    json!({
        "ok": true,
        "request_id": info.request_id,
        "client_id": info.client_id,
        "client_name": info.client_name,
        "redirect_uri": info.redirect_uri,
        "scope": info.scope,
        "connector_id": info.connector_id,
        "expires_at_ms": info.expires_at_ms,
        "resource": info.resource,
        "created_at_ms": info.created_at_ms,
        "requester_addr": info.requester_addr,
        "requester_ua": info.requester_ua,
    })
}

async fn inspect(State(s): State<Arc<EdgeState>>, headers: HeaderMap, body: Body) -> Response {
    let run = async {
        let (_, obj) = authorized(&s, &headers, body, &["request_id"]).await?;
        let id = request_id(&obj)?;
        connectors::inspect(&s.store, id).map_err(approval_error)
    };
    match run.await {
        Ok(info) => json_response(200, info_json(&info)),
        Err(r) => r,
    }
}

async fn approve(State(s): State<Arc<EdgeState>>, headers: HeaderMap, body: Body) -> Response {
    let run = async {
        let (me, obj) = authorized(&s, &headers, body, &["request_id", "code"]).await?;
        let id = request_id(&obj)?;
        let code = string_param(&obj, "code")?;
        // A malformed code is the caller's typo, not a guess: refuse it without
        // spending one of the five attempts.
        if code.len() != 6 || !code.bytes().all(|b| b.is_ascii_digit()) {
            return Err(fail(400, "invalid_params", "code must be the 6 digits shown on the approval page"));
        }
        connectors::approve(&s.store, id, code, &me.device_id).map_err(approval_error)
    };
    match run.await {
        Ok(info) => json_response(200, info_json(&info)),
        Err(r) => r,
    }
}

async fn cancel(State(s): State<Arc<EdgeState>>, headers: HeaderMap, body: Body) -> Response {
    let run = async {
        let (_, obj) = authorized(&s, &headers, body, &["request_id"]).await?;
        let id = request_id(&obj)?.to_string();
        connectors::cancel(&s.store, &id).map_err(approval_error)?;
        Ok::<_, Response>(id)
    };
    match run.await {
        Ok(id) => json_response(200, json!({"ok": true, "request_id": id, "cancelled": true})),
        Err(r) => r,
    }
}

async fn list(State(s): State<Arc<EdgeState>>, headers: HeaderMap) -> Response {
    if let Err(r) = caller(&s, &headers, UNAUTHORIZED) {
        return r;
    }
    match inventory(&s.store) {
        Ok(inv) => {
            let mut body = json!(inv);
            body["ok"] = json!(true);
            json_response(200, body)
        }
        Err(e) => {
            tracing::error!("connector inventory: {e}");
            fail(500, "internal_error", "the connector inventory cannot be read")
        }
    }
}

async fn revoke(State(s): State<Arc<EdgeState>>, headers: HeaderMap, body: Body) -> Response {
    let run = async {
        let (me, obj) = authorized(&s, &headers, body, &["connector_id", "confirm"]).await?;
        let id = connector_id(&obj)?;
        confirmed(&obj)?;
        connectors::revoke(&s.store, id, &me.device_id).map_err(|e| revoke_error("connector", e))
    };
    match run.await {
        Ok(r) => json_response(200, json!(r)),
        Err(r) => r,
    }
}

async fn revoke_client_route(State(s): State<Arc<EdgeState>>, headers: HeaderMap, body: Body) -> Response {
    let run = async {
        let (me, obj) = authorized(&s, &headers, body, &["client_id", "confirm"]).await?;
        let id = client_id(&obj)?;
        confirmed(&obj)?;
        revoke_client(&s.store, id, &me.device_id).map_err(|e| revoke_error("client", e))
    };
    match run.await {
        Ok(r) => json_response(200, json!(r)),
        Err(r) => r,
    }
}
