//! Bindings between a chat conversation and the work it follows (spec/extension.md §5.1, §5.3).
//!
//! A binding joins one conversation scope to one workspace; a conversation may have several.
//! Which page is which scope is ext-adapters' job (URL → identity); the shell turns that
//! identity into a [`ConvTarget`] and this module keeps the state and its rules:
//!
//! - a plain conversation (`/c/<id>`) is bound by its own key;
//! - a ChatGPT Project is bound by its Project key and follows the Project's active
//!   conversation (`active_conv_key`);
//! - a binding made on a site's new-chat page is *pending*: keyed by the site root, it moves
//!   once to the first conversation the same tab lands on (on z.ai also any tab, while the
//!   row's recorded tab URL is the root), and never afterwards.
//!
//! Auto (automatic wakes) is a per-conversation flag, off unless switched on.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// The conversation scope of a page, as the shell derives it from ext-adapters' identity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "scope", rename_all = "snake_case")]
pub enum ConvTarget {
    /// A persisted conversation (`…/c/<id>`, or a DeepSeek chat).
    Conversation { site: String, conv_key: String },
    /// A ChatGPT Project; `active_conv_key` is the Project conversation the page shows, if any.
    Project { site: String, project_id: String, project_key: String, active_conv_key: Option<String> },
    /// A site's new-chat page (`root_key` = the site root) on a site whose new chats get
    /// their own URL after the first message.
    PendingRoot { site: String, root_key: String },
}

impl ConvTarget {
    /// The key bindings of this scope are stored under.
    pub fn binding_conv_key(&self) -> &str {
        match self {
            ConvTarget::Conversation { conv_key, .. } => conv_key,
            ConvTarget::Project { project_key, .. } => project_key,
            ConvTarget::PendingRoot { root_key, .. } => root_key,
        }
    }

    pub fn site(&self) -> &str {
        match self {
            ConvTarget::Conversation { site, .. }
            | ConvTarget::Project { site, .. }
            | ConvTarget::PendingRoot { site, .. } => site,
        }
    }
}

/// What a binding follows: a Herdr workspace, or a managed root when Herdr is absent.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WorkspaceRef {
    Herdr { id: String },
    Root { path: String },
}

impl WorkspaceRef {
    /// The workspace part of a binding key (`workspace_id` in the reference rows).
    pub fn key(&self) -> String {
        match self {
            WorkspaceRef::Herdr { id } => id.clone(),
            WorkspaceRef::Root { path } => format!("root:{path}"),
        }
    }

    pub fn herdr_id(&self) -> Option<&str> {
        match self {
            WorkspaceRef::Herdr { id } => Some(id),
            WorkspaceRef::Root { .. } => None,
        }
    }

    /// Checks and normalises the reference (trailing slashes of a root are dropped).
    fn normalised(self) -> Result<Self, BindError> {
        match self {
            WorkspaceRef::Herdr { id } if !id.trim().is_empty() => Ok(WorkspaceRef::Herdr { id: id.trim().to_owned() }),
            WorkspaceRef::Root { path } if path.starts_with('/') => Ok(WorkspaceRef::Root { path: normalise_path(&path) }),
            WorkspaceRef::Root { path } if !path.trim().is_empty() => Err(BindError::RootNotAbsolute(path)),
            _ => Err(BindError::WorkspaceRequired),
        }
    }
}

/// The site name whose root bindings also follow the first tab to land on a conversation
/// when their recorded tab URL is the root (spec §5.3; ChatGPT's rule is same tab only).
const ZAI_SITE: &str = "z.ai";

/// A tab URL as a conversation key: without fragment, query and trailing slashes (the
/// browser has already normalised scheme and host).
fn page_key(url: &str) -> &str {
    let end = url.find(['?', '#']).unwrap_or(url.len());
    url[..end].trim_end_matches('/')
}

/// `/a/b/` → `/a/b`; `/` stays `/`.
pub fn normalise_path(path: &str) -> String {
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() { "/".to_owned() } else { trimmed.to_owned() }
}

/// True when `path` is `root` or below it (by whole path components).
pub fn path_within(root: &str, path: &str) -> bool {
    let (root, path) = (normalise_path(root), normalise_path(path));
    root == "/" && path.starts_with('/') || path == root || path.strip_prefix(&root).is_some_and(|rest| rest.starts_with('/'))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BindingScope {
    Conversation,
    Project,
    Pending,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BindingStatus {
    #[default]
    Idle,
    Working,
}

/// The last settle a binding acted on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastSettle {
    pub seq: String,
    pub at_ms: u64,
}

/// Progress-tick bookkeeping of one working round (see `progress`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgressState {
    /// Seeded when the round is armed, then the time of the last progress wake.
    pub last_sent_at_ms: u64,
    /// Whether a progress wake went out in this working round.
    pub sent_this_round: bool,
    /// Fingerprint of the output last reported (or seen at arm time).
    pub last_fingerprint: String,
    /// When the next tick is due.
    pub next_tick_at_ms: u64,
}

/// One binding: a conversation scope × a workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Binding {
    /// `` `${conv_key}::${workspace key}` ``.
    pub key: String,
    pub site: String,
    /// Conversation key, Project key, or the site root for a pending binding.
    pub conv_key: String,
    pub scope: BindingScope,
    pub project_id: Option<String>,
    /// Project bindings: the conversation wakes go to.
    pub active_conv_key: Option<String>,
    pub workspace: WorkspaceRef,
    pub workspace_label: Option<String>,
    pub tab_id: Option<i64>,
    pub tab_url: Option<String>,
    pub created_at_ms: u64,
    pub last_seen_at_ms: u64,
    pub status: BindingStatus,
    pub working_panes: BTreeSet<String>,
    pub last_settle: Option<LastSettle>,
    /// Recent settle keys and exec sessions acted on, so a replay never wakes twice.
    pub seen: Vec<String>,
    pub progress: ProgressState,
}

/// How many settle/exec keys a binding remembers for duplicate detection.
pub const SEEN_KEYS_KEPT: usize = 64;

impl Binding {
    /// The conversation a wake for this binding goes to.
    pub fn target_conv_key(&self) -> &str {
        self.active_conv_key.as_deref().unwrap_or(&self.conv_key)
    }

    /// Records `key`; false when it was already seen.
    pub fn remember(&mut self, key: &str) -> bool {
        if self.seen.iter().any(|k| k == key) {
            return false;
        }
        self.seen.push(key.to_owned());
        if self.seen.len() > SEEN_KEYS_KEPT {
            let excess = self.seen.len() - SEEN_KEYS_KEPT;
            self.seen.drain(..excess);
        }
        true
    }

    /// Whether the page identified by `target` is in this binding's scope.
    fn shown_by(&self, target: &ConvTarget) -> bool {
        self.conv_key == target.binding_conv_key()
    }

    /// Whether the page is where this binding's wakes go: for a Project binding, only its
    /// active conversation (or the Project page while it has none), not any Project chat.
    fn delivered_to(&self, target: &ConvTarget) -> bool {
        let active_matches = match target {
            ConvTarget::Project { active_conv_key, .. } => {
                self.active_conv_key.is_none() || self.active_conv_key == *active_conv_key
            }
            _ => true,
        };
        self.shown_by(target) && active_matches
    }
}

/// A binding with its conversation's Auto flag, as the popup lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BindingView {
    pub binding: Binding,
    pub auto: bool,
}

/// Refusals of binding operations; `code()` is the wire name (spec §5.1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "error", rename_all = "snake_case")]
pub enum BindError {
    AlreadyBound { key: String },
    WorkspaceRequired,
    RootNotAbsolute(String),
    ConversationUnavailable,
    NotFound { conv_key: String },
}

impl BindError {
    pub fn code(&self) -> &'static str {
        match self {
            BindError::AlreadyBound { .. } => "already-bound",
            BindError::WorkspaceRequired | BindError::RootNotAbsolute(_) => "workspace_required",
            BindError::ConversationUnavailable => "conversation-unavailable",
            BindError::NotFound { .. } => "not-found",
        }
    }
}

impl fmt::Display for BindError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BindError::AlreadyBound { key } => write!(f, "already-bound: {key} exists"),
            BindError::WorkspaceRequired => write!(f, "workspace_required: name a Herdr workspace or a managed root"),
            BindError::RootNotAbsolute(p) => write!(f, "workspace_required: root {p:?} is not an absolute path"),
            BindError::ConversationUnavailable => write!(f, "conversation-unavailable: this page has no conversation key"),
            BindError::NotFound { conv_key } => write!(f, "not-found: no binding for {conv_key}"),
        }
    }
}

impl std::error::Error for BindError {}

/// A tab as the shell knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TabRef {
    pub id: i64,
    pub url: String,
}

/// A pending binding that moved (old key → new key).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Moved {
    pub old_key: String,
    pub new_key: String,
}

/// All bindings and Auto flags. Plain serde data: the shell persists it as a whole.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bindings {
    rows: BTreeMap<String, Binding>,
    /// Conversation (binding) key → Auto on.
    auto: BTreeMap<String, bool>,
}

impl Bindings {
    pub fn get(&self, key: &str) -> Option<&Binding> {
        self.rows.get(key)
    }

    pub fn get_mut(&mut self, key: &str) -> Option<&mut Binding> {
        self.rows.get_mut(key)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Binding> {
        self.rows.values()
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Binding> {
        self.rows.values_mut()
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Binds the page's conversation scope to `workspace`. The new binding is idle; the
    /// caller arms it when the workspace is already working.
    pub fn bind(
        &mut self,
        target: &ConvTarget,
        workspace: WorkspaceRef,
        workspace_label: Option<String>,
        tab: Option<TabRef>,
        now_ms: u64,
    ) -> Result<&mut Binding, BindError> {
        let conv_key = target.binding_conv_key().trim();
        if conv_key.is_empty() || target.site().is_empty() {
            return Err(BindError::ConversationUnavailable);
        }
        let workspace = workspace.normalised()?;
        let key = format!("{conv_key}::{}", workspace.key());
        if self.rows.contains_key(&key) {
            return Err(BindError::AlreadyBound { key });
        }
        let (scope, project_id, active_conv_key) = match target {
            ConvTarget::Conversation { .. } => (BindingScope::Conversation, None, None),
            ConvTarget::Project { project_id, active_conv_key, .. } => {
                (BindingScope::Project, Some(project_id.clone()), active_conv_key.clone())
            }
            ConvTarget::PendingRoot { .. } => (BindingScope::Pending, None, None),
        };
        let binding = Binding {
            key: key.clone(),
            site: target.site().to_owned(),
            conv_key: conv_key.to_owned(),
            scope,
            project_id,
            active_conv_key,
            workspace,
            workspace_label: workspace_label.filter(|l| !l.trim().is_empty()),
            tab_id: tab.as_ref().map(|t| t.id),
            tab_url: tab.map(|t| t.url),
            created_at_ms: now_ms,
            last_seen_at_ms: now_ms,
            status: BindingStatus::Idle,
            working_panes: BTreeSet::new(),
            last_settle: None,
            seen: Vec::new(),
            progress: ProgressState::default(),
        };
        Ok(self.rows.entry(key).or_insert(binding))
    }

    /// Removes the bindings of `conv_key` (binding key of the page's scope), or only the one
    /// with `workspace`. The Auto flag goes with the last binding of the conversation.
    pub fn unbind(&mut self, conv_key: &str, workspace: Option<&WorkspaceRef>) -> Result<Vec<Binding>, BindError> {
        let wanted = workspace.map(|w| w.clone().normalised().map(|w| w.key()).unwrap_or_default());
        let keys: Vec<String> = self
            .rows
            .values()
            .filter(|b| b.conv_key == conv_key && wanted.as_ref().is_none_or(|w| *w == b.workspace.key()))
            .map(|b| b.key.clone())
            .collect();
        if keys.is_empty() {
            return Err(BindError::NotFound { conv_key: conv_key.to_owned() });
        }
        let removed = keys.iter().filter_map(|k| self.rows.remove(k)).collect();
        if !self.rows.values().any(|b| b.conv_key == conv_key) {
            self.auto.remove(conv_key);
        }
        Ok(removed)
    }

    /// Switches Auto for a conversation (binding key of its scope).
    pub fn set_auto(&mut self, conv_key: &str, on: bool) {
        if on {
            self.auto.insert(conv_key.to_owned(), true);
        } else {
            self.auto.remove(conv_key);
        }
    }

    /// Auto of a conversation; off unless switched on.
    pub fn auto(&self, conv_key: &str) -> bool {
        self.auto.get(conv_key).copied().unwrap_or(false)
    }

    /// Every binding with its Auto flag, in key order.
    pub fn list(&self) -> Vec<BindingView> {
        self.rows.values().map(|b| BindingView { binding: b.clone(), auto: self.auto(&b.conv_key) }).collect()
    }

    /// The bindings of the page's scope.
    pub fn for_page(&self, target: &ConvTarget) -> Vec<BindingView> {
        self.list().into_iter().filter(|v| v.binding.shown_by(target)).collect()
    }

    /// A tab reports the page it shows (at start and on every URL change). Moves pending
    /// bindings of this tab to the conversation it landed on, lets a Project binding of this
    /// tab follow it to another conversation of the Project, and refreshes tab details.
    pub fn register_page(&mut self, target: &ConvTarget, tab: &TabRef, now_ms: u64) -> Vec<Moved> {
        let moved = self.migrate_pending(target, tab, now_ms);
        if let ConvTarget::Project { project_key, active_conv_key: Some(active), .. } = target {
            self.set_project_active(project_key, active, Some(tab.id), now_ms);
        }
        // A pending binding belongs to the tab it was made in: another tab opening the site's
        // new-chat page must not take it (its first conversation would then inherit it).
        let owns = |b: &Binding| b.scope != BindingScope::Pending || b.tab_id.is_none_or(|t| t == tab.id);
        for b in self.rows.values_mut().filter(|b| b.delivered_to(target) && owns(b)) {
            b.tab_id = Some(tab.id);
            b.tab_url = Some(tab.url.clone());
            b.last_seen_at_ms = now_ms;
        }
        moved
    }

    /// Points the Project bindings of `project_key` at `conv_key`. With `only_tab`, only the
    /// bindings whose tab that is follow (another tab browsing the Project does not steal
    /// them). Returns how many changed.
    pub fn set_project_active(&mut self, project_key: &str, conv_key: &str, only_tab: Option<i64>, now_ms: u64) -> usize {
        let mut changed = 0;
        for b in self.rows.values_mut() {
            let same_tab = only_tab.is_none_or(|t| b.tab_id == Some(t));
            if b.scope == BindingScope::Project && b.conv_key == project_key && same_tab
                && b.active_conv_key.as_deref() != Some(conv_key)
            {
                b.active_conv_key = Some(conv_key.to_owned());
                b.last_seen_at_ms = now_ms;
                changed += 1;
            }
        }
        changed
    }

    /// Pending root bindings move to the conversation or Project the tab landed on, unless
    /// that scope already has bindings (a migration never merges). On ChatGPT only the rows
    /// of this very tab move; on z.ai also a row whose recorded tab URL is still the root
    /// (spec §5.3): a tab restored after a browser restart has a new id, and its binding must
    /// not stay on the root for good. The root's Auto flag carries over when the target has
    /// none, and is removed either way: after this nothing root-keyed is left, so the move
    /// happens once.
    fn migrate_pending(&mut self, target: &ConvTarget, tab: &TabRef, now_ms: u64) -> Vec<Moved> {
        let (scope, project_id, active) = match target {
            ConvTarget::PendingRoot { .. } => return Vec::new(),
            ConvTarget::Conversation { .. } => (BindingScope::Conversation, None, None),
            ConvTarget::Project { project_id, active_conv_key, .. } => {
                (BindingScope::Project, Some(project_id.clone()), active_conv_key.clone())
            }
        };
        let new_conv = target.binding_conv_key().to_owned();
        if self.rows.values().any(|b| b.conv_key == new_conv) {
            return Vec::new();
        }
        let candidates: Vec<String> = self
            .rows
            .values()
            .filter(|b| b.scope == BindingScope::Pending && b.site == target.site())
            .filter(|b| b.tab_id == Some(tab.id) || (b.site == ZAI_SITE && b.tab_url.as_deref().is_some_and(|u| page_key(u) == b.conv_key)))
            .map(|b| b.key.clone())
            .collect();
        let mut moved = Vec::new();
        let mut roots = BTreeSet::new();
        for old_key in candidates {
            let Some(mut b) = self.rows.remove(&old_key) else { continue };
            roots.insert(b.conv_key.clone());
            b.conv_key = new_conv.clone();
            b.scope = scope;
            b.project_id = project_id.clone();
            b.active_conv_key = active.clone();
            b.tab_id = Some(tab.id);
            b.tab_url = Some(tab.url.clone());
            b.last_seen_at_ms = now_ms;
            b.key = format!("{new_conv}::{}", b.workspace.key());
            moved.push(Moved { old_key, new_key: b.key.clone() });
            self.rows.insert(b.key.clone(), b);
        }
        for root in roots {
            if self.auto.remove(&root) == Some(true) && !self.auto.contains_key(&new_conv) {
                self.auto.insert(new_conv.clone(), true);
            }
        }
        moved
    }

    /// Moves every binding of `from` (binding key) to a plain conversation `to` (handoff on
    /// sites without Projects). Refuses when `to` already has bindings. Auto follows.
    pub fn move_conversation(&mut self, from: &str, to: &ConvTarget, now_ms: u64) -> Result<Vec<Moved>, BindError> {
        let to_key = to.binding_conv_key().to_owned();
        if let Some(existing) = self.rows.values().find(|b| b.conv_key == to_key) {
            return Err(BindError::AlreadyBound { key: existing.key.clone() });
        }
        let keys: Vec<String> = self.rows.values().filter(|b| b.conv_key == from).map(|b| b.key.clone()).collect();
        if keys.is_empty() {
            return Err(BindError::NotFound { conv_key: from.to_owned() });
        }
        let mut moved = Vec::new();
        for old_key in keys {
            let Some(mut b) = self.rows.remove(&old_key) else { continue };
            b.conv_key = to_key.clone();
            b.site = to.site().to_owned();
            b.scope = BindingScope::Conversation;
            b.project_id = None;
            b.active_conv_key = None;
            b.last_seen_at_ms = now_ms;
            b.key = format!("{to_key}::{}", b.workspace.key());
            moved.push(Moved { old_key, new_key: b.key.clone() });
            self.rows.insert(b.key.clone(), b);
        }
        if self.auto.remove(from) == Some(true) {
            self.auto.insert(to_key, true);
        }
        Ok(moved)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conv(key: &str) -> ConvTarget {
        ConvTarget::Conversation { site: "chatgpt".into(), conv_key: key.into() }
    }
    fn zai(key: &str) -> ConvTarget {
        ConvTarget::Conversation { site: "z.ai".into(), conv_key: key.into() }
    }
    fn root(site: &str, key: &str) -> ConvTarget {
        ConvTarget::PendingRoot { site: site.into(), root_key: key.into() }
    }
    fn project(active: Option<&str>) -> ConvTarget {
        ConvTarget::Project {
            site: "chatgpt".into(),
            project_id: "g-p-1".into(),
            project_key: "https://chatgpt.com/g/g-p-1".into(),
            active_conv_key: active.map(Into::into),
        }
    }
    fn ws(id: &str) -> WorkspaceRef {
        WorkspaceRef::Herdr { id: id.into() }
    }
    fn tab(id: i64, url: &str) -> Option<TabRef> {
        Some(TabRef { id, url: url.into() })
    }

    #[test]
    fn bind_list_and_auto_default_off() {
        let mut b = Bindings::default();
        b.bind(&conv("https://chatgpt.com/c/A"), ws("w1"), Some("alpha".into()), tab(3, "u"), 10).unwrap();
        b.bind(&conv("https://chatgpt.com/c/A"), ws("w2"), None, None, 11).unwrap();
        let list = b.list();
        assert_eq!(list.len(), 2, "several workspaces per conversation");
        assert!(list.iter().all(|v| !v.auto), "Auto is off by default");
        assert_eq!(list[0].binding.key, "https://chatgpt.com/c/A::w1");
        assert_eq!(list[0].binding.status, BindingStatus::Idle);
        b.set_auto("https://chatgpt.com/c/A", true);
        assert!(b.list().iter().all(|v| v.auto));
        b.set_auto("https://chatgpt.com/c/A", false);
        assert!(!b.auto("https://chatgpt.com/c/A"));
    }

    #[test]
    fn bind_refusals_have_their_codes() {
        let mut b = Bindings::default();
        b.bind(&conv("k"), ws("w1"), None, None, 0).unwrap();
        let dup = b.bind(&conv("k"), ws(" w1 "), None, None, 0).unwrap_err();
        assert_eq!(dup.code(), "already-bound");
        assert_eq!(b.bind(&conv("k"), ws("  "), None, None, 0).unwrap_err().code(), "workspace_required");
        let rel = b.bind(&conv("k"), WorkspaceRef::Root { path: "src/a".into() }, None, None, 0).unwrap_err();
        assert_eq!(rel.code(), "workspace_required");
        assert!(rel.to_string().contains("absolute"), "{rel}");
        assert_eq!(b.bind(&conv(""), ws("w1"), None, None, 0).unwrap_err().code(), "conversation-unavailable");
        assert_eq!(b.unbind("nope", None).unwrap_err().code(), "not-found");
    }

    #[test]
    fn root_bindings_are_normalised_and_keyed() {
        let mut b = Bindings::default();
        let row = b.bind(&conv("k"), WorkspaceRef::Root { path: "/src/a//".into() }, None, None, 0).unwrap();
        assert_eq!(row.key, "k::root:/src/a");
        assert!(path_within("/src/a", "/src/a/sub/x"));
        assert!(path_within("/src/a/", "/src/a"));
        assert!(!path_within("/src/a", "/src/ab"));
        assert!(!path_within("/src/a", "/src"));
        assert!(path_within("/", "/anything"));
    }

    #[test]
    fn unbind_one_workspace_or_all_and_auto_goes_with_the_last() {
        let mut b = Bindings::default();
        b.bind(&conv("k"), ws("w1"), None, None, 0).unwrap();
        b.bind(&conv("k"), ws("w2"), None, None, 0).unwrap();
        b.set_auto("k", true);
        assert_eq!(b.unbind("k", Some(&ws("w1"))).unwrap().len(), 1);
        assert!(b.auto("k"), "still bound to w2");
        assert_eq!(b.unbind("k", Some(&ws("w1"))).unwrap_err().code(), "not-found");
        assert_eq!(b.unbind("k", None).unwrap().len(), 1);
        assert!(b.is_empty());
        assert!(!b.auto("k"), "a later bind starts with Auto off again");
    }

    #[test]
    fn pending_root_binding_moves_once_to_the_conversation_the_same_tab_lands_on() {
        let mut b = Bindings::default();
        b.bind(&root("z.ai", "https://chat.z.ai"), ws("w1"), None, tab(7, "https://chat.z.ai/"), 1).unwrap();
        b.set_auto("https://chat.z.ai", true);
        let moved = b.register_page(&zai("https://chat.z.ai/c/A"), &TabRef { id: 7, url: "https://chat.z.ai/c/A".into() }, 3);
        assert_eq!(moved, vec![Moved { old_key: "https://chat.z.ai::w1".into(), new_key: "https://chat.z.ai/c/A::w1".into() }]);
        let row = b.get("https://chat.z.ai/c/A::w1").unwrap();
        assert_eq!((row.scope, row.last_seen_at_ms, row.tab_url.as_deref()), (BindingScope::Conversation, 3, Some("https://chat.z.ai/c/A")));
        assert!(b.auto("https://chat.z.ai/c/A"), "Auto carried over");
        assert!(!b.auto("https://chat.z.ai"), "root flag removed");
        // The same tab moving on to another conversation drags nothing along.
        assert!(b.register_page(&zai("https://chat.z.ai/c/B"), &TabRef { id: 7, url: "b".into() }, 4).is_empty());
        assert!(b.get("https://chat.z.ai/c/A::w1").is_some());
        assert!(b.get("https://chat.z.ai/c/B::w1").is_none());
    }

    #[test]
    fn zai_root_binding_recorded_at_the_root_moves_with_the_tab_that_lands_first() {
        // Spec §5.3 step 2: a root row whose tab is the sender *or* whose tab URL is the z.ai
        // root. After a browser restart the bound tab comes back under a new id; without the
        // second branch its binding would stay on the root for good.
        let mut b = Bindings::default();
        b.bind(&root("z.ai", "https://chat.z.ai"), ws("w1"), None, tab(7, "https://chat.z.ai/"), 1).unwrap();
        // Another tab on the new-chat page does not take the row's tab over…
        b.register_page(&root("z.ai", "https://chat.z.ai"), &TabRef { id: 12, url: "https://chat.z.ai/".into() }, 2);
        assert_eq!(b.get("https://chat.z.ai::w1").unwrap().tab_id, Some(7));
        // …but whichever tab lands on a new conversation first takes the row, as the rule says.
        let landed = TabRef { id: 12, url: "https://chat.z.ai/c/A".into() };
        assert_eq!(b.register_page(&zai("https://chat.z.ai/c/A"), &landed, 3).len(), 1);
        let row = b.get("https://chat.z.ai/c/A::w1").unwrap();
        assert_eq!((row.tab_id, row.tab_url.as_deref(), row.last_seen_at_ms), (Some(12), Some("https://chat.z.ai/c/A"), 3));
        assert!(b.get("https://chat.z.ai::w1").is_none());
    }

    #[test]
    fn a_root_row_whose_tab_left_the_root_is_only_taken_by_that_tab() {
        let mut b = Bindings::default();
        b.bind(&root("z.ai", "https://chat.z.ai"), ws("w1"), None, tab(7, "https://chat.z.ai/c/Bound"), 1).unwrap();
        assert!(b.register_page(&zai("https://chat.z.ai/c/X"), &TabRef { id: 8, url: "https://chat.z.ai/c/X".into() }, 2).is_empty());
        assert_eq!(b.register_page(&zai("https://chat.z.ai/c/A"), &TabRef { id: 7, url: "https://chat.z.ai/c/A".into() }, 3).len(), 1);
    }

    #[test]
    fn chatgpt_pending_rows_move_with_their_own_tab_only_even_when_recorded_at_the_root() {
        let mut b = Bindings::default();
        b.bind(&root("chatgpt", "https://chatgpt.com"), ws("w1"), None, tab(5, "https://chatgpt.com/"), 1).unwrap();
        assert!(b.register_page(&conv("https://chatgpt.com/c/X"), &TabRef { id: 6, url: "https://chatgpt.com/c/X".into() }, 2).is_empty());
        assert_eq!(b.register_page(&conv("https://chatgpt.com/c/A"), &TabRef { id: 5, url: "https://chatgpt.com/c/A".into() }, 3).len(), 1);
    }

    #[test]
    fn migration_never_merges_into_a_bound_conversation_nor_crosses_sites() {
        let mut b = Bindings::default();
        b.bind(&root("z.ai", "https://chat.z.ai"), ws("w1"), None, tab(7, "r"), 1).unwrap();
        b.bind(&zai("https://chat.z.ai/c/A"), ws("w2"), None, None, 1).unwrap();
        assert!(b.register_page(&zai("https://chat.z.ai/c/A"), &TabRef { id: 7, url: "a".into() }, 2).is_empty());
        assert!(b.register_page(&conv("https://chatgpt.com/c/Q"), &TabRef { id: 7, url: "q".into() }, 2).is_empty());
        assert!(b.get("https://chat.z.ai::w1").is_some(), "still pending");
    }

    #[test]
    fn chatgpt_pending_moves_into_a_project_and_then_follows_its_active_conversation() {
        let mut b = Bindings::default();
        b.bind(&root("chatgpt", "https://chatgpt.com"), ws("w1"), None, tab(5, "https://chatgpt.com/"), 1).unwrap();
        b.set_auto("https://chatgpt.com", false);
        let landed = project(Some("https://chatgpt.com/g/g-p-1/c/A"));
        let moved = b.register_page(&landed, &TabRef { id: 5, url: "a".into() }, 2);
        assert_eq!(moved[0].new_key, "https://chatgpt.com/g/g-p-1::w1");
        let row = b.get("https://chatgpt.com/g/g-p-1::w1").unwrap();
        assert_eq!(row.scope, BindingScope::Project);
        assert_eq!(row.target_conv_key(), "https://chatgpt.com/g/g-p-1/c/A");
        assert!(!b.auto("https://chatgpt.com/g/g-p-1"), "Auto stays off when it was off");
        // Another tab browsing the Project does not steal the binding…
        b.register_page(&project(Some("https://chatgpt.com/g/g-p-1/c/Z")), &TabRef { id: 9, url: "z".into() }, 3);
        assert_eq!(b.get("https://chatgpt.com/g/g-p-1::w1").unwrap().target_conv_key(), "https://chatgpt.com/g/g-p-1/c/A");
        // …but the bound tab moving to another Project conversation carries it along.
        b.register_page(&project(Some("https://chatgpt.com/g/g-p-1/c/B")), &TabRef { id: 5, url: "b".into() }, 4);
        assert_eq!(b.get("https://chatgpt.com/g/g-p-1::w1").unwrap().target_conv_key(), "https://chatgpt.com/g/g-p-1/c/B");
        assert_eq!(b.set_project_active("https://chatgpt.com/g/g-p-1", "https://chatgpt.com/g/g-p-1/c/C", None, 5), 1);
        assert_eq!(b.for_page(&project(None)).len(), 1);
    }

    #[test]
    fn move_conversation_carries_auto_and_refuses_a_bound_target() {
        let mut b = Bindings::default();
        b.bind(&zai("https://chat.z.ai/c/A"), ws("w1"), None, None, 1).unwrap();
        b.bind(&zai("https://chat.z.ai/c/C"), ws("w9"), None, None, 1).unwrap();
        b.set_auto("https://chat.z.ai/c/A", true);
        assert_eq!(b.move_conversation("https://chat.z.ai/c/A", &zai("https://chat.z.ai/c/C"), 2).unwrap_err().code(), "already-bound");
        let moved = b.move_conversation("https://chat.z.ai/c/A", &zai("https://chat.z.ai/c/B"), 2).unwrap();
        assert_eq!(moved.len(), 1);
        assert!(b.auto("https://chat.z.ai/c/B") && !b.auto("https://chat.z.ai/c/A"));
        assert_eq!(b.move_conversation("https://chat.z.ai/c/A", &zai("x"), 3).unwrap_err().code(), "not-found");
    }

    #[test]
    fn seen_keys_are_bounded_and_detect_replays() {
        let mut b = Bindings::default();
        let row = b.bind(&conv("k"), ws("w1"), None, None, 0).unwrap();
        assert!(row.remember("s1"));
        assert!(!row.remember("s1"));
        for i in 0..SEEN_KEYS_KEPT {
            assert!(row.remember(&format!("x{i}")));
        }
        assert_eq!(row.seen.len(), SEEN_KEYS_KEPT);
        assert!(row.remember("s1"), "the oldest key was forgotten");
    }

    #[test]
    fn state_round_trips_through_serde() {
        let mut b = Bindings::default();
        b.bind(&project(Some("a")), ws("w1"), Some("L".into()), tab(1, "u"), 5).unwrap();
        b.set_auto("https://chatgpt.com/g/g-p-1", true);
        let back: Bindings = serde_json::from_str(&serde_json::to_string(&b).unwrap()).unwrap();
        assert_eq!(back, b);
    }
}
