//! Conversation-scoped state that must follow a chat and nothing else (spec §5.1, §5.3):
//! workspace bindings (`herdrWakeBindings`) and the Auto preference
//! (`herdrConversationAutomation`). The rule itself is `ext_adapters::migration`; this applies
//! its plan to the stored JSON maps, keeping rows it cannot read untouched.

use std::collections::BTreeMap;

use ext_adapters::migration::{BindingRow, MigrationInput, plan_migration};
use serde_json::{Map, Value};

pub const BINDINGS_KEY: &str = "herdrWakeBindings";
pub const AUTOMATION_KEY: &str = "herdrConversationAutomation";

/// The two stored maps after a migration (written back together).
#[derive(Debug, Clone, PartialEq)]
pub struct Migrated {
    pub bindings: Map<String, Value>,
    pub automation: Map<String, Value>,
    pub moved_rows: usize,
}

/// Runs the migration for a tab that registered `target_url`; None when nothing moves.
pub fn migrate(bindings: &Map<String, Value>, automation: &Map<String, Value>, target_url: &str, tab_id: i32, now_ms: u64) -> Option<Migrated> {
    let rows: BTreeMap<String, BindingRow> =
        bindings.iter().filter_map(|(k, v)| serde_json::from_value(v.clone()).ok().map(|row| (k.clone(), row))).collect();
    let auto: BTreeMap<String, bool> = automation.iter().filter_map(|(k, v)| v.as_bool().map(|b| (k.clone(), b))).collect();
    let input = MigrationInput { target_url, sender_tab_id: Some(i64::from(tab_id)), bindings: &rows, conversation_automation: &auto, now_ms };
    let plan = plan_migration(&input).ok()?;
    let mut out_bindings = bindings.clone();
    for moved in &plan.moved {
        out_bindings.remove(&moved.old_key);
        out_bindings.insert(moved.new_key.clone(), serde_json::to_value(&moved.row).ok()?);
    }
    let mut out_automation = automation.clone();
    for key in &plan.automation_delete {
        out_automation.remove(key);
    }
    for key in &plan.automation_set {
        out_automation.insert(key.clone(), Value::Bool(true));
    }
    Some(Migrated { bindings: out_bindings, automation: out_automation, moved_rows: plan.moved.len() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn root_rows_move_once_and_unreadable_rows_stay() {
        let bindings = obj(json!({
            "https://chat.z.ai::ws1": {"workspace_id": "ws1", "convKey": "https://chat.z.ai", "tabId": 3, "tabUrl": "https://chat.z.ai/", "created_at": 1, "extra": "kept"},
            "odd-row": 5,
        }));
        let auto = obj(json!({"https://chat.z.ai": true}));
        let m = migrate(&bindings, &auto, "https://chat.z.ai/c/A", 3, 9).unwrap();
        assert_eq!(m.moved_rows, 1);
        let row = &m.bindings["https://chat.z.ai/c/A::ws1"];
        assert_eq!((row["convKey"].as_str(), row["extra"].as_str(), row["tabId"].as_i64()), (Some("https://chat.z.ai/c/A"), Some("kept"), Some(3)));
        assert!(!m.bindings.contains_key("https://chat.z.ai::ws1"));
        assert_eq!(m.bindings["odd-row"], json!(5));
        assert_eq!(m.automation, obj(json!({"https://chat.z.ai/c/A": true})));
        assert_eq!(migrate(&m.bindings, &m.automation, "https://chat.z.ai/c/B", 3, 10), None);
    }

    #[test]
    fn deepseek_never_migrates() {
        let bindings = obj(json!({"https://chat.deepseek.com::ws1": {"workspace_id": "ws1", "convKey": "https://chat.deepseek.com", "tabId": 3}}));
        assert_eq!(migrate(&bindings, &Map::new(), "https://chat.deepseek.com/a/chat/s/1", 3, 1), None);
    }
}
