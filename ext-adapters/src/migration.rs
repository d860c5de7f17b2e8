//! Binding migration when a new chat becomes a persisted conversation (spec §5.3).
//!
//! A binding made on a site's new-chat page is keyed by the root URL. When the site gives the
//! chat its own URL, the binding should follow it — once, and never drag a binding from one
//! conversation to another:
//!
//! - **z.ai** (`migrateZaiRootConversationState`): on registration of `/c/<id>` by a tab,
//!   when `/c/<id>` has no bindings yet, every binding keyed `https://chat.z.ai` whose tab is
//!   the sender **or** whose recorded tab URL is the z.ai root moves to `/c/<id>`. The root's
//!   conversation-automation flag is carried over (if the target has none) and always
//!   deleted. Because root-keyed rows are gone afterwards, `/c/A` → `/c/B` moves nothing.
//! - **ChatGPT**: `pending` bindings keyed `https://chatgpt.com`, **same tab only**, move to
//!   the Project (`binding_scope:"project"`, key = Project key, `active_conv_key` = the
//!   conversation) or to the plain conversation (`binding_scope:"conversation"`).
//!   *[inferred]* The automation flag follows for plain conversations as on z.ai; Project
//!   automation is keyed by Project id and left alone.
//! - **DeepSeek**: never.
//!
//! This module only plans: it returns the rows to write and the keys to delete, and the
//! service worker persists both together and re-arms progress timers of moved `working` rows.

use crate::adapter::{adapter_for_url, MigrationRule};
use crate::site::{ConversationIdentity, Scope, Site};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// A row of `chrome.storage.local["herdrWakeBindings"]` (spec §5.1). The fields migration
/// reads or writes are typed; all others are carried through untouched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BindingRow {
    pub workspace_id: String,
    #[serde(rename = "convKey")]
    pub conv_key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub site: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binding_scope: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_conv_key: Option<String>,
    #[serde(rename = "tabId", default, skip_serializing_if = "Option::is_none")]
    pub tab_id: Option<i64>,
    #[serde(rename = "tabUrl", default, skip_serializing_if = "Option::is_none")]
    pub tab_url: Option<String>,
    #[serde(default)]
    pub created_at: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seen_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

/// Storage key of a binding: `` `${convKey}::${workspace_id}` ``.
pub fn binding_key(conv_key: &str, workspace_id: &str) -> String {
    format!("{conv_key}::{workspace_id}")
}

/// `"h2w:" + hex(31-hash(workspace_id \0 convKey \0 created_at))`: the JavaScript string
/// hash (`h = h*31 + code unit`, 32-bit wrapping) over UTF-16 code units, printed as an
/// unsigned 32-bit hex number *[inferred]*.
pub fn binding_revision(workspace_id: &str, conv_key: &str, created_at: &Value) -> String {
    let created = match created_at {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Null => "null".to_owned(),
        _ => String::new(),
    };
    let text = format!("{workspace_id}\0{conv_key}\0{created}");
    let hash = text.encode_utf16().fold(0u32, |h, unit| h.wrapping_mul(31).wrapping_add(u32::from(unit)));
    format!("h2w:{hash:x}")
}

/// What the service worker knows when a tab registers a conversation key.
#[derive(Debug, Clone, Copy)]
pub struct MigrationInput<'a> {
    /// `location.href` of the registering tab.
    pub target_url: &'a str,
    pub sender_tab_id: Option<i64>,
    /// All bindings, by storage key.
    pub bindings: &'a BTreeMap<String, BindingRow>,
    /// `herdrConversationAutomation`: conversation key → Auto on.
    pub conversation_automation: &'a BTreeMap<String, bool>,
    pub now_ms: u64,
}

/// One binding moving to a new key.
#[derive(Debug, Clone, PartialEq)]
pub struct MovedBinding {
    pub old_key: String,
    pub new_key: String,
    pub row: BindingRow,
}

/// Writes to persist together.
#[derive(Debug, Clone, PartialEq)]
pub struct MigrationPlan {
    pub moved: Vec<MovedBinding>,
    /// Conversation keys whose automation flag becomes `true`.
    pub automation_set: Vec<String>,
    /// Conversation keys whose automation entry is removed.
    pub automation_delete: Vec<String>,
}

/// Why nothing migrates (each is a normal outcome, not an error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoMigration {
    /// Not a supported page.
    UnknownPage,
    /// The site never migrates bindings (DeepSeek).
    SiteNeverMigrates,
    /// The target is not a conversation this rule moves bindings to.
    NotAConversation,
    /// Without the sender tab the same-tab condition cannot be checked.
    NoSenderTab,
    /// The target already has bindings; migration never merges into them.
    TargetAlreadyBound,
    /// No root-keyed binding qualifies.
    NoCandidates,
}

/// Plans the migration for a tab registering `target_url`; see the module doc for the rules.
pub fn plan_migration(input: &MigrationInput<'_>) -> Result<MigrationPlan, NoMigration> {
    let (adapter, _) = adapter_for_url(input.target_url).map_err(|_| NoMigration::UnknownPage)?;
    let target = crate::adapter::identify(input.target_url).map_err(|_| NoMigration::UnknownPage)?;
    match adapter.migration_rule() {
        MigrationRule::Never => Err(NoMigration::SiteNeverMigrates),
        MigrationRule::NewChatRootToConversation => plan_zai(input, &target),
        MigrationRule::PendingToScoped => plan_chatgpt(input, &target),
    }
}

fn has_bindings(bindings: &BTreeMap<String, BindingRow>, conv_key: &str) -> bool {
    bindings.values().any(|row| row.conv_key == conv_key)
}

fn plan_zai(input: &MigrationInput<'_>, target: &ConversationIdentity) -> Result<MigrationPlan, NoMigration> {
    if !matches!(target.scope, Scope::Conversation { .. }) {
        return Err(NoMigration::NotAConversation);
    }
    let tab = input.sender_tab_id.ok_or(NoMigration::NoSenderTab)?;
    if has_bindings(input.bindings, &target.conv_key) {
        return Err(NoMigration::TargetAlreadyBound);
    }
    let root_key = crate::adapter::identify("https://chat.z.ai/").map(|i| i.conv_key).unwrap_or_default();
    let tab_at_root = |url: &Option<String>| {
        url.as_deref()
            .and_then(|u| crate::adapter::identify(u).ok())
            .is_some_and(|i| i.site == Site::ZAi && i.scope == Scope::NewChat)
    };
    let moved: Vec<MovedBinding> = input
        .bindings
        .iter()
        .filter(|(_, row)| row.conv_key == root_key && (row.tab_id == Some(tab) || tab_at_root(&row.tab_url)))
        .map(|(old_key, row)| {
            let mut row = row.clone();
            row.conv_key = target.conv_key.clone();
            row.site = Some(Site::ZAi.name().to_owned());
            move_to_tab(&mut row, input, tab);
            MovedBinding { old_key: old_key.clone(), new_key: binding_key(&target.conv_key, &row.workspace_id), row }
        })
        .collect();
    if moved.is_empty() {
        return Err(NoMigration::NoCandidates);
    }
    Ok(MigrationPlan {
        moved,
        automation_set: carry_automation(input, &root_key, &target.conv_key),
        automation_delete: vec![root_key],
    })
}

fn plan_chatgpt(input: &MigrationInput<'_>, target: &ConversationIdentity) -> Result<MigrationPlan, NoMigration> {
    // (new binding key, scope, project id/key, active conversation)
    let (new_conv_key, scope, project, active) = match &target.scope {
        Scope::Conversation { .. } => (target.conv_key.clone(), "conversation", None, None),
        Scope::ProjectConversation { project_id, project_key, .. } => (
            project_key.clone(),
            "project",
            Some((project_id.clone(), project_key.clone())),
            Some(target.conv_key.clone()),
        ),
        Scope::ProjectHome { project_id, project_key } => {
            (project_key.clone(), "project", Some((project_id.clone(), project_key.clone())), None)
        }
        Scope::NewChat | Scope::Other => return Err(NoMigration::NotAConversation),
    };
    let tab = input.sender_tab_id.ok_or(NoMigration::NoSenderTab)?;
    if has_bindings(input.bindings, &new_conv_key) {
        return Err(NoMigration::TargetAlreadyBound);
    }
    let root_key = crate::sites::CHATGPT_ORIGIN;
    let moved: Vec<MovedBinding> = input
        .bindings
        .iter()
        .filter(|(_, row)| {
            row.conv_key == root_key && row.binding_scope.as_deref() == Some("pending") && row.tab_id == Some(tab)
        })
        .map(|(old_key, row)| {
            let mut row = row.clone();
            row.conv_key = new_conv_key.clone();
            row.site = Some(Site::ChatGpt.name().to_owned());
            row.binding_scope = Some(scope.to_owned());
            if let Some((id, key)) = &project {
                row.project_id = Some(id.clone());
                row.project_key = Some(key.clone());
            }
            if active.is_some() {
                row.active_conv_key = active.clone();
            }
            move_to_tab(&mut row, input, tab);
            MovedBinding { old_key: old_key.clone(), new_key: binding_key(&new_conv_key, &row.workspace_id), row }
        })
        .collect();
    if moved.is_empty() {
        return Err(NoMigration::NoCandidates);
    }
    let automation_set =
        if project.is_none() { carry_automation(input, root_key, &new_conv_key) } else { Vec::new() };
    Ok(MigrationPlan { moved, automation_set, automation_delete: vec![root_key.to_owned()] })
}

fn move_to_tab(row: &mut BindingRow, input: &MigrationInput<'_>, tab: i64) {
    row.tab_id = Some(tab);
    row.tab_url = Some(input.target_url.to_owned());
    row.last_seen_at = Some(input.now_ms);
    row.revision = Some(binding_revision(&row.workspace_id, &row.conv_key, &row.created_at));
}

fn carry_automation(input: &MigrationInput<'_>, root_key: &str, target_key: &str) -> Vec<String> {
    let root_on = input.conversation_automation.get(root_key) == Some(&true);
    let target_set = input.conversation_automation.contains_key(target_key);
    if root_on && !target_set { vec![target_key.to_owned()] } else { Vec::new() }
}
