//! One connection of the link: connect, `hello`, then serve `tool_request`s
//! against the local runtime until the socket ends. [`super::run`] reconnects.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use super::LinkConfig;
use super::connect::{ConnectError, Ws, open};
use super::local::LocalRuntime;
use super::outbox::Outbox;
use crate::edge::forward::READ_TOOLS;
use crate::edge::link_hub_auth::{NAME_HEADER, auth_subprotocol, name_header_value};
use crate::edge::relay::{
    self, CancelAck, Frame, FrameError, Heartbeat, Hello, HelloAck, RuntimeIdentity, Sender, Status, ToolError, ToolRequest, ToolResult, close,
};

pub const HEARTBEAT_EVERY: Duration = Duration::from_secs(30);
/// The link gives up on a silent edge after this long (spec §8: 90 s).
pub const EDGE_SILENCE: Duration = Duration::from_secs(90);
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How a session ended, which decides what [`super::run`] does next.
#[derive(Debug)]
pub enum End {
    /// Try again after a backoff; `linked` when a hello was accepted first.
    Retry { reason: String, linked: bool },
    /// Never retry with this credential (revoked, rejected, misconfigured).
    Fatal(String),
    /// Shutdown was asked for.
    Stopped,
}

pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

fn ws_url(cfg: &LinkConfig) -> Result<String, String> {
    ws_url_of(&cfg.edge, &cfg.workstation_id)
}

/// The link's WebSocket URL on the edge at `edge` (its http(s) base URL).
pub(super) fn ws_url_of(edge: &str, workstation_id: &str) -> Result<String, String> {
    let base = edge.trim_end_matches('/');
    let rest = if let Some(r) = base.strip_prefix("https://") {
        format!("wss://{r}")
    } else if let Some(r) = base.strip_prefix("http://") {
        // The device secret rides in the upgrade request: in clear only on loopback,
        // the rule of the edge's own --issuer.
        if !url::Url::parse(base).is_ok_and(|u| crate::edge::is_loopback_url(&u)) {
            return Err(format!("--edge {base:?}: http:// only for an edge on this computer (loopback); use https://"));
        }
        format!("ws://{r}")
    } else {
        return Err(format!("--edge {base:?} must start with http:// or https://"));
    };
    Ok(format!("{rest}/ws/{workstation_id}"))
}

/// Reads the edge's refusal of an upgrade (a JSON `code`) into an [`End`].
fn refused(status: u16, body: Option<&[u8]>) -> End {
    let code = body
        .and_then(|b| serde_json::from_slice::<Value>(b).ok())
        .and_then(|v| v.get("code").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_else(|| "unknown".into());
    match status {
        401 if code == "device_suspended" => {
            End::Retry { reason: "the device is suspended; retrying until the operator resumes it".into(), linked: false }
        }
        401 | 403 => End::Fatal(format!("the edge refused the link credential ({status} {code})")),
        400 | 404 => End::Fatal(format!("the edge refused the link request ({status} {code})")),
        _ => End::Retry { reason: format!("the edge answered {status} {code}"), linked: false },
    }
}

async fn connect(cfg: &LinkConfig, tls: &Arc<rustls::ClientConfig>) -> Result<Ws, End> {
    let url = ws_url(cfg).map_err(End::Fatal)?;
    let mut req = url.as_str().into_client_request().map_err(|e| End::Fatal(format!("bad edge URL {url}: {e}")))?;
    let protocols = format!("{}, {}", relay::SUBPROTOCOL, auth_subprotocol(&cfg.secret));
    let value = HeaderValue::from_str(&protocols).map_err(|_| End::Fatal("the link credential is not printable".into()))?;
    req.headers_mut().insert("sec-websocket-protocol", value);
    if let Some(name) = &cfg.name {
        // base64url is plain ASCII, always a valid header value.
        if let Ok(v) = HeaderValue::from_str(&name_header_value(name)) {
            req.headers_mut().insert(NAME_HEADER, v);
        }
    }
    // Room above the protocol limit: an oversized frame is read, then refused with 1009.
    let config = WebSocketConfig::default()
        .max_message_size(Some(4 * relay::MAX_LINK_INBOUND))
        .max_frame_size(Some(4 * relay::MAX_LINK_INBOUND));
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, open(req, tls, config)).await {
        Err(_) => Err(End::Retry { reason: "the edge did not complete the handshake within 10 s".into(), linked: false }),
        Ok(Err(ConnectError::Refused(status, body))) => Err(refused(status, body.as_deref())),
        Ok(Err(ConnectError::Fatal(m))) => Err(End::Fatal(m)),
        Ok(Err(ConnectError::Transient(m))) => Err(End::Retry { reason: m, linked: false }),
        Ok(Ok((ws, resp))) => {
            let chosen = resp.headers().get("sec-websocket-protocol").and_then(|v| v.to_str().ok());
            if chosen != Some(relay::SUBPROTOCOL) {
                return Err(End::Fatal(format!("the edge chose subprotocol {chosen:?}, not {}", relay::SUBPROTOCOL)));
            }
            Ok(ws)
        }
    }
}

async fn close_ws(ws: &mut Ws, code: u16, reason: &str) {
    let frame = CloseFrame { code: CloseCode::from(code), reason: reason.chars().take(120).collect::<String>().into() };
    let _ = ws.send(Message::Close(Some(frame))).await;
}

/// Sends hello and waits for a successful hello_ack.
async fn handshake(ws: &mut Ws, cfg: &LinkConfig, boot_id: &str, runtime: RuntimeIdentity) -> Result<HelloAck, End> {
    let hello = Frame::Hello(Hello {
        workstation_id: cfg.workstation_id.clone(),
        boot_id: boot_id.to_string(),
        link_version: env!("CARGO_PKG_VERSION").into(),
        connected_at_ms: Some(now_ms()),
        capabilities: vec!["cancel".into(), "status".into()],
        runtime: Some(runtime),
    });
    let lost = |reason: String| End::Retry { reason, linked: false };
    ws.send(Message::Text(hello.encode().into())).await.map_err(|e| lost(format!("hello not sent: {e}")))?;
    let answer = tokio::time::timeout(HANDSHAKE_TIMEOUT, ws.next()).await.map_err(|_| lost("no hello_ack within 10 s".into()))?;
    match answer {
        Some(Ok(Message::Text(t))) => match Frame::decode(t.as_str(), Sender::Edge, relay::MAX_LINK_INBOUND) {
            Ok(Frame::HelloAck(a)) if a.ok => Ok(a),
            Ok(Frame::HelloAck(a)) => {
                let code = a.code.unwrap_or_default();
                let msg = format!("the edge refused the hello: {code}: {}", a.message.unwrap_or_default());
                // A contract mismatch may heal when either side is upgraded.
                if code == "contract_mismatch" { Err(lost(msg)) } else { Err(End::Fatal(msg)) }
            }
            Ok(other) => Err(lost(format!("expected hello_ack, got {}", other.kind()))),
            Err(e) => {
                close_ws(ws, e.close_code(), &e.to_string()).await;
                Err(lost(format!("bad hello_ack: {e}")))
            }
        },
        Some(Ok(Message::Close(f))) => Err(closed(f.map(|f| (u16::from(f.code), f.reason.to_string())))),
        Some(Ok(_)) => Err(lost("expected hello_ack".into())),
        Some(Err(e)) => Err(lost(format!("socket error during hello: {e}"))),
        None => Err(lost("the edge closed during hello".into())),
    }
}

fn closed(frame: Option<(u16, String)>) -> End {
    match frame {
        Some((code, reason)) if code == close::DEVICE_REVOKED && reason.starts_with("device suspended") => {
            End::Retry { reason: format!("the edge closed the link: {reason}; retrying until the operator resumes it"), linked: false }
        }
        Some((code, reason)) if code == close::DEVICE_REVOKED => End::Fatal(format!("the edge closed the link: device revoked ({reason})")),
        // Not linked: the edge is full, so each retry waits longer than the last.
        Some((code, reason)) if code == close::TRY_AGAIN_LATER => {
            End::Retry { reason: format!("the edge is at capacity ({code} {reason})"), linked: false }
        }
        Some((code, reason)) => End::Retry { reason: format!("the edge closed the link ({code} {reason})"), linked: true },
        None => End::Retry { reason: "the edge closed the link".into(), linked: true },
    }
}

/// One session: connect, hello, serve. Never panics; every exit is an [`End`].
/// Requests outlive the session in `outbox`; their answers reach this socket or,
/// after a resume, a later one.
pub async fn run_session(
    cfg: &LinkConfig,
    tls: &Arc<rustls::ClientConfig>,
    local: &LocalRuntime,
    outbox: &Arc<Outbox>,
    boot_id: &str,
    started: Instant,
    stop: &CancellationToken,
) -> End {
    let runtime = match local.identity().await {
        Ok(r) => r,
        Err(e) => return End::Retry { reason: e.message, linked: false },
    };
    let mut ws = tokio::select! {
        r = connect(cfg, tls) => match r { Ok(ws) => ws, Err(end) => return end },
        _ = stop.cancelled() => return End::Stopped,
    };
    // A stop must not wait out an edge that never answers the hello.
    let ack = tokio::select! {
        r = handshake(&mut ws, cfg, boot_id, runtime.clone()) => match r { Ok(ack) => ack, Err(end) => return end },
        _ = stop.cancelled() => return End::Stopped,
    };
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    let resumed = outbox.attach(tx.clone(), &ack).await;
    tracing::info!(edge = %cfg.edge, workstation = %cfg.workstation_id, resumed, "linked");
    let mut heartbeat = tokio::time::interval(cfg.timings.heartbeat_every);
    let mut last_heard = Instant::now();
    let end = loop {
        tokio::select! {
            _ = stop.cancelled() => {
                close_ws(&mut ws, 1000, "link stopping").await;
                break End::Stopped;
            }
            msg = ws.next() => {
                last_heard = Instant::now();
                let text = match msg {
                    Some(Ok(Message::Text(t))) => t,
                    Some(Ok(Message::Binary(_))) => {
                        close_ws(&mut ws, close::UNSUPPORTED_DATA, &FrameError::Binary.to_string()).await;
                        break End::Retry { reason: "the edge sent a binary frame".into(), linked: true };
                    }
                    Some(Ok(Message::Close(f))) => break closed(f.map(|f| (u16::from(f.code), f.reason.to_string()))),
                    Some(Ok(_)) => continue,
                    Some(Err(e)) => break End::Retry { reason: format!("socket error: {e}"), linked: true },
                    None => break End::Retry { reason: "the edge ended the socket".into(), linked: true },
                };
                let frame = match Frame::decode(text.as_str(), Sender::Edge, relay::MAX_LINK_INBOUND) {
                    Ok(f) => f,
                    Err(e) => {
                        close_ws(&mut ws, e.close_code(), &e.to_string()).await;
                        break End::Retry { reason: format!("the edge sent a bad frame: {e}"), linked: true };
                    }
                };
                match frame {
                    Frame::ToolRequest(req) => {
                        let id = req.request_id.clone();
                        let is_mutation = !READ_TOOLS.contains(&req.operation.as_str());
                        let (local, out) = (local.clone(), Arc::clone(outbox));
                        let generation = runtime.runtime_generation.clone();
                        let task_id = id.clone();
                        outbox.start(id, || {
                            tokio::spawn(async move {
                                let answer = serve_request(&local, req, generation).await;
                                out.finished(&task_id, is_mutation, answer).await;
                            })
                            .abort_handle()
                        });
                    }
                    Frame::Cancel(c) => {
                        let accepted = outbox.cancel(&c.request_id);
                        let ack = Frame::CancelAck(CancelAck {
                            workstation_id: cfg.workstation_id.clone(),
                            request_id: c.request_id,
                            accepted,
                            cancelled_at_ms: now_ms(),
                            reason: c.reason,
                        });
                        let _ = tx.send(ack.encode());
                    }
                    Frame::Status(s) if s.query == Some(true) => {
                        let mut status = Status {
                            workstation_id: cfg.workstation_id.clone(),
                            boot_id: Some(boot_id.to_string()),
                            runtime: Some(runtime.clone()),
                            active_requests: Some(outbox.running() as u32),
                            link_uptime_ms: Some(started.elapsed().as_millis() as u64),
                            ..Default::default()
                        };
                        // Checking a runtime that hangs takes up to its health
                        // timeout; answered from a task so requests and cancels
                        // arriving meanwhile are not held up behind it.
                        let (local, tx) = (local.clone(), tx.clone());
                        tokio::spawn(async move {
                            status.healthy = Some(local.identity().await.is_ok());
                            status.sent_at_ms = Some(now_ms());
                            let _ = tx.send(Frame::Status(status).encode());
                        });
                    }
                    Frame::HelloAck(_) => {
                        close_ws(&mut ws, close::POLICY, "hello_ack was already received").await;
                        break End::Retry { reason: "the edge repeated hello_ack".into(), linked: true };
                    }
                    _ => {}
                }
            }
            Some(text) = rx.recv() => {
                if let Err(e) = ws.send(Message::Text(text.into())).await {
                    break End::Retry { reason: format!("send failed: {e}"), linked: true };
                }
            }
            _ = heartbeat.tick() => {
                if last_heard.elapsed() > cfg.timings.edge_silence {
                    let why = format!("the edge has been silent for {} s", cfg.timings.edge_silence.as_secs());
                    close_ws(&mut ws, close::STALE, &why).await;
                    break End::Retry { reason: "the edge went silent".into(), linked: true };
                }
                let hb = Frame::Heartbeat(Heartbeat {
                    workstation_id: cfg.workstation_id.clone(),
                    boot_id: boot_id.to_string(),
                    sent_at_ms: now_ms(),
                    link_uptime_ms: Some(started.elapsed().as_millis() as u64),
                    active_requests: outbox.running() as u32,
                    runtime: Some(runtime.clone()),
                });
                if let Err(e) = ws.send(Message::Text(hb.encode().into())).await {
                    break End::Retry { reason: format!("heartbeat failed: {e}"), linked: true };
                }
            }
        }
    };
    outbox.detach();
    end
}

/// Runs one request on the local runtime; the answer frame's text.
async fn serve_request(local: &LocalRuntime, req: ToolRequest, generation: Option<String>) -> String {
    let timeout = Duration::from_millis(req.timeout_ms.unwrap_or(30_000));
    let ws = req.workstation_id.clone();
    let id = req.request_id.clone();
    let error = |code: &str, message: String, retryable: bool, state| {
        Frame::ToolError(ToolError {
            workstation_id: ws.clone(),
            request_id: id.clone(),
            code: code.into(),
            message: Some(message),
            details: None,
            retryable,
            delivery_state: Some(state),
            served_at_ms: Some(now_ms()),
            runtime_generation: generation.clone(),
        })
        .encode()
    };
    match local.call_tool_text_for_edge(&req.operation, req.arguments.unwrap_or(Value::Object(Default::default())), timeout, &id).await {
        Ok(result) => {
            let mut text = Frame::ToolResult(ToolResult {
                workstation_id: ws.clone(),
                request_id: id.clone(),
                result: None,
                served_at_ms: now_ms(),
                runtime_generation: generation.clone(),
                transport_name: Some("unix".into()),
            })
            .encode();
            // The runtime's result as it wrote it (already checked to be JSON),
            // spliced in as the frame's last member instead of parsed and encoded again.
            text.pop();
            text.push_str(",\"result\":");
            text.push_str(&result);
            text.push('}');
            if text.len() > relay::MAX_EDGE_INBOUND {
                return error(
                    "payload_too_large",
                    format!("the result is {} bytes; the edge accepts at most {}", text.len(), relay::MAX_EDGE_INBOUND),
                    false,
                    relay::DeliveryState::Delivered,
                );
            }
            text
        }
        Err(e) => error(e.code, e.message, e.retryable, e.delivery_state),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_edge_is_retried_with_a_growing_backoff() {
        let full = closed(Some((close::TRY_AGAIN_LATER, "edge_capacity_exceeded: this edge holds its maximum of 2 links".into())));
        assert!(matches!(full, End::Retry { linked: false, ref reason } if reason.contains("capacity")), "{full:?}");
        // Any other close after a hello counts as linked (the backoff starts over).
        assert!(matches!(closed(Some((close::GOING_AWAY, "bye".into()))), End::Retry { linked: true, .. }));
        assert!(matches!(closed(Some((close::DEVICE_REVOKED, "device revoked".into()))), End::Fatal(_)));
    }
}
