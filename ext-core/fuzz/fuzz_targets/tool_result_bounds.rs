//! A TOOL_RESULT message built from arbitrary results is valid JSON and at most 60 000 chars.
#![no_main]

use ext_core::parser::Variant;
use ext_core::tool_result::{MAX_TOOL_RESULT_CHARS, ResultRow, TOOL_RESULT_PREFIX, present, render_tool_result};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Some((&shape, rest)) = data.split_first() else { return };
    let text = String::from_utf8_lossy(rest);
    // One input in 256 is blown up so the 60 000-char bound and its shrinking path are
    // exercised; rarely, because shrinking costs ~100x a plain render and would starve the run.
    let repeat = if shape == 0xFF { 40 } else { 1 };
    let value = serde_json::from_str::<Value>(&text).unwrap_or_else(|_| Value::String(text.repeat(repeat)));
    // `present` is deterministic, so one sanitized copy stands for every success row.
    let presented = present(&value);
    let rows: Vec<ResultRow> = (1..=usize::from(shape % 8) + 1)
        .map(|i| if i % 3 == 0 { ResultRow::failure(i, "t", &text, &text) } else { ResultRow::success_presented(i, "herdr_fs_read", presented.clone()) })
        .collect();
    let variants = if shape & 0x80 != 0 { vec![Variant::Fenced] } else { vec![] };
    let msg = render_tool_result(rows, &variants);
    assert!(msg.chars().count() <= MAX_TOOL_RESULT_CHARS);
    let body = msg.strip_prefix(TOOL_RESULT_PREFIX).and_then(|b| b.strip_prefix('\n')).expect("prefix");
    let parsed: Vec<Value> = serde_json::from_str(body).expect("valid JSON array");
    assert!(!parsed.is_empty());
});
