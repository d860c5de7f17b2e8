//! `GET /health`: identity, contract and subsystem status, for probes and the
//! native host's status command. Reveals no paths or secrets (TCP serves it without
//! a bearer).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use super::mcp::ServerState;
use crate::contract::CONTRACT_EPOCH;

pub async fn health(State(state): State<Arc<ServerState>>) -> Json<Value> {
    Json(health_body(&state))
}

pub fn health_body(state: &ServerState) -> Value {
    let info = &state.ctx.info;
    json!({
        "ok": true,
        "name": info.name,
        "version": info.version,
        "build": {
            "commit": info.build_commit,
            "started_at": info.started_at,
            "pid": info.pid,
            "boot_id": info.boot_id,
        },
        "contract": {
            "epoch": CONTRACT_EPOCH,
            "hash": state.contract_hash,
            "tool_count": state.registry.len(),
        },
        "uptime_ms": info.uptime_ms() as u64,
        "tool_count": state.registry.len(),
        "exec_sessions": crate::exec::health(state.ctx.services.exec.as_deref()),
        "herdr": herdr_health(state.ctx.services.herdr.as_deref()),
    })
}

/// `connected` while the event cache follows a live Herdr server (the extension's
/// options page shows the Herdr layer from this). No socket path: TCP serves
/// `/health` without a bearer.
fn herdr_health(herdr: Option<&crate::herdr::HerdrService>) -> Value {
    match herdr {
        Some(service) if service.cache.is_live() => json!({"status": "connected"}),
        Some(_) => json!({
            "status": "unavailable",
            "message": "no Herdr server answers on the Herdr socket; start Herdr for the workspace and agent tools (the runtime keeps looking)",
        }),
        None => json!({"status": "unavailable", "message": "the Herdr integration is off (the runtime log says why)"}),
    }
}
