//! Reading a page snapshot: message roles, the latest reply, and whether it is finished.

use crate::adapter::{adapter_for_url, IdentityError, SiteAdapter};
use crate::messages::{PageSnapshot, RootSnapshot};
use crate::site::ConversationIdentity;
use ext_core::engine::Event;
use ext_core::fold::{fold_decision, FoldLabel, Role};
use ext_core::journal::{Role as TranscriptRole, TranscriptEntry};

/// One chat message the adapter recognised.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry<'a> {
    /// Position among all message roots on the page (for `fold` actions).
    pub root_index: u32,
    pub dom_id: Option<&'a str>,
    pub role: Role,
    pub text: &'a str,
    pub text_truncated: bool,
    pub folded: Option<FoldLabel>,
}

/// Why a reply does not count as finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BusyReason {
    /// Nothing rendered yet.
    Empty,
    /// The site marks the message as streaming (ChatGPT `data-is-streaming="true"`).
    Streaming,
    /// A status text such as "thinking..." is showing (z.ai); the matched pattern.
    StatusText(&'static str),
    /// A typing cursor / loading indicator is inside the message (DeepSeek).
    Cursor,
}

/// The newest assistant message.
#[derive(Debug, Clone, PartialEq)]
pub struct LatestReply<'a> {
    pub entry: Entry<'a>,
    /// `None` when finished.
    pub busy: Option<BusyReason>,
}

impl LatestReply<'_> {
    pub fn finished(&self) -> bool {
        self.busy.is_none()
    }
}

/// A snapshot as the service worker understands it.
#[derive(Debug, Clone, PartialEq)]
pub struct PageView<'a> {
    pub identity: ConversationIdentity,
    /// Recognised messages, in document order (roots that are neither role are skipped).
    pub entries: Vec<Entry<'a>>,
    /// The newest assistant message in the snapshot, even if a user message follows it.
    /// `None` for a history page (a snapshot that ends before the page's last root).
    pub latest_reply: Option<LatestReply<'a>>,
    /// The newest message is the user's: a reply is expected but has not started.
    pub awaiting_reply: bool,
    /// The snapshot is a page of older roots (`request_snapshot {before_index}`).
    pub history_page: bool,
}

impl Entry<'_> {
    /// Id the engine knows this message by: the DOM id, else `root-<index>` (DeepSeek roots
    /// have no id; indexes only grow as a conversation does).
    pub fn message_id(&self) -> String {
        self.dom_id.map_or_else(|| format!("root-{}", self.root_index), str::to_owned)
    }
}

impl PageView<'_> {
    /// The engine's `ReplySnapshot` event for the latest reply, if there is one.
    pub fn reply_snapshot_event(&self, now_ms: u64) -> Option<Event> {
        let reply = self.latest_reply.as_ref()?;
        Some(Event::ReplySnapshot {
            message_id: reply.entry.message_id(),
            text: reply.entry.text.to_owned(),
            done: reply.finished(),
            now_ms,
        })
    }

    /// The messages as the reload-recovery rule reads them (spec §5.4).
    pub fn transcript(&self) -> Vec<TranscriptEntry> {
        self.entries
            .iter()
            .map(|e| TranscriptEntry {
                role: match e.role {
                    Role::User => TranscriptRole::User,
                    Role::Assistant => TranscriptRole::Assistant,
                },
                text: e.text.to_owned(),
            })
            .collect()
    }

    /// Messages that should be folded and are not yet: `(root_index, dom_id, label)`.
    /// The latest reply is only folded once finished; older replies are finished by
    /// definition.
    pub fn pending_folds(&self) -> Vec<(u32, Option<String>, FoldLabel)> {
        self.pending_folds_when(self.latest_reply.as_ref().is_some_and(LatestReply::finished))
    }

    /// [`Self::pending_folds`] with the caller's word on whether the latest reply is
    /// finished (the worker's: the page shows it finished and its text settled). A reply
    /// still streaming is not parsed for folding at every poll.
    pub fn pending_folds_when(&self, latest_finished: bool) -> Vec<(u32, Option<String>, FoldLabel)> {
        let latest = self.latest_reply.as_ref().map(|r| (r.entry.root_index, latest_finished));
        self.entries
            .iter()
            .filter(|e| e.folded.is_none())
            .filter_map(|e| {
                let finished = match latest {
                    Some((index, finished)) if index == e.root_index => finished,
                    _ => true,
                };
                fold_decision(e.role, e.text, finished).map(|label| (e.root_index, e.dom_id.map(str::to_owned), label))
            })
            .collect()
    }
}

pub(crate) fn interpret_with<'a, A: SiteAdapter + ?Sized>(
    adapter: &A,
    snapshot: &'a PageSnapshot,
) -> Result<PageView<'a>, IdentityError> {
    let (owner, page) = adapter_for_url(&snapshot.url)?;
    if owner.site() != adapter.site() {
        return Err(IdentityError::UnsupportedSite { host: page.host });
    }
    let identity = adapter.identity(&page);
    let mut entries = Vec::with_capacity(snapshot.roots.len());
    let mut latest: Option<(usize, &RootSnapshot)> = None;
    for root in &snapshot.roots {
        let Some(role) = adapter.classify_root(root) else { continue };
        if role == Role::Assistant {
            latest = Some((entries.len(), root));
        }
        entries.push(Entry {
            root_index: root.index,
            dom_id: root.dom_id.as_deref(),
            role,
            text: &root.text,
            text_truncated: root.text_truncated,
            folded: root.folded,
        });
    }
    let history_page = snapshot.roots.last().is_some_and(|r| r.index.saturating_add(1) < snapshot.total_roots);
    let latest = latest.filter(|_| !history_page);
    let latest_reply = latest.map(|(i, root)| LatestReply {
        entry: entries[i].clone(),
        busy: if root.text.trim().is_empty() { Some(BusyReason::Empty) } else { adapter.reply_busy(root) },
    });
    let awaiting_reply = !history_page && entries.last().is_some_and(|e| e.role == Role::User);
    Ok(PageView { identity, entries, latest_reply, awaiting_reply, history_page })
}
