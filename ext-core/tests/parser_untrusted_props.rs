//! Property: the tool-call parser runs on page text the model (or the page) wrote,
//! so any text — half-written calls, stray braces, fences, labels, multi-byte
//! characters — gets a classification without a panic; spans point inside the
//! text; and the streaming parser's final answer is the one-shot answer, whether
//! the snapshots grew the text or rewrote it.

use ext_core::parser::{ParseOutcome, ReplyState, ToolCallParser, parse_reply};
use ext_core::validate::{Catalog, Checked, MAX_CALLS_PER_REPLY, MAX_TOOL_NAME_CHARS, validate_calls};
use proptest::prelude::*;

/// Fragments a chat page shows, well-formed and not.
fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => Just(r#"{"tool":"herdr_fs_read","args":{"path":"a.txt"}}"#.to_string()),
        1 => Just(r#"{"name":"x","arguments":"{\"a\":1}"}"#.to_string()),
        1 => Just(r#"{"tool_calls":[{"function":{"name":"y","arguments":{}}}]}"#.to_string()),
        1 => Just(r#"[{"tool":"a","args":{}},{"tool":"b","args":[]}]"#.to_string()),
        1 => Just(r#"{"tool":"t","args":{"s":"line"#.to_string()),
        1 => Just("\"\n\t".to_string()),
        2 => prop::sample::select(vec!["{", "}", "[", "]", "\"", "\\", ":", ",", "\\u00", "\\ud800"]).prop_map(str::to_string),
        2 => prop::sample::select(vec!["```json\n", "```\n", "json", "Copy code", "JSON\n", "javascript"]).prop_map(str::to_string),
        2 => prop::sample::select(vec!["\n", "\r\n", " ", "é", "😀", "\u{212a}", "\u{0}"]).prop_map(str::to_string),
        2 => "[a-z ]{0,12}",
        1 => any::<String>(),
    ]
}

fn page_text() -> impl Strategy<Value = String> {
    prop::collection::vec(fragment(), 0..16).prop_map(|f| f.concat())
}

/// Many calls, long names and names from the catalog, to reach validation's limits.
fn many_calls_text() -> impl Strategy<Value = String> {
    let call = prop_oneof![
        Just(r#"{"tool":"herdr_fs_read","args":{"path":"a"}}"#.to_string()),
        Just(r#"{"tool":"herdr_fs_read","args":"{}"}"#.to_string()),
        Just(r#"{"tool":"herdr_fs_read","args":[1]}"#.to_string()),
        (120usize..140).prop_map(|n| format!(r#"{{"tool":"{}","args":{{}}}}"#, "é".repeat(n))),
        "[a-z_]{1,10}".prop_map(|n| format!(r#"{{"tool":"{n}","args":{{}}}}"#)),
    ];
    prop::collection::vec(call, 0..(MAX_CALLS_PER_REPLY + 4)).prop_map(|c| c.join("\n"))
}

fn check_outcome(text: &str, outcome: &ParseOutcome) {
    for span in outcome.calls.iter().map(|c| c.span).chain(outcome.problems.iter().map(|p| p.span)) {
        assert!(span.0 <= span.1 && span.1 <= text.len(), "span {span:?} outside {} bytes", text.len());
        assert!(text.is_char_boundary(span.0) && text.is_char_boundary(span.1), "span {span:?} cuts a character");
    }
    match outcome.state {
        ReplyState::Complete => assert!(!outcome.calls.is_empty() && outcome.problems.is_empty()),
        ReplyState::None => assert!(outcome.calls.is_empty() && outcome.problems.is_empty()),
        ReplyState::Malformed | ReplyState::Incomplete => {}
    }
    let mut sorted = outcome.variants.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted, outcome.variants);
}

fn char_floor(text: &str, mut i: usize) -> usize {
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn any_text_is_classified(text in page_text()) {
        check_outcome(&text, &parse_reply(&text));
    }

    #[test]
    fn growing_snapshots_agree_with_one_shot_parses(
        text in page_text(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..10),
    ) {
        let mut points: Vec<usize> = cuts.iter().map(|i| char_floor(&text, i.index(text.len() + 1))).collect();
        points.sort_unstable();
        let mut parser = ToolCallParser::new();
        for p in points {
            prop_assert_eq!(parser.feed(&text[..p], false), parse_reply(&text[..p]).state);
        }
        parser.feed(&text, true);
        prop_assert_eq!(parser.outcome(), parse_reply(&text));
    }

    /// Pages re-render: a snapshot may drop, replace or insert text anywhere. However
    /// the earlier snapshots went, the final one is parsed exactly.
    #[test]
    fn rewritten_snapshots_end_in_the_one_shot_answer(
        base in page_text(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<prop::sample::Index>(), fragment()), 1..6),
    ) {
        let mut parser = ToolCallParser::new();
        let mut text = base;
        for (a, b, insert) in edits {
            parser.feed(&text, false);
            let (x, y) = (char_floor(&text, a.index(text.len() + 1)), char_floor(&text, b.index(text.len() + 1)));
            text.replace_range(x.min(y)..x.max(y), &insert);
        }
        parser.feed(&text, true);
        let outcome = parser.outcome();
        check_outcome(&text, &outcome);
        prop_assert_eq!(outcome, parse_reply(&text));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 100, ..ProptestConfig::default() })]

    /// Whatever the parser found is checked call by call: one row per call, in order,
    /// and only a catalog tool with object arguments of a reply within the batch limit runs.
    #[test]
    fn parsed_calls_validate_one_row_each(text in prop_oneof![page_text(), many_calls_text()]) {
        let catalog = Catalog::from_tools(&[serde_json::json!({"name": "herdr_fs_read"})]);
        let calls = parse_reply(&text).calls;
        let checked = validate_calls(&calls, &catalog);
        prop_assert_eq!(checked.len(), calls.len());
        for (i, (c, call)) in checked.iter().zip(&calls).enumerate() {
            match c {
                Checked::Run(v) => {
                    prop_assert_eq!(v.index, i + 1);
                    prop_assert!(calls.len() <= MAX_CALLS_PER_REPLY, "a call of an oversized reply ran");
                    prop_assert_eq!(v.tool.as_str(), "herdr_fs_read");
                    prop_assert!(call.args.is_object());
                }
                Checked::Refused(r) => {
                    prop_assert_eq!(r.index, i + 1);
                    prop_assert!(r.tool.chars().count() <= MAX_TOOL_NAME_CHARS + 1);
                    prop_assert!(!r.detail.is_empty());
                }
            }
        }
    }
}

#[test]
fn deeply_nested_call_like_text_is_classified() {
    for depth in [1_000, 100_000] {
        let text = format!(r#"{{"tool":"t","args":{}{}}}"#, "[".repeat(depth), "]".repeat(depth));
        check_outcome(&text, &parse_reply(&text));
        let open = format!(r#"{{"tool":"t","args":{}"#, "{\"a\":".repeat(depth));
        assert_eq!(parse_reply(&open).state, ReplyState::Incomplete);
    }
}
