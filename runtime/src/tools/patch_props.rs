//! Property tests of `herdr_fs_patch`'s grammar and its in-memory apply, on text
//! that comes straight from a model: any string parses to ops or a clear error,
//! rendered ops parse back to themselves, and hunks either apply as a splice of
//! the one place they match or are refused.

use proptest::prelude::*;

use super::super::patch_parse::{Hunk, HunkLine, Op, parse};
use super::{TextFile, apply_hunks};

const END_OF_FILE: &str = "*** End of File";

fn path() -> impl Strategy<Value = String> {
    "[a-z0-9_.][a-z0-9_./ -]{0,18}[a-z0-9_.]".prop_map(|p| p.to_string())
}

/// Line text without line breaks, now and then the end-of-file marker's own text.
fn line_text() -> impl Strategy<Value = String> {
    prop_oneof![
        9 => "[^\r\n]{0,12}",
        1 => Just(END_OF_FILE.to_string()),
    ]
}

fn hunk() -> impl Strategy<Value = Hunk> {
    let line = prop_oneof![
        line_text().prop_map(HunkLine::Context),
        line_text().prop_map(HunkLine::Remove),
        line_text().prop_map(HunkLine::Add),
    ];
    let anchor = prop::option::of("[a-z(){}:][a-z (){}:]{0,10}[a-z(){}:]");
    (anchor, prop::collection::vec(line, 1..6)).prop_map(|(anchor, lines)| Hunk { anchor, lines })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (path(), prop::collection::vec(line_text(), 0..5)).prop_map(|(path, lines)| Op::Add { path, lines }),
        path().prop_map(|path| Op::Delete { path }),
        (path(), prop::option::of(path()), prop::collection::vec(hunk(), 0..4))
            .prop_filter("an update needs hunks or a move", |(_, to, hunks)| to.is_some() || !hunks.is_empty())
            .prop_map(|(path, move_to, hunks)| Op::Update { path, move_to, hunks }),
    ]
}

fn render(ops: &[Op], crlf: bool) -> String {
    let mut lines = vec!["*** Begin Patch".to_string()];
    for op in ops {
        match op {
            Op::Add { path, lines: added } => {
                lines.push(format!("*** Add File: {path}"));
                lines.extend(added.iter().map(|l| format!("+{l}")));
            }
            Op::Delete { path } => lines.push(format!("*** Delete File: {path}")),
            Op::Update { path, move_to, hunks } => {
                lines.push(format!("*** Update File: {path}"));
                if let Some(to) = move_to {
                    lines.push(format!("*** Move to: {to}"));
                }
                for h in hunks {
                    lines.push(match &h.anchor {
                        Some(a) => format!("@@ {a}"),
                        None => "@@".to_string(),
                    });
                    lines.extend(h.lines.iter().map(|l| match l {
                        HunkLine::Context(t) => format!(" {t}"),
                        HunkLine::Remove(t) => format!("-{t}"),
                        HunkLine::Add(t) => format!("+{t}"),
                    }));
                }
            }
        }
    }
    lines.push("*** End Patch".to_string());
    lines.join(if crlf { "\r\n" } else { "\n" })
}

/// Lines a model might write in a patch, well-formed or not.
fn patchish_line() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("*** Begin Patch".to_string()),
        Just("*** End Patch".to_string()),
        Just("*** End of File".to_string()),
        path().prop_map(|p| format!("*** Add File: {p}")),
        path().prop_map(|p| format!("*** Delete File: {p}")),
        path().prop_map(|p| format!("*** Update File: {p}")),
        path().prop_map(|p| format!("*** Move to: {p}")),
        Just("*** Add File: ".to_string()),
        Just("*** Update File:   ".to_string()),
        Just("@@".to_string()),
        Just("@@ fn main() @@".to_string()),
        line_text().prop_map(|t| format!(" {t}")),
        line_text().prop_map(|t| format!("-{t}")),
        line_text().prop_map(|t| format!("+{t}")),
        Just(String::new()),
        Just("\r".to_string()),
        any::<String>(),
    ]
}

fn small_lines() -> impl Strategy<Value = Vec<String>> {
    // A small alphabet, so hunks match once, several times or not at all.
    prop::collection::vec(prop::sample::select(vec!["a", "b", "c", "fn x", ""]).prop_map(str::to_string), 0..12)
}

fn small_hunk() -> impl Strategy<Value = Hunk> {
    let text = prop::sample::select(vec!["a", "b", "c", "fn x", "", "z"]).prop_map(str::to_string);
    let line = prop_oneof![
        text.clone().prop_map(HunkLine::Context),
        text.clone().prop_map(HunkLine::Remove),
        text.prop_map(HunkLine::Add),
    ];
    let anchor = prop::option::weighted(0.3, prop::sample::select(vec!["fn x", "b", "q"]).prop_map(str::to_string));
    (anchor, prop::collection::vec(line, 0..5)).prop_map(|(anchor, lines)| Hunk { anchor, lines })
}

fn ok_ops_are_sound(ops: &[Op]) {
    assert!(!ops.is_empty());
    for op in ops {
        let p = op.path();
        assert!(!p.is_empty() && p.trim() == p, "path {p:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn rendered_ops_parse_back(ops in prop::collection::vec(op(), 1..5), crlf in any::<bool>()) {
        let text = render(&ops, crlf);
        prop_assert_eq!(parse(&text), Ok(ops), "{}", text);
    }

    #[test]
    fn any_text_parses_or_is_refused_with_a_reason(text in any::<String>()) {
        match parse(&text) {
            Ok(ops) => ok_ops_are_sound(&ops),
            Err(e) => prop_assert!(!e.is_empty()),
        }
    }

    #[test]
    fn patchish_lines_parse_or_are_refused_with_a_reason(
        lines in prop::collection::vec(patchish_line(), 0..14),
        wrap in any::<bool>(),
    ) {
        let mut text = lines.join("\n");
        if wrap {
            text = format!("*** Begin Patch\n{text}\n*** End Patch\n");
        }
        match parse(&text) {
            Ok(ops) => ok_ops_are_sound(&ops),
            Err(e) => prop_assert!(!e.is_empty()),
        }
    }

    #[test]
    fn hunks_apply_as_splices_or_are_refused(lines in small_lines(), hunks in prop::collection::vec(small_hunk(), 0..4)) {
        let Ok(out) = apply_hunks(&lines, &hunks) else { return Ok(()) };
        let grown: isize = hunks.iter().map(|h| h.new_lines().len() as isize - h.old_lines().len() as isize).sum();
        prop_assert_eq!(out.len() as isize, lines.len() as isize + grown);
    }

    #[test]
    fn one_unanchored_hunk_replaces_its_single_match(lines in small_lines(), hunk in small_hunk()) {
        let hunk = Hunk { anchor: None, ..hunk };
        let old: Vec<String> = hunk.old_lines().into_iter().map(str::to_string).collect();
        let new: Vec<String> = hunk.new_lines().into_iter().map(str::to_string).collect();
        let got = apply_hunks(&lines, std::slice::from_ref(&hunk));
        if old.is_empty() {
            prop_assert_eq!(got, Ok([lines.clone(), new].concat()));
            return Ok(());
        }
        let at: Vec<usize> = (0..lines.len()).filter(|&s| lines[s..].starts_with(&old)).collect();
        match at.as_slice() {
            [s] => prop_assert_eq!(got, Ok([&lines[..*s], &new[..], &lines[s + old.len()..]].concat())),
            [] => prop_assert!(got.is_err()),
            many => prop_assert_eq!(got, Err(super::HunkError::Ambiguous { hunk_index: 0, match_count: many.len() })),
        }
    }

    #[test]
    fn file_text_decodes_and_round_trips_when_its_line_ends_agree(
        pieces in prop::collection::vec(prop::sample::select(vec!["a", "é", "\n", "\r", "\r\n", "\u{feff}", "\t"]), 0..16),
        bom in any::<bool>(),
        junk in prop::collection::vec(any::<u8>(), 0..8),
    ) {
        let text = pieces.concat();
        let mut bytes = if bom { b"\xEF\xBB\xBF".to_vec() } else { Vec::new() };
        bytes.extend_from_slice(text.as_bytes());
        let file = TextFile::decode(&bytes).expect("UTF-8 text decodes");
        let crlf_only = text.match_indices('\n').all(|(i, _)| i > 0 && text.as_bytes()[i - 1] == b'\r');
        if !text.contains("\r\n") || crlf_only {
            prop_assert_eq!(file.encode(), bytes.clone());
        }
        // Arbitrary bytes: decoded or refused as not UTF-8, never a panic.
        bytes.extend_from_slice(&junk);
        if let Err(e) = TextFile::decode(&bytes) {
            prop_assert!(e.contains("not UTF-8"));
        }
    }
}
