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
//! 3. The root's text is the [line text](#line-text) (trimmed) of the **last outermost**
//!    element inside the root matching `content` (an element not inside another match), or
//!    of the root itself when nothing matches. "Last outermost" picks the answer over an
//!    earlier thinking block and never a fragment nested inside the answer. Every root except
//!    the last is cut to `history_text_chars` characters (the last one is the reply being
//!    read, sent whole).
//! 4. `head` is the first `head_chars` characters of the root's `textContent` with leading
//!    white space removed: status lines (e.g. DeepSeek's "Thought for 12 seconds") live
//!    there.
//! 5. The composer is the first match of `composer`; the send button the first match of
//!    `send_buttons`, tried in order.
//!
//! All decisions (roles, reply finished, folding) are made in Rust from the snapshot.
//!
//! # Line text
//!
//! Line breaks are content: a site may draw a code block as one element per line (z.ai's
//! code editor) and prose as one paragraph per line, where `textContent` would join the
//! lines. The line text of an element is its text nodes in document order, where
//! - a `<br>` is a line break;
//! - the start and the end of every element whose tag is in `line_break_tags` is a line
//!   break, except at the very start of the text, right after another such break, or where
//!   the text already ends with a line break (so `<div>a</div><div>b</div>` is `a\nb`,
//!   and an empty editor line, `<div><br></div>`, is one empty line);
//! - a text node of white space only that holds a line break is markup indentation and is
//!   left out, unless its parent lays text out as written (`<pre>`, or CSS `white-space`
//!   `pre`, `pre-wrap`, `pre-line`, `break-spaces`);
//! - `script`, `style`, `template` and `noscript` elements are left out.

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
    /// Upper-case tag names whose element boundaries are line breaks in a message's text
    /// (see [line text](#line-text)).
    pub line_break_tags: Vec<String>,
}

/// Defaults shared by all sites.
pub(crate) const HEAD_CHARS: u32 = 512;
pub(crate) const MAX_ROOTS: u32 = 40;
pub(crate) const HISTORY_TEXT_CHARS: u32 = 65_536;

/// Block-level elements of HTML: where a browser starts a new line.
pub(crate) const LINE_BREAK_TAGS: [&str; 37] = [
    "ADDRESS", "ARTICLE", "ASIDE", "BLOCKQUOTE", "CAPTION", "DD", "DETAILS", "DIALOG", "DIV", "DL", "DT", "FIELDSET",
    "FIGCAPTION", "FIGURE", "FOOTER", "FORM", "H1", "H2", "H3", "H4", "H5", "H6", "HEADER", "HGROUP", "HR", "LI", "MAIN",
    "NAV", "OL", "P", "PRE", "SECTION", "SUMMARY", "TABLE", "TBODY", "TR", "UL",
];

/// [`LINE_BREAK_TAGS`] as a selector set wants them.
pub(crate) fn line_break_tags() -> Vec<String> {
    LINE_BREAK_TAGS.iter().map(|t| (*t).to_owned()).collect()
}
