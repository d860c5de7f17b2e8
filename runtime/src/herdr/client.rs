//! The Herdr socket client: newline-delimited JSON over a Unix stream, one
//! connection per call (Herdr resets a connection that carries a second request).

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

use super::config::Timeouts;
use super::error::{HerdrError, codes};

/// Largest reply line accepted (Herdr's own request limit is the same).
pub const MAX_REPLY_BYTES: usize = 1024 * 1024;

/// `ping`'s answer: what Herdr runs and which protocol it speaks.
#[derive(Debug, Clone, PartialEq)]
pub struct Pong {
    pub version: Option<String>,
    pub protocol: Option<u64>,
    pub raw: Value,
}

pub struct HerdrClient {
    path: PathBuf,
    timeouts: Timeouts,
    next_id: AtomicU64,
}

impl HerdrClient {
    pub fn new(path: PathBuf, timeouts: Timeouts) -> Self {
        HerdrClient { path, timeouts, next_id: AtomicU64::new(1) }
    }

    pub fn socket_path(&self) -> &Path {
        &self.path
    }

    pub fn timeouts(&self) -> &Timeouts {
        &self.timeouts
    }

    fn request_line(&self, method: &str, params: &Value) -> Result<Vec<u8>, HerdrError> {
        let id = format!("rust-{}", self.next_id.fetch_add(1, Ordering::Relaxed));
        let mut line = serde_json::to_vec(&json!({"id": id, "method": method, "params": params}))
            .map_err(|e| HerdrError::local(codes::ENCODE_ERROR, format!("cannot encode {method} request: {e}")))?;
        line.push(b'\n');
        Ok(line)
    }

    /// Calls `method` with its own time budget; returns the `result` object.
    pub async fn call(&self, method: &str, params: Value) -> Result<Value, HerdrError> {
        self.call_with_timeout(method, params, self.timeouts.for_method(method)).await
    }

    /// Calls `method`, giving up after `timeout` (capped at the configured maximum)
    /// for connect, write and read together.
    pub async fn call_with_timeout(&self, method: &str, params: Value, timeout: Duration) -> Result<Value, HerdrError> {
        let timeout = self.timeouts.clamp(timeout);
        let line = self.request_line(method, &params)?;
        match tokio::time::timeout(timeout, self.exchange(method, &line)).await {
            Ok(result) => result,
            Err(_) => {
                Err(HerdrError::local(codes::TIMEOUT, format!("herdr did not answer {method} within {} ms", timeout.as_millis())))
            }
        }
    }

    async fn exchange(&self, method: &str, line: &[u8]) -> Result<Value, HerdrError> {
        let mut stream = connect(&self.path).await?;
        stream.write_all(line).await.map_err(|e| io_error(method, "write", &e))?;
        let mut reader = BufReader::new(stream);
        let reply = read_line_capped(&mut reader, MAX_REPLY_BYTES).await.map_err(|e| e.into_herdr(method))?.ok_or_else(|| {
            HerdrError::local(codes::UNEXPECTED_EOF, format!("herdr closed the connection without answering {method}"))
        })?;
        parse_reply(method, &reply)
    }

    pub async fn ping(&self) -> Result<Pong, HerdrError> {
        let raw = self.call("ping", json!({})).await?;
        Ok(Pong {
            version: raw.get("version").and_then(Value::as_str).map(str::to_string),
            protocol: raw.get("protocol").and_then(Value::as_u64),
            raw,
        })
    }

    /// Opens an `events.subscribe` stream. The acknowledgement must arrive within
    /// the default budget; later events may take as long as they like.
    pub async fn subscribe(&self, subscriptions: Vec<Value>) -> Result<Subscription, HerdrError> {
        let method = "events.subscribe";
        let line = self.request_line(method, &json!({"subscriptions": subscriptions}))?;
        let open = async {
            let mut stream = connect(&self.path).await?;
            stream.write_all(&line).await.map_err(|e| io_error(method, "write", &e))?;
            let mut reader = BufReader::new(stream);
            let ack =
                read_line_capped(&mut reader, MAX_REPLY_BYTES).await.map_err(|e| e.into_herdr(method))?.ok_or_else(|| {
                    HerdrError::local(codes::UNEXPECTED_EOF, "herdr closed the subscription before acknowledging it")
                })?;
            parse_reply(method, &ack)?;
            Ok(Subscription { reader })
        };
        let timeout = self.timeouts.for_method(method);
        tokio::time::timeout(timeout, open).await.unwrap_or_else(|_| {
            Err(HerdrError::local(
                codes::TIMEOUT,
                format!("herdr did not acknowledge {method} within {} ms", timeout.as_millis()),
            ))
        })
    }
}

/// An open event stream. Dropping it closes the connection, which ends the subscription.
pub struct Subscription {
    reader: BufReader<UnixStream>,
}

impl Subscription {
    /// The next event line as JSON; `Ok(None)` when Herdr closed the stream. An
    /// `error` line ends the stream with that error.
    pub async fn next_event(&mut self) -> Result<Option<Value>, HerdrError> {
        loop {
            let Some(line) =
                read_line_capped(&mut self.reader, MAX_REPLY_BYTES).await.map_err(|e| e.into_herdr("events.subscribe"))?
            else {
                return Ok(None);
            };
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let value: Value = serde_json::from_slice(&line)
                .map_err(|e| HerdrError::local(codes::PARSE_ERROR, format!("herdr sent an event that is not JSON: {e}")))?;
            if let Some(err) = value.get("error") {
                return Err(daemon_error(err));
            }
            return Ok(Some(value));
        }
    }
}

async fn connect(path: &Path) -> Result<UnixStream, HerdrError> {
    UnixStream::connect(path).await.map_err(|e| match e.kind() {
        ErrorKind::NotFound => {
            HerdrError::local(codes::SOCKET_MISSING, format!("no Herdr socket at {} (is Herdr running?)", path.display()))
        }
        ErrorKind::ConnectionRefused => HerdrError::local(
            codes::CONNECTION_REFUSED,
            format!("nothing accepts connections on {} (stale socket?)", path.display()),
        ),
        _ => HerdrError::local(codes::SOCKET_ERROR, format!("cannot connect to {}: {e}", path.display())),
    })
}

fn io_error(method: &str, what: &str, e: &std::io::Error) -> HerdrError {
    HerdrError::local(codes::SOCKET_ERROR, format!("{what} failed during {method}: {e}"))
}

fn daemon_error(err: &Value) -> HerdrError {
    let code = err.get("code").and_then(Value::as_str).unwrap_or("unknown_error");
    let message = err.get("message").and_then(Value::as_str).unwrap_or("herdr reported an error without a message");
    HerdrError::daemon(code, message)
}

/// Turns one reply line into the `result` object or the daemon's error.
pub fn parse_reply(method: &str, line: &[u8]) -> Result<Value, HerdrError> {
    let value: Value = serde_json::from_slice(line).map_err(|e| {
        let preview: String = String::from_utf8_lossy(&line[..line.len().min(80)]).into_owned();
        HerdrError::local(
            codes::PARSE_ERROR,
            format!("herdr answered {method} with something that is not JSON ({e}): {preview:?}"),
        )
    })?;
    if let Some(err) = value.get("error") {
        return Err(daemon_error(err));
    }
    match value.get("result") {
        Some(result) => Ok(result.clone()),
        None => Err(HerdrError::local(codes::PARSE_ERROR, format!("herdr's answer to {method} has neither result nor error"))),
    }
}

#[derive(Debug)]
pub enum LineError {
    TooLarge,
    Io(std::io::Error),
}

impl LineError {
    fn into_herdr(self, method: &str) -> HerdrError {
        match self {
            LineError::TooLarge => HerdrError::local(
                codes::RESPONSE_TOO_LARGE,
                format!("herdr's answer to {method} exceeds {MAX_REPLY_BYTES} bytes"),
            ),
            LineError::Io(e) => io_error(method, "read", &e),
        }
    }
}

/// Reads one `\n`-terminated line of at most `cap` bytes (newline excluded), without
/// ever buffering more than `cap` + one read chunk. `Ok(None)` means a clean EOF
/// before any byte; a final line without newline is returned as is.
pub async fn read_line_capped<R: AsyncBufRead + Unpin>(reader: &mut R, cap: usize) -> Result<Option<Vec<u8>>, LineError> {
    let mut line = Vec::new();
    loop {
        let chunk = reader.fill_buf().await.map_err(LineError::Io)?;
        if chunk.is_empty() {
            return Ok(if line.is_empty() { None } else { Some(line) });
        }
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (chunk.len(), false),
        };
        if line.len() + take > cap {
            return Err(LineError::TooLarge);
        }
        line.extend_from_slice(&chunk[..take]);
        reader.consume(if done { take + 1 } else { take });
        if done {
            return Ok(Some(line));
        }
    }
}

#[cfg(test)]
#[path = "client_props.rs"]
mod props;

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn line_cap_is_exact() {
        let exact = format!("{}\n", "a".repeat(16));
        let mut r = BufReader::new(exact.as_bytes());
        assert_eq!(read_line_capped(&mut r, 16).await.unwrap().unwrap().len(), 16);
        let over = format!("{}\n", "a".repeat(17));
        let mut r = BufReader::new(over.as_bytes());
        assert!(matches!(read_line_capped(&mut r, 16).await, Err(LineError::TooLarge)));
        let mut r = BufReader::new(&b""[..]);
        assert!(read_line_capped(&mut r, 16).await.unwrap().is_none());
    }

    #[test]
    fn replies_map_to_result_or_daemon_error() {
        assert_eq!(parse_reply("ping", br#"{"id":"x","result":{"type":"pong"}}"#).unwrap(), json!({"type":"pong"}));
        let e = parse_reply("pane.get", br#"{"id":"x","error":{"code":"pane_not_found","message":"nope"}}"#).unwrap_err();
        assert_eq!((e.code.as_str(), e.from_daemon), ("pane_not_found", true));
        assert_eq!(parse_reply("ping", b"garbage").unwrap_err().code, "parse_error");
        assert_eq!(parse_reply("ping", br#"{"id":"x"}"#).unwrap_err().code, "parse_error");
    }
}
