//! `GET /ws/<workstation_id>`: the link's WebSocket. Checks the offer and the
//! credential before upgrading (so refusals are plain HTTP answers a link can
//! report), then requires `hello` as the first frame, answers `hello_ack` (its
//! `resume`/`completed` lists come from the mutation ledger, so a reconnecting
//! link sends the answers the edge still lacks), and pumps frames until either
//! side ends the link. Answers nobody waits for any more settle the ledger late.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::get;
use futures::{SinkExt, StreamExt};
use serde_json::json;
use tokio::sync::mpsc;

use super::forward::settlement;
use super::forward_pending;
use super::http::json_response;
use super::link_hub::{LinkConn, LinkHub, LinkSlot, Outbound, Outcome};
use super::link_hub_auth::{DeviceInfo, LinkAuthError, Offer, read_offer, read_offered_name};
use super::relay::{self, Frame, FrameError, HelloAck, ReconnectHint, Sender, close};

/// A link must say hello within this long (spec §8: 10 s handshake).
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// The edge pings this often so a link sees it alive between requests.
pub const PING_EVERY: Duration = Duration::from_secs(30);
/// Bytes the WebSocket reads from the socket at a time, and so the buffer an idle
/// link keeps (tungstenite's default is 128 KiB). A larger frame grows the buffer
/// for as long as it takes to read it.
pub const READ_BUFFER_BYTES: usize = 4 * 1024;
/// Reconnect pacing suggested to links.
pub const RECONNECT: ReconnectHint = ReconnectHint { min_backoff_ms: 500, max_backoff_ms: 30_000 };

pub fn routes(hub: Arc<LinkHub>) -> Router {
    Router::new().route("/ws/{workstation_id}", get(upgrade)).with_state(hub)
}

fn refuse(status: u16, code: &str, message: &str) -> Response {
    json_response(status, json!({"ok": false, "code": code, "retryable": false, "message": message}))
}

async fn upgrade(
    State(hub): State<Arc<LinkHub>>,
    Path(workstation_id): Path<String>,
    headers: HeaderMap,
    ws: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Response {
    let secret = match read_offer(&headers) {
        Offer::Bad(why) => return refuse(400, "bad_request", why),
        Offer::Link { secret } => secret,
    };
    if let Err(m) = relay::check_id("workstation_id", &workstation_id, relay::MAX_WORKSTATION_ID) {
        return refuse(400, "bad_request", &m);
    }
    let offered_name = match read_offered_name(&headers) {
        Ok(n) => n,
        Err(m) => return refuse(400, "invalid_device_name", &m),
    };
    let Some(secret) = secret else {
        return refuse(401, LinkAuthError::Rejected.code(), "no link credential was offered");
    };
    if hub.is_tombstoned(&workstation_id) {
        return refuse(401, LinkAuthError::Revoked.code(), "this device was revoked");
    }
    // Before the credential is checked: at the cap an edge sheds links for the
    // price of an upgrade, without reading its registry.
    let Some(slot) = hub.reserve_slot(&workstation_id) else {
        let Ok(ws) = ws else {
            return refuse(400, "bad_request", "expected a WebSocket upgrade");
        };
        let reason = format!("edge_capacity_exceeded: this edge holds its maximum of {} links; retry later", hub.max_links());
        return ws.protocols([relay::SUBPROTOCOL]).read_buffer_size(READ_BUFFER_BYTES).write_buffer_size(0).on_upgrade(move |mut socket| async move {
            close_with(&mut socket, close::TRY_AGAIN_LATER, &reason).await;
        });
    };
    let mut device = match hub.authenticator().verify_link(&workstation_id, &secret) {
        Ok(d) => d,
        Err(e) => {
            if let LinkAuthError::Unavailable(m) = &e {
                tracing::error!("link auth for {workstation_id}: {m}");
            }
            return refuse(401, e.code(), &e.to_string());
        }
    };
    let Ok(ws) = ws else {
        return refuse(400, "bad_request", "expected a WebSocket upgrade");
    };
    // Spec §8: the name sets a generated name once; a failure to store it is no
    // reason to keep the workstation offline.
    if let Some(name) = offered_name {
        match hub.authenticator().offer_name(&device, &name) {
            Ok(in_effect) => device.name = in_effect,
            Err(e) => tracing::warn!(workstation = %workstation_id, "cannot store the offered device name: {e}"),
        }
    }
    // Room above the protocol limit, so an oversized frame is read and refused
    // with 1009 instead of tearing the socket down without a reason.
    // Small buffers: thousands of links sit idle most of the time, and each
    // message is written at once (no write batching to wait for).
    ws.protocols([relay::SUBPROTOCOL])
        .read_buffer_size(READ_BUFFER_BYTES)
        .write_buffer_size(0)
        .max_message_size(4 * relay::MAX_EDGE_INBOUND)
        .max_frame_size(4 * relay::MAX_EDGE_INBOUND)
        .on_upgrade(move |socket| run(hub, device, socket, slot))
}

async fn close_with(socket: &mut WebSocket, code: u16, reason: &str) {
    let reason: String = reason.chars().take(120).collect();
    let _ = socket.send(Message::Close(Some(CloseFrame { code, reason: reason.into() }))).await;
}

fn hello_refusal(workstation_id: &str, code: &str, message: String) -> String {
    Frame::HelloAck(HelloAck {
        workstation_id: workstation_id.to_string(),
        ok: false,
        server_version: Some(env!("CARGO_PKG_VERSION").into()),
        edge_deployment_id: None,
        capabilities: None,
        reconnect: None,
        resume: None,
        completed: None,
        code: Some(code.into()),
        message: Some(message),
    })
    .encode()
}

/// The first frame: a valid hello for this route and contract, or a close.
async fn handshake(hub: &LinkHub, device: &DeviceInfo, socket: &mut WebSocket) -> Option<relay::Hello> {
    let first = match tokio::time::timeout(HELLO_TIMEOUT, socket.recv()).await {
        Err(_) => {
            close_with(socket, close::POLICY, "no hello within 10 s").await;
            return None;
        }
        Ok(None | Some(Err(_))) => return None,
        Ok(Some(Ok(m))) => m,
    };
    let text = match first {
        Message::Text(t) => t,
        Message::Binary(_) => {
            close_with(socket, close::UNSUPPORTED_DATA, &FrameError::Binary.to_string()).await;
            return None;
        }
        _ => {
            close_with(socket, close::POLICY, "the first frame must be hello").await;
            return None;
        }
    };
    let hello = match Frame::decode(text.as_str(), Sender::Link, relay::MAX_EDGE_INBOUND) {
        Ok(Frame::Hello(h)) => h,
        Ok(other) => {
            close_with(socket, close::POLICY, &format!("the first frame must be hello, not {}", other.kind())).await;
            return None;
        }
        Err(e) => {
            close_with(socket, e.close_code(), &e.to_string()).await;
            return None;
        }
    };
    let refusal = if hello.workstation_id != device.workstation_id {
        Some(("workstation_mismatch", format!("hello names {}, the route {}", hello.workstation_id, device.workstation_id)))
    } else {
        let (epoch, hash) = &hub.runtime_contract;
        match &hello.runtime {
            Some(r) if r.contract_epoch == *epoch && &r.contract_hash == hash => None,
            Some(r) => Some((
                "contract_mismatch",
                format!("runtime contract epoch {} {} is not the accepted epoch {epoch} {hash}", r.contract_epoch, r.contract_hash),
            )),
            None => Some(("contract_mismatch", "hello carries no runtime contract".to_string())),
        }
    };
    if let Some((code, message)) = refusal {
        let _ = socket.send(Message::Text(hello_refusal(&device.workstation_id, code, message.clone()).into())).await;
        close_with(socket, close::POLICY, &message).await;
        return None;
    }
    Some(hello)
}

async fn run(hub: Arc<LinkHub>, device: DeviceInfo, mut socket: WebSocket, _slot: LinkSlot) {
    let Some(hello) = handshake(&hub, &device, &mut socket).await else { return };
    // Read before this link replaces an older one, so a request still waiting on
    // the older socket is listed as well.
    let (resume, completed) = match forward_pending::resume_of(&hub.store, &device.workstation_id) {
        Ok(lists) => lists,
        Err(e) => {
            tracing::error!(workstation = %device.workstation_id, "cannot read unanswered requests for resume: {e}");
            (Vec::new(), Vec::new())
        }
    };
    let ack = Frame::HelloAck(HelloAck {
        workstation_id: device.workstation_id.clone(),
        ok: true,
        server_version: Some(env!("CARGO_PKG_VERSION").into()),
        edge_deployment_id: None,
        capabilities: Some(vec!["cancel".into()]),
        reconnect: Some(RECONNECT),
        resume: Some(resume),
        completed: Some(completed),
        code: None,
        message: None,
    });
    // Registered before the ack is written: requests routed meanwhile wait in
    // the channel and reach the link after its hello_ack, never before.
    let (tx, mut rx) = mpsc::unbounded_channel();
    let conn = Arc::new(LinkConn::new(hub.next_conn_id(), device, hello, tx, hub.now_ms()));
    hub.register(Arc::clone(&conn));
    if socket.send(Message::Text(ack.encode().into())).await.is_err() {
        hub.unregister(&conn);
        return;
    }
    tracing::info!(workstation = %conn.device.workstation_id, conn = conn.conn_id, "link up");
    let (mut sink, mut stream) = socket.split();
    let mut ping = tokio::time::interval(PING_EVERY);
    ping.tick().await;
    // Whether the workstation's runtime answers is the link's to say: asked now,
    // then with every ping, so `health` is never older than PING_EVERY.
    let status_query = Frame::Status(relay::Status { workstation_id: conn.device.workstation_id.clone(), query: Some(true), ..Default::default() });
    if conn.answers_status() {
        conn.send(&status_query);
    }
    let end = loop {
        tokio::select! {
            msg = stream.next() => {
                let Some(Ok(msg)) = msg else { break None };
                conn.touch(hub.now_ms());
                hub.persist_seen(&conn, false);
                match msg {
                    Message::Text(t) => {
                        if let Some(stop) = on_frame(&hub, &conn, t.as_str()) {
                            break Some(stop);
                        }
                    }
                    Message::Binary(_) => break Some((close::UNSUPPORTED_DATA, FrameError::Binary.to_string())),
                    Message::Close(_) => break None,
                    Message::Ping(_) | Message::Pong(_) => {}
                }
            }
            out = rx.recv() => match out {
                Some(Outbound::Frame(text)) => {
                    if sink.send(Message::Text(text.into())).await.is_err() {
                        break None;
                    }
                }
                Some(Outbound::Close(code, reason)) => break Some((code, reason)),
                None => break None,
            },
            _ = ping.tick() => {
                if sink.send(Message::Ping(Default::default())).await.is_err() {
                    break None;
                }
                if conn.answers_status() && sink.send(Message::Text(status_query.encode().into())).await.is_err() {
                    break None;
                }
            }
        }
    };
    if let Some((code, reason)) = end {
        let reason: String = reason.chars().take(120).collect();
        let _ = sink.send(Message::Close(Some(CloseFrame { code, reason: reason.into() }))).await;
    }
    let _ = sink.close().await;
    hub.unregister(&conn);
    tracing::info!(workstation = %conn.device.workstation_id, conn = conn.conn_id, "link down");
}

/// Handles one inbound frame; `Some((code, reason))` ends the link.
fn on_frame(hub: &LinkHub, conn: &LinkConn, text: &str) -> Option<(u16, String)> {
    let frame = match Frame::decode(text, Sender::Link, relay::MAX_EDGE_INBOUND) {
        Ok(f) => f,
        Err(e) => return Some((e.close_code(), e.to_string())),
    };
    if frame.workstation_id() != conn.device.workstation_id {
        return Some((close::POLICY, format!("frame names workstation {}", frame.workstation_id())));
    }
    match frame {
        Frame::Hello(_) => return Some((close::POLICY, "hello was already received".into())),
        Frame::Heartbeat(h) => {
            conn.observe(h.runtime, Some(h.active_requests));
            // A backstop for a change the registry watcher has not acted on yet (or
            // a registry without a generation): this one device, and only when the
            // generation moved. A link no longer admitted is closed (its 4401
            // arrives through `out`).
            if let Err(e) = hub.recheck_link(conn) {
                tracing::warn!("device registry unreadable during heartbeat: {e}");
            }
        }
        Frame::Status(s) => {
            if let Some(healthy) = s.healthy {
                conn.observe_health(healthy);
            }
            conn.observe(s.runtime, s.active_requests);
        }
        Frame::ToolResult(r) => {
            let id = r.request_id.clone();
            if let Some(late) = conn.settle(&id, Outcome::Result(r)) {
                settle_late(hub, &conn.device.workstation_id, &id, &late);
            }
        }
        Frame::ToolError(e) => {
            let id = e.request_id.clone();
            if let Some(late) = conn.settle(&id, Outcome::Error(e)) {
                settle_late(hub, &conn.device.workstation_id, &id, &late);
            }
        }
        Frame::CancelAck(a) => tracing::debug!(request = %a.request_id, accepted = a.accepted, "cancel acknowledged"),
        // Edge-bound kinds never pass `decode(.., Sender::Link, ..)`.
        Frame::HelloAck(_) | Frame::ToolRequest(_) | Frame::Cancel(_) => {}
    }
    None
}

/// An answer nobody waits for any more: its caller was already told
/// `delivery_uncertain` (or timed out), so it is not answered again, but the
/// ledger learns the real outcome for a retry with the same idempotency key.
fn settle_late(hub: &LinkHub, workstation_id: &str, request_id: &str, outcome: &Outcome) {
    // Whether the row has a key is the ledger's to know; it keeps the answer only then.
    let (state, label, answer) = settlement(outcome, true);
    match forward_pending::settle_late(&hub.store, workstation_id, request_id, state, &label, answer.as_deref()) {
        Ok(true) => tracing::info!(workstation = %workstation_id, request = %request_id, "a late answer settled an unanswered request"),
        Ok(false) => tracing::debug!(workstation = %workstation_id, request = %request_id, "answer for no unanswered request; ignored"),
        Err(e) => tracing::error!(workstation = %workstation_id, request = %request_id, "cannot record a late answer: {e}"),
    }
}
