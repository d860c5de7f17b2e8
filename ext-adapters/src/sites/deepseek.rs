//! DeepSeek (`https://chat.deepseek.com/*`), spec §4.3.

use super::strings;
use crate::adapter::{MigrationRule, SiteAdapter};
use crate::composer::*;
use crate::interpret::BusyReason;
use crate::messages::RootSnapshot;
use crate::selectors::*;
use crate::site::{ConversationIdentity, Scope, Site};
use crate::url::PageUrl;
use ext_core::fold::Role;

pub struct DeepSeek;

const MAIN_CONTENT: &str = ".ds-assistant-message-main-content";

impl SiteAdapter for DeepSeek {
    fn site(&self) -> Site {
        Site::DeepSeek
    }

    fn handles_host(&self, host: &str) -> bool {
        host == "chat.deepseek.com"
    }

    fn identity(&self, url: &PageUrl) -> ConversationIdentity {
        let scope = match url.segments().as_slice() {
            [] => Scope::NewChat,
            ["a", "chat", "s", id] => Scope::Conversation { conversation_id: (*id).to_owned() },
            _ => Scope::Other,
        };
        ConversationIdentity { site: Site::DeepSeek, conv_key: url.key(), scope }
    }

    fn selectors(&self) -> SelectorSet {
        SelectorSet {
            composer: strings(&["textarea[name=search]", "textarea"]),
            // Send is a `div[role=button]` beside the composer, like the DeepThink and Search
            // toggles next to it: it is the one drawing the arrow icon (its class names are
            // build hashes, tried second). `aria-disabled` while the composer is empty.
            send_buttons: strings(&[
                r#"div[role=button]:has(svg path[d^="M8.3125"]):not([aria-disabled="true"])"#,
                r#"div[role=button]._7436101:not([aria-disabled="true"])"#,
            ]),
            message_root: ".ds-message".to_owned(),
            content: MAIN_CONTENT.to_owned(),
            probes: vec![
                Probe::new(PROBE_ASSISTANT, MAIN_CONTENT),
                Probe::new(PROBE_CURSOR, "[class*=cursor], [class*=blink], [class*=loading]"),
            ],
            head_chars: HEAD_CHARS,
            max_roots: MAX_ROOTS,
            history_text_chars: HISTORY_TEXT_CHARS,
            line_break_tags: line_break_tags(),
        }
    }

    fn classify_root(&self, root: &RootSnapshot) -> Option<Role> {
        Some(if root.has_probe(PROBE_ASSISTANT) { Role::Assistant } else { Role::User })
    }

    /// Reference rule: a "Thought for N" header means done; else a cursor/loading element
    /// means busy. The header is looked for in the head of the message only, so an answer
    /// that happens to quote the phrase does not count.
    fn reply_busy(&self, root: &RootSnapshot) -> Option<BusyReason> {
        if has_thought_for_header(&root.head) {
            None
        } else if root.has_probe(PROBE_CURSOR) {
            Some(BusyReason::Cursor)
        } else {
            None
        }
    }

    fn composer(&self) -> ComposerStrategy {
        ComposerStrategy {
            insert: InsertMethod::TextareaValueSetter,
            submit: vec![SubmitMethod::PressEnter, SubmitMethod::RequestSubmit],
            focus_before_enter_ms: FOCUS_BEFORE_ENTER_MS,
            settle_after_insert_ms: SETTLE_AFTER_INSERT_MS,
            clear_timeout_ms: CLEAR_TIMEOUT_MS,
            // The user's click on Send is a send like their Enter: intercepted, never let
            // through unbridged.
            intercept: Some(InterceptTriggers { enter_key: true, form_submit: true, send_button_click: true }),
        }
    }

    fn migration_rule(&self) -> MigrationRule {
        MigrationRule::Never
    }

    fn json_bridge(&self) -> bool {
        true
    }
}

/// `/Thought for \d+/`.
fn has_thought_for_header(text: &str) -> bool {
    text.match_indices("Thought for ")
        .any(|(i, m)| text[i + m.len()..].bytes().next().is_some_and(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn thought_for_needs_a_number() {
        assert!(super::has_thought_for_header("Thought for 12 seconds"));
        assert!(!super::has_thought_for_header("Thought for a while"));
        assert!(!super::has_thought_for_header("Thought for "));
    }
}
