//! Which chat messages are bridge protocol messages, and the label each one is folded under.
//!
//! Folding is presentation only (spec §3): the content script hides the message behind a
//! one-line bar with this label and never deletes DOM. Decisions:
//!
//! - a user message containing the bridge marker → [`FoldLabel::Tools`] (preamble + catalog);
//! - a user message with a line starting (after optional whitespace) with `TOOL_RESULT:` →
//!   [`FoldLabel::ToolResult`];
//! - a *finished* assistant reply that is only tool calls → [`FoldLabel::ToolCall`].
//!
//! Unlike the reference, which folded any assistant message with at least one call, a reply
//! that mixes calls with prose stays visible: hiding it would hide what the model said to the
//! user. A reply still streaming is never folded, because folding is sticky and the prose may
//! come after the calls.

use crate::parser::{parse_reply, ParseOutcome, ReplyState};
use crate::protocol_text::{is_js_space, BRIDGE_MARKER};
use serde::{Deserialize, Serialize};

/// Who wrote a message, as the site adapter classified its DOM root.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
}

/// Why a message is folded; [`FoldLabel::text`] is what the fold bar shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FoldLabel {
    /// The bridged task message (preamble and tool catalog).
    Tools,
    /// A `TOOL_RESULT:` message carrying results back to the model.
    ToolResult,
    /// An assistant reply consisting only of tool calls.
    ToolCall,
}

impl FoldLabel {
    pub fn text(self) -> &'static str {
        match self {
            FoldLabel::Tools => "Herdr JSON tools",
            FoldLabel::ToolResult => "Herdr tool result",
            FoldLabel::ToolCall => "Herdr tool call",
        }
    }
}

/// Fold decision for one message. Parses assistant text; when the caller already holds a
/// [`ParseOutcome`] for it, [`fold_decision_parsed`] avoids parsing twice.
pub fn fold_decision(role: Role, text: &str, reply_finished: bool) -> Option<FoldLabel> {
    match role {
        Role::User => user_fold(text),
        Role::Assistant if reply_finished => assistant_fold(text, &parse_reply(text)),
        Role::Assistant => None,
    }
}

/// Like [`fold_decision`], with the assistant text's parse supplied by the caller.
pub fn fold_decision_parsed(
    role: Role,
    text: &str,
    outcome: &ParseOutcome,
    reply_finished: bool,
) -> Option<FoldLabel> {
    match role {
        Role::User => user_fold(text),
        Role::Assistant if reply_finished => assistant_fold(text, outcome),
        Role::Assistant => None,
    }
}

/// True for any user message the bridge itself sent (used by reload recovery, spec §5.4).
pub fn is_bridge_user_message(text: &str) -> bool {
    user_fold(text).is_some()
}

fn user_fold(text: &str) -> Option<FoldLabel> {
    if text.contains(BRIDGE_MARKER) {
        Some(FoldLabel::Tools)
    } else if has_tool_result_line(text) {
        Some(FoldLabel::ToolResult)
    } else {
        None
    }
}

/// JavaScript's `/^\s*TOOL_RESULT:/m`: `^` after any line terminator, `\s` as JavaScript
/// has it (Unicode white space without U+0085, plus the BOM). `\s*` may span lines, which splitting on terminators already covers.
fn has_tool_result_line(text: &str) -> bool {
    text.split(['\n', '\r', '\u{2028}', '\u{2029}'])
        .any(|line| line.trim_start_matches(is_js_space).starts_with("TOOL_RESULT:"))
}

fn assistant_fold(text: &str, outcome: &ParseOutcome) -> Option<FoldLabel> {
    (outcome.state == ReplyState::Complete && only_calls(text, outcome)).then_some(FoldLabel::ToolCall)
}

/// Everything outside the calls' JSON is white space or what a rendered code block leaves
/// behind (fence backticks, the language label, the copy button's text).
fn only_calls(text: &str, outcome: &ParseOutcome) -> bool {
    let mut spans: Vec<(usize, usize)> = outcome.calls.iter().map(|c| c.span).collect();
    spans.sort_unstable();
    let mut pos = 0;
    let mut leftovers = Vec::new();
    for (start, end) in spans {
        // Calls from one JSON array share its span; overlapping spans are skipped.
        if start >= pos {
            leftovers.push(text.get(pos..start).unwrap_or(""));
        }
        pos = pos.max(end);
    }
    leftovers.push(text.get(pos..).unwrap_or(""));
    leftovers.iter().all(|gap| gap.split_whitespace().all(is_code_block_residue))
}

/// A token made only of code-block chrome. `textContent` glues adjacent labels together
/// ("json" + "Copy" → "jsonCopy"), so the token may be several of the words in a row.
fn is_code_block_residue(token: &str) -> bool {
    const WORDS: [&str; 6] = ["jsonl", "json", "copy", "code", "复制", "代码"];
    let mut rest = token.trim_matches('`');
    while !rest.is_empty() {
        let Some(word) = WORDS.iter().find(|w| rest.get(..w.len()).is_some_and(|head| head.eq_ignore_ascii_case(w)))
        else {
            return false;
        };
        rest = rest[word.len()..].trim_start_matches('`');
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    const CALL: &str = r#"{"tool":"herdr_fs_read","args":{"path":"README.md"}}"#;

    #[test]
    fn bridged_task_is_folded_as_tools() {
        let text = format!("{BRIDGE_MARKER}\nYou can use tools.\n\nUSER_TASK:\nfix the build");
        assert_eq!(fold_decision(Role::User, &text, true), Some(FoldLabel::Tools));
        assert_eq!(FoldLabel::Tools.text(), "Herdr JSON tools");
    }

    #[test]
    fn tool_result_is_folded_at_the_start_of_any_line() {
        for text in [
            "TOOL_RESULT:\n[{\"index\":1}]",
            "  \t TOOL_RESULT:\n[]",
            "note\nTOOL_RESULT:\n[]",
            "note\r\n   TOOL_RESULT: []",
            "\u{feff}TOOL_RESULT:[]",
        ] {
            assert_eq!(fold_decision(Role::User, text, true), Some(FoldLabel::ToolResult), "{text:?}");
        }
        assert_eq!(FoldLabel::ToolResult.text(), "Herdr tool result");
    }

    #[test]
    fn user_text_that_only_mentions_the_words_is_not_folded() {
        for text in ["what does TOOL_RESULT: mean?", "tool_result:\n[]", "TOOL_RESULT\n[]", "hello", "", "\u{85}TOOL_RESULT:\n[]"] {
            assert_eq!(fold_decision(Role::User, text, true), None, "{text:?}");
        }
    }

    #[test]
    fn markers_in_assistant_text_do_not_fold_it() {
        let text = format!("I saw {BRIDGE_MARKER} and\nTOOL_RESULT: earlier.");
        assert_eq!(fold_decision(Role::Assistant, &text, true), None);
    }

    #[test]
    fn call_only_reply_is_folded_once_finished() {
        let text = format!("{CALL}\n{CALL}");
        assert_eq!(fold_decision(Role::Assistant, &text, true), Some(FoldLabel::ToolCall));
        assert_eq!(fold_decision(Role::Assistant, &text, false), None, "still streaming");
        assert_eq!(FoldLabel::ToolCall.text(), "Herdr tool call");
    }

    #[test]
    fn rendered_fence_residue_still_counts_as_call_only() {
        let text = format!("json\nCopy\n{CALL}");
        assert_eq!(fold_decision(Role::Assistant, &text, true), Some(FoldLabel::ToolCall));
        let text = format!("jsonCopy code\n{CALL}");
        assert_eq!(fold_decision(Role::Assistant, &text, true), Some(FoldLabel::ToolCall));
        let fenced = format!("```json\n{CALL}\n```");
        assert_eq!(fold_decision(Role::Assistant, &fenced, true), Some(FoldLabel::ToolCall));
    }

    #[test]
    fn calls_with_prose_normal_answers_and_broken_json_stay_visible() {
        for text in [
            format!("Let me read the file first.\n{CALL}"),
            "The build passes now.".to_owned(),
            r#"{"tool":"herdr_fs_read","args":{"path":"#.to_owned(),
            r#"{"status":"x"}"#.to_owned(),
            format!("jsonCopyright notice\n{CALL}"),
        ] {
            assert_eq!(fold_decision(Role::Assistant, &text, true), None, "{text:?}");
        }
    }

    #[test]
    fn parsed_variant_agrees_with_the_parsing_one() {
        let text = format!("{CALL}\n");
        let outcome = parse_reply(&text);
        assert_eq!(
            fold_decision_parsed(Role::Assistant, &text, &outcome, true),
            fold_decision(Role::Assistant, &text, true)
        );
        assert!(is_bridge_user_message("TOOL_RESULT:\n[]"));
        assert!(!is_bridge_user_message("plain"));
    }
}
