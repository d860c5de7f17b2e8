//! The runtime's `/push/events` SSE stream, parsed incrementally into typed events, and the
//! reconnect backoff of the one shared stream (spec/extension.md §7.1).
//!
//! The wire format is the runtime's (`runtime/src/push/sse.rs`): blocks of `event:` and
//! `data:` lines (plus `id:` = the bus seq), separated by a blank line; keep-alive comments
//! start with `:`. Chunks arrive as raw bytes from the native port, so a block, a line, a
//! `\r\n` pair or a UTF-8 character may be split anywhere; nothing is decoded before its
//! block is complete.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use std::fmt;

/// Largest block (all its lines together) the parser buffers. A `hello` of a big Herdr
/// fleet is the largest legitimate block; this matches the native message limit.
pub const DEFAULT_MAX_BLOCK_BYTES: usize = 1024 * 1024;

/// Agent statuses that end a working period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SettledStatus {
    Idle,
    Done,
    Blocked,
}

impl SettledStatus {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "idle" => Some(SettledStatus::Idle),
            "done" => Some(SettledStatus::Done),
            "blocked" => Some(SettledStatus::Blocked),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SettledStatus::Idle => "idle",
            SettledStatus::Done => "done",
            SettledStatus::Blocked => "blocked",
        }
    }
}

/// One agent of a `hello` (or `/push/state`) picture.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "AgentWire")]
pub struct AgentInfo {
    pub pane: Option<String>,
    pub status: Option<String>,
    pub workspace: Option<String>,
    pub name: Option<String>,
    /// Herdr's `state_change_seq` of the agent (number or string on the wire).
    pub seq: Option<String>,
    pub terminal_title: Option<String>,
    pub cwd: Option<String>,
    /// What the agent last said, when the source has it (`summary`, else `output`, else
    /// `status_text`).
    pub summary: Option<String>,
}

/// The wire shape: every field optional and loosely typed, the summary under any of its
/// three names (several may be present, so they are not serde aliases).
#[derive(Deserialize)]
struct AgentWire {
    #[serde(default, deserialize_with = "loose_string")]
    pane: Option<String>,
    #[serde(default, deserialize_with = "loose_string")]
    status: Option<String>,
    #[serde(default, deserialize_with = "loose_string")]
    workspace: Option<String>,
    #[serde(default, deserialize_with = "loose_string")]
    name: Option<String>,
    #[serde(default, deserialize_with = "loose_string")]
    seq: Option<String>,
    #[serde(default, deserialize_with = "loose_string")]
    terminal_title: Option<String>,
    #[serde(default, deserialize_with = "loose_string")]
    cwd: Option<String>,
    #[serde(default, deserialize_with = "loose_string")]
    summary: Option<String>,
    #[serde(default, deserialize_with = "loose_string")]
    output: Option<String>,
    #[serde(default, deserialize_with = "loose_string")]
    status_text: Option<String>,
}

impl From<AgentWire> for AgentInfo {
    fn from(w: AgentWire) -> Self {
        AgentInfo {
            pane: w.pane,
            status: w.status,
            workspace: w.workspace,
            name: w.name,
            seq: w.seq,
            terminal_title: w.terminal_title,
            cwd: w.cwd,
            summary: w.summary.or(w.output).or(w.status_text),
        }
    }
}

impl AgentInfo {
    pub fn is_working(&self) -> bool {
        self.status.as_deref() == Some("working")
    }

    pub fn settled_status(&self) -> Option<SettledStatus> {
        self.status.as_deref().and_then(SettledStatus::parse)
    }
}

/// One workspace of a `hello` picture.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceInfo {
    pub id: String,
    #[serde(default, deserialize_with = "loose_string")]
    pub label: Option<String>,
    #[serde(default)]
    pub roots: Vec<String>,
    #[serde(default)]
    pub panes: Vec<String>,
}

/// The whole picture: the first event of every stream, and the body of `/push/state`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    #[serde(default)]
    pub agents: Vec<AgentInfo>,
    #[serde(default)]
    pub workspaces: Vec<WorkspaceInfo>,
    #[serde(default)]
    pub herdr_live: bool,
    /// The bus seq at the time of the picture.
    #[serde(default)]
    pub seq: Option<u64>,
}

/// A typed event of the push stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum PushEvent {
    Hello(Hello),
    AgentWorking {
        workspace: Option<String>,
        pane: String,
        agent: Option<String>,
        seq: Option<u64>,
    },
    AgentSettled {
        workspace: Option<String>,
        pane: String,
        agent: Option<String>,
        status: SettledStatus,
        seq: Option<u64>,
        at: Option<String>,
    },
    AgentOutput {
        workspace: Option<String>,
        pane: String,
        agent: Option<String>,
        output: String,
        seq: Option<u64>,
    },
    AgentGone {
        workspace: Option<String>,
        pane: String,
        agent: Option<String>,
        seq: Option<u64>,
    },
    ExecCompleted {
        session_id: String,
        root: String,
        exit_code: Option<i32>,
        signal: Option<String>,
        workspace: Option<String>,
        at: Option<String>,
        seq: Option<u64>,
    },
    /// The runtime dropped `dropped` events for this client: the picture must be refetched.
    Lagged { dropped: u64 },
}

/// Why a block could not be used. The parser keeps going after every one of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "error", rename_all = "snake_case")]
pub enum PushStreamError {
    /// A block grew past the limit; it was skipped up to its end.
    BlockTooLarge { limit: usize },
    /// A block was not UTF-8.
    NotUtf8 { event: String },
    /// A known event whose data is not the expected JSON.
    BadEvent { event: String, reason: String },
}

impl fmt::Display for PushStreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PushStreamError::BlockTooLarge { limit } => {
                write!(f, "push stream block larger than {limit} bytes was skipped")
            }
            PushStreamError::NotUtf8 { event } => write!(f, "push stream block {event:?} is not UTF-8"),
            PushStreamError::BadEvent { event, reason } => write!(f, "push event {event:?} is malformed: {reason}"),
        }
    }
}

impl std::error::Error for PushStreamError {}

/// Incremental SSE parser. Feed it every chunk in order with [`SseParser::push`].
#[derive(Debug, Clone)]
pub struct SseParser {
    max_block: usize,
    /// Bytes of the line being received.
    line: Vec<u8>,
    /// A `\r` ended the last line; a `\n` right after it belongs to the same terminator.
    after_cr: bool,
    event: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
    /// Bytes held by the current block (lines received so far plus the partial line).
    block_bytes: usize,
    /// The current block overflowed: ignore everything up to its blank line.
    skipping: bool,
}

impl Default for SseParser {
    fn default() -> Self {
        SseParser::new(DEFAULT_MAX_BLOCK_BYTES)
    }
}

impl SseParser {
    pub fn new(max_block: usize) -> Self {
        SseParser {
            max_block: max_block.max(1),
            line: Vec::new(),
            after_cr: false,
            event: Vec::new(),
            data: Vec::new(),
            has_data: false,
            block_bytes: 0,
            skipping: false,
        }
    }

    /// Forgets any partial block, as after a reconnect (a new stream starts clean).
    pub fn reset(&mut self) {
        *self = SseParser::new(self.max_block);
    }

    /// Consumes one chunk; returns the events (and errors) of the blocks it completed.
    /// Unknown event names and comments produce nothing.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<Result<PushEvent, PushStreamError>> {
        let mut out = Vec::new();
        for &byte in chunk {
            let after_cr = std::mem::replace(&mut self.after_cr, false);
            match byte {
                b'\n' if after_cr => {}
                b'\n' | b'\r' => {
                    self.after_cr = byte == b'\r';
                    self.end_line(&mut out);
                }
                _ => {
                    if self.skipping {
                        continue;
                    }
                    self.line.push(byte);
                    self.block_bytes += 1;
                    if self.block_bytes > self.max_block {
                        out.push(Err(PushStreamError::BlockTooLarge { limit: self.max_block }));
                        self.clear_block();
                        self.skipping = true;
                    }
                }
            }
        }
        out
    }

    fn clear_block(&mut self) {
        self.line.clear();
        self.event.clear();
        self.data.clear();
        self.has_data = false;
        self.block_bytes = 0;
    }

    fn end_line(&mut self, out: &mut Vec<Result<PushEvent, PushStreamError>>) {
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            if std::mem::replace(&mut self.skipping, false) {
                self.clear_block();
                return;
            }
            if (self.has_data || !self.event.is_empty())
                && let Some(item) = decode_block(&self.event, &self.data)
            {
                out.push(item);
            }
            self.clear_block();
            return;
        }
        if self.skipping || line[0] == b':' {
            return;
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => {
                let value = &line[i + 1..];
                (&line[..i], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (&line[..], &[][..]),
        };
        match field {
            b"event" => self.event = value.to_vec(),
            b"data" => {
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(value);
                self.has_data = true;
            }
            // `id:` (the bus seq, also inside data), `retry:` and unknown fields are not needed.
            _ => {}
        }
    }
}

fn decode_block(event: &[u8], data: &[u8]) -> Option<Result<PushEvent, PushStreamError>> {
    let name = match std::str::from_utf8(event) {
        Ok("") => "message",
        Ok(name) => name,
        Err(_) => return Some(Err(PushStreamError::NotUtf8 { event: String::from_utf8_lossy(event).into_owned() })),
    };
    if !KNOWN_EVENTS.contains(&name) {
        return None;
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return Some(Err(PushStreamError::NotUtf8 { event: name.to_owned() }));
    };
    Some(decode_event(name, text))
}

const KNOWN_EVENTS: [&str; 7] =
    ["hello", "agent_working", "agent_settled", "agent_output", "agent_gone", "exec_completed", "lagged"];

/// Decodes the `data:` JSON of a known event name.
pub fn decode_event(name: &str, data: &str) -> Result<PushEvent, PushStreamError> {
    let bad = |reason: String| PushStreamError::BadEvent { event: name.to_owned(), reason };
    let value: Value = serde_json::from_str(data).map_err(|e| bad(format!("data is not JSON: {e}")))?;
    if !value.is_object() {
        return Err(bad("data is not a JSON object".into()));
    }
    let text = |key: &str| value.get(key).and_then(value_string);
    let need = |key: &str| text(key).ok_or_else(|| bad(format!("missing {key}")));
    let seq = value.get("seq").and_then(Value::as_u64);
    Ok(match name {
        "hello" => PushEvent::Hello(serde_json::from_value(value.clone()).map_err(|e| bad(e.to_string()))?),
        "agent_working" => {
            PushEvent::AgentWorking { workspace: text("workspace"), pane: need("pane")?, agent: text("agent"), seq }
        }
        "agent_settled" => {
            let raw = need("status")?;
            let status = SettledStatus::parse(&raw).ok_or_else(|| bad(format!("status {raw:?} is not idle|done|blocked")))?;
            PushEvent::AgentSettled {
                workspace: text("workspace"),
                pane: need("pane")?,
                agent: text("agent"),
                status,
                seq,
                at: text("at"),
            }
        }
        "agent_output" => PushEvent::AgentOutput {
            workspace: text("workspace"),
            pane: need("pane")?,
            agent: text("agent"),
            output: text("output").unwrap_or_default(),
            seq,
        },
        "agent_gone" => PushEvent::AgentGone { workspace: text("workspace"), pane: need("pane")?, agent: text("agent"), seq },
        "exec_completed" => PushEvent::ExecCompleted {
            session_id: need("session_id")?,
            root: need("root")?,
            exit_code: value.get("exit_code").and_then(Value::as_i64).and_then(|c| i32::try_from(c).ok()),
            signal: text("signal"),
            workspace: text("workspace"),
            at: text("at"),
            seq,
        },
        "lagged" => PushEvent::Lagged { dropped: value.get("dropped").and_then(Value::as_u64).unwrap_or(0) },
        other => return Err(bad(format!("unknown event {other:?}"))),
    })
}

fn value_string(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Strings that the runtime may send as numbers (Herdr seqs) or null.
fn loose_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(Option::<Value>::deserialize(d)?.as_ref().and_then(value_string))
}

/// How long one connection attempt may take before it counts as failed.
pub const CONNECT_TIMEOUT_MS: u64 = 5_000;
/// First reconnect delay.
pub const BACKOFF_INITIAL_MS: u64 = 2_000;
/// Longest reconnect delay.
pub const BACKOFF_MAX_MS: u64 = 15_000;

/// Reconnect schedule of the push stream: 2 s, doubling, capped at 15 s; a successful
/// connection starts over.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Backoff {
    failures: u32,
}

impl Backoff {
    /// The delay before the next attempt, after one more failure.
    pub fn on_failure(&mut self) -> u64 {
        let delay = BACKOFF_INITIAL_MS.saturating_mul(1u64 << self.failures.min(16)).min(BACKOFF_MAX_MS);
        self.failures = self.failures.saturating_add(1);
        delay
    }

    /// The stream opened (`stream_open` with a 2xx status and a `hello`).
    pub fn on_success(&mut self) {
        self.failures = 0;
    }

    pub fn failures(&self) -> u32 {
        self.failures
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(items: Vec<Result<PushEvent, PushStreamError>>) -> Vec<PushEvent> {
        items.into_iter().map(|r| r.expect("event")).collect()
    }

    /// Exactly what axum 0.8's `Sse` writes for the runtime's events (fields in the order
    /// `event`, `data`, `id`; keep-alive `: keep-alive`).
    const WIRE: &str = concat!(
        "event: hello\ndata: {\"agents\":[{\"pane\":\"w1:p1\",\"status\":\"working\",\"workspace\":\"w1\",\"name\":\"claude\",\"kind\":\"claude\",\"seq\":7,\"terminal_title\":null,\"cwd\":\"/src/a\"}],\"workspaces\":[{\"id\":\"w1\",\"label\":\"alpha\",\"roots\":[\"/src/a\"],\"panes\":[\"w1:p1\"]}],\"herdr_live\":true,\"seq\":4}\n\n",
        ": keep-alive\n\n",
        "event: agent_settled\ndata: {\"workspace\":\"w1\",\"pane\":\"w1:p1\",\"agent\":\"claude\",\"status\":\"done\",\"at\":\"2026-01-01T00:00:00Z\",\"seq\":5}\nid: 5\n\n",
        "event: agent_output\ndata: {\"workspace\":\"w1\",\"pane\":\"w1:p1\",\"agent\":\"claude\",\"output\":\"all green\",\"seq\":6}\nid: 6\n\n",
        "event: exec_completed\ndata: {\"session_id\":\"s1\",\"root\":\"/src/a\",\"exit_code\":0,\"signal\":null,\"at\":\"t\",\"seq\":7}\nid: 7\n\n",
        "event: lagged\ndata: {\"dropped\":3}\n\n",
    );

    fn expected() -> Vec<PushEvent> {
        vec![
            PushEvent::Hello(Hello {
                agents: vec![AgentInfo {
                    pane: Some("w1:p1".into()),
                    status: Some("working".into()),
                    workspace: Some("w1".into()),
                    name: Some("claude".into()),
                    seq: Some("7".into()),
                    terminal_title: None,
                    cwd: Some("/src/a".into()),
                    summary: None,
                }],
                workspaces: vec![WorkspaceInfo {
                    id: "w1".into(),
                    label: Some("alpha".into()),
                    roots: vec!["/src/a".into()],
                    panes: vec!["w1:p1".into()],
                }],
                herdr_live: true,
                seq: Some(4),
            }),
            PushEvent::AgentSettled {
                workspace: Some("w1".into()),
                pane: "w1:p1".into(),
                agent: Some("claude".into()),
                status: SettledStatus::Done,
                seq: Some(5),
                at: Some("2026-01-01T00:00:00Z".into()),
            },
            PushEvent::AgentOutput {
                workspace: Some("w1".into()),
                pane: "w1:p1".into(),
                agent: Some("claude".into()),
                output: "all green".into(),
                seq: Some(6),
            },
            PushEvent::ExecCompleted {
                session_id: "s1".into(),
                root: "/src/a".into(),
                exit_code: Some(0),
                signal: None,
                workspace: None,
                at: Some("t".into()),
                seq: Some(7),
            },
            PushEvent::Lagged { dropped: 3 },
        ]
    }

    #[test]
    fn parses_the_runtime_wire_format_whole() {
        assert_eq!(events(SseParser::default().push(WIRE.as_bytes())), expected());
    }

    #[test]
    fn any_chunking_gives_the_same_events() {
        let bytes = WIRE.as_bytes();
        for size in [1, 2, 3, 7, 64] {
            let mut p = SseParser::default();
            let got: Vec<PushEvent> = bytes.chunks(size).flat_map(|c| events(p.push(c))).collect();
            assert_eq!(got, expected(), "chunk size {size}");
        }
    }

    #[test]
    fn crlf_lines_and_split_utf8_are_handled() {
        let wire = "event: agent_output\r\ndata: {\"pane\":\"p\",\"output\":\"héllo 日本\"}\r\n\r\n";
        let bytes = wire.as_bytes();
        let mut p = SseParser::default();
        let got: Vec<PushEvent> = bytes.chunks(1).flat_map(|c| events(p.push(c))).collect();
        assert!(matches!(&got[..], [PushEvent::AgentOutput { output, .. }] if output == "héllo 日本"));
        // Bare `\r` terminators too.
        let got = events(SseParser::default().push(b"event: lagged\rdata: {\"dropped\":1}\r\r"));
        assert_eq!(got, vec![PushEvent::Lagged { dropped: 1 }]);
    }

    #[test]
    fn multi_line_data_is_joined_with_newlines() {
        let got = events(SseParser::default().push(b"event: agent_working\ndata: {\"pane\":\ndata: \"p1\"}\n\n"));
        assert_eq!(got, vec![PushEvent::AgentWorking { workspace: None, pane: "p1".into(), agent: None, seq: None }]);
    }

    #[test]
    fn unknown_events_and_comments_produce_nothing() {
        let mut p = SseParser::default();
        assert!(p.push(b"event: pane_upsert\ndata: {\"x\":1}\n\n: hi\n\ndata: {}\n\n").is_empty());
        assert!(p.push(b"\n\n\n").is_empty());
    }

    #[test]
    fn an_incomplete_block_waits_for_its_blank_line() {
        let mut p = SseParser::default();
        assert!(p.push(b"event: lagged\ndata: {\"dropped\":2}\n").is_empty());
        assert_eq!(events(p.push(b"\n")), vec![PushEvent::Lagged { dropped: 2 }]);
        p.push(b"event: lagged\ndata: {\"dropped\":9}");
        p.reset();
        assert!(p.push(b"\n\n").is_empty(), "reset forgets the partial block");
    }

    #[test]
    fn malformed_known_events_are_clear_errors_and_the_stream_goes_on() {
        let mut p = SseParser::default();
        let items = p.push(concat!(
            "event: agent_settled\ndata: {\"pane\":\"p\",\"status\":\"working\"}\n\n",
            "event: agent_settled\ndata: {\"status\":\"done\"}\n\n",
            "event: hello\ndata: not json\n\n",
            "event: exec_completed\ndata: [1]\n\n",
            "event: lagged\ndata: {\"dropped\":1}\n\n",
        ).as_bytes());
        let errs: Vec<String> = items.iter().filter_map(|r| r.as_ref().err()).map(|e| e.to_string()).collect();
        assert_eq!(errs.len(), 4, "{errs:?}");
        assert!(errs[0].contains("not idle|done|blocked"), "{}", errs[0]);
        assert!(errs[1].contains("missing pane"), "{}", errs[1]);
        assert!(errs[2].contains("not JSON"), "{}", errs[2]);
        assert!(errs[3].contains("not a JSON object"), "{}", errs[3]);
        assert_eq!(items.last(), Some(&Ok(PushEvent::Lagged { dropped: 1 })));
        let bad_utf8 = p.push(b"event: lagged\ndata: {\"dropped\":\xff}\n\n");
        assert!(matches!(&bad_utf8[..], [Err(PushStreamError::NotUtf8 { .. })]));
    }

    #[test]
    fn a_block_at_the_limit_passes_and_one_byte_more_is_skipped_with_an_error() {
        let block = "event: lagged\ndata: {\"dropped\":1}\n\n";
        // Bytes counted are line contents without terminators.
        let limit = "event: lagged".len() + "data: {\"dropped\":1}".len();
        let mut p = SseParser::new(limit);
        assert_eq!(events(p.push(block.as_bytes())), vec![PushEvent::Lagged { dropped: 1 }]);
        let mut p = SseParser::new(limit - 1);
        let items = p.push(block.as_bytes());
        assert_eq!(items, vec![Err(PushStreamError::BlockTooLarge { limit: limit - 1 })]);
        assert!(items[0].as_ref().unwrap_err().to_string().contains("larger than"));
        // The parser resynchronises at the next blank line.
        assert_eq!(events(p.push(b"data:{\"dropped\":2}\nevent:lagged\n\n")), vec![PushEvent::Lagged { dropped: 2 }]);
    }

    #[test]
    fn agent_summary_comes_from_any_of_its_names() {
        let a: AgentInfo = serde_json::from_str(r#"{"pane":"p","output":"o","status_text":"s"}"#).unwrap();
        assert_eq!(a.summary.as_deref(), Some("o"));
        let a: AgentInfo = serde_json::from_str(r#"{"summary":"x","output":"o","seq":"12"}"#).unwrap();
        assert_eq!((a.summary.as_deref(), a.seq.as_deref()), (Some("x"), Some("12")));
        let back: AgentInfo = serde_json::from_value(serde_json::to_value(&a).unwrap()).unwrap();
        assert_eq!(back, a, "persisted form reads back");
    }

    #[test]
    fn backoff_doubles_from_2s_caps_at_15s_and_resets() {
        let mut b = Backoff::default();
        let delays: Vec<u64> = (0..6).map(|_| b.on_failure()).collect();
        assert_eq!(delays, vec![2_000, 4_000, 8_000, 15_000, 15_000, 15_000]);
        b.on_success();
        assert_eq!(b.on_failure(), 2_000);
        let mut many = Backoff::default();
        for _ in 0..100 {
            assert!(many.on_failure() <= BACKOFF_MAX_MS);
        }
    }
}
