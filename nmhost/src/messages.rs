//! Wire shapes between the extension and the host, and the stable error codes.
//!
//! Browser → host: `request`, `stream`, `cancel`, `identity` (all carry an optional `id`; a
//! message with `"oneshot": true` makes the host stop reading after it). Host → browser:
//! `response`, `chunk`, `stream_open`, `stream_chunk`, `stream_end`, `stream_error`, `cancelled`,
//! `identity` and `error`. See `chunking` for how bodies above 1 MiB travel.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// Longest accepted `id`: every frame about a request repeats it, so it must stay small next to
/// the 1 MiB frame budget.
pub const MAX_ID_CHARS: usize = 256;

/// Stable error codes; the extension branches on these strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    InvalidNativeMessage,
    NativeMessageTooLarge,
    UnsupportedMessage,
    LegacySessionRequiresCompatHost,
    ExtensionOriginNotAllowed,
    PathNotAllowed,
    StreamPathNotAllowed,
    ProxyMethodNotAllowed,
    InvalidProxyHeader,
    BaseUrlNotAllowed,
    NativeRequestTooLarge,
    NativeResponseTooLarge,
    NativeRequestTimeout,
    NativeStreamConnectTimeout,
    NativeStreamFailed,
    NativeResponseFailed,
    ExtensionIpcUnavailable,
    DuplicateRequestId,
    UnknownRequestId,
    TooManyInFlight,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidNativeMessage => "invalid_native_message",
            ErrorCode::NativeMessageTooLarge => "native_message_too_large",
            ErrorCode::UnsupportedMessage => "unsupported_message",
            ErrorCode::LegacySessionRequiresCompatHost => "legacy_session_requires_compat_host",
            ErrorCode::ExtensionOriginNotAllowed => "extension_origin_not_allowed",
            ErrorCode::PathNotAllowed => "path_not_allowed",
            ErrorCode::StreamPathNotAllowed => "stream_path_not_allowed",
            ErrorCode::ProxyMethodNotAllowed => "proxy_method_not_allowed",
            ErrorCode::InvalidProxyHeader => "invalid_proxy_header",
            ErrorCode::BaseUrlNotAllowed => "base_url_not_allowed",
            ErrorCode::NativeRequestTooLarge => "native_request_too_large",
            ErrorCode::NativeResponseTooLarge => "native_response_too_large",
            ErrorCode::NativeRequestTimeout => "native_request_timeout",
            ErrorCode::NativeStreamConnectTimeout => "native_stream_connect_timeout",
            ErrorCode::NativeStreamFailed => "native_stream_failed",
            ErrorCode::NativeResponseFailed => "native_response_failed",
            ErrorCode::ExtensionIpcUnavailable => "extension_ipc_unavailable",
            ErrorCode::DuplicateRequestId => "duplicate_request_id",
            ErrorCode::UnknownRequestId => "unknown_request_id",
            ErrorCode::TooManyInFlight => "too_many_in_flight",
        }
    }
}

/// A refusal or failure with its code and a sentence for people reading logs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", code.as_str())]
pub struct HostError {
    pub code: ErrorCode,
    pub message: String,
}

impl HostError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self { code, message: message.into() }
    }
}

/// A request id as the extension sent it: a string or a JSON number.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MessageId {
    Number(serde_json::Number),
    Text(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct RequestMsg {
    pub method: String,
    pub path: String,
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
    pub timeout_ms: Option<f64>,
    pub base_url: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct StreamMsg {
    pub path: String,
    pub timeout_ms: Option<f64>,
    pub base_url: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum InboundKind {
    Request(RequestMsg),
    Stream(StreamMsg),
    Cancel,
    Identity,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Inbound {
    pub id: Option<MessageId>,
    pub oneshot: bool,
    pub kind: InboundKind,
}

/// A message that could not be accepted, with the id when it could still be read so the
/// extension can match the refusal to its call.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejected {
    pub id: Option<MessageId>,
    pub oneshot: bool,
    pub error: HostError,
}

#[derive(Deserialize)]
struct Envelope {
    #[serde(rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    oneshot: Option<bool>,
}

#[derive(Deserialize)]
struct RawRequest {
    #[serde(default)]
    method: Option<String>,
    path: String,
    #[serde(default)]
    headers: Option<BTreeMap<String, Value>>,
    #[serde(default)]
    body: Option<Value>,
    #[serde(default)]
    timeout_ms: Option<f64>,
    #[serde(default)]
    base_url: Option<String>,
}

#[derive(Deserialize)]
struct RawStream {
    path: String,
    #[serde(default)]
    timeout_ms: Option<f64>,
    #[serde(default)]
    base_url: Option<String>,
}

fn invalid(message: impl Into<String>) -> HostError {
    HostError::new(ErrorCode::InvalidNativeMessage, message)
}

fn read_id(object: &serde_json::Map<String, Value>) -> Result<Option<MessageId>, HostError> {
    match object.get("id") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => Ok(Some(MessageId::Number(n.clone()))),
        Some(Value::String(s)) if s.chars().count() <= MAX_ID_CHARS => Ok(Some(MessageId::Text(s.clone()))),
        Some(Value::String(_)) => Err(invalid(format!("id is longer than {MAX_ID_CHARS} characters"))),
        Some(_) => Err(invalid("id must be a string or a number")),
    }
}

fn body_bytes(body: Option<Value>) -> Vec<u8> {
    match body {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => s.into_bytes(),
        // Being lenient here costs nothing: a JSON body given as an object is what the caller meant.
        Some(other) => other.to_string().into_bytes(),
    }
}

fn header_values(raw: Option<BTreeMap<String, Value>>) -> Result<BTreeMap<String, String>, HostError> {
    let mut out = BTreeMap::new();
    for (name, value) in raw.unwrap_or_default() {
        match value {
            Value::String(s) => {
                out.insert(name, s);
            }
            _ => return Err(HostError::new(ErrorCode::InvalidProxyHeader, format!("header {name:?} must be a string"))),
        }
    }
    Ok(out)
}

/// Parses one frame payload. Never panics; every failure carries a stable code.
pub fn parse_inbound(payload: &[u8]) -> Result<Inbound, Rejected> {
    let reject = |id, oneshot, error| Rejected { id, oneshot, error };
    let value: Value = serde_json::from_slice(payload)
        .map_err(|e| reject(None, false, invalid(format!("frame is not UTF-8 JSON: {e}"))))?;
    let Value::Object(object) = value else {
        return Err(reject(None, false, invalid("frame must be a JSON object")));
    };
    let id = read_id(&object).map_err(|e| reject(None, false, e))?;
    let envelope: Envelope = serde_json::from_value(Value::Object(object.clone()))
        .map_err(|e| reject(id.clone(), false, invalid(format!("bad message envelope: {e}"))))?;
    let oneshot = envelope.oneshot.unwrap_or(false);
    let fields = || Value::Object(object.clone());
    let kind = match envelope.kind.as_deref() {
        Some("request") => {
            let raw: RawRequest = serde_json::from_value(fields())
                .map_err(|e| reject(id.clone(), oneshot, invalid(format!("bad request message: {e}"))))?;
            let headers = header_values(raw.headers).map_err(|e| reject(id.clone(), oneshot, e))?;
            InboundKind::Request(RequestMsg {
                method: raw.method.unwrap_or_else(|| "GET".to_owned()),
                path: raw.path,
                headers,
                body: body_bytes(raw.body),
                timeout_ms: raw.timeout_ms,
                base_url: raw.base_url,
            })
        }
        Some("stream") => {
            let raw: RawStream = serde_json::from_value(fields())
                .map_err(|e| reject(id.clone(), oneshot, invalid(format!("bad stream message: {e}"))))?;
            InboundKind::Stream(StreamMsg { path: raw.path, timeout_ms: raw.timeout_ms, base_url: raw.base_url })
        }
        Some("cancel") => {
            if id.is_none() {
                return Err(reject(None, oneshot, invalid("cancel needs the id of what to cancel")));
            }
            InboundKind::Cancel
        }
        Some("identity") => InboundKind::Identity,
        Some("session") => {
            return Err(reject(
                id,
                oneshot,
                HostError::new(
                    ErrorCode::LegacySessionRequiresCompatHost,
                    "legacy session messages are not handled by this host",
                ),
            ));
        }
        Some(other) => {
            return Err(reject(
                id,
                oneshot,
                HostError::new(ErrorCode::UnsupportedMessage, format!("message type {other:?} is not supported")),
            ));
        }
        None => return Err(reject(id, oneshot, invalid("message has no \"type\""))),
    };
    Ok(Inbound { id, oneshot, kind })
}

/// Host → browser frame bodies. Each serializes to one JSON object with a `type`.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Outbound<'a> {
    Response {
        #[serde(skip_serializing_if = "Option::is_none")]
        id: Option<&'a MessageId>,
        ok: bool,
        transport: &'static str,
        status: u16,
        headers: &'a BTreeMap<String, String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        body: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        body_b64: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        chunked: Option<ChunkedInfo>,
    },
    Chunk {
        #[serde(skip_serializing_if = "Option::is_none")]
        id: Option<&'a MessageId>,
        seq: usize,
        data_b64: &'a str,
    },
    StreamOpen {
        id: Option<&'a MessageId>,
        status: u16,
        transport: &'static str,
    },
    StreamChunk {
        id: Option<&'a MessageId>,
        chunk_b64: &'a str,
    },
    StreamEnd {
        id: Option<&'a MessageId>,
    },
    Cancelled {
        id: &'a MessageId,
    },
    Identity {
        #[serde(skip_serializing_if = "Option::is_none")]
        id: Option<&'a MessageId>,
        ok: bool,
        active: bool,
        transport: &'static str,
        version: &'static str,
        extension_origin: &'a str,
        runtime_socket: &'a str,
        runtime_available: bool,
    },
}

/// How a chunked body was split; present on the final `response` frame instead of `body`.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct ChunkedInfo {
    /// Number of `chunk` frames sent before this one, `seq` 0..count.
    pub count: usize,
    /// Total body length in bytes after base64-decoding and concatenating the chunks.
    pub bytes: usize,
    /// How to turn the bytes into the body: `utf8` (text) or `binary`.
    pub encoding: &'static str,
}

/// Failure frame: `{type, id?, ok:false, error:<code>, message}`. `type` is `response` for a
/// failed request, `stream_error` for a failed stream and `error` when no call can be blamed.
#[derive(Debug, Serialize)]
pub struct FailureFrame<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<&'a MessageId>,
    pub ok: bool,
    pub error: &'static str,
    pub message: &'a str,
}

impl<'a> FailureFrame<'a> {
    pub fn new(kind: &'static str, id: Option<&'a MessageId>, error: &'a HostError) -> Self {
        Self { kind, id, ok: false, error: error.code.as_str(), message: &error.message }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code_of(payload: &[u8]) -> &'static str {
        parse_inbound(payload).unwrap_err().error.code.as_str()
    }

    #[test]
    fn parses_a_request_with_defaults() {
        let m = parse_inbound(br#"{"type":"request","id":"a1","path":"/health"}"#).unwrap();
        assert_eq!(m.id, Some(MessageId::Text("a1".into())));
        assert!(!m.oneshot);
        let InboundKind::Request(r) = m.kind else { panic!("not a request") };
        assert_eq!((r.method.as_str(), r.path.as_str(), r.body.len()), ("GET", "/health", 0));
    }

    #[test]
    fn object_bodies_are_serialized_and_numbers_are_ids() {
        let m = parse_inbound(br#"{"type":"request","id":7,"method":"POST","path":"/mcp","body":{"a":1},"oneshot":true}"#)
            .unwrap();
        assert_eq!(m.id, Some(MessageId::Number(7.into())));
        assert!(m.oneshot);
        let InboundKind::Request(r) = m.kind else { panic!("not a request") };
        assert_eq!(r.body, br#"{"a":1}"#);
    }

    #[test]
    fn refusals_carry_their_codes_and_ids() {
        assert_eq!(code_of(b"not json"), "invalid_native_message");
        assert_eq!(code_of(b"[1]"), "invalid_native_message");
        assert_eq!(code_of(br#"{"id":1}"#), "invalid_native_message");
        assert_eq!(code_of(br#"{"type":"request","id":{}}"#), "invalid_native_message");
        assert_eq!(code_of(br#"{"type":"cancel"}"#), "invalid_native_message");
        assert_eq!(code_of(br#"{"type":"session"}"#), "legacy_session_requires_compat_host");
        assert_eq!(code_of(br#"{"type":"request_batch","requests":[]}"#), "unsupported_message");
        assert_eq!(code_of(br#"{"type":"request","path":"/mcp","headers":{"accept":1}}"#), "invalid_proxy_header");
        let r = parse_inbound(br#"{"type":"request","id":"x","path":5}"#).unwrap_err();
        assert_eq!(r.id, Some(MessageId::Text("x".into())));
    }

    #[test]
    fn id_length_limit_is_exact() {
        let at = format!(r#"{{"type":"identity","id":"{}"}}"#, "i".repeat(MAX_ID_CHARS));
        let over = format!(r#"{{"type":"identity","id":"{}"}}"#, "i".repeat(MAX_ID_CHARS + 1));
        assert!(parse_inbound(at.as_bytes()).is_ok());
        assert_eq!(code_of(over.as_bytes()), "invalid_native_message");
    }

    #[test]
    fn failure_frames_have_the_documented_shape() {
        let err = HostError::new(ErrorCode::PathNotAllowed, "no");
        let id = MessageId::Text("q".into());
        let v = serde_json::to_value(FailureFrame::new("response", Some(&id), &err)).unwrap();
        assert_eq!(v, serde_json::json!({"type":"response","id":"q","ok":false,"error":"path_not_allowed","message":"no"}));
    }
}
