//! Errors of a Herdr call: either raised locally by the client (transport, framing)
//! or passed through verbatim from the daemon's `error` envelope.

use serde_json::{Value, json};

/// One failed Herdr call. `code` is a stable wire string: a client code such as
/// `socket_missing` or `timeout`, or whatever code the daemon sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("herdr {code}: {message}")]
pub struct HerdrError {
    pub code: String,
    pub message: String,
    /// True when the daemon sent this error; false for client-side failures.
    pub from_daemon: bool,
}

/// Client-side error codes (spec §4).
pub mod codes {
    pub const SOCKET_MISSING: &str = "socket_missing";
    pub const CONNECTION_REFUSED: &str = "connection_refused";
    pub const TIMEOUT: &str = "timeout";
    pub const SOCKET_ERROR: &str = "socket_error";
    pub const UNEXPECTED_EOF: &str = "unexpected_eof";
    pub const PARSE_ERROR: &str = "parse_error";
    pub const ENCODE_ERROR: &str = "encode_error";
    pub const RESPONSE_TOO_LARGE: &str = "response_too_large";
    /// What Herdr-backed tools answer when no Herdr server is reachable.
    pub const HERDR_UNAVAILABLE: &str = "herdr_unavailable";
}

impl HerdrError {
    pub fn local(code: &str, message: impl Into<String>) -> Self {
        HerdrError { code: code.to_string(), message: message.into(), from_daemon: false }
    }

    pub fn daemon(code: impl Into<String>, message: impl Into<String>) -> Self {
        HerdrError { code: code.into(), message: message.into(), from_daemon: true }
    }

    /// No Herdr server is listening: the socket file is absent or nobody accepts.
    /// Nothing was delivered, so a retry is safe.
    pub fn is_unavailable(&self) -> bool {
        !self.from_daemon && (self.code == codes::SOCKET_MISSING || self.code == codes::CONNECTION_REFUSED)
    }

    pub fn to_json(&self) -> Value {
        json!({"code": self.code, "message": self.message})
    }
}

/// Advice shown with `herdr_unavailable`.
pub const START_HERDR_HINT: &str = "Start Herdr on this machine (run `herdr` in a terminal, or `herdr server` for a headless server), \
or point HERDR_SOCKET_PATH / HERDR_SESSION at the socket of a running Herdr session, then retry.";
