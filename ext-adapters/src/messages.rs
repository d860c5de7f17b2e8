//! Messages between the content script (thin JS "hands") and the service worker (Rust).
//!
//! Every message is one JSON object `{"v": 1, "type": "<kind>", ...fields}`; `v` is
//! [`PROTOCOL_VERSION`] and a receiver refuses any other value (see [`decode_content`]), so a
//! stale content script left in a tab after an extension update fails loudly instead of
//! being misread.
//!
//! Content script → service worker ([`ContentMessage`]):
//! - `hello {script_version, url}` — once at start; answered with `configure`.
//! - `snapshot {PageSnapshot}` — after DOM mutations (coalesced), on route changes and on
//!   request; the only way the worker learns about the page.
//! - `submit_intercepted {url, text, trigger}` — the user pressed Enter / clicked send /
//!   submitted the form with non-empty text; the site's own send was cancelled.
//! - `action_done {action_id, ok, error?}` — outcome of one [`Action`].
//!
//! Service worker → content script ([`WorkerMessage`]):
//! - `configure {site, selectors, composer}` — how to snapshot and drive this site.
//! - `act {action_id, action}` — do one [`Action`]:
//!   `insert_text`, `submit`, `fold`, `show_status`, `set_composer_hidden`.
//! - `request_snapshot {before_index?}` — send a snapshot now (e.g. after an action
//!   completed). With `before_index`, the snapshot carries the newest roots *before* that
//!   index instead, so the worker can page back through a long history (to fold it on load)
//!   while every snapshot stays bounded by `max_roots`.

use crate::composer::{ComposerStrategy, InsertMethod, SubmitMethod};
use crate::selectors::SelectorSet;
use crate::site::Site;
use ext_core::fold::FoldLabel;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Version of this message set; bump on any incompatible change.
pub const PROTOCOL_VERSION: u32 = 1;

/// A message with its version, as it travels.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope<T> {
    pub v: u32,
    #[serde(flatten)]
    pub body: T,
}

impl<T> Envelope<T> {
    pub fn new(body: T) -> Self {
        Self { v: PROTOCOL_VERSION, body }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentMessage {
    Hello { script_version: String, url: String },
    Snapshot(PageSnapshot),
    SubmitIntercepted { url: String, text: String, trigger: SubmitTrigger },
    ActionDone {
        action_id: u64,
        ok: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum WorkerMessage {
    Configure { site: Site, selectors: SelectorSet, composer: ComposerStrategy },
    Act { action_id: u64, action: Action },
    RequestSnapshot {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        before_index: Option<u32>,
    },
}

/// What the user did that the content script intercepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SubmitTrigger {
    EnterKey,
    FormSubmit,
    SendButton,
}

/// One DOM action, decided in Rust and applied by the content script.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Action {
    /// Replace the composer's content with `text`.
    InsertText { text: String, method: InsertMethod },
    /// Send the composer's content, trying `methods` in order; success = composer cleared.
    /// The content script ignores its own intercept hooks while this runs.
    Submit { methods: Vec<SubmitMethod> },
    /// Hide a message root behind a fold bar (presentation only; DOM is never removed). The
    /// root is found by `root_index` among `message_root` matches and, when present, checked
    /// against `dom_id` so a shifted list never folds the wrong message. The content script
    /// marks the root `data-h2w-folded="<label>"` (the label's wire name), which later
    /// snapshots report as `folded`, so nothing is folded twice.
    Fold {
        root_index: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dom_id: Option<String>,
        label: FoldLabel,
        caption: String,
    },
    /// A short status line near the composer (e.g. "running 3 tools").
    ShowStatus { text: String, level: StatusLevel },
    /// Hide the composer while the bridge writes into it, so protocol text does not flash.
    SetComposerHidden { hidden: bool },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StatusLevel {
    Info,
    Working,
    Error,
}

/// What the content script saw on the page. Built with the site's
/// [`SelectorSet`] (see `selectors` for exactly how each field is collected).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PageSnapshot {
    /// Increases with every snapshot of one page load; stale snapshots are ignored.
    pub seq: u64,
    /// `location.href`.
    pub url: String,
    /// `document.visibilityState === "visible"`.
    pub visible: bool,
    /// Number of message roots on the page (the snapshot may carry only the newest).
    pub total_roots: u32,
    /// The newest roots, in document order.
    pub roots: Vec<RootSnapshot>,
    pub composer: ComposerSnapshot,
    /// The first send-button candidate present, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_button: Option<ButtonSnapshot>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RootSnapshot {
    /// Position among all message roots on the page (0-based).
    pub index: u32,
    /// The root's `id` attribute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dom_id: Option<String>,
    /// Names of the probes that matched the root or a descendant.
    pub probes: Vec<String>,
    /// Message text (see `SelectorSet::content`).
    pub text: String,
    /// `text` was cut to `history_text_chars`.
    #[serde(default)]
    pub text_truncated: bool,
    /// First `head_chars` characters of the root's whole text.
    #[serde(default)]
    pub head: String,
    /// The fold label already applied to this root by a previous `fold` action.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub folded: Option<FoldLabel>,
    /// The page's last root only: the revision of its text (see `reply_text`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rev: Option<u64>,
    /// The page's last root only: what was appended to the text of an earlier revision;
    /// `text` is then empty and the worker rebuilds it (see `reply_text`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta: Option<crate::reply_text::TextDelta>,
    /// An older root whose text is the one sent before: `text` is empty and the worker puts
    /// it back (see `reply_text::HistoryTexts`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub held: bool,
}

impl RootSnapshot {
    pub fn has_probe(&self, name: &str) -> bool {
        self.probes.iter().any(|p| p == name)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ComposerKind {
    Textarea,
    ContentEditable,
    Other,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComposerSnapshot {
    pub present: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<ComposerKind>,
    /// Value (textarea) or `innerText` (editor) without zero-width spaces, trimmed.
    #[serde(default)]
    pub text: String,
    /// An IME composition is in progress.
    #[serde(default)]
    pub composing: bool,
    #[serde(default)]
    pub disabled: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ButtonSnapshot {
    /// Which `send_buttons` candidate matched.
    pub candidate: u32,
    pub enabled: bool,
    pub visible: bool,
}

/// Why a received message was refused.
#[derive(Debug)]
pub enum DecodeError {
    /// Not JSON or not one of the message shapes; the serde error says where.
    Malformed(serde_json::Error),
    /// Sent by a content script of another protocol version.
    Version { got: u64 },
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Malformed(e) => write!(f, "malformed content-script message: {e}"),
            DecodeError::Version { got } => {
                write!(f, "content-script message version {got}, expected {PROTOCOL_VERSION} (reload the tab)")
            }
        }
    }
}

impl std::error::Error for DecodeError {}

/// Parses a content-script message, checking its version before its shape.
pub fn decode_content(json: &str) -> Result<ContentMessage, DecodeError> {
    let value: serde_json::Value = serde_json::from_str(json).map_err(DecodeError::Malformed)?;
    let got = value.get("v").and_then(serde_json::Value::as_u64).unwrap_or(0);
    if got != u64::from(PROTOCOL_VERSION) {
        return Err(DecodeError::Version { got });
    }
    let envelope: Envelope<ContentMessage> = serde_json::from_value(value).map_err(DecodeError::Malformed)?;
    Ok(envelope.body)
}

/// Serializes a worker message with its version.
pub fn encode_worker(message: &WorkerMessage) -> String {
    // Serializing these plain data types cannot fail: no maps with non-string keys, no
    // custom serializers.
    serde_json::to_string(&Envelope::new(message)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn snapshot_round_trips_with_version_and_tag() {
        let raw = json!({
            "v": 1, "type": "snapshot", "seq": 3, "url": "https://chat.z.ai/c/1", "visible": true,
            "total_roots": 1,
            "roots": [{"index": 0, "dom_id": "message-1", "probes": ["assistant"], "text": "hi",
                       "head": "hi", "folded": "tool_call"}],
            "composer": {"present": true, "kind": "textarea", "text": ""},
            "send_button": {"candidate": 0, "enabled": false, "visible": true}
        });
        let msg = decode_content(&raw.to_string()).unwrap();
        let ContentMessage::Snapshot(snap) = &msg else { panic!("{msg:?}") };
        assert_eq!(snap.roots[0].folded, Some(FoldLabel::ToolCall));
        let back = serde_json::to_value(Envelope::new(msg.clone())).unwrap();
        assert_eq!(back["type"], "snapshot");
        assert_eq!(back["v"], 1);
        assert_eq!(decode_content(&back.to_string()).unwrap(), msg);
    }

    #[test]
    fn wrong_version_and_wrong_shape_are_refused_with_reasons() {
        let e = decode_content(r#"{"v":2,"type":"hello","script_version":"x","url":"u"}"#).unwrap_err();
        assert!(e.to_string().contains("version 2, expected 1"), "{e}");
        let e = decode_content(r#"{"type":"hello"}"#).unwrap_err();
        assert!(matches!(e, DecodeError::Version { got: 0 }));
        let e = decode_content(r#"{"v":1,"type":"teleport"}"#).unwrap_err();
        assert!(e.to_string().contains("teleport"), "{e}");
        assert!(decode_content("not json").is_err());
    }

    #[test]
    fn request_snapshot_pages_back_only_when_asked() {
        let now = encode_worker(&WorkerMessage::RequestSnapshot { before_index: None });
        assert_eq!(now, r#"{"v":1,"type":"request_snapshot"}"#);
        let older = encode_worker(&WorkerMessage::RequestSnapshot { before_index: Some(40) });
        assert_eq!(older, r#"{"v":1,"type":"request_snapshot","before_index":40}"#);
    }

    #[test]
    fn actions_serialize_with_kind_tags() {
        let msg = WorkerMessage::Act {
            action_id: 7,
            action: Action::Fold { root_index: 4, dom_id: None, label: FoldLabel::ToolResult, caption: "Herdr tool result".into() },
        };
        let v: serde_json::Value = serde_json::from_str(&encode_worker(&msg)).unwrap();
        assert_eq!(v, json!({"v":1,"type":"act","action_id":7,
            "action":{"kind":"fold","root_index":4,"label":"tool_result","caption":"Herdr tool result"}}));
        let insert = serde_json::to_value(Action::InsertText {
            text: "x".into(),
            method: InsertMethod::ContentEditable { main_world: true },
        })
        .unwrap();
        assert_eq!(insert, json!({"kind":"insert_text","text":"x","method":{"method":"content_editable","main_world":true}}));
    }
}
