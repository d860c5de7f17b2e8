//! Selector sets: the data a content script needs to snapshot a site's page.
//!
//! The content script is deliberately generic. It receives a [`SelectorSet`] from the
//! service worker (message `configure`) and builds a
//! [`PageSnapshot`](crate::messages::PageSnapshot) with it:
//!
//! 1. `roots = document.querySelectorAll(message_root)`; only the last `max_roots` are sent
//!    (the last `max_roots` before `before_index` when the worker asked for older ones),
//!    each with its index among all roots.
//! 2. For each root, every [`Probe`] whose selector matches the root itself
//!    (`root.matches(sel)`) or a descendant (`root.querySelector(sel)`) is reported by name.
//! 3. The root's text is `textContent.trim()` of the **last outermost** element inside the
//!    root matching `content` (an element not inside another match), or of the root itself
//!    when nothing matches. "Last outermost" picks the answer over an earlier thinking
//!    block and never a fragment nested inside the answer. Every root except the last is cut
//!    to `history_text_chars` characters (the last one is the reply being read, sent whole).
//! 4. `head` is the first `head_chars` characters of the root's `textContent` with leading
//!    white space removed: status lines (e.g. DeepSeek's "Thought for 12 seconds") live
//!    there.
//! 5. The composer is the first match of `composer`; the send button the first match of
//!    `send_buttons`, tried in order.
//!
//! All decisions (roles, reply finished, folding) are made in Rust from the snapshot.

use serde::{Deserialize, Serialize};

/// Probe name: the root is (or contains) a user message.
pub const PROBE_USER: &str = "user";
/// Probe name: the root is (or contains) an assistant message.
pub const PROBE_ASSISTANT: &str = "assistant";
/// Probe name: the site marks this message as still streaming.
pub const PROBE_STREAMING: &str = "streaming";
/// Probe name: a typing cursor / blinking caret / loading indicator is inside the root.
pub const PROBE_CURSOR: &str = "cursor";

/// A named CSS selector whose presence in a message root is reported in snapshots.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Probe {
    pub name: String,
    pub selector: String,
}

impl Probe {
    pub fn new(name: &str, selector: &str) -> Self {
        Self { name: name.to_owned(), selector: selector.to_owned() }
    }
}

/// Everything the content script queries on a site's page. See the module doc for how each
/// field is applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SelectorSet {
    /// Composer candidates; the first match is the composer.
    pub composer: Vec<String>,
    /// Send-button candidates in order of preference; empty when the site sends with Enter.
    pub send_buttons: Vec<String>,
    /// One element per chat message.
    pub message_root: String,
    /// Where a message's text lives inside its root.
    pub content: String,
    pub probes: Vec<Probe>,
    /// Leading characters of each root reported as `head`.
    pub head_chars: u32,
    /// How many of the newest roots a snapshot carries. 40 covers the reload-recovery window
    /// of spec §5.4 (last entry + 39 before it).
    pub max_roots: u32,
    /// Text cap for every root but the last. Older messages are only checked for the bridge
    /// marker / `TOOL_RESULT:` (both at the start) and for call-only replies, whose calls
    /// carry arguments; 64 KiB keeps those intact while bounding a long history.
    pub history_text_chars: u32,
}

/// Defaults shared by all sites.
pub(crate) const HEAD_CHARS: u32 = 512;
pub(crate) const MAX_ROOTS: u32 = 40;
pub(crate) const HISTORY_TEXT_CHARS: u32 = 65_536;
