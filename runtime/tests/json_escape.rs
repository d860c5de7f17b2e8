//! serde_json as this workspace builds it (vendor/serde_json, whose string escaper
//! scans many bytes per step) writes strings exactly as JSON's rules and upstream
//! serde_json do: checked against an escaper written here one character at a time.
//! Tool results are serialised by rmcp with this serde_json, so a difference would
//! change what every client reads.

use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// Upstream serde_json's escaping, one character at a time: the short escapes it
/// uses, `\u00XX` (lowercase hex) for the other control characters, everything
/// else (DEL and all of Unicode included) as it is.
fn reference_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The whole value, with strings (keys included) written by [`reference_string`]
/// and everything else as serde_json writes it.
fn reference(value: &Value) -> String {
    match value {
        Value::String(s) => reference_string(s),
        Value::Array(items) => format!("[{}]", items.iter().map(reference).collect::<Vec<_>>().join(",")),
        Value::Object(map) => format!(
            "{{{}}}",
            map.iter().map(|(k, v)| format!("{}:{}", reference_string(k), reference(v))).collect::<Vec<_>>().join(",")
        ),
        other => serde_json::to_string(other).expect("a scalar serialises"),
    }
}

fn same_as_reference(value: &Value) {
    assert_eq!(serde_json::to_string(value).expect("a Value serialises"), reference(value), "for {value:?}");
}

#[test]
fn every_ascii_and_some_unicode_at_every_offset() {
    let specials: Vec<char> =
        (0u8..=0x7f).map(char::from).chain(['é', '€', '😀', '\u{2028}', '\u{feff}', '¢', 'Ü']).collect();
    for c in specials {
        for offset in 0..=70 {
            for tail in [0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 65] {
                same_as_reference(&Value::String(format!("{}{c}{}", "a".repeat(offset), "b".repeat(tail))));
            }
        }
    }
}

#[test]
fn runs_of_escapes_and_long_clean_runs() {
    for s in ["", "\"", "\\\\\\\\\\\\\\\\\\", "\n\n\n\n\n\n\n\n\n\n", "abcdefgh\"abcdefgh\\abcdefgh\u{1f}", "€€€€\t€€€€"] {
        same_as_reference(&Value::String(s.to_string()));
    }
    let long: String = (0..5000).map(|i| if i % 97 == 0 { '"' } else { char::from(b'a' + (i % 26) as u8) }).collect();
    same_as_reference(&Value::String(long));
    // A file read's payload: the text block holds the payload's JSON, escaped again.
    let payload = json!({"ok": true, "path": "src/\"odd\"\\name.rs", "content": "fn main() {\n\tprintln!(\"hi\\n\");\n}\n".repeat(200)});
    same_as_reference(&payload);
    same_as_reference(&Value::String(payload.to_string()));
}

#[test]
fn keys_and_nesting() {
    same_as_reference(&json!({
        "ok": true, "none": null, "u": u64::MAX, "f": 0.1,
        "list": [1, "two", [], {}, [null, [true]]],
        "nested": {"k\"ey": {"\n": "v\u{0}"}},
        "empty": "",
    }));
}

#[test]
fn writers_other_than_a_vec_get_the_same_text() {
    let value = json!({"text": "a\"b\\c\u{1}d".repeat(40)});
    let expected = reference(&value);
    assert_eq!(value.to_string(), expected, "Display");
    let mut via_writer = Vec::new();
    serde_json::to_writer(&mut via_writer, &value).expect("a Value serialises");
    assert_eq!(String::from_utf8(via_writer).expect("UTF-8"), expected, "to_writer");
    let pretty = serde_json::to_string_pretty(&value).expect("a Value serialises");
    assert_eq!(pretty, format!("{{\n  \"text\": {}\n}}", reference(&value["text"])), "pretty");
}

/// Strings dense in the bytes the scan stops at, at every alignment.
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

fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<String>().prop_map(Value::String),
        tricky_string().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((prop_oneof![any::<String>(), tricky_string()], inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn any_value_is_written_as_the_reference_writes_it(v in value()) {
        prop_assert_eq!(serde_json::to_string(&v).expect("a Value serialises"), reference(&v));
    }

    #[test]
    fn any_string_round_trips(s in any::<String>()) {
        let text = serde_json::to_string(&s).expect("a string serialises");
        prop_assert_eq!(serde_json::from_str::<String>(&text).expect("its own output parses"), s);
    }
}
