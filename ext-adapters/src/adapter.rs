//! The `SiteAdapter` trait and lookup of the adapter for a page.

use crate::composer::ComposerStrategy;
use crate::interpret::{interpret_with, BusyReason, PageView};
use crate::messages::{PageSnapshot, RootSnapshot};
use crate::selectors::SelectorSet;
use crate::site::{ConversationIdentity, Site};
use crate::sites::{ChatGpt, DeepSeek, ZAi};
use crate::url::{PageUrl, UrlError};
use ext_core::fold::Role;
use std::fmt;

/// Which binding migration (spec §5.3) a site supports; see [`crate::migration`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MigrationRule {
    /// Bindings never move between conversation keys (DeepSeek).
    Never,
    /// Root-keyed bindings move once to the first `/c/<id>` (z.ai).
    NewChatRootToConversation,
    /// `pending` bindings on the root move to the Project or conversation, same tab only
    /// (ChatGPT).
    PendingToScoped,
}

/// Everything site-specific, as data and pure functions.
pub trait SiteAdapter: Sync {
    fn site(&self) -> Site;
    /// Whether this adapter handles pages on `host` (lower-case, no port).
    fn handles_host(&self, host: &str) -> bool;
    /// Conversation identity of a page of this site.
    fn identity(&self, url: &PageUrl) -> ConversationIdentity;
    /// What the content script queries.
    fn selectors(&self) -> SelectorSet;
    /// User, assistant, or neither (a root the selectors caught that is no message).
    /// By default a root is whatever its user or assistant probe says, user first.
    fn classify_root(&self, root: &RootSnapshot) -> Option<Role> {
        if root.has_probe(crate::selectors::PROBE_USER) {
            Some(Role::User)
        } else if root.has_probe(crate::selectors::PROBE_ASSISTANT) {
            Some(Role::Assistant)
        } else {
            None
        }
    }
    /// Why the reply in `root` is not finished yet, or `None` when it is.
    fn reply_busy(&self, root: &RootSnapshot) -> Option<BusyReason>;
    fn composer(&self) -> ComposerStrategy;
    fn migration_rule(&self) -> MigrationRule;
    /// Whether the JSON tool bridge runs on this site (z.ai, DeepSeek) or only continuity
    /// (ChatGPT, which speaks MCP natively).
    fn json_bridge(&self) -> bool;

    /// Roles, latest reply and whether it is finished, from a snapshot of this site.
    fn interpret<'a>(&self, snapshot: &'a PageSnapshot) -> Result<PageView<'a>, IdentityError> {
        interpret_with(self, snapshot)
    }
}

/// Why no conversation identity could be derived from a URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdentityError {
    Url(UrlError),
    /// An https page on a host no adapter handles.
    UnsupportedSite { host: String },
}

impl fmt::Display for IdentityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IdentityError::Url(e) => e.fmt(f),
            IdentityError::UnsupportedSite { host } => write!(f, "no site adapter for host {host:?}"),
        }
    }
}

impl std::error::Error for IdentityError {}

static ADAPTERS: [&dyn SiteAdapter; 3] = [&ZAi, &DeepSeek, &ChatGpt];

pub fn adapter_for_site(site: Site) -> &'static dyn SiteAdapter {
    match site {
        Site::ZAi => &ZAi,
        Site::DeepSeek => &DeepSeek,
        Site::ChatGpt => &ChatGpt,
    }
}

/// The adapter for a page URL, with the URL split.
pub fn adapter_for_url(url: &str) -> Result<(&'static dyn SiteAdapter, PageUrl), IdentityError> {
    let page = PageUrl::parse(url).map_err(IdentityError::Url)?;
    let adapter = ADAPTERS
        .iter()
        .copied()
        .find(|a| a.handles_host(&page.host))
        .ok_or_else(|| IdentityError::UnsupportedSite { host: page.host.clone() })?;
    Ok((adapter, page))
}

/// Conversation identity of any supported page.
pub fn identify(url: &str) -> Result<ConversationIdentity, IdentityError> {
    let (adapter, page) = adapter_for_url(url)?;
    Ok(adapter.identity(&page))
}

/// [`SiteAdapter::interpret`] for a snapshot of whichever site its URL belongs to.
pub fn interpret(snapshot: &PageSnapshot) -> Result<PageView<'_>, IdentityError> {
    let (adapter, _) = adapter_for_url(&snapshot.url)?;
    interpret_with(adapter, snapshot)
}
