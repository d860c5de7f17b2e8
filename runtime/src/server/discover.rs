//! `server/discover` on the runtime, answered by the endpoint before rmcp sees the
//! request (the result itself is built in [`crate::mcp_discover`]).
//!
//! Why not rmcp's own `server/discover` handler: rmcp 3.11 implements the
//! 2026-07-28 discover lifecycle, so both its HTTP layer and its handler refuse a
//! discover request whose `_meta` lacks that revision's request metadata
//! (protocol version, client info, client capabilities), which the clients of
//! spec §3 do not send; a request whose params it cannot type falls through to
//! `on_custom_request` instead, and the session service would answer as SSE. The
//! spec wants one JSON answer for every caller, with or without a session, and
//! the choice of versions depends on a header. Answering here serves the Unix
//! socket and TCP (behind the same bearer layer) alike, and costs `tools/call`
//! nothing but a comparison of the method name the envelope check already read.
//!
//! A request carrying `Mcp-Session-Id` is answered when the session is live (the
//! endpoint refuses an unknown one with 404, as for every method, so a client
//! learns that its session ended); the result itself describes the server, not
//! the session.

use axum::body::Body;
use http::{HeaderMap, Response, StatusCode};
use serde_json::Value;

use super::jsonrpc;
use super::mcp::ServerState;
use crate::mcp_discover::is_openai_request;

/// The answer to a `server/discover` message whose envelope was already checked:
/// 202 without a body for a notification (spec §3), else the result as JSON.
pub fn answer(state: &ServerState, headers: &HeaderMap, body: &[u8]) -> Response<Body> {
    let message: Value = match serde_json::from_slice(body) {
        Ok(message) => message,
        Err(e) => {
            return jsonrpc::error_response(StatusCode::BAD_REQUEST, jsonrpc::PARSE_ERROR, &format!("Parse error: {e}"), None);
        }
    };
    let Some(id) = message.get("id").cloned() else {
        return jsonrpc::accepted();
    };
    // Params that are not an object never get here: the envelope check refuses
    // them (rmcp's message model has no room for them) for every method.
    let params = message.get("params");
    jsonrpc::result_response(id, state.discover_result(is_openai_request(headers, params)))
}
