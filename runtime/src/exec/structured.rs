//! `structured_output`: a stream that is exactly one JSON object is handed back
//! parsed, so a model need not re-parse text (spec §1.17).

use serde_json::Value;

use super::output::{Output, Stream};

/// Largest stream considered for parsing.
pub const STRUCTURED_MAX_BYTES: usize = 65_536;

/// The parsed object and its stream; stdout is preferred over stderr. A stream
/// qualifies only when it is complete (nothing dropped), at most 64 KiB and, after
/// trimming whitespace, one JSON object and nothing else.
pub fn detect(output: &Output) -> Option<(Value, Stream)> {
    [Stream::Stdout, Stream::Stderr].into_iter().find_map(|stream| {
        let bytes = output.complete_stream(stream, STRUCTURED_MAX_BYTES)?;
        let text = std::str::from_utf8(&bytes).ok()?.trim();
        if !text.starts_with('{') {
            return None;
        }
        match serde_json::from_str::<Value>(text) {
            Ok(v @ Value::Object(_)) => Some((v, stream)),
            _ => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn output(stdout: &[u8], stderr: &[u8]) -> Output {
        let mut o = Output::new(1 << 20);
        o.push(Stream::Stdout, stdout);
        o.push(Stream::Stderr, stderr);
        o
    }

    #[test]
    fn one_object_per_stream_with_stdout_first() {
        let (v, s) = detect(&output(b"  {\"a\":1}\n", b"{\"b\":2}")).unwrap();
        assert_eq!((v, s), (json!({"a":1}), Stream::Stdout));
        let (v, s) = detect(&output(b"not json", b"{\"b\":2}\n")).unwrap();
        assert_eq!((v, s), (json!({"b":2}), Stream::Stderr));
    }

    #[test]
    fn arrays_two_objects_and_oversized_streams_do_not_count() {
        assert!(detect(&output(b"[1,2]", b"")).is_none());
        assert!(detect(&output(b"{\"a\":1}{\"b\":2}", b"")).is_none());
        assert!(detect(&output(b"{\"a\":1}\nmore", b"")).is_none());
        let pad = " ".repeat(STRUCTURED_MAX_BYTES - 7);
        let at_limit = format!("{{\"a\":1}}{pad}");
        assert_eq!(at_limit.len(), STRUCTURED_MAX_BYTES);
        assert!(detect(&output(at_limit.as_bytes(), b"")).is_some());
        let over = format!("{at_limit} ");
        assert!(detect(&output(over.as_bytes(), b"")).is_none());
    }
}
