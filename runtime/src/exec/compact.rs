//! Compaction of a finished command's complete output (spec §1.15), so that a long
//! but successful result does not flood a model's context:
//!
//! - a uniform JSON array of objects (every item has the same keys) becomes one
//!   `{"$herdr_table":{encoding:"object-array/v1",columns,rows,items}}` object, which
//!   says each key once instead of once per item and loses nothing;
//! - any other text keeps its first [`HEAD_LINES`] and last [`TAIL_LINES`] lines around
//!   a `…[omitted N lines]…` marker, and reports the byte range left out so that the
//!   caller can read exactly that range by offset.
//!
//! Output at or under both thresholds ([`MIN_BYTES`], [`MIN_LINES`]) is left alone.

use serde_json::{Map, Value, json};

/// Output longer than this many bytes is compacted.
pub const MIN_BYTES: usize = 8192;
/// Output with more lines than this is compacted.
pub const MIN_LINES: usize = 80;
/// Lines kept from the start.
pub const HEAD_LINES: usize = 20;
/// Lines kept from the end.
pub const TAIL_LINES: usize = 40;
/// Encoding tag of the table form.
pub const TABLE_ENCODING: &str = "object-array/v1";

/// A compacted text and what it stands for.
#[derive(Debug, Clone, PartialEq)]
pub struct Compacted {
    pub text: String,
    /// `{bytes, lines, …}` of the original, plus what was kept or left out.
    pub counts: Value,
}

/// Lines of `text`: a final newline ends the last line rather than starting an empty one.
fn line_count(text: &str) -> usize {
    if text.is_empty() {
        return 0;
    }
    text.matches('\n').count() + usize::from(!text.ends_with('\n'))
}

/// The compact form of a complete output, or `None` when it is small enough (or
/// compaction would not shorten it).
pub fn compact(text: &str) -> Option<Compacted> {
    let lines = line_count(text);
    if text.len() <= MIN_BYTES && lines <= MIN_LINES {
        return None;
    }
    table(text, lines).or_else(|| head_tail(text, lines)).filter(|c| c.text.len() < text.len())
}

/// Replaces `payload[key]` with the compact form of `bytes` when that applies, and
/// marks the payload `compacted:true` with its `counts`. Output that is not valid
/// UTF-8 is left alone: the byte offsets in `counts` must be exact.
pub fn apply(payload: &mut Value, key: &str, bytes: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(bytes) else { return false };
    let Some(c) = compact(text) else { return false };
    payload[key] = json!(c.text);
    payload["compacted"] = json!(true);
    payload["counts"] = c.counts;
    true
}

/// A uniform array of objects as a `$herdr_table`.
fn table(text: &str, lines: usize) -> Option<Compacted> {
    let trimmed = text.trim();
    if !trimmed.starts_with('[') {
        return None;
    }
    let Value::Array(items) = serde_json::from_str::<Value>(trimmed).ok()? else { return None };
    let first = items.first()?.as_object()?;
    let columns: Vec<&String> = first.keys().collect();
    let mut rows = Vec::with_capacity(items.len());
    for item in &items {
        let obj = item.as_object()?;
        if obj.len() != columns.len() {
            return None;
        }
        let row: Option<Vec<Value>> = columns.iter().map(|c| obj.get(*c).cloned()).collect();
        rows.push(Value::Array(row?));
    }
    let table = json!({"$herdr_table": {
        "encoding": TABLE_ENCODING,
        "columns": columns,
        "rows": rows,
        "items": items.len(),
    }});
    Some(Compacted {
        text: table.to_string(),
        counts: json!({"bytes": text.len(), "lines": lines, "items": items.len(), "columns": columns.len(), "form": "table"}),
    })
}

/// The first and last lines around an omission marker.
fn head_tail(text: &str, lines: usize) -> Option<Compacted> {
    if lines <= HEAD_LINES + TAIL_LINES {
        return None;
    }
    let omitted = lines - HEAD_LINES - TAIL_LINES;
    // Byte offsets where the omitted lines start and where the kept tail starts.
    let starts: Vec<usize> = std::iter::once(0).chain(text.match_indices('\n').map(|(i, _)| i + 1)).collect();
    let (cut_from, cut_to) = (starts[HEAD_LINES], starts[HEAD_LINES + omitted]);
    let mut out = String::with_capacity(cut_from + (text.len() - cut_to) + 32);
    out.push_str(&text[..cut_from]);
    out.push_str(&format!("…[omitted {omitted} lines]…\n"));
    out.push_str(&text[cut_to..]);
    let mut counts = Map::new();
    counts.insert("bytes".into(), json!(text.len()));
    counts.insert("lines".into(), json!(lines));
    counts.insert("head_lines".into(), json!(HEAD_LINES));
    counts.insert("tail_lines".into(), json!(TAIL_LINES));
    counts.insert("omitted_lines".into(), json!(omitted));
    counts.insert("omitted_from_offset".into(), json!(cut_from));
    counts.insert("omitted_to_offset".into(), json!(cut_to));
    counts.insert("form".into(), json!("head_tail"));
    Some(Compacted { text: out, counts: Value::Object(counts) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbered(n: usize) -> String {
        (1..=n).map(|i| format!("line {i}\n")).collect()
    }

    #[test]
    fn output_at_both_limits_is_left_alone() {
        let at_lines = numbered(MIN_LINES);
        assert!(at_lines.len() <= MIN_BYTES);
        assert_eq!(compact(&at_lines), None);
        let at_bytes = "x".repeat(MIN_BYTES);
        assert_eq!(compact(&at_bytes), None);
        // Without a final newline the last line still counts once.
        assert_eq!(line_count("a\nb"), 2);
        assert_eq!(line_count("a\nb\n"), 2);
        assert_eq!(line_count(""), 0);
    }

    #[test]
    fn one_line_over_keeps_head_and_tail_and_names_the_omitted_range() {
        let text = numbered(MIN_LINES + 1);
        let c = compact(&text).expect("81 lines are compacted");
        let omitted = MIN_LINES + 1 - HEAD_LINES - TAIL_LINES;
        assert_eq!(c.counts["omitted_lines"], omitted);
        assert_eq!(c.counts["lines"], MIN_LINES + 1);
        let kept: Vec<&str> = c.text.lines().collect();
        assert_eq!(kept.len(), HEAD_LINES + 1 + TAIL_LINES);
        assert_eq!(kept[0], "line 1");
        assert_eq!(kept[HEAD_LINES - 1], "line 20");
        assert_eq!(kept[HEAD_LINES], format!("…[omitted {omitted} lines]…"));
        assert_eq!(kept[HEAD_LINES + 1], format!("line {}", HEAD_LINES + omitted + 1));
        assert_eq!(*kept.last().unwrap(), format!("line {}", MIN_LINES + 1));
        let (from, to) = (c.counts["omitted_from_offset"].as_u64().unwrap() as usize, c.counts["omitted_to_offset"].as_u64().unwrap() as usize);
        assert_eq!(&text[from..to], &numbered(HEAD_LINES + omitted)[numbered(HEAD_LINES).len()..]);
    }

    #[test]
    fn one_byte_over_with_few_lines_is_not_shortened() {
        // Nothing can be omitted from three long lines: the output stays whole.
        let text = format!("{}\n{}\n{}", "a".repeat(3000), "b".repeat(3000), "c".repeat(MIN_BYTES - 6000 - 1));
        assert_eq!(text.len(), MIN_BYTES + 1);
        assert_eq!(compact(&text), None);
    }

    #[test]
    fn uniform_object_arrays_become_a_lossless_table() {
        let items: Vec<Value> = (0..200).map(|i| json!({"name": format!("pkg-{i}"), "version": "1.0.0", "ok": i % 2 == 0})).collect();
        let text = serde_json::to_string_pretty(&items).unwrap();
        let c = compact(&text).unwrap();
        let v: Value = serde_json::from_str(&c.text).unwrap();
        let t = &v["$herdr_table"];
        assert_eq!(t["encoding"], TABLE_ENCODING);
        assert_eq!(t["items"], 200);
        let columns: Vec<&str> = t["columns"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
        // Rebuild every item from the table: nothing is lost.
        for (row, item) in t["rows"].as_array().unwrap().iter().zip(&items) {
            let rebuilt: Map<String, Value> = columns.iter().map(|c| c.to_string()).zip(row.as_array().unwrap().iter().cloned()).collect();
            assert_eq!(&Value::Object(rebuilt), item);
        }
        assert_eq!(c.counts["form"], "table");
        assert!(c.text.len() < text.len());
    }

    #[test]
    fn mixed_arrays_fall_back_to_head_and_tail() {
        let mut items: Vec<Value> = (0..100).map(|i| json!({"a": i})).collect();
        items.push(json!({"b": 1}));
        let text = serde_json::to_string_pretty(&items).unwrap();
        let c = compact(&text).unwrap();
        assert_eq!(c.counts["form"], "head_tail");
        let scalars = serde_json::to_string_pretty(&(0..3000).collect::<Vec<_>>()).unwrap();
        assert_eq!(compact(&scalars).unwrap().counts["form"], "head_tail");
    }
}
