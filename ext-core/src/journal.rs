//! Call journal policy: never run a mutation twice (ARCHITECTURE decision 5).
//!
//! Every call a reply asks for gets a fingerprint from (conversation, assistant message,
//! index, tool, canonical args). Before a call is handed to the runtime its entry is written
//! as `pending`; the runtime's answer moves it to `delivered`. After a reload nobody knows
//! what happened to a `pending` call, so it becomes `unknown` and is reported as
//! `delivery_unknown` instead of being run again. Only calls without an entry may run.
//!
//! Mutating calls also carry a derived idempotency key so the runtime deduplicates too.
//! The journal is plain serde data: the extension shell stores it in `chrome.storage.local`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::parser::{ReplyState, parse_reply};
use crate::validate::Catalog;

/// Entries kept per conversation; the oldest settled ones go first.
pub const MAX_JOURNAL_ENTRIES: usize = 512;
/// How many entries before the last one the reload rule looks at (spec §5.4: 39).
pub const RESUME_LOOKBACK: usize = 39;
/// The intent given to `herdr_exec` when the model did not choose one: the safe default,
/// since the bridge cannot know whether a shell command is repeatable.
pub const DEFAULT_EXEC_INTENT: &str = "non_idempotent_write";

/// Tools whose calls change state and so get an idempotency key.
pub fn is_mutating(tool: &str) -> bool {
    matches!(tool, "herdr_fs_edit" | "herdr_fs_write" | "herdr_fs_patch" | "herdr_prompt" | "herdr_call")
        || tool.starts_with("herdr_exec")
}

/// What identifies one call of one reply.
#[derive(Debug, Clone, Copy)]
pub struct CallIdentity<'a> {
    pub conv_key: &'a str,
    pub message_id: &'a str,
    /// 1-based position in the reply.
    pub index: usize,
    pub tool: &'a str,
    /// The arguments as the model wrote them (before any key is injected).
    pub args: &'a Value,
}

/// Stable fingerprint of a call: `cf1:` + SHA-256 hex.
pub fn fingerprint(id: &CallIdentity<'_>) -> String {
    format!("cf1:{}", digest_hex("call", id))
}

/// Idempotency key derived from the same identity; 36 chars, within the runtime's 1..256.
pub fn idempotency_key(id: &CallIdentity<'_>) -> String {
    format!("hb1-{}", &digest_hex("idempotency", id)[..32])
}

fn digest_hex(purpose: &str, id: &CallIdentity<'_>) -> String {
    let mut h = Sha256::new();
    // Length-prefixed fields: no choice of strings can make two identities collide by framing.
    for part in [purpose, id.conv_key, id.message_id, &id.index.to_string(), id.tool, &canonical_json(id.args)] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    hex::encode(h.finalize())
}

/// JSON with object keys sorted at every level, independent of map ordering features.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// The arguments actually sent: the key goes into `args` only where the live schema accepts
/// it (`herdr_exec` also needs an `intent`; spec contract §2.5). A key or intent the model
/// chose itself is kept.
pub fn prepare_args(tool: &str, args: &Value, key: Option<&str>, catalog: &Catalog) -> Value {
    let (Some(key), Value::Object(map)) = (key, args) else {
        return args.clone();
    };
    if !catalog.accepts_property(tool, "idempotency_key") {
        return args.clone();
    }
    let mut map: Map<String, Value> = map.clone();
    if tool == "herdr_exec" {
        if !catalog.accepts_property(tool, "intent") {
            return args.clone();
        }
        map.entry("intent").or_insert_with(|| Value::String(DEFAULT_EXEC_INTENT.to_string()));
    }
    map.entry("idempotency_key").or_insert_with(|| Value::String(key.to_string()));
    Value::Object(map)
}

/// How a delivered call ended, as shown to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum CallOutcome {
    /// The runtime answered; `result` is the sanitized presentation value.
    Ok { result: Value },
    /// The call failed with a known answer (the runtime or the bridge said so).
    Err { error: String, detail: String },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum CallState {
    /// Handed (or about to be handed) to the runtime; no answer yet.
    Pending,
    /// The answer came back.
    Delivered { outcome: CallOutcome },
    /// It may or may not have run (reload or lost transport while pending).
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JournalEntry {
    pub fingerprint: String,
    pub message_id: String,
    pub index: usize,
    pub tool: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    pub state: CallState,
    /// Insertion order, for pruning.
    pub seq: u64,
}

/// What to do with a call, according to the journal.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// Never sent: run it.
    Run,
    /// Already answered: reuse the answer, do not run.
    Replay(CallOutcome),
    /// Sent, but the answer was lost: report `delivery_unknown`, never run again.
    DeliveryUnknown,
    /// Currently in flight in this session: wait, do not send twice.
    InFlight,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JournalError {
    AlreadyJournaled { fingerprint: String },
    NotFound { fingerprint: String },
    NotPending { fingerprint: String },
}

impl std::fmt::Display for JournalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JournalError::AlreadyJournaled { fingerprint } => write!(f, "call {fingerprint} is already in the journal"),
            JournalError::NotFound { fingerprint } => write!(f, "call {fingerprint} is not in the journal"),
            JournalError::NotPending { fingerprint } => write!(f, "call {fingerprint} is not pending, so its state cannot change"),
        }
    }
}

impl std::error::Error for JournalError {}

/// The per-conversation call journal.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CallJournal {
    pub conv_key: String,
    entries: Vec<JournalEntry>,
    next_seq: u64,
}

impl CallJournal {
    pub fn new(conv_key: &str) -> Self {
        CallJournal { conv_key: conv_key.to_string(), entries: Vec::new(), next_seq: 0 }
    }

    pub fn entries(&self) -> &[JournalEntry] {
        &self.entries
    }

    pub fn entry(&self, fingerprint: &str) -> Option<&JournalEntry> {
        self.entries.iter().find(|e| e.fingerprint == fingerprint)
    }

    pub fn plan(&self, fingerprint: &str) -> Plan {
        match self.entry(fingerprint).map(|e| &e.state) {
            None => Plan::Run,
            Some(CallState::Pending) => Plan::InFlight,
            Some(CallState::Delivered { outcome }) => Plan::Replay(outcome.clone()),
            Some(CallState::Unknown) => Plan::DeliveryUnknown,
        }
    }

    /// Record a call as pending before it is sent. Write-ahead: the shell must persist the
    /// journal before executing.
    pub fn begin(&mut self, id: &CallIdentity<'_>) -> Result<JournalEntry, JournalError> {
        let fp = fingerprint(id);
        if self.entry(&fp).is_some() {
            return Err(JournalError::AlreadyJournaled { fingerprint: fp });
        }
        let entry = JournalEntry {
            fingerprint: fp,
            message_id: id.message_id.to_string(),
            index: id.index,
            tool: id.tool.to_string(),
            idempotency_key: is_mutating(id.tool).then(|| idempotency_key(id)),
            state: CallState::Pending,
            seq: self.next_seq,
        };
        self.next_seq += 1;
        self.entries.push(entry.clone());
        self.prune();
        Ok(entry)
    }

    /// The runtime answered a pending call.
    pub fn deliver(&mut self, fingerprint: &str, outcome: CallOutcome) -> Result<(), JournalError> {
        self.settle(fingerprint, CallState::Delivered { outcome })
    }

    /// A pending call's fate cannot be known any more.
    pub fn mark_unknown(&mut self, fingerprint: &str) -> Result<(), JournalError> {
        self.settle(fingerprint, CallState::Unknown)
    }

    fn settle(&mut self, fingerprint: &str, state: CallState) -> Result<(), JournalError> {
        let entry = self
            .entries
            .iter_mut()
            .find(|e| e.fingerprint == fingerprint)
            .ok_or_else(|| JournalError::NotFound { fingerprint: fingerprint.to_string() })?;
        if entry.state != CallState::Pending {
            return Err(JournalError::NotPending { fingerprint: fingerprint.to_string() });
        }
        entry.state = state;
        Ok(())
    }

    /// After a page/worker reload: every pending call may have run, so it becomes unknown.
    /// Returns how many entries changed.
    pub fn after_reload(&mut self) -> usize {
        let mut changed = 0;
        for e in &mut self.entries {
            if e.state == CallState::Pending {
                e.state = CallState::Unknown;
                changed += 1;
            }
        }
        changed
    }

    fn prune(&mut self) {
        while self.entries.len() > MAX_JOURNAL_ENTRIES {
            // Settled entries go first; pending ones only when nothing else is left.
            let victim = self
                .entries
                .iter()
                .position(|e| e.state != CallState::Pending)
                .unwrap_or(0);
            self.entries.remove(victim);
        }
    }
}

/// Who wrote a message in the page transcript: the same classification folding uses, so
/// the two can never disagree about a message.
pub use crate::fold::Role;

/// One user/assistant message as read from the page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TranscriptEntry {
    pub role: Role,
    pub text: String,
}

/// True when a user message is a bridge message (task preamble or tool results); folding
/// owns the rule.
pub use crate::fold::is_bridge_user_message;

/// The reload-recovery rule (spec §5.4): resume only when the last message is an assistant
/// reply with tool JSON and one of the 39 messages before it is a bridge user message.
pub fn has_pending_tool_reply(entries: &[TranscriptEntry]) -> bool {
    let Some((last, before)) = entries.split_last() else {
        return false;
    };
    if last.role != Role::Assistant || parse_reply(&last.text).state == ReplyState::None {
        return false;
    }
    let window = &before[before.len().saturating_sub(RESUME_LOOKBACK)..];
    window.iter().any(|e| e.role == Role::User && is_bridge_user_message(&e.text))
}
