//! What `pane.read` returns when asked for `lines` (spec/herdr.md D.2): the count
//! runs over the pane's screen rows, blank ones included. On a 39-row pane holding
//! three lines of output, `recent` with `lines:10` is the bottom ten rows — all
//! blank — so the text is empty and `truncated` is true; `visible` counts from the top.

/// Rows of the headless pane the live transcript was taken on.
pub const VIEWPORT_ROWS: usize = 39;

/// The text and `truncated` flag of a read of `text` from `source`.
pub fn read(text: &str, source: &str, lines: Option<u64>) -> (String, bool) {
    let Some(lines) = lines else { return (text.to_string(), false) };
    let rows: Vec<&str> = text.lines().collect();
    let screen = rows.len().max(VIEWPORT_ROWS);
    let take = (lines as usize).min(screen);
    let (start, end) = match source {
        "recent" | "recent_unwrapped" => (screen - take, screen),
        _ => (0, take),
    };
    let has_text = |r: std::ops::Range<usize>| r.into_iter().any(|i| rows.get(i).is_some_and(|row| !row.trim().is_empty()));
    let truncated = has_text(0..start) || has_text(end..screen);
    let picked: Vec<&str> = (start..end).map(|i| rows.get(i).copied().unwrap_or("")).collect();
    let last = picked.iter().rposition(|row| !row.trim().is_empty());
    let text = match last {
        Some(last) => format!("{}\n", picked[..=last].join("\n")),
        None => String::new(),
    };
    (text, truncated)
}
