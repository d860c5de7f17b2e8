//! `GET /activity`: the newest log entries, read-only and bounded, for the
//! extension's options page (through the native host) and local tools.
//!
//! Query: `limit` (1–200, default 50), `caller` (`extension`, `tcp`, …),
//! `since_ms`. Answers `{"ok":true,"entries":[…]}` with the entries of
//! [`super::query::entry_json`], newest first.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Query, State};
use serde::Deserialize;
use serde_json::{Value, json};

use super::query::{Filter, entry_json, latest};
use crate::server::mcp::ServerState;

/// Most entries one `GET /activity` returns.
pub const MAX_HTTP_LIMIT: usize = 200;
const DEFAULT_LIMIT: usize = 50;

#[derive(Debug, Deserialize)]
pub struct Params {
    limit: Option<usize>,
    caller: Option<String>,
    since_ms: Option<i64>,
}

pub async fn activity(State(state): State<Arc<ServerState>>, Query(p): Query<Params>) -> Json<Value> {
    let Some(db) = state.ctx.services.state.clone() else {
        return Json(
            json!({"ok": false, "code": "state_unavailable", "message": "this runtime has no state database, so it keeps no activity log"}),
        );
    };
    let filter = Filter {
        since_ms: p.since_ms,
        caller: p.caller.filter(|c| !c.is_empty()).map(|c| c.chars().take(32).collect()),
        limit: p.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_HTTP_LIMIT),
    };
    match db.run(move |c| latest(c, &filter)).await {
        Ok(entries) => Json(json!({"ok": true, "entries": entries.iter().map(entry_json).collect::<Vec<_>>()})),
        Err(e) => Json(json!({"ok": false, "code": "state_error", "message": e.to_string()})),
    }
}
