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
        // Filled by the exec and Herdr work; reported honestly until then.
        "exec_sessions": crate::exec::health(state.ctx.services.exec.as_deref()),
        "herdr": {"status": "unavailable", "message": "no Herdr connection in this build"},
    })
}
