//! Data-driven parser tests over tests/corpus/replies.json (≥ 150 hand-labelled replies).
//! Each reply is checked one-shot against its expected classification and calls, and then
//! fed as growing snapshots in several split patterns, which must end in the same outcome.

use ext_core::parser::{ParseOutcome, ReplyState, ToolCallParser, Variant, parse_reply};
use serde::Deserialize;
use serde_json::Value;

#[derive(Deserialize)]
struct Corpus {
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    text: String,
    state: ReplyState,
    calls: Vec<ExpectedCall>,
    variants: Vec<Variant>,
}

#[derive(Deserialize)]
struct ExpectedCall {
    tool: String,
    args: Value,
}

fn corpus() -> Vec<Case> {
    let raw = include_str!("corpus/replies.json");
    serde_json::from_str::<Corpus>(raw).expect("corpus/replies.json parses").cases
}

/// Char-boundary-aligned prefix ends, `step` bytes apart, ending with the full length.
fn cut_points(text: &str, step: usize) -> Vec<usize> {
    let mut cuts = Vec::new();
    let mut at = 0;
    while at < text.len() {
        at = (at + step).min(text.len());
        while !text.is_char_boundary(at) {
            at += 1;
        }
        cuts.push(at);
    }
    cuts
}

fn feed_in_steps(text: &str, step: usize, check_each_prefix: bool) -> ParseOutcome {
    let mut parser = ToolCallParser::new();
    for cut in cut_points(text, step) {
        let prefix = &text[..cut];
        let state = parser.feed(prefix, false);
        if check_each_prefix {
            assert_eq!(state, parse_reply(prefix).state, "prefix of {} bytes: {prefix:?}", cut);
        }
    }
    parser.feed(text, true);
    parser.outcome()
}

#[test]
fn corpus_has_at_least_150_replies_covering_every_state() {
    let cases = corpus();
    assert!(cases.len() >= 150, "only {} cases", cases.len());
    for state in [ReplyState::None, ReplyState::Incomplete, ReplyState::Malformed, ReplyState::Complete] {
        assert!(cases.iter().filter(|c| c.state == state).count() >= 10, "fewer than 10 {state:?} cases");
    }
}

#[test]
fn corpus_one_shot_matches_expectations() {
    let mut failures = Vec::new();
    for case in corpus() {
        let got = parse_reply(&case.text);
        let calls: Vec<(String, Value)> = got.calls.iter().map(|c| (c.tool.clone(), c.args.clone())).collect();
        let want: Vec<(String, Value)> = case.calls.iter().map(|c| (c.tool.clone(), c.args.clone())).collect();
        let mut want_variants = case.variants.clone();
        want_variants.sort();
        let calls_ok = case.state != ReplyState::Complete || calls == want;
        if got.state != case.state || !calls_ok || (case.state == ReplyState::Complete && got.variants != want_variants) {
            failures.push(format!(
                "{}: want {:?} {:?} {:?}, got {:?} {:?} {:?} problems {:?}",
                case.name,
                case.state,
                want.len(),
                case.variants,
                got.state,
                calls.len(),
                got.variants,
                got.problems
            ));
        }
    }
    assert!(failures.is_empty(), "{} corpus failures:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn corpus_streamed_snapshots_equal_one_shot() {
    for case in corpus() {
        let one_shot = parse_reply(&case.text);
        let small = case.text.len() <= 600;
        for step in [1, 7, 64, 1024] {
            let streamed = feed_in_steps(&case.text, step, small && step == 1);
            assert_eq!(streamed, one_shot, "{} fed in {step}-byte steps", case.name);
        }
    }
}

#[test]
fn rewritten_snapshot_restarts_and_final_answer_is_exact() {
    for case in corpus().into_iter().filter(|c| c.text.len() > 40) {
        let mut parser = ToolCallParser::new();
        // A snapshot that is not a prefix (the page re-rendered the start) and then the truth.
        let mut fake: String = "X".repeat(20);
        let tail: String = case.text.chars().rev().take(10).collect::<Vec<_>>().into_iter().rev().collect();
        fake.push_str(&tail);
        parser.feed(&fake, false);
        parser.feed(&case.text, true);
        assert_eq!(parser.outcome(), parse_reply(&case.text), "{}", case.name);
    }
}
