//! The parser never panics, its spans point at JSON openers and closers, and feeding any
//! split of a reply as growing snapshots gives exactly the one-shot answer (also for sampled
//! intermediate prefixes' states).
#![no_main]

use ext_core::parser::{ToolCallParser, parse_reply};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&seed, rest)) = data.split_first() else { return };
    let text = String::from_utf8_lossy(rest);
    let one_shot = parse_reply(&text);
    for call in &one_shot.calls {
        let (start, end) = call.span;
        assert!(start < end && end <= text.len());
        assert!(matches!(text.as_bytes()[start], b'{' | b'['));
        assert!(matches!(text.as_bytes()[end - 1], b'}' | b']'));
        assert!(!call.tool.trim().is_empty());
    }
    // Split points from the seed: steps of 1..=32 bytes, moved to char boundaries. Every 8th
    // prefix's state is compared with a one-shot parse of that prefix (keeps an exec cheap).
    let step = usize::from(seed % 32) + 1;
    let mut n = 0usize;
    let mut parser = ToolCallParser::new();
    let mut at = 0;
    while at < text.len() {
        at = (at + step).min(text.len());
        while !text.is_char_boundary(at) {
            at += 1;
        }
        let state = parser.feed(&text[..at], false);
        n += 1;
        if n % 8 == 0 {
            assert_eq!(state, parse_reply(&text[..at]).state, "prefix {at}");
        }
    }
    parser.feed(&text, true);
    assert_eq!(parser.outcome(), one_shot);
    // A snapshot that rewrites the past must not leak old state into the final answer.
    if seed & 0x80 != 0 && !text.is_empty() {
        let mut rewritten = ToolCallParser::new();
        rewritten.feed("{\"tool\":\"stale\",\"args\":{\"x\":\"", false);
        rewritten.feed(&text, true);
        assert_eq!(rewritten.outcome(), one_shot);
    }
});
