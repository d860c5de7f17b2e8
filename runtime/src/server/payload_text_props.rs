//! Property test: the text block writer agrees byte for byte with
//! `serde_json::to_string` on any value, including strings from outside (file
//! contents, command output) with any mix of escapes and multi-byte characters.

use proptest::prelude::*;
use serde_json::{Map, Value};

use super::to_json_text;

/// Strings dense in the bytes the scanners stop at, at every alignment.
fn tricky_string() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        8 => "[a-z]{1,80}",
        2 => Just("\"".to_string()),
        2 => Just("\\".to_string()),
        2 => (0u32..0x20).prop_map(|c| char::from_u32(c).unwrap_or('x').to_string()),
        1 => Just("\u{7f}".to_string()),
        1 => Just("é€😀\u{2028}\u{feff}¢Ü".to_string()),
    ];
    prop::collection::vec(piece, 0..40).prop_map(|pieces| pieces.concat())
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        any::<String>().prop_map(Value::String),
        tricky_string().prop_map(Value::String),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((prop_oneof![any::<String>(), tricky_string()], inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn text_block_is_serde_json_text(v in value()) {
        prop_assert_eq!(to_json_text(&v), serde_json::to_string(&v).expect("a Value always serialises"));
    }
}
