//! z.ai (`https://chat.z.ai/*`), spec §4.2.

use super::strings;
use crate::adapter::{MigrationRule, SiteAdapter};
use crate::composer::*;
use crate::interpret::BusyReason;
use crate::messages::RootSnapshot;
use crate::selectors::*;
use crate::site::{ConversationIdentity, Scope, Site};
use crate::url::PageUrl;

pub struct ZAi;

/// Reply selectors of the reference (SpeaksJSON) plus the user-message classes, so a user
/// root's text comes from its bubble rather than the whole row.
const CONTENT: &str = ".markdown-prose, [class*=markdown], [class*=answer], [class*=message-content], \
                       [class*=prose], .user-message, .chat-user";

/// Status texts z.ai shows while a reply is not finished (the reference's list).
const BUSY_TEXTS: [&str; 6] = ["thinking...", "generating", "loading...", "思考中", "生成中", "加载中"];

/// A reply this short is all status line, wherever the phrase sits in it.
const STATUS_ONLY_CHARS: usize = 64;

impl SiteAdapter for ZAi {
    fn site(&self) -> Site {
        Site::ZAi
    }

    fn handles_host(&self, host: &str) -> bool {
        host == "chat.z.ai"
    }

    fn identity(&self, url: &PageUrl) -> ConversationIdentity {
        let scope = match url.segments().as_slice() {
            [] => Scope::NewChat,
            ["c", id] => Scope::Conversation { conversation_id: (*id).to_owned() },
            _ => Scope::Other,
        };
        ConversationIdentity { site: Site::ZAi, conv_key: url.key(), scope }
    }

    fn selectors(&self) -> SelectorSet {
        SelectorSet {
            composer: strings(&["textarea"]),
            send_buttons: strings(&["#send-message-button:not(:disabled)", "form button[type=submit]:not(:disabled)"]),
            message_root: r#"[id^="message-"]:not([id$="-start"])"#.to_owned(),
            content: CONTENT.to_owned(),
            probes: vec![
                Probe::new(PROBE_USER, ".user-message, .chat-user"),
                Probe::new(PROBE_ASSISTANT, ".markdown-prose, .chat-assistant"),
            ],
            head_chars: HEAD_CHARS,
            max_roots: MAX_ROOTS,
            history_text_chars: HISTORY_TEXT_CHARS,
            line_break_tags: line_break_tags(),
        }
    }

    /// The reference looked for a status phrase anywhere in the reply, so a finished reply
    /// that merely mentions "generating" — or a tool call whose arguments contain
    /// "Loading..." — never counted as finished and the loop stalled until its timeout. Here
    /// the phrase must be where a status indicator sits: the reply (or its root) starts or
    /// ends with it, or the reply is short enough to be only the indicator. Like the
    /// reference, only the reply's own text is read (not a thinking block beside it).
    fn reply_busy(&self, root: &RootSnapshot) -> Option<BusyReason> {
        let text = root.text.trim();
        let short = text.chars().nth(STATUS_ONLY_CHARS).is_none();
        // Only the ends of a long reply are read (a streamed reply is read at every poll):
        // no phrase is longer than the window, so its lower case starts or ends the same.
        let (head, tail) = if short {
            (text.to_lowercase(), String::new())
        } else {
            let head: String = text.chars().take(STATUS_ONLY_CHARS).collect();
            let tail: String = text.chars().rev().take(STATUS_ONLY_CHARS).collect::<Vec<_>>().into_iter().rev().collect();
            (head.to_lowercase(), tail.to_lowercase())
        };
        BUSY_TEXTS
            .iter()
            .find(|t| if short { head.contains(*t) } else { head.starts_with(*t) || tail.ends_with(*t) })
            .map(|t| BusyReason::StatusText(t))
    }

    fn composer(&self) -> ComposerStrategy {
        ComposerStrategy {
            insert: InsertMethod::TextareaValueSetter,
            submit: vec![SubmitMethod::ClickSendButton, SubmitMethod::RequestSubmit, SubmitMethod::PressEnter],
            focus_before_enter_ms: FOCUS_BEFORE_ENTER_MS,
            settle_after_insert_ms: SETTLE_AFTER_INSERT_MS,
            clear_timeout_ms: CLEAR_TIMEOUT_MS,
            intercept: Some(InterceptTriggers { enter_key: true, form_submit: true, send_button_click: true }),
        }
    }

    fn migration_rule(&self) -> MigrationRule {
        MigrationRule::NewChatRootToConversation
    }

    fn json_bridge(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn busy(text: &str) -> Option<BusyReason> {
        let root = RootSnapshot {
            index: 0,
            dom_id: None,
            probes: vec![PROBE_ASSISTANT.into()],
            text: text.into(),
            text_truncated: false,
            head: String::new(),
            folded: None,
            rev: None,
            delta: None,
            held: false,
        };
        ZAi.reply_busy(&root)
    }

    #[test]
    fn status_phrases_where_an_indicator_sits_are_busy() {
        assert_eq!(busy("Thinking..."), Some(BusyReason::StatusText("thinking...")));
        assert_eq!(busy("  思考中  "), Some(BusyReason::StatusText("思考中")));
        assert_eq!(busy("Generating an answer for you"), Some(BusyReason::StatusText("generating")));
        let long = "x".repeat(200);
        assert_eq!(busy(&format!("{long} loading...")), Some(BusyReason::StatusText("loading...")));
        assert_eq!(busy(&format!("Thinking... {long}")), Some(BusyReason::StatusText("thinking...")));
    }

    /// Only the ends of a long reply are read (it is read at every poll while it streams):
    /// a phrase there is found in any case, one in the middle of 1 MB is not looked for.
    #[test]
    fn a_long_reply_is_read_at_its_ends_only() {
        let long = "é".repeat(500_000);
        assert_eq!(busy(&format!("{long} GENERATING")), Some(BusyReason::StatusText("generating")));
        assert_eq!(busy(&format!("生成中 {long}")), Some(BusyReason::StatusText("生成中")));
        assert_eq!(busy(&format!("{long} thinking... {long}")), None);
    }

    #[test]
    fn phrases_inside_a_long_reply_do_not_block_it() {
        let call = r#"{"tool":"herdr_fs_write","args":{"path":"ui.txt","content":"Loading... please wait while generating"}}"#;
        assert_eq!(busy(call), None);
        let prose = "The script starts by generating the config, then runs the migrations and reports.";
        assert_eq!(busy(prose), None);
    }
}
