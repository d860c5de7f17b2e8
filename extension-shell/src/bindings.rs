//! Conversation-scoped state that must follow a chat and nothing else (spec §5.1, §5.3):
//! workspace bindings (`herdrWakeBindings`, keyed `<convKey>::<workspace_id>`) and the Auto
//! preference (`herdrConversationAutomation`, keyed by convKey).
//!
//! The only move is z.ai's new-chat root → `/c/<id>`, once: the root rows are deleted as they
//! move, so a later `/c/A` → `/c/B` switch finds nothing to carry.

use serde_json::{Map, Value};

use crate::sites::{BridgeSite, zai_conversation_id};

pub const BINDINGS_KEY: &str = "herdrWakeBindings";
pub const AUTOMATION_KEY: &str = "herdrConversationAutomation";

/// What a migration changed (written back together).
#[derive(Debug, Clone, PartialEq)]
pub struct Migration {
    pub bindings: Map<String, Value>,
    pub automation: Map<String, Value>,
    pub moved_rows: usize,
}

fn row_key_conv(key: &str) -> &str {
    key.rsplit_once("::").map_or(key, |(conv, _)| conv)
}

/// Applies `migrateZaiRootConversationState` for a tab that registered `target`.
/// Returns None when nothing may move (not a z.ai chat, target already bound, no tab).
pub fn migrate_zai_root(
    bindings: &Map<String, Value>,
    automation: &Map<String, Value>,
    target: &str,
    tab_id: Option<i32>,
    tab_url: &str,
    now_ms: u64,
) -> Option<Migration> {
    zai_conversation_id(target)?;
    let tab_id = tab_id?;
    let root = BridgeSite::Zai.origin();
    if bindings.keys().any(|k| row_key_conv(k) == target) {
        return None;
    }
    let mut out_bindings = bindings.clone();
    let mut moved = 0;
    for (key, row) in bindings {
        if row_key_conv(key) != root {
            continue;
        }
        let same_tab = row.get("tabId").and_then(Value::as_i64) == Some(i64::from(tab_id));
        let at_root = row.get("tabUrl").and_then(Value::as_str).and_then(crate::sites::conversation_key).as_deref() == Some(root);
        if !same_tab && !at_root {
            continue;
        }
        let workspace = key.rsplit_once("::").map_or("", |(_, ws)| ws);
        let mut row = row.clone();
        if let Value::Object(fields) = &mut row {
            fields.insert("convKey".into(), Value::from(target));
            fields.insert("site".into(), Value::from("z.ai"));
            fields.insert("tabId".into(), Value::from(tab_id));
            fields.insert("tabUrl".into(), Value::from(tab_url));
            fields.insert("last_seen_at".into(), Value::from(now_ms));
            let created = fields.get("created_at").map(|v| v.to_string()).unwrap_or_default();
            fields.insert("revision".into(), Value::from(revision(workspace, target, &created)));
        }
        out_bindings.remove(key);
        out_bindings.insert(format!("{target}::{workspace}"), row);
        moved += 1;
    }
    let mut out_automation = automation.clone();
    let root_auto = out_automation.remove(root);
    if root_auto == Some(Value::Bool(true)) && !out_automation.contains_key(target) {
        out_automation.insert(target.to_string(), Value::Bool(true));
    }
    if moved == 0 && root_auto.is_none() {
        return None;
    }
    Some(Migration { bindings: out_bindings, automation: out_automation, moved_rows: moved })
}

/// `"h2w:" + hex(31-hash(workspace_id \0 convKey \0 created_at))`.
pub fn revision(workspace: &str, conv_key: &str, created_at: &str) -> String {
    let mut h: u32 = 0;
    for c in format!("{workspace}\0{conv_key}\0{created_at}").encode_utf16() {
        h = h.wrapping_mul(31).wrapping_add(u32::from(c));
    }
    format!("h2w:{h:x}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn root_rows_of_the_same_tab_move_once() {
        let bindings = obj(json!({"https://chat.z.ai::ws1": {"tabId": 3, "tabUrl": "https://chat.z.ai/", "created_at": 1}}));
        let auto = obj(json!({"https://chat.z.ai": true}));
        let m = migrate_zai_root(&bindings, &auto, "https://chat.z.ai/c/A", Some(3), "https://chat.z.ai/c/A", 9).unwrap();
        assert_eq!(m.moved_rows, 1);
        assert!(m.bindings.contains_key("https://chat.z.ai/c/A::ws1"));
        assert!(!m.bindings.contains_key("https://chat.z.ai::ws1"));
        assert_eq!(m.automation, obj(json!({"https://chat.z.ai/c/A": true})));
        // Second hop /c/A → /c/B: nothing root-keyed is left.
        assert_eq!(migrate_zai_root(&m.bindings, &m.automation, "https://chat.z.ai/c/B", Some(3), "https://chat.z.ai/c/B", 10), None);
    }

    #[test]
    fn refuses_without_tab_for_bound_targets_and_off_site() {
        let bindings = obj(json!({"https://chat.z.ai::ws1": {"tabId": 3}, "https://chat.z.ai/c/A::ws2": {"tabId": 3}}));
        let none = Map::new();
        assert_eq!(migrate_zai_root(&bindings, &none, "https://chat.z.ai/c/A", Some(3), "", 1), None);
        assert_eq!(migrate_zai_root(&bindings, &none, "https://chat.z.ai/c/B", None, "", 1), None);
        assert_eq!(migrate_zai_root(&bindings, &none, "https://chat.deepseek.com/a/chat/s/1", Some(3), "", 1), None);
        // Another tab's root row that is no longer at the root stays.
        let other = obj(json!({"https://chat.z.ai::ws1": {"tabId": 4, "tabUrl": "https://chat.z.ai/c/Z"}}));
        assert_eq!(migrate_zai_root(&other, &none, "https://chat.z.ai/c/B", Some(3), "", 1), None);
    }

    #[test]
    fn revision_is_stable() {
        assert_eq!(revision("w", "k", "1"), revision("w", "k", "1"));
        assert_ne!(revision("w", "k", "1"), revision("w", "k2", "1"));
    }
}
