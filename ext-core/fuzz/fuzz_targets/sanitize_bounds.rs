//! Sanitizer output is always valid JSON within every configured bound.
#![no_main]

use ext_core::sanitize::{SanitizeLimits, json_len, sanitize};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fn depth(v: &Value) -> usize {
    match v {
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Value::Object(map) => 1 + map.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let limits = SanitizeLimits {
        max_depth: usize::from(data[0] % 10),
        max_array_len: usize::from(data[1] % 20) + 1,
        max_object_keys: usize::from(data[1] / 20 % 10) + 1,
        max_string_chars: usize::from(data[2]) * 4,
        max_key_chars: usize::from(data[2] % 64),
        max_total_chars: usize::from(data[3]) * 40,
        binary_min_chars: 256,
    };
    let text = String::from_utf8_lossy(&data[4..]);
    let input = serde_json::from_str::<Value>(&text).unwrap_or_else(|_| Value::String(text.into_owned()));
    let out = sanitize(&input, &limits);
    let effective = limits.effective();
    let serialized = out.to_string();
    // Parsing must succeed; equality is not asserted because serde_json without
    // `float_roundtrip` may read a huge float back one ULP off.
    serde_json::from_str::<Value>(&serialized).expect("sanitizer output is valid JSON");
    assert!(json_len(&out) <= effective.max_total_chars, "{} > {}", json_len(&out), effective.max_total_chars);
    assert!(serialized.len() <= effective.max_total_chars);
    assert!(depth(&out) <= effective.max_depth, "depth {} > {}", depth(&out), effective.max_depth);
});
