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
//! socket and TCP (behind the same bearer layer) alike. The body is read once, by
//! the envelope check (`super::envelope`), which hands over the id and `_meta`'s
//! verdict; `tools/call` pays nothing for any of this.
//!
//! A request carrying `Mcp-Session-Id` is answered when the session is live (the
//! endpoint refuses an unknown one with 404, as for every method, so a client
//! learns that its session ended; a stateless client's id is not checked); the
//! result itself describes the server, not the session.

use axum::body::Body;
use http::{HeaderMap, Response};
use serde_json::Value;

use super::jsonrpc;
use super::mcp::ServerState;
use crate::mcp_discover::has_openai_user_agent;

/// The answer to a `server/discover` message, from what the envelope check read
/// out of it (`id`, and whether its `_meta` names one of OpenAI's clients): 202
/// without a body for a notification (spec §3), else the result as JSON.
pub fn answer(state: &ServerState, headers: &HeaderMap, id: Option<Value>, openai_by_meta: bool) -> Response<Body> {
    let Some(id) = id else {
        return jsonrpc::accepted();
    };
    let openai = openai_by_meta || has_openai_user_agent(headers);
    jsonrpc::result_response(id, state.discover_result(openai))
}
