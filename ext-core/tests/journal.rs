//! Call journal: every state transition, reload recovery, keys, and the §5.4 resume rule.

use ext_core::journal::{
    CallIdentity, CallJournal, CallOutcome, CallState, DEFAULT_EXEC_INTENT, JournalError, MAX_JOURNAL_ENTRIES, Plan, RESUME_LOOKBACK, Role,
    TranscriptEntry, canonical_json, fingerprint, has_pending_tool_reply, idempotency_key, is_mutating, prepare_args,
};
use ext_core::validate::Catalog;
use serde_json::{Value, json};

fn id<'a>(msg: &'a str, index: usize, tool: &'a str, args: &'a Value) -> CallIdentity<'a> {
    CallIdentity { conv_key: "https://chat.z.ai/c/abc", message_id: msg, index, tool, args }
}

#[test]
fn new_call_is_planned_to_run_and_begins_pending() {
    let args = json!({"path": "a"});
    let mut j = CallJournal::new("https://chat.z.ai/c/abc");
    let call = id("m1", 1, "herdr_fs_read", &args);
    assert_eq!(j.plan(&fingerprint(&call)), Plan::Run);
    let entry = j.begin(&call).unwrap();
    assert_eq!(entry.state, CallState::Pending);
    assert_eq!(entry.idempotency_key, None, "reads get no key");
    assert_eq!(j.plan(&entry.fingerprint), Plan::InFlight);
    assert_eq!(j.begin(&call), Err(JournalError::AlreadyJournaled { fingerprint: entry.fingerprint.clone() }));
}

#[test]
fn pending_to_delivered_then_replayed_and_frozen() {
    let args = json!({});
    let mut j = CallJournal::new("c");
    let fp = j.begin(&id("m", 1, "herdr_inspect", &args)).unwrap().fingerprint;
    let outcome = CallOutcome::Ok { result: json!({"ok": true}) };
    j.deliver(&fp, outcome.clone()).unwrap();
    assert_eq!(j.plan(&fp), Plan::Replay(outcome.clone()));
    assert_eq!(j.deliver(&fp, outcome), Err(JournalError::NotPending { fingerprint: fp.clone() }));
    assert_eq!(j.mark_unknown(&fp), Err(JournalError::NotPending { fingerprint: fp.clone() }));
    let err = CallOutcome::Err { error: "mcp-rpc--32602".into(), detail: "bad".into() };
    let fp2 = j.begin(&id("m", 2, "herdr_inspect", &args)).unwrap().fingerprint;
    j.deliver(&fp2, err.clone()).unwrap();
    assert_eq!(j.plan(&fp2), Plan::Replay(err));
}

#[test]
fn pending_to_unknown_is_never_run_again() {
    let args = json!({"command": "rm x"});
    let mut j = CallJournal::new("c");
    let fp = j.begin(&id("m", 1, "herdr_exec", &args)).unwrap().fingerprint;
    j.mark_unknown(&fp).unwrap();
    assert_eq!(j.plan(&fp), Plan::DeliveryUnknown);
    assert!(j.deliver(&fp, CallOutcome::Ok { result: Value::Null }).is_err(), "a late answer cannot rewrite history");
    assert_eq!(j.mark_unknown("cf1:missing"), Err(JournalError::NotFound { fingerprint: "cf1:missing".into() }));
}

#[test]
fn reload_turns_pending_into_unknown_and_keeps_delivered() {
    let args = json!({});
    let mut j = CallJournal::new("c");
    let delivered = j.begin(&id("m", 1, "herdr_inspect", &args)).unwrap().fingerprint;
    j.deliver(&delivered, CallOutcome::Ok { result: json!(1) }).unwrap();
    let pending = j.begin(&id("m", 2, "herdr_fs_write", &args)).unwrap().fingerprint;
    // Stored and reloaded through serde, as chrome.storage.local would.
    let stored = serde_json::to_string(&j).unwrap();
    let mut reloaded: CallJournal = serde_json::from_str(&stored).unwrap();
    assert_eq!(reloaded, j);
    assert_eq!(reloaded.after_reload(), 1);
    assert_eq!(reloaded.plan(&delivered), Plan::Replay(CallOutcome::Ok { result: json!(1) }));
    assert_eq!(reloaded.plan(&pending), Plan::DeliveryUnknown);
    let never_sent = json!({"x": 1});
    assert_eq!(reloaded.plan(&fingerprint(&id("m", 3, "herdr_fs_write", &never_sent))), Plan::Run);
    assert_eq!(reloaded.after_reload(), 0, "idempotent");
}

#[test]
fn fingerprint_depends_on_every_part_but_not_on_key_order() {
    let a = json!({"x": 1, "y": [1, {"b": 2, "a": 1}]});
    let a_reordered: Value = serde_json::from_str(r#"{"y":[1,{"a":1,"b":2}],"x":1}"#).unwrap();
    let base = fingerprint(&id("m", 1, "t", &a));
    assert_eq!(base, fingerprint(&id("m", 1, "t", &a_reordered)));
    assert!(base.starts_with("cf1:") && base.len() == 4 + 64);
    let other = json!({"x": 2});
    for changed in [
        fingerprint(&CallIdentity { conv_key: "other", ..id("m", 1, "t", &a) }),
        fingerprint(&id("m2", 1, "t", &a)),
        fingerprint(&id("m", 2, "t", &a)),
        fingerprint(&id("m", 1, "t2", &a)),
        fingerprint(&id("m", 1, "t", &other)),
    ] {
        assert_ne!(changed, base);
    }
    // Field framing: moving a character between fields must change the fingerprint.
    assert_ne!(fingerprint(&id("ab", 1, "c", &a)), fingerprint(&id("a", 1, "bc", &a)));
    assert_eq!(canonical_json(&a_reordered), r#"{"x":1,"y":[1,{"a":1,"b":2}]}"#);
}

#[test]
fn mutating_calls_get_a_stable_key() {
    for tool in ["herdr_fs_edit", "herdr_fs_write", "herdr_fs_patch", "herdr_exec", "herdr_exec_start", "herdr_exec_kill", "herdr_prompt", "herdr_call"] {
        assert!(is_mutating(tool), "{tool}");
    }
    for tool in ["herdr_fs_read", "herdr_git", "herdr_inspect", "herdr_since"] {
        assert!(!is_mutating(tool), "{tool}");
    }
    let args = json!({"command": "make"});
    let key = idempotency_key(&id("m", 1, "herdr_exec", &args));
    assert_eq!(key, idempotency_key(&id("m", 1, "herdr_exec", &args)));
    assert!(key.starts_with("hb1-") && key.len() == 36 && key.len() <= 256);
    let mut j = CallJournal::new("c");
    assert_eq!(j.begin(&id("m", 1, "herdr_exec", &args)).unwrap().idempotency_key, Some(key));
}

#[test]
fn keys_go_into_args_only_where_the_schema_accepts_them() {
    let catalog = Catalog::from_tools(&[
        json!({"name": "herdr_exec", "inputSchema": {"properties": {"command": {}, "intent": {}, "idempotency_key": {}}}}),
        json!({"name": "herdr_prompt", "inputSchema": {"properties": {"target": {}, "text": {}, "idempotency_key": {}}}}),
        json!({"name": "herdr_fs_write", "inputSchema": {"properties": {"path": {}, "content": {}}}}),
    ]);
    let exec = prepare_args("herdr_exec", &json!({"command": "make"}), Some("k1"), &catalog);
    assert_eq!(exec, json!({"command": "make", "intent": DEFAULT_EXEC_INTENT, "idempotency_key": "k1"}));
    let own = prepare_args("herdr_exec", &json!({"command": "ls", "intent": "read_only", "idempotency_key": "mine"}), Some("k1"), &catalog);
    assert_eq!(own, json!({"command": "ls", "intent": "read_only", "idempotency_key": "mine"}));
    let prompt = prepare_args("herdr_prompt", &json!({"target": "a", "text": "t"}), Some("k2"), &catalog);
    assert_eq!(prompt, json!({"target": "a", "text": "t", "idempotency_key": "k2"}));
    let write = prepare_args("herdr_fs_write", &json!({"path": "p"}), Some("k3"), &catalog);
    assert_eq!(write, json!({"path": "p"}), "key stays on the journal entry only");
    assert_eq!(prepare_args("herdr_exec", &json!({"command": "x"}), None, &catalog), json!({"command": "x"}));
    let old_exec = Catalog::from_tools(&[json!({"name": "herdr_exec", "inputSchema": {"properties": {"command": {}, "idempotency_key": {}}}})]);
    assert_eq!(prepare_args("herdr_exec", &json!({"command": "x"}), Some("k"), &old_exec), json!({"command": "x"}), "no intent field, no key");
}

#[test]
fn journal_is_bounded_and_prunes_settled_entries_first() {
    let mut j = CallJournal::new("c");
    let args = json!({});
    let first = j.begin(&id("m0", 1, "herdr_inspect", &args)).unwrap().fingerprint;
    for i in 1..MAX_JOURNAL_ENTRIES {
        let fp = j.begin(&id(&format!("m{i}"), 1, "herdr_inspect", &args)).unwrap().fingerprint;
        if i == 1 {
            j.deliver(&fp, CallOutcome::Ok { result: Value::Null }).unwrap();
        }
    }
    assert_eq!(j.entries().len(), MAX_JOURNAL_ENTRIES, "exactly at the limit nothing is dropped");
    j.begin(&id("over", 1, "herdr_inspect", &args)).unwrap();
    assert_eq!(j.entries().len(), MAX_JOURNAL_ENTRIES);
    assert!(j.entry(&first).is_some(), "the pending oldest entry survives");
    assert!(j.entries().iter().all(|e| e.message_id != "m1"), "the settled one went first");
}

fn user(text: &str) -> TranscriptEntry {
    TranscriptEntry { role: Role::User, text: text.to_string() }
}
fn assistant(text: &str) -> TranscriptEntry {
    TranscriptEntry { role: Role::Assistant, text: text.to_string() }
}

#[test]
fn resume_rule_of_spec_5_4() {
    let call = r#"{"tool":"herdr_inspect","args":{}}"#;
    assert!(has_pending_tool_reply(&[user("[HERDR_JSON_BRIDGE_V1]\n…USER_TASK:\nx"), assistant(call)]));
    assert!(has_pending_tool_reply(&[user("TOOL_RESULT:\n[]"), assistant(r#"{"tool":"a""#)]), "incomplete counts");
    assert!(has_pending_tool_reply(&[user("note\n  TOOL_RESULT:\n[]"), assistant(call)]), "TOOL_RESULT on a later line");
    assert!(!has_pending_tool_reply(&[user("[HERDR_JSON_BRIDGE_V1]"), assistant("All done.")]), "normal answer");
    assert!(!has_pending_tool_reply(&[assistant(call), user("TOOL_RESULT:\n[]")]), "last is the user's");
    assert!(!has_pending_tool_reply(&[user("just chatting"), assistant(call)]), "no bridge message before");
    assert!(!has_pending_tool_reply(&[]));
    assert!(!has_pending_tool_reply(&[assistant(call)]));
    // The bridge message exactly 39 entries back counts; 40 back does not.
    let mut at_edge = vec![user("[HERDR_JSON_BRIDGE_V1]")];
    at_edge.extend((0..RESUME_LOOKBACK - 1).map(|_| assistant("filler")));
    at_edge.push(assistant(call));
    assert_eq!(at_edge.len(), RESUME_LOOKBACK + 1);
    assert!(has_pending_tool_reply(&at_edge));
    let mut beyond = vec![user("[HERDR_JSON_BRIDGE_V1]")];
    beyond.extend(at_edge[1..].iter().cloned());
    beyond.insert(1, assistant("one more"));
    assert!(!has_pending_tool_reply(&beyond));
}
