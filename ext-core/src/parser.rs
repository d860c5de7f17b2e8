//! Incremental, drift-tolerant detection of tool calls in an assistant reply.
//!
//! The canonical form is one `{"tool":"<name>","args":{...}}` object per line. Models drift:
//! they wrap calls in ```json fences, emit a JSON array of calls, or use the OpenAI-style
//! `{"name":..,"arguments":..}` shape. Those are accepted, normalised, and recorded as a
//! [`Variant`] so the next TOOL_RESULT can remind the model of the canonical form.
//!
//! Replies stream in as successive snapshots of the rendered text. The parser keeps its
//! scanner state (string/escape/depth, finished objects) between snapshots, so the total work
//! over a reply is linear in its final length: each byte is scanned once and each finished
//! JSON value is parsed once. A snapshot that does not extend the previous one restarts the
//! scan (see [`ToolCallParser::feed`] for how that is checked cheaply while streaming and
//! exactly once the reply is done).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Classification of the latest assistant reply (spec §1.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplyState {
    /// No call-like JSON: a normal answer.
    None,
    /// A call (or what may become one) is still open at the end of the text.
    Incomplete,
    /// Call-like JSON that cannot be used, or a reply that is only non-call JSON.
    Malformed,
    /// At least one call and nothing broken.
    Complete,
}

impl ReplyState {
    /// The wire word used in repair rows (`<state>-tool-json`).
    pub fn as_str(self) -> &'static str {
        match self {
            ReplyState::None => "none",
            ReplyState::Incomplete => "incomplete",
            ReplyState::Malformed => "malformed",
            ReplyState::Complete => "complete",
        }
    }
}

/// A non-canonical way the model wrote a call. Recorded so the model can be reminded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Variant {
    /// Inside a Markdown code fence (or right after a rendered "json"/"Copy" label).
    Fenced,
    /// Several calls inside one JSON array.
    Array,
    /// `{"name":..,"arguments":..}`, `{"function":{..}}` or `"arguments"` instead of `"args"`.
    NameArguments,
    /// Arguments given as a JSON-encoded string instead of an object.
    StringArguments,
    /// Calls wrapped in `{"tool_calls":[..]}` / `{"calls":[..]}`.
    Wrapped,
    /// Raw line breaks or tabs inside JSON strings (invalid JSON, repaired).
    RawControlChars,
}

/// One call found in a reply, normalised to the canonical shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParsedCall {
    /// The tool name, trimmed.
    pub tool: String,
    /// The arguments as written; validation (not parsing) refuses non-objects.
    pub args: Value,
    /// How this call deviated from the canonical form; empty when canonical.
    pub variants: Vec<Variant>,
    /// Byte range of the JSON value holding this call within the reply text.
    pub span: (usize, usize),
}

/// Why a call-like JSON value could not be used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    pub span: (usize, usize),
    pub reason: String,
}

/// The full result of parsing one reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParseOutcome {
    pub state: ReplyState,
    pub calls: Vec<ParsedCall>,
    pub problems: Vec<Problem>,
    /// Union of the variants of all calls, sorted, without duplicates.
    pub variants: Vec<Variant>,
}

/// Parse a whole reply at once.
pub fn parse_reply(text: &str) -> ParseOutcome {
    let mut parser = ToolCallParser::new();
    parser.feed(text, true);
    parser.outcome()
}

/// How a candidate JSON value started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Opener {
    Object,
    Array,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Outside JSON.
    Prose,
    /// Saw `{` or `[` in prose; waiting for the next significant byte to decide.
    Probe { start: usize, opener: Opener },
    /// Inside a candidate JSON value.
    Value { start: usize, opener: Opener },
}

/// Keys seen at the level where a call object's keys live.
const KEY_TOOL: u8 = 1;
const KEY_NAME: u8 = 2;
const KEY_ARGUMENTS: u8 = 4;
const KEY_FUNCTION: u8 = 8;
const KEY_WRAPPER: u8 = 16;

/// Scanner state inside a candidate; everything needed to resume on the next snapshot.
#[derive(Debug, Clone, Default)]
struct ValueScan {
    depth: u32,
    in_string: bool,
    escape: bool,
    /// The string being scanned is an object key at the call level.
    string_is_call_key: bool,
    string_start: usize,
    /// Last significant byte outside strings, to tell keys (after `{` or `,`) from values.
    last_sig: u8,
    keys: u8,
    keys_seen: u32,
    /// A string with a raw control character inside it was seen (invalid JSON).
    raw_control: bool,
}

impl ValueScan {
    fn call_key_depth(opener: Opener) -> u32 {
        match opener {
            Opener::Object => 1,
            Opener::Array => 2,
        }
    }

    fn call_like(&self) -> bool {
        self.keys & (KEY_TOOL | KEY_FUNCTION | KEY_WRAPPER) != 0
            || (self.keys & KEY_NAME != 0 && self.keys & KEY_ARGUMENTS != 0)
    }

    /// Could this still-open value turn out to be a call?
    fn maybe_call(&self) -> bool {
        self.call_like() || self.keys & KEY_NAME != 0 || self.keys_seen == 0
    }
}

/// Incremental tool-call parser for one reply. Feed it successive snapshots.
#[derive(Debug, Clone, Default)]
pub struct ToolCallParser {
    text: String,
    mode: ModeHolder,
    scan: ValueScan,
    /// Length of the current run of backticks in prose (fences are runs of ≥ 3).
    backtick_run: u32,
    /// Whether the prose position is inside a Markdown code fence.
    in_fence: bool,
    calls: Vec<ParsedCall>,
    problems: Vec<Problem>,
    /// Spans of complete JSON values that are not calls.
    non_call_values: usize,
    /// Start of the first candidate, if any, and whether only labels/whitespace precede it.
    first_candidate_leads: Option<bool>,
    /// Whether the first `{` in the text comes after nothing but whitespace and labels: a
    /// reply that opens like JSON but holds no call is a failed attempt (reference parity).
    first_brace_leads: Option<bool>,
    /// The same for the first `[`: the reference treats a reply opening with `[` like one
    /// opening with `{` (spec §1.5), so `[1, 2]` alone is a botched call, not an answer.
    first_bracket_leads: Option<bool>,
    /// Number of times a snapshot did not extend the previous one and the scan restarted.
    restarts: u64,
    /// The text stream fed through [`ToolCallParser::feed_stream`], if any.
    stream_epoch: Option<u64>,
}

#[derive(Debug, Clone, Copy)]
struct ModeHolder(Mode);

impl Default for ModeHolder {
    fn default() -> Self {
        ModeHolder(Mode::Prose)
    }
}

/// Bytes compared at the tail of the previous snapshot while streaming.
const TAIL_CHECK_BYTES: usize = 256;
/// Evenly spaced probes of the older prefix while streaming.
const PREFIX_PROBES: usize = 8;
const PROBE_BYTES: usize = 8;

impl ToolCallParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// The text scanned so far (the last accepted snapshot).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// How often a non-extending snapshot forced a restart.
    pub fn restarts(&self) -> u64 {
        self.restarts
    }

    /// Accept the next snapshot of the reply and return the current classification.
    ///
    /// While `done` is false, the snapshot is assumed to extend the previous one when its
    /// length, the last 256 bytes of the previous text and a few sampled probes of the older
    /// prefix agree; this keeps streaming O(new bytes). When `done` is true the whole prefix is
    /// compared once, so the final answer is always exactly that of a one-shot parse.
    pub fn feed(&mut self, snapshot: &str, done: bool) -> ReplyState {
        let extends = if done {
            self.extends_exactly(snapshot)
        } else {
            self.extends_probably(snapshot)
        };
        if !extends {
            self.restart();
        }
        self.stream_epoch = None;
        let from = self.text.len();
        if snapshot.len() > from {
            self.text.push_str(&snapshot[from..]);
            self.scan_from(from);
        }
        self.state()
    }

    /// Accept the text of a stream whose text only grows while `epoch` stays the same (the
    /// worker's reassembled reply, `ext_adapters::reply_text`): the new part is scanned
    /// without comparing the old one, at every poll and at the end. Another epoch (the page
    /// rewrote the message) or text fed otherwise before means the scan starts over.
    pub fn feed_stream(&mut self, text: &str, epoch: u64) -> ReplyState {
        let same = self.stream_epoch == Some(epoch) && text.len() >= self.text.len() && text.is_char_boundary(self.text.len());
        if !same && (!self.text.is_empty() || self.stream_epoch.is_some()) {
            self.restart();
        }
        self.stream_epoch = Some(epoch);
        let from = self.text.len();
        if text.len() > from {
            self.text.push_str(&text[from..]);
            self.scan_from(from);
        }
        self.state()
    }

    fn extends_exactly(&self, snapshot: &str) -> bool {
        snapshot.len() >= self.text.len() && snapshot.as_bytes()[..self.text.len()] == *self.text.as_bytes()
    }

    fn extends_probably(&self, snapshot: &str) -> bool {
        let old = self.text.as_bytes();
        let new = snapshot.as_bytes();
        if new.len() < old.len() || !snapshot.is_char_boundary(old.len()) {
            return false;
        }
        let tail = old.len().saturating_sub(TAIL_CHECK_BYTES);
        if old[tail..] != new[tail..old.len()] {
            return false;
        }
        if tail > 0 {
            for probe in 0..PREFIX_PROBES {
                let at = tail * probe / PREFIX_PROBES;
                let end = (at + PROBE_BYTES).min(tail);
                if old[at..end] != new[at..end] {
                    return false;
                }
            }
        }
        true
    }

    fn restart(&mut self) {
        let restarts = self.restarts + 1;
        *self = ToolCallParser::default();
        self.restarts = restarts;
    }

    /// Current classification of the text seen so far.
    pub fn state(&self) -> ReplyState {
        let leads = self.first_candidate_leads == Some(true);
        // Every finished candidate counts as a call, a problem or a non-call value, so an open
        // value with none of those before it is the first candidate. Only that one can be the
        // JSON a reply opens with; a later unclosed non-call value (prose such as `{"key": 1`
        // after the calls) does not hold the calls back, as in the reference, which only
        // looks at objects opening with `"tool"`.
        let open_is_first = self.calls.is_empty() && self.problems.is_empty() && self.non_call_values == 0;
        match self.mode.0 {
            Mode::Probe { .. } => return ReplyState::Incomplete,
            Mode::Value { .. } if self.scan.maybe_call() || (leads && open_is_first) => return ReplyState::Incomplete,
            _ => {}
        }
        let opens_like_json = self.first_brace_leads == Some(true) || self.first_bracket_leads == Some(true);
        if !self.problems.is_empty() {
            ReplyState::Malformed
        } else if !self.calls.is_empty() {
            ReplyState::Complete
        } else if (self.non_call_values > 0 && leads) || opens_like_json {
            ReplyState::Malformed
        } else {
            ReplyState::None
        }
    }

    /// Calls completed so far (also those of a reply that is, overall, malformed).
    pub fn calls(&self) -> &[ParsedCall] {
        &self.calls
    }

    /// A snapshot of the whole result.
    pub fn outcome(&self) -> ParseOutcome {
        let mut problems = self.problems.clone();
        let state = self.state();
        if let Mode::Value { start, .. } | Mode::Probe { start, .. } = self.mode.0
            && state == ReplyState::Incomplete
        {
            problems.push(Problem {
                span: (start, self.text.len()),
                reason: "the JSON value starting here is not closed".to_string(),
            });
        }
        let mut variants: Vec<Variant> = self.calls.iter().flat_map(|c| c.variants.iter().copied()).collect();
        variants.sort();
        variants.dedup();
        ParseOutcome { state, calls: self.calls.clone(), problems, variants }
    }

    fn scan_from(&mut self, from: usize) {
        let mut i = from;
        let len = self.text.len();
        while i < len {
            match self.mode.0 {
                Mode::Prose => i = self.scan_prose(i),
                Mode::Probe { start, opener } => {
                    let b = self.text.as_bytes()[i];
                    if is_json_ws(b) {
                        i += 1;
                        continue;
                    }
                    let enters = match opener {
                        Opener::Object => b == b'"' || b == b'}',
                        Opener::Array => b == b'{' || b == b']',
                    };
                    if enters {
                        self.begin_value(start, opener);
                        // Replay the bytes after the opener (only whitespace) and this one.
                        i = start + 1;
                    } else {
                        // Not JSON after all; let prose look at this byte (it may open a probe).
                        self.mode.0 = Mode::Prose;
                    }
                }
                Mode::Value { start, opener } => i = self.scan_value(i, start, opener),
            }
        }
    }

    fn scan_prose(&mut self, mut i: usize) -> usize {
        let bytes = self.text.as_bytes();
        while i < bytes.len() {
            let b = bytes[i];
            if b == b'`' {
                self.backtick_run += 1;
                i += 1;
                continue;
            }
            if self.backtick_run >= 3 {
                self.in_fence = !self.in_fence;
            }
            self.backtick_run = 0;
            if b == b'{' {
                if self.first_brace_leads.is_none() {
                    self.first_brace_leads = Some(only_labels(&self.text[..i]));
                }
                self.mode.0 = Mode::Probe { start: i, opener: Opener::Object };
                return i + 1;
            }
            if b == b'[' {
                if self.first_bracket_leads.is_none() {
                    self.first_bracket_leads = Some(only_labels(&self.text[..i]));
                }
                self.mode.0 = Mode::Probe { start: i, opener: Opener::Array };
                return i + 1;
            }
            i += 1;
        }
        i
    }

    fn begin_value(&mut self, start: usize, opener: Opener) {
        if self.first_candidate_leads.is_none() {
            self.first_candidate_leads = Some(only_labels(&self.text[..start]));
        }
        self.mode.0 = Mode::Value { start, opener };
        self.scan = ValueScan { depth: 1, last_sig: self.text.as_bytes()[start], ..ValueScan::default() };
    }

    fn scan_value(&mut self, mut i: usize, start: usize, opener: Opener) -> usize {
        let key_depth = ValueScan::call_key_depth(opener);
        let bytes = self.text.as_bytes();
        let scan = &mut self.scan;
        while i < bytes.len() {
            let b = bytes[i];
            if scan.in_string {
                if scan.escape {
                    scan.escape = false;
                } else if b == b'\\' {
                    scan.escape = true;
                } else if b == b'"' {
                    scan.in_string = false;
                    if scan.string_is_call_key {
                        scan.keys_seen += 1;
                        scan.keys |= key_flag(&bytes[scan.string_start..i]);
                    }
                } else if b < 0x20 {
                    scan.raw_control = true;
                }
                i += 1;
                continue;
            }
            match b {
                b'"' => {
                    scan.in_string = true;
                    scan.string_is_call_key = scan.depth == key_depth && (scan.last_sig == b'{' || scan.last_sig == b',');
                    scan.string_start = i + 1;
                }
                b'{' | b'[' => scan.depth += 1,
                b'}' | b']' => {
                    scan.depth -= 1;
                    if scan.depth == 0 {
                        let end = i + 1;
                        self.mode.0 = Mode::Prose;
                        self.finish_value(start, end);
                        return end;
                    }
                }
                _ => {}
            }
            if !is_json_ws(b) {
                scan.last_sig = b;
            }
            i += 1;
        }
        i
    }

    fn finish_value(&mut self, start: usize, end: usize) {
        let slice = &self.text[start..end];
        let mut extra = Vec::new();
        let parsed = match serde_json::from_str::<Value>(slice) {
            Ok(v) => Ok(v),
            Err(e) if self.scan.raw_control => match serde_json::from_str::<Value>(&escape_raw_controls(slice)) {
                Ok(v) => {
                    extra.push(Variant::RawControlChars);
                    Ok(v)
                }
                Err(_) => Err(e),
            },
            Err(e) => Err(e),
        };
        let fenced = self.in_fence || preceded_by_label(&self.text[..start]);
        if fenced {
            extra.push(Variant::Fenced);
        }
        match parsed {
            Ok(value) => match interpret(&value) {
                Interpretation::Calls(found) => {
                    for (tool, args, mut variants) in found {
                        variants.extend(extra.iter().copied());
                        variants.sort();
                        variants.dedup();
                        self.calls.push(ParsedCall { tool, args, variants, span: (start, end) });
                    }
                }
                Interpretation::Broken(reason) => self.problems.push(Problem { span: (start, end), reason }),
                Interpretation::NotCall => self.non_call_values += 1,
            },
            Err(e) => {
                if self.scan.call_like() {
                    self.problems.push(Problem { span: (start, end), reason: format!("invalid JSON in a tool call: {e}") });
                } else {
                    self.non_call_values += 1;
                }
            }
        }
    }
}

fn is_json_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

fn key_flag(raw: &[u8]) -> u8 {
    match raw {
        b"tool" => KEY_TOOL,
        b"name" => KEY_NAME,
        b"arguments" | b"args" | b"parameters" => KEY_ARGUMENTS,
        b"function" => KEY_FUNCTION,
        b"tool_calls" | b"calls" => KEY_WRAPPER,
        _ => 0,
    }
}

/// Labels that rendered code blocks leave in page text, or raw fence openers.
const LABELS: [&str; 6] = ["```json", "```", "copy code", "copy", "json", "javascript"];

/// True when `prefix` holds nothing but whitespace and code-block labels.
fn only_labels(prefix: &str) -> bool {
    let mut rest = prefix.trim();
    loop {
        if rest.is_empty() {
            return true;
        }
        let lower_head: String = rest.chars().take(9).collect::<String>().to_ascii_lowercase();
        match LABELS.iter().find(|l| lower_head.starts_with(*l)) {
            Some(label) => rest = rest[label.len()..].trim_start(),
            None => return false,
        }
    }
}

/// True when the text right before a value ends with a code-block label ("json", "Copy", ```json).
fn preceded_by_label(before: &str) -> bool {
    let trimmed = before.trim_end().as_bytes();
    let tail = &trimmed[trimmed.len().saturating_sub(16)..];
    let lower = tail.to_ascii_lowercase();
    lower.ends_with(b"json") || lower.ends_with(b"copy") || lower.ends_with(b"copy code")
}

/// Escape raw control characters inside JSON strings so a model's literal line breaks parse.
fn escape_raw_controls(slice: &str) -> String {
    let mut out = String::with_capacity(slice.len() + 16);
    let mut in_string = false;
    let mut escape = false;
    for c in slice.chars() {
        if in_string {
            if escape {
                escape = false;
            } else if c == '\\' {
                escape = true;
            } else if c == '"' {
                in_string = false;
            } else if (c as u32) < 0x20 {
                match c {
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    '\t' => out.push_str("\\t"),
                    other => out.push_str(&format!("\\u{:04x}", other as u32)),
                }
                continue;
            }
        } else if c == '"' {
            in_string = true;
        }
        out.push(c);
    }
    out
}

type FoundCall = (String, Value, Vec<Variant>);

enum Interpretation {
    Calls(Vec<FoundCall>),
    Broken(String),
    NotCall,
}

fn interpret(value: &Value) -> Interpretation {
    match value {
        Value::Object(map) => interpret_object(map),
        Value::Array(items) => interpret_array(items, Variant::Array),
        _ => Interpretation::NotCall,
    }
}

fn interpret_array(items: &[Value], variant: Variant) -> Interpretation {
    if items.is_empty() {
        return Interpretation::NotCall;
    }
    let mut calls = Vec::new();
    let mut not_calls = 0usize;
    for item in items {
        match item {
            Value::Object(map) => match interpret_object(map) {
                Interpretation::Calls(found) => calls.extend(found),
                Interpretation::Broken(reason) => return Interpretation::Broken(reason),
                Interpretation::NotCall => not_calls += 1,
            },
            _ => not_calls += 1,
        }
    }
    if calls.is_empty() {
        Interpretation::NotCall
    } else if not_calls > 0 {
        Interpretation::Broken("an array mixes tool calls with other values".to_string())
    } else {
        for call in &mut calls {
            call.2.push(variant);
        }
        Interpretation::Calls(calls)
    }
}

fn interpret_object(map: &Map<String, Value>) -> Interpretation {
    if let Some(tool) = map.get("tool") {
        let Some(name) = tool.as_str().map(str::trim).filter(|s| !s.is_empty()) else {
            return Interpretation::Broken("\"tool\" must be a non-empty string".to_string());
        };
        let (args, mut variants) = match (map.get("args"), map.get("arguments")) {
            (Some(args), _) => (args.clone(), Vec::new()),
            (None, Some(args)) => (args.clone(), vec![Variant::NameArguments]),
            (None, None) => (Value::Object(Map::new()), Vec::new()),
        };
        return finish_call(name, args, &mut variants);
    }
    if let Some(Value::Object(function)) = map.get("function")
        && let Some(name) = function.get("name").and_then(Value::as_str)
    {
        let args = function.get("arguments").or_else(|| function.get("parameters")).cloned();
        let mut variants = vec![Variant::NameArguments];
        return finish_call(name, args.unwrap_or_else(|| Value::Object(Map::new())), &mut variants);
    }
    if let Some(Value::String(name)) = map.get("name") {
        let args = map.get("arguments").or_else(|| map.get("args")).or_else(|| map.get("parameters"));
        if let Some(args) = args {
            let mut variants = vec![Variant::NameArguments];
            return finish_call(name, args.clone(), &mut variants);
        }
        return Interpretation::NotCall;
    }
    for key in ["tool_calls", "calls"] {
        if let Some(Value::Array(items)) = map.get(key) {
            return interpret_array(items, Variant::Wrapped);
        }
    }
    Interpretation::NotCall
}

fn finish_call(name: &str, args: Value, variants: &mut Vec<Variant>) -> Interpretation {
    let name = name.trim();
    if name.is_empty() {
        return Interpretation::Broken("the tool name must be a non-empty string".to_string());
    }
    let args = match args {
        Value::String(encoded) => match serde_json::from_str::<Value>(&encoded) {
            Ok(decoded @ Value::Object(_)) => {
                variants.push(Variant::StringArguments);
                decoded
            }
            _ => return Interpretation::Broken(format!("the arguments of {name} are a string that is not a JSON object")),
        },
        other => other,
    };
    Interpretation::Calls(vec![(name.to_string(), args, std::mem::take(variants))])
}

/// Render calls in the canonical form, one per line (used by tests and reminders).
pub fn render_canonical(calls: &[(String, Value)]) -> String {
    let mut out = String::new();
    for (tool, args) in calls {
        let line = serde_json::json!({ "tool": tool, "args": args });
        out.push_str(&line.to_string());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_examples() {
        assert_eq!(parse_reply(r#"{"status":"x"}"#).state, ReplyState::Malformed);
        assert_eq!(parse_reply(r#"{"tool":oops}"#).state, ReplyState::Malformed);
        assert_eq!(parse_reply("{\"tool\":\"a\",\"args\":{}}\n{\"tool\":\"b\"").state, ReplyState::Incomplete);
        assert_eq!(parse_reply("Just an answer.").state, ReplyState::None);
    }

    #[test]
    fn restart_when_snapshot_rewrites_the_past() {
        let mut p = ToolCallParser::new();
        p.feed("{\"tool\":\"a\",\"args\":{}}", false);
        assert_eq!(p.feed("Hello, no calls here at all.", true), ReplyState::None);
        assert_eq!(p.restarts(), 1);
    }
}
