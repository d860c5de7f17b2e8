//! TOOL_RESULT rendering (spec §1.9): exact row shapes, and a bounded message that stays
//! valid JSON when results must be shortened.

use ext_core::parser::{Problem, ReplyState, Variant};
use ext_core::tool_result::{
    BRIDGE_TOOL, ERR_TRUNCATED, MAX_TOOL_RESULT_CHARS, NOTICE_NON_CANONICAL, ResultRow, TOOL_RESULT_PREFIX,
    render_repair, render_tool_result, repair_limit_message,
};
use serde_json::{Value, json};

fn body(message: &str) -> Vec<Value> {
    let rest = message.strip_prefix(&format!("{TOOL_RESULT_PREFIX}\n")).expect("prefix line");
    serde_json::from_str::<Vec<Value>>(rest).expect("body is a valid JSON array")
}

fn chars(s: &str) -> usize {
    s.chars().count()
}

#[test]
fn rows_have_the_exact_shape() {
    let msg = render_tool_result(
        vec![
            ResultRow::success(1, "herdr_inspect", &json!({"ok": true, "n": 1})),
            ResultRow::failure(2, "herdr_git", "mcp-rpc--32602", "bad args"),
        ],
        &[],
    );
    let rows = body(&msg);
    assert_eq!(rows[0], json!({"index": 1, "tool": "herdr_inspect", "ok": true, "result": {"ok": true, "n": 1}}));
    assert_eq!(
        rows[1],
        json!({"index": 2, "tool": "herdr_git", "ok": false, "error": "mcp-rpc--32602", "detail": "bad args"})
    );
    assert!(msg.starts_with("TOOL_RESULT:\n[{\"index\":1,\"tool\":\"herdr_inspect\",\"ok\":true,\"result\":"), "{msg}");
    assert_eq!(rows.len(), 2);
    let empty_error = body(&render_tool_result(vec![ResultRow::failure(1, "t", "", "")], &[]));
    assert_eq!(empty_error[0]["error"], "tool-call-failed");
}

#[test]
fn drift_adds_a_reminder_row() {
    let rows = body(&render_tool_result(
        vec![ResultRow::success(1, "t", &json!(1))],
        &[Variant::Fenced, Variant::NameArguments],
    ));
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1]["tool"], BRIDGE_TOOL);
    assert_eq!(rows[1]["result"]["notice"], NOTICE_NON_CANONICAL);
    assert_eq!(rows[1]["result"]["forms"], json!(["fenced", "name_arguments"]));
    assert!(rows[1]["detail"].as_str().unwrap().contains("{\"tool\":\"<name>\",\"args\":{...}}"));
}

#[test]
fn repair_message_names_state_and_problem() {
    let msg = render_repair(ReplyState::Incomplete, &[Problem { span: (3, 9), reason: "not closed".into() }]);
    let rows = body(&msg);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["index"], 1);
    assert_eq!(rows[0]["tool"], "bridge_protocol");
    assert_eq!(rows[0]["ok"], false);
    assert_eq!(rows[0]["error"], "incomplete-tool-json");
    assert!(rows[0]["detail"].as_str().unwrap().contains("3..9: not closed"));
    assert_eq!(body(&render_repair(ReplyState::Malformed, &[]))[0]["error"], "malformed-tool-json");
    assert!(repair_limit_message(4).contains('4'));
}

/// A success row whose serialized message is exactly `target` chars long.
fn message_of_len(target: usize) -> (Vec<ResultRow>, String) {
    let base = render_tool_result(vec![ResultRow::success_presented(1, "t", json!(""))], &[]);
    let filler = "a".repeat(target - chars(&base));
    let rows = vec![ResultRow::success_presented(1, "t", json!(filler))];
    let msg = render_tool_result(rows.clone(), &[]);
    (rows, msg)
}

#[test]
fn a_message_of_exactly_the_limit_is_untouched_and_one_more_is_shrunk() {
    let (_, exact) = message_of_len(MAX_TOOL_RESULT_CHARS);
    assert_eq!(chars(&exact), MAX_TOOL_RESULT_CHARS);
    assert!(!exact.contains(ERR_TRUNCATED));
    let (_, over) = message_of_len(MAX_TOOL_RESULT_CHARS + 1);
    assert!(chars(&over) <= MAX_TOOL_RESULT_CHARS, "{}", chars(&over));
    let rows = body(&over);
    assert!(rows[0]["result"].as_str().unwrap().contains("truncated"));
    assert_eq!(rows.last().unwrap()["error"], ERR_TRUNCATED);
}

/// The reference measures `text.length`: UTF-16 code units, so an emoji counts twice.
fn utf16(s: &str) -> usize {
    s.encode_utf16().count()
}

#[test]
fn the_limit_counts_utf16_units_so_emoji_count_twice() {
    let base = render_tool_result(vec![ResultRow::success_presented(1, "t", json!(""))], &[]);
    let room = MAX_TOOL_RESULT_CHARS - utf16(&base);
    // Exactly at the limit in UTF-16 units: untouched.
    let at_limit = format!("{}{}", "a".repeat(room % 2), "😀".repeat(room / 2));
    let exact = render_tool_result(vec![ResultRow::success_presented(1, "t", json!(at_limit))], &[]);
    assert_eq!(utf16(&exact), MAX_TOOL_RESULT_CHARS);
    assert!(!exact.contains(ERR_TRUNCATED));
    // Fewer than 60 000 characters, but more UTF-16 units: shrunk to fit.
    let filler = "😀".repeat(room / 2 + 1);
    let over = render_tool_result(vec![ResultRow::success_presented(1, "t", json!(filler))], &[]);
    assert!(chars(&base) + chars(&filler) < MAX_TOOL_RESULT_CHARS, "the unshrunk message is short in characters");
    assert!(utf16(&over) <= MAX_TOOL_RESULT_CHARS, "{}", utf16(&over));
    assert_eq!(body(&over).last().unwrap()["error"], ERR_TRUNCATED);
}

#[test]
fn big_results_share_the_budget_and_small_ones_stay_whole() {
    let huge = json!({"text": "é\"\\".repeat(30_000)});
    let rows = vec![
        ResultRow::success_presented(1, "small", json!({"ok": true})),
        ResultRow::success_presented(2, "big1", huge.clone()),
        ResultRow::success_presented(3, "big2", huge),
        ResultRow::failure(4, "fail", "x", &"d".repeat(10_000)),
    ];
    let msg = render_tool_result(rows, &[Variant::Array]);
    assert!(chars(&msg) <= MAX_TOOL_RESULT_CHARS);
    let out = body(&msg);
    assert_eq!(out[0]["result"], json!({"ok": true}));
    for big in &out[1..3] {
        let kept = big["result"]["text"].as_str().expect("structure kept");
        assert!(kept.contains("truncated"), "the cut is marked");
        assert!(chars(kept) >= 5_000, "each big result keeps a fair share, got {}", chars(kept));
    }
    assert!(chars(out[3]["detail"].as_str().unwrap()) <= 2_000);
    assert!(out.iter().any(|r| r["error"] == ERR_TRUNCATED));
    assert!(out.iter().any(|r| r["result"]["notice"] == NOTICE_NON_CANONICAL));
}

#[test]
fn thousands_of_rows_still_fit_as_valid_json() {
    let rows: Vec<ResultRow> = (1..=3_000)
        .map(|i| ResultRow::failure(i, &"t".repeat(128), "json-bridge-batch-too-large", &"why ".repeat(100)))
        .collect();
    let msg = render_tool_result(rows, &[]);
    assert!(chars(&msg) <= MAX_TOOL_RESULT_CHARS);
    let out = body(&msg);
    let last = out.last().unwrap();
    assert_eq!(last["error"], ERR_TRUNCATED);
    assert!(last["detail"].as_str().unwrap().contains("of 3000 rows"), "{last}");
}

/// The runtime's `CallToolResult` for a payload (spec contract: one text block holding the
/// payload JSON, plus `structuredContent` with the same object).
fn call_tool_result(payload: &Value) -> Value {
    json!({ "content": [{ "type": "text", "text": payload.to_string() }], "structuredContent": payload })
}

#[test]
fn each_result_is_carried_once_and_a_40_kb_file_read_arrives_whole() {
    let file: String = (0..800).map(|i| format!("line {i:04}: {}\n", "x".repeat(38))).collect();
    assert!(file.len() >= 40_000, "{}", file.len());
    let payload =
        json!({ "ok": true, "path": "big.txt", "content": file, "start_line": 1, "end_line": 800, "total_lines": 800 });
    let msg = render_tool_result(vec![ResultRow::success(1, "herdr_fs_read", &call_tool_result(&payload))], &[]);
    assert!(utf16(&msg) <= MAX_TOOL_RESULT_CHARS, "{}", utf16(&msg));
    assert!(!msg.contains(ERR_TRUNCATED), "nothing was shortened");
    assert_eq!(msg.matches("line 0799").count(), 1, "the file is in the message once");
    let rows = body(&msg);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["result"], payload, "the row's result is the tool's payload itself");
}

#[test]
fn without_structured_content_the_text_block_is_the_payload() {
    let payload = json!({ "ok": true, "n": 1 });
    let text_only = json!({ "content": [{ "type": "text", "text": payload.to_string() }] });
    assert_eq!(body(&render_tool_result(vec![ResultRow::success(1, "t", &text_only)], &[]))[0]["result"], payload);
    let prose = json!({ "content": [{ "type": "text", "text": "plain words" }] });
    assert_eq!(
        body(&render_tool_result(vec![ResultRow::success(1, "t", &prose)], &[]))[0]["result"],
        json!("plain words")
    );
    // A protocol failure keeps its flag next to the payload.
    let failed = json!({ "content": [{ "type": "text", "text": "{\"ok\":false,\"code\":\"x\"}" }], "structuredContent": { "ok": false, "code": "x" }, "isError": true });
    assert_eq!(
        body(&render_tool_result(vec![ResultRow::success(1, "t", &failed)], &[]))[0]["result"],
        json!({ "ok": false, "code": "x", "isError": true })
    );
    // Anything that is not an MCP result passes as it is.
    assert_eq!(
        body(&render_tool_result(vec![ResultRow::success(1, "t", &json!({"ok": true, "n": 1}))], &[]))[0]["result"],
        json!({"ok": true, "n": 1})
    );
}
