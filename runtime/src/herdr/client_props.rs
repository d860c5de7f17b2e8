//! Property tests of what the client makes of bytes from the Herdr socket: line
//! reading is exactly a split at `\n` with a hard cap, however the bytes arrive,
//! and any line becomes a result or a `HerdrError` with a code, never a panic.

use proptest::prelude::*;
use serde_json::{Value, json};
use tokio::io::BufReader;

use super::{LineError, parse_reply, read_line_capped};

/// Reads every line as the client does, through a buffer of `chunk` bytes.
fn read_lines(bytes: &[u8], chunk: usize, cap: usize) -> Result<Vec<Vec<u8>>, ()> {
    let mut reader = BufReader::with_capacity(chunk, bytes);
    let mut lines = Vec::new();
    loop {
        match futures::executor::block_on(read_line_capped(&mut reader, cap)) {
            Ok(Some(line)) => lines.push(line),
            Ok(None) => return Ok(lines),
            Err(LineError::TooLarge) => return Err(()),
            Err(LineError::Io(e)) => panic!("reading from memory failed: {e}"),
        }
    }
}

/// The same, by splitting: a last line without `\n` counts, a line over `cap` is an error.
fn split_lines(bytes: &[u8], cap: usize) -> Result<Vec<Vec<u8>>, ()> {
    let mut lines: Vec<Vec<u8>> = bytes.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
    if bytes.is_empty() || bytes.ends_with(b"\n") {
        lines.pop();
    }
    match lines.iter().position(|l| l.len() > cap) {
        // Lines before the long one were read; the long one fails the read.
        Some(_) => Err(()),
        None => Ok(lines),
    }
}

fn reply_line() -> impl Strategy<Value = Vec<u8>> {
    let value = prop_oneof![
        Just(Value::Null),
        any::<i64>().prop_map(Value::from),
        any::<String>().prop_map(Value::String),
        Just(json!({"code": 7})),
        Just(json!({"code": "pane_not_found", "message": "gone"})),
        Just(json!([])),
    ];
    prop_oneof![
        (value.clone(), value.clone(), any::<bool>(), any::<bool>()).prop_map(|(r, e, has_r, has_e)| {
            let mut o = serde_json::Map::new();
            o.insert("id".into(), json!("x"));
            if has_r { o.insert("result".into(), r); }
            if has_e { o.insert("error".into(), e); }
            Value::Object(o).to_string().into_bytes()
        }),
        value.prop_map(|v| v.to_string().into_bytes()),
        prop::collection::vec(any::<u8>(), 0..200),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn line_reading_is_a_capped_split(
        pieces in prop::collection::vec(prop_oneof![
            "[a-z{}\":]{0,24}".prop_map(String::into_bytes),
            Just(b"\n".to_vec()),
            Just(b"\r\n".to_vec()),
            prop::collection::vec(any::<u8>(), 0..8),
        ], 0..24),
        chunk in 1usize..40,
        cap in 0usize..48,
    ) {
        let bytes = pieces.concat();
        prop_assert_eq!(read_lines(&bytes, chunk, cap), split_lines(&bytes, cap));
    }

    #[test]
    fn any_reply_line_is_a_result_or_a_coded_error(line in reply_line()) {
        let parsed: Option<Value> = serde_json::from_slice(&line).ok();
        match parse_reply("pane.get", &line) {
            Ok(result) => {
                let v = parsed.expect("a result comes from JSON");
                prop_assert!(v.get("error").is_none());
                prop_assert_eq!(Some(&result), v.get("result"));
            }
            Err(e) => {
                prop_assert!(!e.code.is_empty() && !e.message.is_empty());
                match parsed.as_ref().and_then(|v| v.get("error")) {
                    Some(_) => prop_assert!(e.from_daemon),
                    None => prop_assert_eq!(e.code.as_str(), "parse_error"),
                }
            }
        }
    }
}
