//! Property: any serialisable call list rendered canonically parses back identically,
//! whether parsed at once or fed as randomly split growing snapshots.

use ext_core::parser::{ReplyState, ToolCallParser, parse_reply};
use proptest::prelude::*;
use serde_json::{Map, Value};

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        // Quarter steps are exact in binary and short in decimal, so they round-trip exactly.
        (-100_000i32..100_000).prop_map(|x| Value::from(f64::from(x) / 4.0)),
        any::<String>().prop_map(Value::String),
        "[{}\\[\\]\"\\\\:,`$ \r\n\tA-Za-z0-9]{0,40}".prop_map(Value::String),
        Just(Value::String("\\u0024 {\"tool\":\"x\"} ```json".to_string())),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    json_leaf().prop_recursive(5, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(any::<String>(), inner, 0..6).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn args() -> impl Strategy<Value = Value> {
    prop::collection::btree_map("[a-z_\"{}\\\\ ]{1,12}", json_value(), 0..6).prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>()))
}

fn calls() -> impl Strategy<Value = Vec<(String, Value)>> {
    prop::collection::vec(("[a-z][a-z0-9_]{0,30}", args()), 0..8)
}

fn render(calls: &[(String, Value)], crlf: bool) -> String {
    let sep = if crlf { "\r\n" } else { "\n" };
    calls
        .iter()
        .map(|(tool, args)| serde_json::json!({ "tool": tool, "args": args }).to_string())
        .collect::<Vec<_>>()
        .join(sep)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn canonical_calls_round_trip(calls in calls(), crlf in any::<bool>()) {
        let text = render(&calls, crlf);
        let outcome = parse_reply(&text);
        let expected_state = if calls.is_empty() { ReplyState::None } else { ReplyState::Complete };
        prop_assert_eq!(outcome.state, expected_state);
        let got: Vec<(String, Value)> = outcome.calls.iter().map(|c| (c.tool.clone(), c.args.clone())).collect();
        prop_assert_eq!(&got, &calls);
        prop_assert!(outcome.variants.is_empty());
    }

    #[test]
    fn random_snapshot_splits_give_the_one_shot_answer(
        calls in calls(),
        crlf in any::<bool>(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
    ) {
        let text = render(&calls, crlf);
        let mut points: Vec<usize> = cuts.iter().map(|i| i.index(text.len() + 1)).collect();
        points.sort_unstable();
        let mut parser = ToolCallParser::new();
        for p in points {
            let mut p = p;
            while !text.is_char_boundary(p) { p += 1; }
            let state = parser.feed(&text[..p], false);
            prop_assert_eq!(state, parse_reply(&text[..p]).state);
        }
        parser.feed(&text, true);
        prop_assert_eq!(parser.outcome(), parse_reply(&text));
    }
}
