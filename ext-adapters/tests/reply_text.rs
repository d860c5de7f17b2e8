//! The reply text rebuilt from the content script's deltas (issue 26 item 1): appends are
//! applied once, a rewrite arrives whole and starts a new epoch, a delta that does not fit
//! the text held is never applied, and the parser fed from it always sees the page's text.

use ext_adapters::reply_text::{Applied, ReplyText, TextDelta};
use ext_core::parser::{ReplyState, ToolCallParser, parse_reply};

fn key(index: u32) -> (u32, Option<String>) {
    (index, Some(format!("message-{index}")))
}

fn delta(base_rev: u64, base: &str, append: &str) -> TextDelta {
    TextDelta { base_rev, base_len: base.encode_utf16().count() as u64, append: append.into() }
}

#[test]
fn deltas_rebuild_the_text_in_one_epoch() {
    let mut r = ReplyText::new();
    assert_eq!(r.apply_full(key(3), Some(1), "Hello".into()), Applied::Replaced);
    let epoch = r.epoch();
    assert_eq!(r.apply_delta(key(3), 2, &delta(1, "Hello", ", wörld 😀")), Applied::Appended);
    // The base length is JavaScript's: UTF-16 code units, not bytes.
    assert_eq!(r.apply_delta(key(3), 3, &delta(2, "Hello, wörld 😀", "!")), Applied::Appended);
    assert_eq!(r.text(), "Hello, wörld 😀!");
    assert_eq!(r.epoch(), epoch, "appends keep the epoch");
    // Nothing new: same revision, empty append.
    assert_eq!(r.apply_delta(key(3), 3, &delta(3, "Hello, wörld 😀!", "")), Applied::Unchanged);
    assert_eq!(r.text(), "Hello, wörld 😀!");
}

#[test]
fn duplicate_and_out_of_order_deltas_never_corrupt_the_text() {
    let mut r = ReplyText::new();
    r.apply_full(key(0), Some(1), "ab".into());
    assert_eq!(r.apply_delta(key(0), 2, &delta(1, "ab", "cd")), Applied::Appended);
    // The same delta again: dropped.
    assert_eq!(r.apply_delta(key(0), 2, &delta(1, "ab", "cd")), Applied::Unchanged);
    assert_eq!(r.text(), "abcd");
    // An older revision arriving late: dropped.
    assert_eq!(r.apply_delta(key(0), 1, &delta(0, "", "ab")), Applied::Stale);
    assert_eq!(r.apply_full(key(0), Some(1), "ab".into()), Applied::Stale);
    assert_eq!(r.text(), "abcd");
    // A gap (revision 3 never arrived) and a base length that does not match: resync, text kept.
    assert_eq!(r.apply_delta(key(0), 5, &delta(4, "abcdefgh", "ij")), Applied::Resync);
    assert_eq!(r.apply_delta(key(0), 3, &TextDelta { base_rev: 2, base_len: 3, append: "x".into() }), Applied::Resync);
    assert_eq!(r.text(), "abcd");
    // A delta of another message, or with nothing held (a restarted worker): resync.
    assert_eq!(r.apply_delta(key(1), 3, &delta(2, "abcd", "e")), Applied::Resync);
    assert_eq!(ReplyText::new().apply_delta(key(0), 2, &delta(1, "ab", "cd")), Applied::Resync);
    assert!(Applied::Resync.dropped() && Applied::Stale.dropped() && !Applied::Appended.dropped());
    // The next whole text puts everything right.
    assert_eq!(r.apply_full(key(0), Some(6), "abcdefghij".into()), Applied::Appended);
    assert_eq!(r.apply_delta(key(0), 7, &delta(6, "abcdefghij", "k")), Applied::Appended);
    assert_eq!(r.text(), "abcdefghijk");
}

#[test]
fn a_rewrite_arrives_whole_and_starts_a_new_epoch() {
    let mut r = ReplyText::new();
    r.apply_full(key(0), Some(1), "first answer, long enough".into());
    let epoch = r.epoch();
    // Regenerated in place (same message): another text of the same length.
    assert_eq!(r.apply_full(key(0), Some(2), "first ANSWER, long enough".into()), Applied::Replaced);
    assert_ne!(r.epoch(), epoch);
    let epoch = r.epoch();
    // A whole text that extends the one held (a sender without deltas) stays in the epoch.
    assert_eq!(r.apply_full(key(0), None, "first ANSWER, long enough!".into()), Applied::Appended);
    assert_eq!(r.epoch(), epoch);
    assert_eq!(r.apply_full(key(0), None, "first ANSWER, long enough!".into()), Applied::Unchanged);
    // Another message: new epoch.
    assert_eq!(r.apply_full(key(1), Some(3), "first ANSWER, long enough!".into()), Applied::Replaced);
    assert_ne!(r.epoch(), epoch);
}

/// The text the parser scans is the page's text, byte for byte, through appends and a
/// rewrite in the middle that keeps the length (which a sampled prefix check can miss).
#[test]
fn the_parser_fed_from_the_stream_sees_exactly_the_pages_text() {
    let call = r#"{"tool":"herdr_fs_read","args":{"path":"a.txt"}}"#;
    let prose = "Some words before the call. ".repeat(200);
    let page = format!("{prose}\n{call}\n");
    let mut r = ReplyText::new();
    let mut parser = ToolCallParser::new();
    let mut rev = 0;
    let mut sent = String::new();
    for chunk in page.as_bytes().chunks(97) {
        let chunk = std::str::from_utf8(chunk).unwrap();
        rev += 1;
        let applied = if sent.is_empty() {
            r.apply_full(key(0), Some(rev), chunk.into())
        } else {
            r.apply_delta(key(0), rev, &delta(rev - 1, &sent, chunk))
        };
        assert!(!applied.dropped());
        sent.push_str(chunk);
        parser.feed_stream(r.text(), r.epoch());
        assert_eq!(parser.text(), sent);
    }
    assert_eq!(parser.state(), ReplyState::Complete);
    // The page rewrites one byte deep in the middle (the call is gone): the content script
    // sends it whole, the worker starts a new epoch and the parser starts over.
    let rewritten = page.replacen("herdr_fs_read", "herdr_fs_reed", 1).replacen(r#"{"tool""#, r#"("tool""#, 1);
    assert_eq!(rewritten.len(), page.len());
    rev += 1;
    assert_eq!(r.apply_full(key(0), Some(rev), rewritten.clone()), Applied::Replaced);
    let state = parser.feed_stream(r.text(), r.epoch());
    assert_eq!(parser.text(), rewritten);
    assert_eq!(state, parse_reply(&rewritten).state);
    assert_eq!(parser.calls().len(), 0);
}

fn root(index: u32, text: &str, held: bool) -> ext_adapters::RootSnapshot {
    ext_adapters::RootSnapshot {
        index,
        dom_id: Some(format!("message-{index}")),
        probes: vec!["user".into()],
        text: text.into(),
        text_truncated: false,
        head: String::new(),
        folded: None,
        rev: None,
        delta: None,
        held,
    }
}

/// Older messages sent as `held` get back the text sent before; one not held here (a
/// restarted worker, a message that scrolled out) is never guessed: the report is refused
/// and nothing the worker holds changes.
#[test]
fn held_history_texts_come_back_and_unknown_ones_are_refused() {
    let mut h = ext_adapters::reply_text::HistoryTexts::new();
    let mut first = vec![root(0, "the task", false), root(1, "an answer", false)];
    assert!(h.fill(&mut first));
    h.keep(&mut first);
    let mut next = vec![root(0, "", true), root(1, "an answer, edited", false)];
    assert!(h.fill(&mut next));
    assert_eq!((next[0].text.as_str(), next[0].held), ("the task", false));
    assert_eq!(next[1].text, "an answer, edited");
    h.keep(&mut next);
    // Root 2 was never sent whole: refused, and the texts held stay.
    let mut unknown = vec![root(1, "", true), root(2, "", true)];
    assert!(!h.fill(&mut unknown));
    let mut again = vec![root(1, "", true)];
    assert!(h.fill(&mut again));
    assert_eq!(again[0].text, "an answer, edited");
    // A root with another DOM id at the same index is another message.
    let mut moved = vec![ext_adapters::RootSnapshot { dom_id: Some("message-x".into()), ..root(1, "", true) }];
    assert!(!h.fill(&mut moved));
}
