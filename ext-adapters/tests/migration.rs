//! Binding migration rule of spec §5.3, case by case.

use ext_adapters::migration::{
    binding_key, binding_revision, plan_migration, BindingRow, MigrationInput, MigrationPlan, NoMigration,
};
use serde_json::{json, Value};
use std::collections::BTreeMap;

const ZAI_ROOT: &str = "https://chat.z.ai";
const GPT_ROOT: &str = "https://chatgpt.com";
const PROJECT: &str = "g-p-0123456789abcdef0123456789abcdef";

fn row(conv_key: &str, ws: &str, tab: Option<i64>, tab_url: &str, scope: &str) -> BindingRow {
    serde_json::from_value(json!({
        "workspace_id": ws, "workspace_label": format!("label {ws}"), "convKey": conv_key,
        "binding_scope": scope, "tabId": tab, "tabUrl": tab_url, "created_at": 1_700_000_000_000u64,
        "status": "working", "pane": "p1", "persistence": "explicit"
    }))
    .unwrap()
}

fn store(rows: Vec<BindingRow>) -> BTreeMap<String, BindingRow> {
    rows.into_iter().map(|r| (binding_key(&r.conv_key, &r.workspace_id), r)).collect()
}

fn plan(
    url: &str,
    tab: Option<i64>,
    bindings: &BTreeMap<String, BindingRow>,
    auto: &BTreeMap<String, bool>,
) -> Result<MigrationPlan, NoMigration> {
    plan_migration(&MigrationInput {
        target_url: url,
        sender_tab_id: tab,
        bindings,
        conversation_automation: auto,
        now_ms: 1_800_000_000_000,
    })
}

/// Applies a plan the way the service worker persists it.
fn apply(plan: &MigrationPlan, bindings: &mut BTreeMap<String, BindingRow>, auto: &mut BTreeMap<String, bool>) {
    for m in &plan.moved {
        bindings.remove(&m.old_key);
        bindings.insert(m.new_key.clone(), m.row.clone());
    }
    for k in &plan.automation_set {
        auto.insert(k.clone(), true);
    }
    for k in &plan.automation_delete {
        auto.remove(k);
    }
}

fn no_auto() -> BTreeMap<String, bool> {
    BTreeMap::new()
}

#[test]
fn zai_root_binding_follows_the_same_tab_to_its_new_conversation_once() {
    let mut bindings = store(vec![row(ZAI_ROOT, "w1", Some(7), "https://chat.z.ai/", "conversation")]);
    let mut auto: BTreeMap<String, bool> = [(ZAI_ROOT.to_owned(), true)].into();
    let p = plan("https://chat.z.ai/c/A", Some(7), &bindings, &auto).unwrap();
    assert_eq!(p.moved.len(), 1);
    let m = &p.moved[0];
    assert_eq!((m.old_key.as_str(), m.new_key.as_str()), ("https://chat.z.ai::w1", "https://chat.z.ai/c/A::w1"));
    assert_eq!(m.row.conv_key, "https://chat.z.ai/c/A");
    assert_eq!(m.row.site.as_deref(), Some("z.ai"));
    assert_eq!((m.row.tab_id, m.row.tab_url.as_deref()), (Some(7), Some("https://chat.z.ai/c/A")));
    assert_eq!(m.row.last_seen_at, Some(1_800_000_000_000));
    assert_eq!(m.row.revision, Some(binding_revision("w1", "https://chat.z.ai/c/A", &json!(1_700_000_000_000u64))));
    assert_eq!(m.row.rest["pane"], "p1", "unknown fields travel with the row");
    assert_eq!(p.automation_set, ["https://chat.z.ai/c/A"]);
    assert_eq!(p.automation_delete, [ZAI_ROOT]);

    apply(&p, &mut bindings, &mut auto);
    // At most once: the same tab moving on to /c/B drags nothing.
    assert_eq!(plan("https://chat.z.ai/c/B", Some(7), &bindings, &auto), Err(NoMigration::NoCandidates));
    assert_eq!(auto, [("https://chat.z.ai/c/A".to_owned(), true)].into());
}

#[test]
fn zai_root_binding_of_another_tab_moves_only_if_that_tab_was_at_the_root() {
    let at_root = row(ZAI_ROOT, "w1", Some(3), "https://chat.z.ai/", "conversation");
    let elsewhere = row(ZAI_ROOT, "w2", Some(4), "https://chat.z.ai/c/Z", "conversation");
    let bindings = store(vec![at_root, elsewhere]);
    let p = plan("https://chat.z.ai/c/A", Some(9), &bindings, &no_auto()).unwrap();
    let moved: Vec<_> = p.moved.iter().map(|m| m.row.workspace_id.as_str()).collect();
    assert_eq!(moved, ["w1"]);
    assert!(p.automation_set.is_empty(), "root had no automation flag");
    assert_eq!(p.automation_delete, [ZAI_ROOT], "the root entry is always deleted");
}

#[test]
fn zai_conversation_to_conversation_never_drags_a_binding() {
    let bindings = store(vec![row("https://chat.z.ai/c/A", "w1", Some(7), "https://chat.z.ai/c/A", "conversation")]);
    assert_eq!(plan("https://chat.z.ai/c/B", Some(7), &bindings, &no_auto()), Err(NoMigration::NoCandidates));
}

#[test]
fn zai_target_with_bindings_is_never_merged_into() {
    let bindings = store(vec![
        row(ZAI_ROOT, "w1", Some(7), "https://chat.z.ai/", "conversation"),
        row("https://chat.z.ai/c/A", "w2", Some(8), "https://chat.z.ai/c/A", "conversation"),
    ]);
    assert_eq!(plan("https://chat.z.ai/c/A", Some(7), &bindings, &no_auto()), Err(NoMigration::TargetAlreadyBound));
}

#[test]
fn zai_preconditions_sender_tab_and_conversation_target() {
    let bindings = store(vec![row(ZAI_ROOT, "w1", Some(7), "https://chat.z.ai/", "conversation")]);
    assert_eq!(plan("https://chat.z.ai/c/A", None, &bindings, &no_auto()), Err(NoMigration::NoSenderTab));
    assert_eq!(plan("https://chat.z.ai/", Some(7), &bindings, &no_auto()), Err(NoMigration::NotAConversation));
    assert_eq!(plan("https://chat.z.ai/c/A/share", Some(7), &bindings, &no_auto()), Err(NoMigration::NotAConversation));
    assert_eq!(plan("https://example.com/c/A", Some(7), &bindings, &no_auto()), Err(NoMigration::UnknownPage));
}

#[test]
fn zai_existing_automation_choice_on_target_is_kept() {
    let bindings = store(vec![row(ZAI_ROOT, "w1", Some(7), "https://chat.z.ai/", "conversation")]);
    let auto: BTreeMap<String, bool> = [(ZAI_ROOT.to_owned(), true), ("https://chat.z.ai/c/A".to_owned(), false)].into();
    let p = plan("https://chat.z.ai/c/A", Some(7), &bindings, &auto).unwrap();
    assert!(p.automation_set.is_empty());
}

#[test]
fn deepseek_never_migrates() {
    let bindings = store(vec![row("https://chat.deepseek.com", "w1", Some(7), "https://chat.deepseek.com/", "conversation")]);
    assert_eq!(
        plan("https://chat.deepseek.com/a/chat/s/abc", Some(7), &bindings, &no_auto()),
        Err(NoMigration::SiteNeverMigrates)
    );
}

#[test]
fn chatgpt_pending_binding_becomes_a_conversation_binding_in_the_same_tab_only() {
    let bindings = store(vec![
        row(GPT_ROOT, "w1", Some(7), "https://chatgpt.com/", "pending"),
        row(GPT_ROOT, "w2", Some(8), "https://chatgpt.com/", "pending"),
    ]);
    let auto: BTreeMap<String, bool> = [(GPT_ROOT.to_owned(), true)].into();
    let p = plan("https://chatgpt.com/c/xyz", Some(7), &bindings, &auto).unwrap();
    assert_eq!(p.moved.len(), 1, "the other tab's pending binding stays");
    let m = &p.moved[0];
    assert_eq!(m.new_key, "https://chatgpt.com/c/xyz::w1");
    assert_eq!(m.row.binding_scope.as_deref(), Some("conversation"));
    assert_eq!(m.row.site.as_deref(), Some("chatgpt"));
    assert_eq!(p.automation_set, ["https://chatgpt.com/c/xyz"]);
}

#[test]
fn chatgpt_pending_binding_becomes_a_project_binding() {
    let bindings = store(vec![row(GPT_ROOT, "w1", Some(7), "https://chatgpt.com/", "pending")]);
    let url = format!("https://chatgpt.com/g/{PROJECT}-my-project/c/xyz");
    let p = plan(&url, Some(7), &bindings, &no_auto()).unwrap();
    let m = &p.moved[0];
    let project_key = format!("https://chatgpt.com/g/{PROJECT}");
    assert_eq!(m.new_key, format!("{project_key}::w1"));
    assert_eq!(m.row.conv_key, project_key);
    assert_eq!(m.row.binding_scope.as_deref(), Some("project"));
    assert_eq!(m.row.project_id.as_deref(), Some(PROJECT));
    assert_eq!(m.row.project_key.as_deref(), Some(project_key.as_str()));
    assert_eq!(m.row.active_conv_key, Some(format!("{project_key}/c/xyz")));
    assert!(p.automation_set.is_empty(), "Project automation is keyed by Project id, not moved here");
}

#[test]
fn chatgpt_only_pending_rows_move_and_an_existing_project_binding_blocks() {
    let conv_scoped = store(vec![row(GPT_ROOT, "w1", Some(7), "https://chatgpt.com/", "conversation")]);
    assert_eq!(plan("https://chatgpt.com/c/xyz", Some(7), &conv_scoped, &no_auto()), Err(NoMigration::NoCandidates));
    let project_key = format!("https://chatgpt.com/g/{PROJECT}");
    let bound = store(vec![
        row(GPT_ROOT, "w1", Some(7), "https://chatgpt.com/", "pending"),
        row(&project_key, "w2", Some(5), &project_key, "project"),
    ]);
    let url = format!("https://chatgpt.com/g/{PROJECT}/c/xyz");
    assert_eq!(plan(&url, Some(7), &bound, &no_auto()), Err(NoMigration::TargetAlreadyBound));
}

#[test]
fn revision_is_the_javascript_string_hash() {
    // Expected values computed independently (UTF-16 code units, h = h*31 + u mod 2^32).
    assert_eq!(binding_revision("w1", "https://chat.z.ai/c/A", &json!(1_700_000_000_000u64)), "h2w:8344e4ad");
    assert_eq!(binding_revision("é😀", "k", &Value::String("x".into())), "h2w:5ccd242f");
}

#[test]
fn rows_round_trip_through_storage_json_unchanged() {
    let raw = json!({"workspace_id":"w","convKey":"k","tabId":1,"tabUrl":"u","created_at":5,
        "workingPanes":{"p":true},"lastSettle":{"seq":3,"at":9},"continuity_id":"hc:1:x"});
    let r: BindingRow = serde_json::from_value(raw.clone()).unwrap();
    assert_eq!(serde_json::to_value(&r).unwrap(), raw);
}
