//! Validation before execution (spec §1.6): refusals become rows, limits hold at their edges.

use ext_core::parser::ParsedCall;
use ext_core::validate::{
    Catalog, Checked, ERR_BATCH_INVALID, ERR_BATCH_TOO_LARGE, ERR_UNKNOWN_TOOL, MAX_CALLS_PER_REPLY, MAX_TOOL_NAME_CHARS, validate_calls,
};
use serde_json::{Value, json};

fn call(tool: &str, args: Value) -> ParsedCall {
    ParsedCall { tool: tool.to_string(), args, variants: vec![], span: (0, 0) }
}

fn catalog_with(names: &[&str]) -> Catalog {
    Catalog::from_tools(&names.iter().map(|n| json!({"name": n})).collect::<Vec<_>>())
}

fn refusal_error(c: &Checked) -> Option<&'static str> {
    match c {
        Checked::Refused(r) => Some(r.error),
        Checked::Run(_) => None,
    }
}

#[test]
fn known_tool_with_object_args_runs_with_its_index() {
    let out = validate_calls(&[call("a", json!({})), call("b", json!({"x": 1}))], &catalog_with(&["a", "b"]));
    assert!(matches!(&out[1], Checked::Run(v) if v.index == 2 && v.tool == "b" && v.args == json!({"x": 1})));
}

#[test]
fn unknown_tool_and_non_object_args_are_refused() {
    let cat = catalog_with(&["a"]);
    let out = validate_calls(&[call("nope", json!({})), call("a", json!([1])), call("a", json!("s")), call("a", Value::Null)], &cat);
    assert_eq!(refusal_error(&out[0]), Some(ERR_UNKNOWN_TOOL));
    match &out[0] {
        Checked::Refused(r) => assert!(r.detail.contains("Unknown Herdr tool: nope"), "{}", r.detail),
        _ => unreachable!(),
    }
    for c in &out[1..] {
        assert_eq!(refusal_error(c), Some(ERR_BATCH_INVALID));
    }
}

#[test]
fn a_reply_of_24_calls_runs_and_one_of_25_runs_none() {
    let calls = |n: usize| -> Vec<ParsedCall> { (0..n).map(|_| call("a", json!({}))).collect() };
    let at = validate_calls(&calls(MAX_CALLS_PER_REPLY), &catalog_with(&["a"]));
    assert!(at.iter().all(|c| matches!(c, Checked::Run(_))));
    let over = validate_calls(&calls(MAX_CALLS_PER_REPLY + 1), &catalog_with(&["a"]));
    assert_eq!(over.len(), MAX_CALLS_PER_REPLY + 1, "one row per call");
    for (i, c) in over.iter().enumerate() {
        match c {
            Checked::Refused(r) => {
                assert_eq!((r.index, r.error), (i + 1, ERR_BATCH_TOO_LARGE));
                assert!(r.detail.contains("25 calls") && r.detail.contains("none of them ran"), "{}", r.detail);
            }
            Checked::Run(_) => panic!("call {} of an oversized reply ran", i + 1),
        }
    }
}

#[test]
fn tool_names_up_to_128_chars_pass_and_longer_are_refused() {
    let ok = "n".repeat(MAX_TOOL_NAME_CHARS);
    let long = "n".repeat(MAX_TOOL_NAME_CHARS + 1);
    let out = validate_calls(&[call(&ok, json!({})), call(&long, json!({}))], &catalog_with(&[&ok, &long]));
    assert_eq!(refusal_error(&out[0]), None);
    assert_eq!(refusal_error(&out[1]), Some(ERR_BATCH_INVALID));
    match &out[1] {
        Checked::Refused(r) => assert!(r.tool.chars().count() <= MAX_TOOL_NAME_CHARS + 1, "echoed name is bounded"),
        _ => unreachable!(),
    }
}

#[test]
fn catalog_skips_nameless_tools_and_reads_schema_properties() {
    let cat = Catalog::from_tools(&[
        json!({"name": ""}),
        json!({"x": 1}),
        json!({"name": "herdr_exec", "inputSchema": {"properties": {"intent": {}, "idempotency_key": {}}}}),
    ]);
    assert_eq!(cat.len(), 1);
    assert!(cat.accepts_property("herdr_exec", "idempotency_key"));
    assert!(!cat.accepts_property("herdr_exec", "command"));
    assert!(!cat.accepts_property("other", "intent"));
}

/// A string argument repaired from raw line breaks may have lost lines on the page (joined
/// paragraphs, a rendered fence swallowed): a call that changes something never runs on it.
/// The model is asked for `\n` escapes instead; reads run.
#[test]
fn a_write_repaired_from_raw_line_breaks_is_refused_with_a_repair_request() {
    use ext_core::parser::{Variant, parse_reply};
    use ext_core::validate::ERR_RAW_CONTROL_CHARS;
    let reply = "{\"tool\":\"herdr_fs_write\",\"args\":{\"path\":\"a.txt\",\"content\":\"one\ntwo\"}}\n{\"tool\":\"herdr_fs_read\",\"args\":{\"path\":\"a\nb\"}}\n{\"tool\":\"herdr_fs_write\",\"args\":{\"path\":\"b.txt\",\"content\":\"one\\ntwo\"}}";
    let parsed = parse_reply(reply);
    assert_eq!(parsed.calls.len(), 3);
    assert!(parsed.calls[0].variants.contains(&Variant::RawControlChars));
    let out = validate_calls(&parsed.calls, &catalog_with(&["herdr_fs_write", "herdr_fs_read"]));
    match &out[0] {
        Checked::Refused(r) => {
            assert_eq!(r.error, ERR_RAW_CONTROL_CHARS);
            assert!(r.detail.contains("\\n"), "asks for \\n escapes: {}", r.detail);
            assert!(r.detail.starts_with("Not run"), "{}", r.detail);
        }
        Checked::Run(v) => panic!("the flattened-prone write would run: {v:?}"),
    }
    assert!(matches!(&out[1], Checked::Run(_)), "a read is harmless");
    assert!(matches!(&out[2], Checked::Run(v) if v.args["content"] == "one\ntwo"), "escaped line breaks are exact");
    for tool in ["herdr_exec", "herdr_fs_edit", "herdr_fs_patch", "herdr_prompt"] {
        let call = ParsedCall { tool: tool.into(), args: json!({"x": "a\nb"}), variants: vec![Variant::RawControlChars], span: (0, 0) };
        assert_eq!(refusal_error(&validate_calls(&[call], &catalog_with(&[tool]))[0]), Some(ERR_RAW_CONTROL_CHARS), "{tool}");
    }
}
