//! The `TOOL_RESULT:` message that carries call results back to the model (spec §1.9).
//!
//! Unlike the reference, the message stays valid JSON when it has to be shortened: results
//! that do not fit are replaced by an explicit truncation object with a preview, and a marker
//! row says that shortening happened. The whole message never exceeds
//! [`MAX_TOOL_RESULT_CHARS`] UTF-16 code units (what the reference's `text.length` counts).

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::parser::{Problem, ReplyState, Variant};

/// Every TOOL_RESULT message starts with this line.
pub const TOOL_RESULT_PREFIX: &str = "TOOL_RESULT:";
/// Upper bound on the whole message, prefix included, in UTF-16 code units: the reference's
/// `text.length`, which is also how chat pages count what fits in their composer.
pub const MAX_TOOL_RESULT_CHARS: usize = 60_000;
/// Error details longer than this are cut before any other shrinking.
pub const MAX_DETAIL_CHARS: usize = 2_000;
/// The pseudo-tool named in rows the bridge itself writes (repairs, notices, truncation).
pub const BRIDGE_TOOL: &str = "bridge_protocol";

pub const ERR_MISSING_RESPONSE: &str = "missing-tool-response";
pub const ERR_DELIVERY_UNKNOWN: &str = "delivery_unknown";
pub const ERR_TRUNCATED: &str = "tool-result-truncated";
pub const NOTICE_NON_CANONICAL: &str = "non-canonical-tool-json";

/// One row of the TOOL_RESULT array.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultRow {
    pub index: usize,
    pub tool: String,
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl ResultRow {
    /// A successful call; the result is passed through the presentation sanitizer.
    pub fn success(index: usize, tool: &str, result: &Value) -> Self {
        ResultRow { index, tool: tool.to_string(), ok: true, result: Some(present(result)), error: None, detail: None }
    }

    /// A successful call whose result is already sanitized (e.g. replayed from the journal).
    pub fn success_presented(index: usize, tool: &str, presented: Value) -> Self {
        ResultRow { index, tool: tool.to_string(), ok: true, result: Some(presented), error: None, detail: None }
    }

    pub fn failure(index: usize, tool: &str, error: &str, detail: &str) -> Self {
        let error = if error.is_empty() { "tool-call-failed" } else { error };
        ResultRow {
            index,
            tool: tool.to_string(),
            ok: false,
            result: None,
            error: Some(error.to_string()),
            detail: Some(detail.to_string()),
        }
    }
}

/// Presentation of a call's result: the tool's payload, once, bounded by the sanitizer.
/// Kept behind one function so the implementation in `crate::sanitize` can be swapped
/// without touching the callers.
///
/// Strings may use the whole message budget: a single file read is shown whole when it
/// fits, and several big results share the budget when the message is rendered.
pub fn present(value: &Value) -> Value {
    let limits = crate::sanitize::SanitizeLimits { max_string_chars: MAX_TOOL_RESULT_CHARS, ..Default::default() };
    crate::sanitize::sanitize(&payload_of(value), &limits)
}

/// One copy of what a tool answered. An MCP `CallToolResult` carries its payload twice (a
/// text block with the JSON and `structuredContent` with the same object): the structured
/// copy when there is one, else the text (parsed when it is JSON). More than one block, or a
/// block that is not text, keeps the blocks (as their text when they are text). `isError`
/// stays with the payload. Anything that is not a `CallToolResult` passes unchanged.
pub fn payload_of(result: &Value) -> Value {
    let Some(object) = result.as_object() else { return result.clone() };
    let structured = object.get("structuredContent").filter(|v| !v.is_null());
    let content = object.get("content").and_then(Value::as_array).map(Vec::as_slice);
    let block_value =
        |block: &Value| match (block.get("type").and_then(Value::as_str), block.get("text").and_then(Value::as_str)) {
            (Some("text"), Some(text)) => match serde_json::from_str::<Value>(text) {
                Ok(parsed) if parsed.is_object() || parsed.is_array() => parsed,
                _ => Value::String(text.to_string()),
            },
            _ => block.clone(),
        };
    let payload = match (structured, content) {
        (Some(structured), _) => structured.clone(),
        (None, Some([block])) => block_value(block),
        (None, Some(blocks)) => Value::Array(blocks.iter().map(block_value).collect()),
        (None, None) => return result.clone(),
    };
    if object.get("isError") != Some(&Value::Bool(true)) {
        return payload;
    }
    match payload {
        Value::Object(mut map) => {
            map.entry("isError").or_insert(Value::Bool(true));
            Value::Object(map)
        }
        other => json!({ "isError": true, "content": other }),
    }
}

/// Render the TOOL_RESULT message for a round. `variants` are the drift forms the reply used.
pub fn render_tool_result(mut rows: Vec<ResultRow>, variants: &[Variant]) -> String {
    if !variants.is_empty() {
        rows.push(reminder_row(rows.len() + 1, variants));
    }
    render_bounded(rows)
}

fn reminder_row(index: usize, variants: &[Variant]) -> ResultRow {
    let forms: Vec<Value> = variants.iter().map(|v| json!(v)).collect();
    ResultRow {
        index,
        tool: BRIDGE_TOOL.to_string(),
        ok: true,
        result: Some(json!({ "notice": NOTICE_NON_CANONICAL, "forms": forms })),
        error: None,
        detail: Some(
            "Your calls were understood, but please use the canonical form next time: one {\"tool\":\"<name>\",\"args\":{...}} object per line, with nothing else in a tool-call reply."
                .to_string(),
        ),
    }
}

/// The message sent instead of results when the reply's tool JSON was unusable.
pub fn render_repair(state: ReplyState, problems: &[Problem]) -> String {
    let mut detail = String::from(
        "No tool ran. Re-send every call as complete, valid JSON, one {\"tool\":\"<name>\",\"args\":{...}} object per line, or answer normally without JSON.",
    );
    if let Some(first) = problems.first() {
        let reason: String = first.reason.chars().take(300).collect();
        detail.push_str(&format!(" First problem at characters {}..{}: {reason}", first.span.0, first.span.1));
    }
    let row = ResultRow::failure(1, BRIDGE_TOOL, &format!("{}-tool-json", state.as_str()), &detail);
    render_bounded(vec![row])
}

/// What the user sees when the model keeps sending broken tool JSON.
pub fn repair_limit_message(repairs: u32) -> String {
    format!(
        "Stopped: the model sent unusable tool-call JSON {repairs} times in a row after being asked to fix it. Check the last reply, then send your request again."
    )
}

fn message_chars(rows: &[ResultRow]) -> usize {
    TOOL_RESULT_PREFIX.len() + 1 + units(&serde_json::to_string(rows).unwrap_or_default())
}

/// Length in UTF-16 code units (a character outside the BMP, e.g. an emoji, counts twice).
fn units(s: &str) -> usize {
    s.chars().map(char::len_utf16).sum()
}

fn chars(s: &str) -> usize {
    s.chars().count()
}

fn to_message(rows: &[ResultRow]) -> String {
    // Serializing plain rows of `Value`s cannot fail; an empty array is the safe fallback.
    let body = serde_json::to_string(rows).unwrap_or_else(|_| "[]".to_string());
    format!("{TOOL_RESULT_PREFIX}\n{body}")
}

fn cut_chars(s: &str, max: usize) -> String {
    if chars(s) <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

fn marker_row(index: usize, detail: &str) -> ResultRow {
    ResultRow::failure(index, BRIDGE_TOOL, ERR_TRUNCATED, detail)
}

/// Serialize rows into a message of at most [`MAX_TOOL_RESULT_CHARS`], shrinking as needed.
fn render_bounded(mut rows: Vec<ResultRow>) -> String {
    for row in &mut rows {
        if let Some(detail) = &row.detail {
            row.detail = Some(cut_chars(detail, MAX_DETAIL_CHARS));
        }
        if let Some(error) = &row.error {
            row.error = Some(cut_chars(error, 200));
        }
    }
    if message_chars(&rows) <= MAX_TOOL_RESULT_CHARS {
        return to_message(&rows);
    }
    let marker = marker_row(
        rows.len() + 1,
        &format!(
            "The results above were shortened to fit {MAX_TOOL_RESULT_CHARS} characters. Ask for less at a time (ranges, filters, paging) to see more."
        ),
    );
    // Water-fill: every result gets an equal share of what is left after the skeleton; small
    // results keep their full size and give their unused share to the larger ones.
    let skeleton: Vec<ResultRow> =
        rows.iter().map(|r| ResultRow { result: r.result.as_ref().map(|_| Value::Null), ..r.clone() }).collect();
    let mut with_marker = skeleton.clone();
    with_marker.push(marker.clone());
    let fixed = message_chars(&with_marker);
    if fixed < MAX_TOOL_RESULT_CHARS {
        let mut sizes: Vec<(usize, usize)> = rows
            .iter()
            .enumerate()
            .filter_map(|(i, r)| r.result.as_ref().map(|v| (i, units(&v.to_string()).saturating_sub(4))))
            .collect();
        sizes.sort_by_key(|&(_, size)| size);
        let mut budget = MAX_TOOL_RESULT_CHARS - fixed;
        let mut remaining = sizes.len();
        for (i, size) in sizes {
            let share = budget / remaining.max(1);
            remaining -= 1;
            if size <= share {
                budget -= size;
                continue;
            }
            let shrunk = shrink_to(rows[i].result.as_ref().unwrap_or(&Value::Null), share);
            budget -= units(&shrunk.to_string()).saturating_sub(4).min(budget);
            rows[i].result = Some(shrunk);
        }
        rows.push(marker.clone());
        if message_chars(&rows) <= MAX_TOOL_RESULT_CHARS {
            return to_message(&rows);
        }
        rows.pop();
    }
    // Too many rows for even the skeleton: keep what fits and name the rest in the marker.
    let mut kept: Vec<ResultRow> = Vec::new();
    let total = rows.len();
    for row in skeleton.into_iter().map(|mut r| {
        if r.result.is_some() {
            r.result = Some(json!({ "truncated": true }));
        }
        r.detail = r.detail.map(|d| cut_chars(&d, 200));
        r
    }) {
        kept.push(row);
        let mut probe = kept.clone();
        probe.push(marker_row(0, &omitted_detail(kept.len(), total)));
        if message_chars(&probe) > MAX_TOOL_RESULT_CHARS {
            kept.pop();
            break;
        }
    }
    let next_index = kept.last().map_or(1, |r| r.index + 1);
    kept.push(marker_row(next_index, &omitted_detail(kept.len(), total)));
    to_message(&kept)
}

fn omitted_detail(kept: usize, total: usize) -> String {
    format!(
        "Only {kept} of {total} rows fit in {MAX_TOOL_RESULT_CHARS} characters; results were dropped and later rows omitted. Make fewer, smaller calls per reply."
    )
}

/// Shrink a result so its serialization fits `max_chars`, keeping its structure: the
/// sanitizer cuts strings and arrays with explicit markers. Below the sanitizer's smallest
/// budget only a truncation stub fits.
fn shrink_to(value: &Value, max_chars: usize) -> Value {
    if max_chars >= crate::sanitize::MIN_TOTAL_CHARS {
        let limits = crate::sanitize::SanitizeLimits { max_total_chars: max_chars, ..Default::default() };
        let out = crate::sanitize::sanitize(value, &limits);
        if units(&out.to_string()) <= max_chars {
            return out;
        }
    }
    json!({ "truncated": true, "original_chars": chars(&value.to_string()) })
}
