//! A TOOL_RESULT message built from arbitrary results is valid JSON and at most 60 000 chars.
#![no_main]

use ext_core::parser::Variant;
use ext_core::tool_result::{MAX_TOOL_RESULT_CHARS, ResultRow, TOOL_RESULT_PREFIX, render_tool_result};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Some((&shape, rest)) = data.split_first() else { return };
    let text = String::from_utf8_lossy(rest);
    let value = serde_json::from_str::<Value>(&text).unwrap_or_else(|_| Value::String(text.repeat(usize::from(shape % 8) + 1)));
    let rows: Vec<ResultRow> = (1..=usize::from(shape % 30) + 1)
        .map(|i| if i % 3 == 0 { ResultRow::failure(i, "t", &text, &text) } else { ResultRow::success(i, "herdr_fs_read", &value) })
        .collect();
    let variants = if shape & 0x80 != 0 { vec![Variant::Fenced] } else { vec![] };
    let msg = render_tool_result(rows, &variants);
    assert!(msg.chars().count() <= MAX_TOOL_RESULT_CHARS);
    let body = msg.strip_prefix(TOOL_RESULT_PREFIX).and_then(|b| b.strip_prefix('\n')).expect("prefix");
    let parsed: Vec<Value> = serde_json::from_str(body).expect("valid JSON array");
    assert!(!parsed.is_empty());
});
