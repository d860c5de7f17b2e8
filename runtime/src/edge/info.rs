//! `GET /info`: the identity of the public catalog and of the runtime contract
//! links must serve, each as `{epoch, hash}` computed from the very catalogs
//! `/mcp` lists and the hub enforces, so an operator can compare them.

use std::sync::Arc;

use axum::extract::State;
use axum::response::Response;
use serde_json::json;

use super::EdgeState;
use super::http::json_response;
use super::mcp::{PUBLIC_CONTRACT_EPOCH, public_catalog};

pub async fn info(State(s): State<Arc<EdgeState>>) -> Response {
    let public = public_catalog(s.router.as_ref());
    let runtime = s.router.runtime_catalog().map(|tools| {
        json!({"epoch": crate::contract::CONTRACT_EPOCH, "hash": crate::contract::contract_hash(&tools).unwrap_or_default()})
    });
    json_response(
        200,
        json!({
            "ok": true,
            "service": "herdr-mcp-edge",
            "stage": "link",
            "edgeVersion": env!("CARGO_PKG_VERSION"),
            "publicContract": {"epoch": PUBLIC_CONTRACT_EPOCH, "hash": crate::contract::contract_hash(&public).unwrap_or_default()},
            "runtimeContract": runtime,
            "routes": [
                {"path": "/mcp", "stage": "oauth"},
                {"path": "/oauth/authorize", "stage": "oauth"},
                {"path": "/oauth/token", "stage": "oauth"},
                {"path": "/oauth/register", "stage": "oauth"},
                {"path": "/ws/:workstationId", "stage": "link"},
            ],
        }),
    )
}
