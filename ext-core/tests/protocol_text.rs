//! The preamble and typed catalog rendered from a live tools/list (spec §1.3–§1.4).

use ext_core::protocol_text::{
    BRIDGE_MARKER, DOC_MAX_CHARS, SCHEMA_MAX_DEPTH, Site, USER_TASK_LABEL, render_key, render_preamble, render_task_message, render_typed_api,
    safe_doc, schema_type,
};
use serde_json::{Value, json};

fn catalog() -> Vec<Value> {
    vec![
        json!({"name": "herdr_fs_read", "description": "Read a file.", "inputSchema": {
            "type": "object",
            "properties": {
                "workspace": {"type": "string"},
                "path": {"type": "string"},
                "start_line": {"type": "integer"},
                "mode": {"enum": ["text", "bytes", 3, null]},
                "either": {"anyOf": [{"type": "string"}, {"type": "number"}]},
                "one": {"oneOf": [{"type": "boolean"}, {"type": "null"}]},
                "multi": {"type": ["string", "null"]},
                "tags": {"type": "array", "items": {"type": "string"}},
                "matrix": {"type": "array", "items": {"type": "array", "items": {"type": "number"}}},
                "mixed_list": {"type": "array", "items": {"type": ["string", "integer"]}},
                "opts": {"type": "object"},
                "weird-key": {"type": "boolean"},
                "$ok_1": {"type": "string"},
                "1bad": {},
                "ref": {"$ref": "#/x"}
            },
            "required": ["workspace", "path"]
        }}),
        json!({"name": "herdr_inspect", "inputSchema": {"type": "object", "properties": {}}}),
        json!({"name": "", "description": "skipped: empty name"}),
        json!({"description": "skipped: no name"}),
        json!({"name": 7}),
        json!({"name": "herdr_git", "description": "  Run   git\n\tsafely */ here  "}),
    ]
}

#[test]
fn typed_api_renders_every_schema_rule() {
    let api = render_typed_api(&catalog());
    assert!(api.starts_with("declare const herdr: {\n"), "{api}");
    assert!(api.ends_with("};"), "{api}");
    let read_line = api.lines().find(|l| l.contains("herdr_fs_read:")).expect("read tool rendered");
    for part in [
        "workspace: string",
        "path: string",
        "start_line?: number",
        "mode?: \"text\" | \"bytes\" | 3 | null",
        "either?: string | number",
        "one?: boolean | null",
        "multi?: string | null",
        "tags?: string[]",
        "matrix?: number[][]",
        "mixed_list?: (string | number)[]",
        "opts?: Record<string, unknown>",
        "\"weird-key\"?: boolean",
        "$ok_1?: string",
        "\"1bad\"?: unknown",
        "ref?: unknown",
    ] {
        assert!(read_line.contains(part), "missing {part:?} in {read_line}");
    }
    assert!(read_line.ends_with("}) => Promise<unknown>;"), "{read_line}");
    assert!(api.contains("  herdr_inspect: (input: Record<string, never>) => Promise<unknown>;"), "{api}");
    assert!(api.contains("/** Call herdr_inspect */"), "{api}");
    assert!(api.contains("/** Run git safely * / here */"), "{api}");
    assert!(!api.contains("skipped"), "{api}");
    assert_eq!(api.matches("Promise<unknown>").count(), 3);
}

#[test]
fn docs_are_cut_at_exactly_520_chars() {
    let exact = "é".repeat(DOC_MAX_CHARS);
    assert_eq!(safe_doc(&exact), exact);
    let over = format!("{exact}x");
    assert_eq!(safe_doc(&over).chars().count(), DOC_MAX_CHARS);
    assert!(!safe_doc("a */ b */").contains("*/"));
    let api = render_typed_api(&[json!({"name": "t", "description": "*/".repeat(400)})]);
    assert_eq!(api.matches("*/").count(), 1, "only the comment's own closer may remain");
    // The reference counts UTF-16 units: an emoji takes two, and is never split.
    let emoji = "😀".repeat(DOC_MAX_CHARS / 2);
    assert_eq!(safe_doc(&emoji), emoji);
    assert_eq!(safe_doc(&format!("{emoji}x")), emoji);
    assert_eq!(safe_doc(&format!("x{emoji}")), format!("x{}", "😀".repeat(DOC_MAX_CHARS / 2 - 1)));
}

#[test]
fn docs_collapse_white_space_as_javascript_does() {
    assert_eq!(safe_doc("  a\t\n b\u{a0}\u{3000}c\u{feff}d  "), "a b c d");
    assert_eq!(safe_doc("a\u{85}b"), "a\u{85}b", "U+0085 is not white space to JavaScript's \\s");
}

#[test]
fn keys_are_bare_only_when_identifiers() {
    assert_eq!(render_key("abc_1"), "abc_1");
    assert_eq!(render_key("_x$"), "_x$");
    assert_eq!(render_key("a-b"), "\"a-b\"");
    assert_eq!(render_key("9a"), "\"9a\"");
    assert_eq!(render_key(""), "\"\"");
    assert_eq!(render_key("ключ"), "\"ключ\"");
}

#[test]
fn schema_nesting_is_bounded() {
    let mut schema = json!({"type": "string"});
    for _ in 0..(SCHEMA_MAX_DEPTH * 4) {
        schema = json!({"type": "array", "items": schema});
    }
    let rendered = schema_type(&schema);
    assert!(rendered.starts_with("unknown"), "{rendered}");
    assert_eq!(rendered.matches("[]").count(), SCHEMA_MAX_DEPTH);
    assert_eq!(schema_type(&json!("not a schema")), "unknown");
    assert_eq!(schema_type(&json!({"enum": []})), "unknown");
}

#[test]
fn preamble_and_task_message_shape() {
    let tools = catalog();
    let msg = render_task_message(&tools, Site::Zai, "fix the build");
    assert!(msg.starts_with(BRIDGE_MARKER), "{msg}");
    assert!(msg.ends_with(&format!("\n\n{USER_TASK_LABEL}\nfix the build")), "{msg}");
    assert!(msg.contains("Tools (typed API):\ndeclare const herdr: {"));
    assert!(msg.contains("{\"tool\":\"<exact tool name>\",\"args\":{...}}"));
    assert!(msg.contains("TOOL_RESULT"));
    assert!(!msg.contains("\\u0024"), "z.ai has no dollar hint");
    let deepseek = render_preamble(&tools, Site::DeepSeek);
    assert!(deepseek.contains("\\u0024"), "{deepseek}");
    assert!(!render_preamble(&tools, Site::ChatGpt).contains("\\u0024"));
    // The preamble is rebuilt from the live catalog: a new tool shows up, a removed one does not.
    let fewer = render_preamble(&tools[1..], Site::Zai);
    assert!(!fewer.contains("herdr_fs_read"));
}
