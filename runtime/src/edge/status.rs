//! `GET /status/<workstation_id>` (spec §2): one workstation's presence for a
//! monitor holding an MCP bearer, the same live fields as its `herdr_devices`
//! row. It reveals nothing a connector cannot already ask `herdr_devices`.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::get;
use serde_json::{Value, json};

use super::EdgeState;
use super::http::json_response;
use super::mcp::{bearer, unauthorized};
use super::token::verify_bearer;

pub fn routes() -> Router<Arc<EdgeState>> {
    Router::new().route("/status/{workstation_id}", get(status))
}

async fn status(State(s): State<Arc<EdgeState>>, Path(workstation_id): Path<String>, headers: HeaderMap) -> Response {
    let bound = match bearer(&headers).map(|t| verify_bearer(&s.store, t)) {
        Some(Ok(Some(p))) => p.device_id,
        Some(Err(e)) => {
            tracing::error!("bearer check failed: {e}");
            return json_response(500, json!({"ok": false, "code": "internal_error", "retryable": true}));
        }
        _ => return unauthorized(&s),
    };
    let rows = match s.router.devices() {
        Ok(rows) => rows,
        Err(e) => {
            tracing::error!("device registry unreadable: {e}");
            return json_response(500, json!({"ok": false, "code": "device_registry_unavailable", "retryable": true}));
        }
    };
    // A paired device's workstation id is its device id.
    // An automation token sees only its own device; any other is "not found".
    let visible = |r: &Value| bound.as_deref().is_none_or(|b| r["device_id"] == b);
    match rows.into_iter().find(|r| r["device_id"] == workstation_id.as_str() && visible(r)) {
        Some(Value::Object(mut row)) => {
            row.insert("ok".into(), json!(true));
            row.insert("workstation_id".into(), json!(workstation_id));
            row.insert("observed_at_ms".into(), json!(s.store.now_ms()));
            json_response(200, Value::Object(row))
        }
        _ => json_response(
            404,
            json!({"ok": false, "code": "device_not_found", "retryable": false, "message": "no device has this workstation id"}),
        ),
    }
}
