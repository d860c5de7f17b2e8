//! Relay protocol v1: the frames between a workstation's `herdr-mcp link` and the
//! edge (spec edge.md §8). One JSON object per WebSocket text frame, snake_case,
//! strict: unknown fields and unknown or retired kinds are refused, and every
//! limit below is checked before a frame is acted on.
//!
//! Both sides use this module, so the link and the edge cannot drift apart. A
//! frame that fails to decode ends the connection with the close code of its
//! [`FrameError`]; the peer learns why from the close reason.

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub const PROTOCOL_VERSION: u64 = 1;
/// Subprotocol a link must offer; the edge answers with it.
pub const SUBPROTOCOL: &str = "herdr-link.v1";
/// Prefix of the subprotocol entry that carries the hex of the link credential.
pub const AUTH_SUBPROTOCOL_PREFIX: &str = "herdr-auth.";

pub const MAX_WORKSTATION_ID: usize = 64;
pub const MAX_REQUEST_ID: usize = 128;
pub const MAX_ARGUMENTS_BYTES: usize = 256 * 1024;
pub const MAX_RESULT_BYTES: usize = 1024 * 1024;
pub const MAX_DETAILS_BYTES: usize = 64 * 1024;
pub const MAX_DEPTH: usize = 32;
pub const MAX_KEYS: usize = 512;
pub const MAX_ITEMS: usize = 4096;
/// Longest string in a frame's own fields. Payloads (`arguments`, `result`,
/// `details`, `health_details`) are bounded by bytes instead, because file
/// contents travel inside them.
pub const MAX_STRING: usize = 4096;
pub const MAX_CAPABILITIES: usize = 32;
/// Largest frame the edge reads.
pub const MAX_EDGE_INBOUND: usize = 1024 * 1024;
/// Largest frame the link reads.
pub const MAX_LINK_INBOUND: usize = 262_144;
pub const MIN_TIMEOUT_MS: u64 = 1000;
pub const MAX_TIMEOUT_MS: u64 = 65_000;

/// WebSocket close codes this protocol uses.
pub mod close {
    /// Binary frames are not part of the protocol.
    pub const UNSUPPORTED_DATA: u16 = 1003;
    /// A malformed, unknown or out-of-order frame; also a failed hello.
    pub const POLICY: u16 = 1008;
    /// A frame over the size limit.
    pub const TOO_BIG: u16 = 1009;
    /// The edge is shutting down.
    pub const GOING_AWAY: u16 = 1001;
    /// The device was revoked: the credential must never reconnect.
    pub const DEVICE_REVOKED: u16 = 4401;
    /// A newer link of the same workstation took over.
    pub const SUPERSEDED: u16 = 4409;
    /// No frame arrived for too long.
    pub const STALE: u16 = 4408;
    /// The edge holds as many links as it is configured for (RFC 6455 "Try
    /// Again Later"); the link retries at its backoff's pace.
    pub const TRY_AGAIN_LATER: u16 = 1013;
}

/// Retired provisional kinds; named so the refusal says what happened.
const RETIRED_KINDS: &[&str] = &["request", "response", "drain", "runtime_status", "upgrade_status", "error", "resume"];

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("frame of {size} bytes exceeds the limit of {limit}")]
    TooLarge { size: usize, limit: usize },
    #[error("binary frames are not accepted; send one JSON object per text frame")]
    Binary,
    #[error("frame is not JSON: {0}")]
    NotJson(String),
    #[error("frame must be a JSON object")]
    NotObject,
    #[error("protocol_version must be the number 1")]
    UnsupportedVersion,
    #[error("frame has no {0}")]
    Missing(&'static str),
    #[error("kind {0:?} is a retired provisional kind")]
    RetiredKind(String),
    #[error("kind {0:?} is unknown")]
    UnknownKind(String),
    #[error("kind {0:?} may not be sent in this direction")]
    WrongDirection(String),
    #[error("{kind}: {message}")]
    Fields { kind: String, message: String },
    #[error("{0}")]
    Limit(String),
}

impl FrameError {
    /// The relay error code a peer would report for this frame.
    pub fn code(&self) -> &'static str {
        match self {
            FrameError::TooLarge { .. } => "payload_too_large",
            FrameError::UnsupportedVersion => "unsupported_protocol_version",
            _ => "bad_request",
        }
    }

    pub fn close_code(&self) -> u16 {
        match self {
            FrameError::TooLarge { .. } => close::TOO_BIG,
            FrameError::Binary => close::UNSUPPORTED_DATA,
            _ => close::POLICY,
        }
    }
}

/// Identity of the runtime behind a link.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeIdentity {
    pub runtime_version: String,
    #[serde(default)]
    pub runtime_commit: Option<String>,
    #[serde(default)]
    pub runtime_generation: Option<String>,
    pub contract_epoch: u32,
    pub contract_hash: String,
    #[serde(default)]
    pub herdr_version: Option<String>,
    #[serde(default)]
    pub herdr_protocol: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hello {
    pub workstation_id: String,
    pub boot_id: String,
    pub link_version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connected_at_ms: Option<u64>,
    #[serde(default)]
    pub capabilities: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<RuntimeIdentity>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResumeState {
    Queued,
    Sent,
    Settled,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResumeEntry {
    pub request_id: String,
    pub operation: String,
    pub state: ResumeState,
    pub deadline_ms: u64,
}

/// How the link should pace reconnects after this connection ends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReconnectHint {
    pub min_backoff_ms: u64,
    pub max_backoff_ms: u64,
}

/// Why a hello was refused.
pub const HELLO_FAILURE_CODES: &[&str] = &[
    "auth_rejected",
    "auth_expired",
    "session_invalid",
    "protocol_incompatible",
    "contract_mismatch",
    "workstation_mismatch",
    "internal_error",
];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HelloAck {
    pub workstation_id: String,
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edge_deployment_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconnect: Option<ReconnectHint>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<Vec<ResumeEntry>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Heartbeat {
    pub workstation_id: String,
    pub boot_id: String,
    pub sent_at_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_uptime_ms: Option<u64>,
    pub active_requests: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<RuntimeIdentity>,
}

/// `status`: a query from the edge (`query:true`) or a report from the link.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Status {
    pub workstation_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<RuntimeIdentity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_generation: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthy: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_details: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_requests: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_uptime_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_at_ms: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolRequest {
    pub workstation_id: String,
    pub request_id: String,
    pub operation: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract_epoch: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract_hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolResult {
    pub workstation_id: String,
    pub request_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    pub served_at_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_generation: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport_name: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryState {
    NotDelivered,
    DeliveryUnknown,
    Delivered,
}

impl DeliveryState {
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryState::NotDelivered => "not_delivered",
            DeliveryState::DeliveryUnknown => "delivery_unknown",
            DeliveryState::Delivered => "delivered",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolError {
    pub workstation_id: String,
    pub request_id: String,
    pub code: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    pub retryable: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_state: Option<DeliveryState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub served_at_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_generation: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cancel {
    pub workstation_id: String,
    pub request_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CancelAck {
    pub workstation_id: String,
    pub request_id: String,
    pub accepted: bool,
    pub cancelled_at_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    Hello(Hello),
    HelloAck(HelloAck),
    Heartbeat(Heartbeat),
    Status(Status),
    ToolRequest(ToolRequest),
    ToolResult(ToolResult),
    ToolError(ToolError),
    Cancel(Cancel),
    CancelAck(CancelAck),
}

/// Which side sent a frame; each side accepts only the other's kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sender {
    Link,
    Edge,
}

impl Frame {
    pub fn kind(&self) -> &'static str {
        match self {
            Frame::Hello(_) => "hello",
            Frame::HelloAck(_) => "hello_ack",
            Frame::Heartbeat(_) => "heartbeat",
            Frame::Status(_) => "status",
            Frame::ToolRequest(_) => "tool_request",
            Frame::ToolResult(_) => "tool_result",
            Frame::ToolError(_) => "tool_error",
            Frame::Cancel(_) => "cancel",
            Frame::CancelAck(_) => "cancel_ack",
        }
    }

    pub fn workstation_id(&self) -> &str {
        match self {
            Frame::Hello(f) => &f.workstation_id,
            Frame::HelloAck(f) => &f.workstation_id,
            Frame::Heartbeat(f) => &f.workstation_id,
            Frame::Status(f) => &f.workstation_id,
            Frame::ToolRequest(f) => &f.workstation_id,
            Frame::ToolResult(f) => &f.workstation_id,
            Frame::ToolError(f) => &f.workstation_id,
            Frame::Cancel(f) => &f.workstation_id,
            Frame::CancelAck(f) => &f.workstation_id,
        }
    }

    fn sent_by(&self) -> &'static [Sender] {
        match self {
            Frame::Hello(_) | Frame::Heartbeat(_) | Frame::ToolResult(_) | Frame::ToolError(_) | Frame::CancelAck(_) => {
                &[Sender::Link]
            }
            Frame::HelloAck(_) | Frame::ToolRequest(_) | Frame::Cancel(_) => &[Sender::Edge],
            Frame::Status(_) => &[Sender::Link, Sender::Edge],
        }
    }

    /// The frame as its JSON text: `protocol_version` and `kind`, then the
    /// kind's fields, serialised straight from the struct (a result of up to
    /// 1 MiB is written once, not first copied into a JSON tree).
    pub fn encode(&self) -> String {
        let body = match self {
            Frame::Hello(f) => serde_json::to_string(f),
            Frame::HelloAck(f) => serde_json::to_string(f),
            Frame::Heartbeat(f) => serde_json::to_string(f),
            Frame::Status(f) => serde_json::to_string(f),
            Frame::ToolRequest(f) => serde_json::to_string(f),
            Frame::ToolResult(f) => serde_json::to_string(f),
            Frame::ToolError(f) => serde_json::to_string(f),
            Frame::Cancel(f) => serde_json::to_string(f),
            Frame::CancelAck(f) => serde_json::to_string(f),
        };
        // These structs hold only strings, numbers and JSON values, and name
        // neither `protocol_version` nor `kind`: serialising cannot fail, and the
        // object never repeats a key.
        let body = body.unwrap_or_else(|_| "{}".into());
        let fields = body.strip_prefix('{').unwrap_or("}");
        let mut out = String::with_capacity(body.len() + 48);
        out.push_str("{\"protocol_version\":");
        out.push_str(&PROTOCOL_VERSION.to_string());
        out.push_str(",\"kind\":\"");
        out.push_str(self.kind());
        out.push('"');
        if fields != "}" {
            out.push(',');
        }
        out.push_str(fields);
        out
    }

    /// Decodes one text frame sent by `from`, enforcing every limit.
    pub fn decode(text: &str, from: Sender, max_bytes: usize) -> Result<Frame, FrameError> {
        if text.len() > max_bytes {
            return Err(FrameError::TooLarge { size: text.len(), limit: max_bytes });
        }
        let value: Value = serde_json::from_str(text).map_err(|e| FrameError::NotJson(e.to_string()))?;
        check_shape(&value, 1)?;
        let Value::Object(mut map) = value else { return Err(FrameError::NotObject) };
        match map.remove("protocol_version") {
            None => return Err(FrameError::Missing("protocol_version")),
            Some(v) if v.as_u64() == Some(PROTOCOL_VERSION) => {}
            Some(_) => return Err(FrameError::UnsupportedVersion),
        }
        let kind = match map.remove("kind") {
            Some(Value::String(k)) => k,
            Some(_) => return Err(FrameError::Fields { kind: "?".into(), message: "kind must be a string".into() }),
            None => return Err(FrameError::Missing("kind")),
        };
        let rest = Value::Object(map);
        let fields = |e: serde_json::Error| FrameError::Fields { kind: kind.clone(), message: e.to_string() };
        let frame = match kind.as_str() {
            "hello" => Frame::Hello(serde_json::from_value(rest).map_err(fields)?),
            "hello_ack" => Frame::HelloAck(serde_json::from_value(rest).map_err(fields)?),
            "heartbeat" => Frame::Heartbeat(serde_json::from_value(rest).map_err(fields)?),
            "status" => Frame::Status(serde_json::from_value(rest).map_err(fields)?),
            "tool_request" => Frame::ToolRequest(serde_json::from_value(rest).map_err(fields)?),
            "tool_result" => Frame::ToolResult(serde_json::from_value(rest).map_err(fields)?),
            "tool_error" => Frame::ToolError(serde_json::from_value(rest).map_err(fields)?),
            "cancel" => Frame::Cancel(serde_json::from_value(rest).map_err(fields)?),
            "cancel_ack" => Frame::CancelAck(serde_json::from_value(rest).map_err(fields)?),
            k if RETIRED_KINDS.contains(&k) => return Err(FrameError::RetiredKind(kind)),
            _ => return Err(FrameError::UnknownKind(kind)),
        };
        if !frame.sent_by().contains(&from) {
            return Err(FrameError::WrongDirection(kind));
        }
        frame.validate()?;
        Ok(frame)
    }

    /// Field rules serde cannot express: id syntax, string lengths, payload sizes.
    fn validate(&self) -> Result<(), FrameError> {
        let kind = self.kind();
        let bad = |message: String| FrameError::Fields { kind: kind.into(), message };
        check_id("workstation_id", self.workstation_id(), MAX_WORKSTATION_ID).map_err(bad)?;
        let mut strings: Vec<(&str, &str)> = Vec::new();
        match self {
            Frame::Hello(f) => {
                check_id("boot_id", &f.boot_id, MAX_REQUEST_ID).map_err(bad)?;
                if f.capabilities.len() > MAX_CAPABILITIES {
                    return Err(bad(format!("capabilities holds more than {MAX_CAPABILITIES} entries")));
                }
                strings.push(("link_version", &f.link_version));
                strings.extend(f.capabilities.iter().map(|c| ("capabilities[]", c.as_str())));
                if let Some(r) = &f.runtime {
                    runtime_strings(r, &mut strings);
                }
            }
            Frame::HelloAck(f) => {
                match (f.ok, f.code.as_deref()) {
                    (true, Some(_)) => return Err(bad("a successful hello_ack carries no code".into())),
                    (false, None) => return Err(bad("a failed hello_ack needs a code".into())),
                    (false, Some(c)) if !HELLO_FAILURE_CODES.contains(&c) => {
                        return Err(bad(format!("code {c:?} is not a hello failure code")));
                    }
                    _ => {}
                }
                if f.capabilities.as_ref().is_some_and(|c| c.len() > MAX_CAPABILITIES) {
                    return Err(bad(format!("capabilities holds more than {MAX_CAPABILITIES} entries")));
                }
                for r in f.resume.iter().flatten() {
                    check_id("resume[].request_id", &r.request_id, MAX_REQUEST_ID).map_err(bad)?;
                    strings.push(("resume[].operation", &r.operation));
                }
                for id in f.completed.iter().flatten() {
                    check_id("completed[]", id, MAX_REQUEST_ID).map_err(bad)?;
                }
                strings.extend(f.server_version.iter().map(|s| ("server_version", s.as_str())));
                strings.extend(f.edge_deployment_id.iter().map(|s| ("edge_deployment_id", s.as_str())));
                strings.extend(f.capabilities.iter().flatten().map(|s| ("capabilities[]", s.as_str())));
                strings.extend(f.code.iter().map(|s| ("code", s.as_str())));
                strings.extend(f.message.iter().map(|s| ("message", s.as_str())));
            }
            Frame::Heartbeat(f) => {
                check_id("boot_id", &f.boot_id, MAX_REQUEST_ID).map_err(bad)?;
                if let Some(r) = &f.runtime {
                    runtime_strings(r, &mut strings);
                }
            }
            Frame::Status(f) => {
                if let Some(b) = &f.boot_id {
                    check_id("boot_id", b, MAX_REQUEST_ID).map_err(bad)?;
                }
                if let Some(r) = &f.runtime {
                    runtime_strings(r, &mut strings);
                }
                if let Some(d) = &f.health_details {
                    check_bytes("health_details", d, MAX_DETAILS_BYTES).map_err(bad)?;
                }
                strings.extend(f.runtime_generation.iter().map(|s| ("runtime_generation", s.as_str())));
                strings.extend(f.last_error.iter().map(|s| ("last_error", s.as_str())));
            }
            Frame::ToolRequest(f) => {
                check_id("request_id", &f.request_id, MAX_REQUEST_ID).map_err(bad)?;
                check_id("operation", &f.operation, MAX_REQUEST_ID).map_err(bad)?;
                if let Some(a) = &f.arguments {
                    if !a.is_object() {
                        return Err(bad("arguments must be an object".into()));
                    }
                    check_bytes("arguments", a, MAX_ARGUMENTS_BYTES).map_err(bad)?;
                }
                if let Some(t) = f.timeout_ms
                    && !(MIN_TIMEOUT_MS..=MAX_TIMEOUT_MS).contains(&t)
                {
                    return Err(bad(format!("timeout_ms must be in {MIN_TIMEOUT_MS}..={MAX_TIMEOUT_MS}")));
                }
                strings.extend(f.contract_hash.iter().map(|s| ("contract_hash", s.as_str())));
                strings.extend(f.idempotency_key.iter().map(|s| ("idempotency_key", s.as_str())));
                strings.extend(f.trace.iter().map(|s| ("trace", s.as_str())));
            }
            Frame::ToolResult(f) => {
                check_id("request_id", &f.request_id, MAX_REQUEST_ID).map_err(bad)?;
                if let Some(r) = &f.result {
                    check_bytes("result", r, MAX_RESULT_BYTES).map_err(bad)?;
                }
                strings.extend(f.runtime_generation.iter().map(|s| ("runtime_generation", s.as_str())));
                strings.extend(f.transport_name.iter().map(|s| ("transport_name", s.as_str())));
            }
            Frame::ToolError(f) => {
                check_id("request_id", &f.request_id, MAX_REQUEST_ID).map_err(bad)?;
                if let Some(d) = &f.details {
                    check_bytes("details", d, MAX_DETAILS_BYTES).map_err(bad)?;
                }
                strings.push(("code", &f.code));
                strings.extend(f.message.iter().map(|s| ("message", s.as_str())));
                strings.extend(f.runtime_generation.iter().map(|s| ("runtime_generation", s.as_str())));
            }
            Frame::Cancel(f) => {
                check_id("request_id", &f.request_id, MAX_REQUEST_ID).map_err(bad)?;
                strings.extend(f.reason.iter().map(|s| ("reason", s.as_str())));
            }
            Frame::CancelAck(f) => {
                check_id("request_id", &f.request_id, MAX_REQUEST_ID).map_err(bad)?;
                strings.extend(f.reason.iter().map(|s| ("reason", s.as_str())));
            }
        }
        for (name, s) in strings {
            if s.chars().count() > MAX_STRING {
                return Err(FrameError::Limit(format!("{kind}: {name} is longer than {MAX_STRING} characters")));
            }
        }
        Ok(())
    }
}

fn runtime_strings<'a>(r: &'a RuntimeIdentity, out: &mut Vec<(&'static str, &'a str)>) {
    out.push(("runtime.runtime_version", &r.runtime_version));
    out.push(("runtime.contract_hash", &r.contract_hash));
    out.extend(r.runtime_commit.iter().map(|s| ("runtime.runtime_commit", s.as_str())));
    out.extend(r.runtime_generation.iter().map(|s| ("runtime.runtime_generation", s.as_str())));
    out.extend(r.herdr_version.iter().map(|s| ("runtime.herdr_version", s.as_str())));
    out.extend(r.herdr_protocol.iter().map(|s| ("runtime.herdr_protocol", s.as_str())));
}

/// `^[A-Za-z0-9][A-Za-z0-9._:-]*$`, at most `max` characters.
pub fn check_id(name: &str, id: &str, max: usize) -> Result<(), String> {
    let mut bytes = id.bytes();
    let first_ok = bytes.next().is_some_and(|b| b.is_ascii_alphanumeric());
    let rest_ok = bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'));
    if !first_ok || !rest_ok {
        return Err(format!("{name} {id:?} is not a valid id"));
    }
    if id.len() > max {
        return Err(format!("{name} is longer than {max} characters"));
    }
    Ok(())
}

fn check_bytes(name: &str, v: &Value, max: usize) -> Result<(), String> {
    let size = serde_json::to_vec(v).map(|b| b.len()).unwrap_or(usize::MAX);
    if size > max {
        return Err(format!("{name} is {size} bytes; the limit is {max}"));
    }
    Ok(())
}

/// Deepest `arguments` a `tool_request` can carry: the frame object is level 1,
/// so its `arguments` object starts at level 2 and may nest to [`MAX_DEPTH`].
pub const MAX_ARGUMENTS_DEPTH: usize = MAX_DEPTH - 1;

/// Checks tool-call `arguments` against the shape limits a `tool_request` frame
/// is held to (depth, keys per object, items per array), so the edge refuses
/// what the link would refuse; a frame the link refuses ends the whole link,
/// and every other call in flight on it with it.
pub fn check_arguments_shape(arguments: &Value) -> Result<(), String> {
    check_shape(arguments, 2).map_err(|e| match e {
        FrameError::Limit(m) if m.starts_with("frame nests deeper") => {
            format!("arguments nest deeper than {MAX_ARGUMENTS_DEPTH} levels, the most a workstation link accepts")
        }
        other => format!("arguments exceed what a workstation link accepts: {other}"),
    })
}

/// Depth, keys per object and items per array, over the whole frame.
fn check_shape(v: &Value, depth: usize) -> Result<(), FrameError> {
    if depth > MAX_DEPTH {
        return Err(FrameError::Limit(format!("frame nests deeper than {MAX_DEPTH} levels")));
    }
    match v {
        Value::Object(m) => {
            if m.len() > MAX_KEYS {
                return Err(FrameError::Limit(format!("an object holds {} keys; the limit is {MAX_KEYS}", m.len())));
            }
            m.values().try_for_each(|c| check_shape(c, depth + 1))
        }
        Value::Array(a) => {
            if a.len() > MAX_ITEMS {
                return Err(FrameError::Limit(format!("an array holds {} items; the limit is {MAX_ITEMS}", a.len())));
            }
            a.iter().try_for_each(|c| check_shape(c, depth + 1))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
#[path = "relay_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "relay_props.rs"]
mod props;
