//! Property tests: for arbitrary JSON and arbitrary limits, the sanitizer's output is valid
//! JSON (serialize → parse gives the same value) and respects every bound.

use ext_core::sanitize::{json_len, sanitize, SanitizeLimits};
use proptest::prelude::*;
use serde_json::{Map, Number, Value};

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "\\PC{0,40}",
        "[\\x00-\\x1f\"\\\\é😀a]{0,60}",
        // Long strings: repeated chunks keep generation cheap while crossing every cap.
        ("\\PC{1,8}", 1usize..800).prop_map(|(s, n)| s.repeat(n)),
        ("[A-Za-z0-9+/]{4}", 50usize..400).prop_map(|(s, n)| s.repeat(n)),
        "data:image/png;base64,[A-Za-z0-9+/]{200,600}",
    ]
}

fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_filter_map("finite", Number::from_f64).prop_map(Value::Number),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(12, 800, 40, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..60).prop_map(Value::Array),
            prop::collection::vec((text(), inner.clone()), 0..40)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
            (inner.clone(), 1usize..120).prop_map(|(v, n)| Value::Array(vec![v; n])),
        ]
    })
}

fn limits() -> impl Strategy<Value = SanitizeLimits> {
    (0usize..10, 0usize..50, 0usize..50, 0usize..600, 0usize..100, 0usize..8000, 0usize..700).prop_map(
        |(d, a, k, s, key, t, b)| SanitizeLimits {
            max_depth: d,
            max_array_len: a,
            max_object_keys: k,
            max_string_chars: s,
            max_key_chars: key,
            max_total_chars: t,
            binary_min_chars: b,
        },
    )
}

fn check_bounds(v: &Value, l: &SanitizeLimits, level: usize) -> Result<(), String> {
    match v {
        Value::String(s) if s.chars().count() > l.max_string_chars => {
            Err(format!("string of {} chars", s.chars().count()))
        }
        Value::Array(_) | Value::Object(_) if level >= l.max_depth => Err(format!("container at level {level}")),
        Value::Array(a) => {
            if a.len() > l.max_array_len {
                return Err(format!("array of {}", a.len()));
            }
            a.iter().try_for_each(|x| check_bounds(x, l, level + 1))
        }
        Value::Object(m) => {
            if m.len() > l.max_object_keys {
                return Err(format!("object of {} keys", m.len()));
            }
            if let Some(k) = m.keys().find(|k| k.chars().count() > l.max_key_chars) {
                return Err(format!("key of {} chars", k.chars().count()));
            }
            m.values().try_for_each(|x| check_bounds(x, l, level + 1))
        }
        _ => Ok(()),
    }
}

/// Equality where floats may differ in their last bits: serde_json's default float parser is
/// not exactly round-tripping (measured: up to 2 units in the last place), which is a property
/// of the parser, not of the sanitizer's output. Counted in such units, since a relative bound
/// fails for subnormal numbers.
const FLOAT_PARSE_ULPS: u64 = 4;

fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            x == y || (x.is_sign_negative() == y.is_sign_negative() && x.to_bits().abs_diff(y.to_bits()) <= FLOAT_PARSE_ULPS)
        }
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_json(x, y)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|((kx, vx), (ky, vy))| kx == ky && same_json(vx, vy))
        }
        _ => a == b,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn output_is_valid_json_within_every_bound(v in json(), l in limits()) {
        let out = sanitize(&v, &l);
        let text = serde_json::to_string(&out).unwrap();
        let back: Value = serde_json::from_str(&text).unwrap();
        prop_assert!(same_json(&back, &out), "roundtrip changed the value");
        let eff = l.effective();
        prop_assert!(text.len() <= eff.max_total_chars, "{} > {}", text.len(), eff.max_total_chars);
        prop_assert_eq!(json_len(&out), text.len());
        if let Err(e) = check_bounds(&out, &eff, 0) {
            prop_assert!(false, "{}", e);
        }
        // Deterministic: same input, same output.
        prop_assert_eq!(sanitize(&v, &l), out);
    }

    #[test]
    fn input_already_within_bounds_is_unchanged(v in json()) {
        let l = SanitizeLimits { max_depth: 64, max_array_len: 10_000, max_object_keys: 10_000,
            max_string_chars: 1 << 20, max_key_chars: 1 << 20, max_total_chars: usize::MAX,
            binary_min_chars: usize::MAX };
        prop_assert_eq!(sanitize(&v, &l), v);
    }
}
