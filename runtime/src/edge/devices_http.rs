//! Device routes (spec §2, §7):
//! - `POST /devices/pairings {ttl_seconds?, name?}`: device credential; creates the pairing.
//! - `POST /devices/pairings/consume {pairing_id, code, name?, recover_device_id?}`: no
//!   auth (the code is the credential); returns the new (or, when recovering, the
//!   re-keyed) device's secret once.
//! - `GET /devices`: device credential; the inventory with each device's live
//!   link state (as `herdr_devices` shows it), never a secret.
//! - `POST /devices/revoke {device_id, confirm: true}`: device credential.
//! - `POST /devices/revoke-self {}` and `POST /devices/rename-self {workstation_id?, name}`:
//!   the device's own credential.
//!
//! The device credential is `Authorization: Bearer <device_secret>` with
//! `x-herdr-workstation: <workstation_id>`. Nothing else is admin here: a
//! connector's OAuth token is not a device secret and gets 401 (an approved
//! connector has ordinary MCP rights only). Bodies are JSON objects of at most
//! 16 KiB with only the listed keys.

// Helpers return the finished error `Response` as their `Err`; boxing it would only
// add an allocation on these rare paths.
#![allow(clippy::result_large_err)]

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::Response;
use axum::routing::{get, post};
use serde_json::{Map, Value, json};

use super::EdgeState;
use super::devices::{Device, DeviceError};
use super::link_hub::live_fields;
use super::link_hub_auth::LinkAuthError;
use super::http::{is_json, json_response, read_body};
use super::pairing::PairingError;

pub const MAX_BODY_BYTES: usize = 16 * 1024;
pub const WORKSTATION_HEADER: &str = "x-herdr-workstation";

pub fn routes() -> Router<Arc<EdgeState>> {
    Router::new()
        .route("/devices", get(list))
        .route("/devices/pairings", post(create_pairing))
        .route("/devices/pairings/consume", post(consume_pairing))
        .route("/devices/revoke", post(revoke))
        .route("/devices/revoke-self", post(revoke_self))
        .route("/devices/rename-self", post(rename_self))
}

pub(super) fn fail(status: u16, code: &str, message: &str) -> Response {
    json_response(status, json!({"ok": false, "code": code, "message": message}))
}

/// The calling device, from its bearer secret and workstation header. Any failure
/// is `unauthorized_code` (401) so the route does not disclose which part was wrong.
pub(super) fn caller(s: &EdgeState, headers: &HeaderMap, unauthorized_code: &str) -> Result<Device, Response> {
    let denied = || fail(401, unauthorized_code, "this route needs an enrolled device's credential");
    let secret = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, t)| t.trim())
        .ok_or_else(denied)?;
    let ws = headers.get(WORKSTATION_HEADER).and_then(|v| v.to_str().ok()).ok_or_else(denied)?;
    match s.devices.verify_link(ws, secret) {
        Ok(d) => Ok(d),
        Err(LinkAuthError::Unavailable(e)) => {
            tracing::error!("device registry: {e}");
            Err(fail(500, "device_registry_unavailable", "the device registry cannot be read"))
        }
        Err(_) => Err(denied()),
    }
}

/// A JSON object body with only `allowed` keys.
pub(super) async fn object_body(headers: &HeaderMap, body: Body, allowed: &[&str]) -> Result<Map<String, Value>, Response> {
    let bytes = read_body(body, MAX_BODY_BYTES, "payload_too_large")
        .await
        .map_err(|_| fail(413, "payload_too_large", &format!("the body exceeds {MAX_BODY_BYTES} bytes")))?;
    if bytes.is_empty() {
        return Ok(Map::new());
    }
    if !is_json(headers) {
        return Err(fail(415, "invalid_params", "the body must be application/json"));
    }
    let Ok(Value::Object(obj)) = serde_json::from_slice::<Value>(&bytes) else {
        return Err(fail(400, "invalid_params", "the body must be one JSON object"));
    };
    if let Some(k) = obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(fail(400, "invalid_params", &format!("unknown parameter {k:?}")));
    }
    Ok(obj)
}

/// An optional name: absent is `None`, a string is checked later, anything else
/// (including `null`, spec §7) is `invalid_device_name`.
fn name_param(obj: &Map<String, Value>) -> Result<Option<&str>, Response> {
    match obj.get("name") {
        None => Ok(None),
        Some(Value::String(n)) => Ok(Some(n)),
        Some(_) => Err(fail(400, "invalid_device_name", "name must be a string")),
    }
}

pub(super) fn string_param<'a>(obj: &'a Map<String, Value>, key: &str) -> Result<&'a str, Response> {
    obj.get(key).and_then(Value::as_str).ok_or_else(|| fail(400, "invalid_params", &format!("{key} is required (a string)")))
}

fn pairing_error(e: PairingError) -> Response {
    if let PairingError::Db(db) = &e {
        tracing::error!("pairing: {db}");
    }
    fail(e.status(), e.code(), &e.to_string())
}

fn device_error(e: DeviceError) -> Response {
    if let DeviceError::Db(db) = &e {
        tracing::error!("device registry: {db}");
    }
    fail(e.status(), e.code(), &e.to_string())
}

async fn create_pairing(State(s): State<Arc<EdgeState>>, headers: HeaderMap, body: Body) -> Response {
    let me = match caller(&s, &headers, "pairing_admin_required") {
        Ok(d) => d,
        Err(r) => return r,
    };
    let obj = match object_body(&headers, body, &["ttl_seconds", "name"]).await {
        Ok(o) => o,
        Err(r) => return r,
    };
    let ttl = match obj.get("ttl_seconds") {
        None => None,
        Some(v) => match v.as_i64() {
            Some(t) => Some(t),
            None => return pairing_error(PairingError::InvalidTtl),
        },
    };
    let name = match name_param(&obj) {
        Ok(n) => n,
        Err(r) => return r,
    };
    match s.devices.create_pairing(ttl, name, &me.device_id) {
        Ok(p) => json_response(
            200,
            json!({"ok": true, "pairing_id": p.pairing_id, "code": p.code, "expires_at_ms": p.expires_at_ms, "worker_origin": s.config.issuer}),
        ),
        Err(e) => pairing_error(e),
    }
}

async fn consume_pairing(State(s): State<Arc<EdgeState>>, headers: HeaderMap, body: Body) -> Response {
    let obj = match object_body(&headers, body, &["pairing_id", "code", "name", "recover_device_id"]).await {
        Ok(o) => o,
        Err(r) => return r,
    };
    let (pairing_id, code, name) = match (string_param(&obj, "pairing_id"), string_param(&obj, "code"), name_param(&obj)) {
        (Ok(p), Ok(c), Ok(n)) => (p, c, n),
        (Err(r), _, _) | (_, Err(r), _) | (_, _, Err(r)) => return r,
    };
    let recover = match obj.get("recover_device_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(d)) => Some(d.as_str()),
        Some(_) => return fail(400, "invalid_params", "recover_device_id must be a device id string"),
    };
    // Only a device without a live link may be recovered (see consume_pairing_recover).
    let live = match recover.map(|_| s.router.devices()).transpose() {
        Ok(rows) => rows.unwrap_or_default(),
        Err(e) => {
            tracing::error!("device registry: {e}");
            return fail(500, "device_registry_unavailable", "the device registry cannot be read");
        }
    };
    let is_linked = |id: &str| live.iter().any(|r| r["device_id"] == id && r["connection"] != "offline");
    match s.devices.consume_pairing_recover(pairing_id, code, name, recover, &is_linked) {
        Ok(e) => json_response(
            200,
            json!({
                "ok": true,
                "device_id": e.device.device_id,
                "workstation_id": e.device.workstation_id,
                "credential_id": e.device.credential_id,
                "device_secret": e.device_secret,
                "name": e.device.name,
                "recovered_existing": e.recovered_existing,
            }),
        ),
        Err(e) => pairing_error(e),
    }
}

async fn list(State(s): State<Arc<EdgeState>>, headers: HeaderMap) -> Response {
    if let Err(r) = caller(&s, &headers, "device_auth_required") {
        return r;
    }
    let devices = match s.devices.list_devices() {
        Ok(d) => d,
        Err(e) => return device_error(DeviceError::Db(e)),
    };
    let live = match s.router.devices() {
        Ok(rows) => rows,
        Err(e) => {
            tracing::error!("device registry: {e}");
            return fail(500, "device_registry_unavailable", "the device registry cannot be read");
        }
    };
    // Indexed by id once, so the join is linear in the rows it returns.
    let live: HashMap<&str, &Value> = live.iter().filter_map(|r| Some((r["device_id"].as_str()?, r))).collect();
    let rows: Vec<Value> = devices.iter().map(|d| with_liveness(d, live.get(d.device_id.as_str()).copied())).collect();
    json_response(200, json!({"ok": true, "devices": rows, "observed_at_ms": s.store.now_ms()}))
}

/// A registry record plus the live fields of its `herdr_devices` row (spec §9:
/// `connection`, `last_seen_ago_ms`, `active_requests`, the runtime); a device
/// the router has no row for has no link, so it gets the offline values.
fn with_liveness(d: &Device, found: Option<&Value>) -> Value {
    let mut row = serde_json::to_value(d).unwrap_or_else(|_| json!({"device_id": d.device_id}));
    let offline = live_fields(None, None, 0);
    if let Some(obj) = row.as_object_mut() {
        for (key, default) in offline {
            let value = found.and_then(|r| r.get(&key)).cloned().unwrap_or(default);
            obj.insert(key, value);
        }
    }
    row
}

fn revoked_answer(d: &Device) -> Response {
    json_response(200, json!({"ok": true, "device_id": d.device_id, "revoked_at_ms": d.revoked_at_ms}))
}

async fn revoke(State(s): State<Arc<EdgeState>>, headers: HeaderMap, body: Body) -> Response {
    let me = match caller(&s, &headers, "device_auth_required") {
        Ok(d) => d,
        Err(r) => return r,
    };
    let obj = match object_body(&headers, body, &["device_id", "confirm"]).await {
        Ok(o) => o,
        Err(r) => return r,
    };
    let device_id = match string_param(&obj, "device_id") {
        Ok(d) => d,
        Err(r) => return r,
    };
    if obj.get("confirm") != Some(&Value::Bool(true)) {
        return fail(400, "confirmation_required", "revocation cannot be undone; send confirm: true");
    }
    match s.devices.revoke(device_id, &me.device_id) {
        Ok(d) => revoked_answer(&d),
        Err(e) => device_error(e),
    }
}

async fn revoke_self(State(s): State<Arc<EdgeState>>, headers: HeaderMap, body: Body) -> Response {
    let me = match caller(&s, &headers, "device_auth_required") {
        Ok(d) => d,
        Err(r) => return r,
    };
    if let Err(r) = object_body(&headers, body, &[]).await {
        return r;
    }
    match s.devices.revoke(&me.device_id, &me.device_id) {
        Ok(d) => revoked_answer(&d),
        Err(e) => device_error(e),
    }
}

async fn rename_self(State(s): State<Arc<EdgeState>>, headers: HeaderMap, body: Body) -> Response {
    let me = match caller(&s, &headers, "device_auth_required") {
        Ok(d) => d,
        Err(r) => return r,
    };
    let obj = match object_body(&headers, body, &["workstation_id", "name"]).await {
        Ok(o) => o,
        Err(r) => return r,
    };
    if obj.get("workstation_id").is_some_and(|w| w.as_str() != Some(me.workstation_id.as_str())) {
        return fail(403, "workstation_mismatch", "a device can only rename itself");
    }
    let name = match name_param(&obj) {
        Ok(Some(n)) => n,
        Ok(None) => return fail(400, "invalid_device_name", "name is required"),
        Err(r) => return r,
    };
    match s.devices.rename(&me.device_id, name) {
        Ok(d) => json_response(200, json!({"ok": true, "device_id": d.device_id, "name": d.name, "aliases": d.aliases})),
        Err(e) => device_error(e),
    }
}
