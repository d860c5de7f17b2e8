//! The newest message's text as the service worker holds it while the page streams it.
//!
//! The content script sends the page's last message whole once, then only what was appended
//! (a [`TextDelta`]) with a revision, so a 1 MB reply costs its own bytes once instead of
//! once per poll. This side rebuilds the text and checks each delta against what it holds:
//! the revision it extends and that text's length. A delta that does not fit (the worker
//! restarted, a report was lost or came out of order) is never applied: [`Applied::Resync`]
//! asks for the whole text, [`Applied::Stale`] drops a report older than the text held.
//!
//! Within one [`ReplyText::epoch`] the text only grows, so a parser fed from it may take the
//! new part without comparing the old; a page that rewrote the message (regenerate, another
//! message) starts a new epoch and the parser starts over.

use crate::messages::RootSnapshot;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// What the page appended to the text of revision `base_rev`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TextDelta {
    /// The revision whose text this extends.
    pub base_rev: u64,
    /// That text's length in UTF-16 code units (JavaScript's `length`).
    pub base_len: u64,
    pub append: String,
}

/// What one report did to the text held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// The same text as before (a repeated report, a duplicate delta).
    Unchanged,
    /// The text held, with more appended: same epoch.
    Appended,
    /// Another text (the first, a rewrite, another message): a new epoch.
    Replaced,
    /// Older than the text held (out of order): ignored, the text held stays.
    Stale,
    /// A delta of a text not held here: ignored until the whole text comes.
    Resync,
}

impl Applied {
    /// The report carries nothing this side can use.
    pub fn dropped(self) -> bool {
        matches!(self, Applied::Stale | Applied::Resync)
    }
}

/// Which message a text belongs to: its index among the page's roots and its DOM id.
pub type RootKey = (u32, Option<String>);

static NEXT_EPOCH: AtomicU64 = AtomicU64::new(1);

/// The reassembled text of the page's last message.
#[derive(Debug, Default)]
pub struct ReplyText {
    key: Option<RootKey>,
    rev: Option<u64>,
    text: String,
    utf16_len: u64,
    epoch: u64,
}

impl ReplyText {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn key(&self) -> Option<&RootKey> {
        self.key.as_ref()
    }

    /// Unique among all texts of this process; the text only grows while it stays.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The whole text of `key` at revision `rev` (`None`: a sender without revisions).
    pub fn apply_full(&mut self, key: RootKey, rev: Option<u64>, text: String) -> Applied {
        let same_root = self.key.as_ref() == Some(&key);
        if same_root
            && let (Some(new), Some(held)) = (rev, self.rev)
            && new < held
        {
            return Applied::Stale;
        }
        if same_root && text.len() >= self.text.len() && text.starts_with(self.text.as_str()) {
            if text.len() == self.text.len() {
                self.rev = rev;
                return Applied::Unchanged;
            }
            self.push(&text[self.text.len()..]);
            self.rev = rev;
            return Applied::Appended;
        }
        self.utf16_len = utf16_len(&text);
        self.text = text;
        self.key = Some(key);
        self.rev = rev;
        self.epoch = NEXT_EPOCH.fetch_add(1, Ordering::Relaxed);
        Applied::Replaced
    }

    /// `delta` makes revision `rev` of `key`'s text.
    pub fn apply_delta(&mut self, key: RootKey, rev: u64, delta: &TextDelta) -> Applied {
        let Some(held) = self.rev.filter(|_| self.key.as_ref() == Some(&key)) else {
            return Applied::Resync;
        };
        if rev == held {
            return Applied::Unchanged;
        }
        if rev < held {
            return Applied::Stale;
        }
        if delta.base_rev != held || delta.base_len != self.utf16_len {
            return Applied::Resync;
        }
        self.rev = Some(rev);
        if delta.append.is_empty() {
            return Applied::Unchanged;
        }
        self.push(&delta.append);
        Applied::Appended
    }

    /// Hands the text out (to sit in a snapshot while the report is read) ...
    pub fn lend(&mut self) -> String {
        std::mem::take(&mut self.text)
    }

    /// ... and takes it back.
    pub fn give_back(&mut self, text: String) {
        self.text = text;
    }

    fn push(&mut self, more: &str) {
        self.text.push_str(more);
        self.utf16_len += utf16_len(more);
    }
}

fn utf16_len(s: &str) -> u64 {
    if s.is_ascii() {
        return s.len() as u64;
    }
    s.chars().map(|c| c.len_utf16() as u64).sum()
}

/// The texts of the snapshot's older messages as last sent, by root.
#[derive(Debug, Default)]
pub struct HistoryTexts {
    texts: HashMap<RootKey, String>,
}

impl HistoryTexts {
    pub fn new() -> Self {
        Self::default()
    }

    /// Gives every `held` root among `roots` its text; `false` (nothing changed) when one
    /// is not held here (the content script then sends them all again).
    pub fn fill(&mut self, roots: &mut [RootSnapshot]) -> bool {
        if roots.iter().any(|r| r.held && !self.texts.contains_key(&(r.index, r.dom_id.clone()))) {
            return false;
        }
        for root in roots.iter_mut().filter(|r| r.held) {
            root.text = self.texts.get(&(root.index, root.dom_id.clone())).cloned().unwrap_or_default();
            root.held = false;
        }
        true
    }

    /// Keeps the texts of `roots` (and only theirs) for the next report, taking them out.
    pub fn keep(&mut self, roots: &mut [RootSnapshot]) {
        self.texts = roots.iter_mut().map(|r| ((r.index, r.dom_id.clone()), std::mem::take(&mut r.text))).collect();
    }
}
