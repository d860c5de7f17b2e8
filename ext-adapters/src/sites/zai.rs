//! z.ai (`https://chat.z.ai/*`), spec §4.2.

use super::strings;
use crate::adapter::{MigrationRule, SiteAdapter};
use crate::composer::*;
use crate::interpret::BusyReason;
use crate::messages::RootSnapshot;
use crate::selectors::*;
use crate::site::{ConversationIdentity, Scope, Site};
use crate::url::PageUrl;
use ext_core::fold::Role;

pub struct ZAi;

/// Reply selectors of the reference (SpeaksJSON) plus the user-message classes, so a user
/// root's text comes from its bubble rather than the whole row.
const CONTENT: &str = ".markdown-prose, [class*=markdown], [class*=answer], [class*=message-content], \
                       [class*=prose], .user-message, .chat-user";

/// Status texts z.ai shows while a reply is not finished, matched in the lower-cased reply
/// text as the reference does.
const BUSY_TEXTS: [&str; 6] = ["thinking...", "generating", "loading...", "思考中", "生成中", "加载中"];

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
        }
    }

    fn classify_root(&self, root: &RootSnapshot) -> Option<Role> {
        if root.has_probe(PROBE_USER) {
            Some(Role::User)
        } else if root.has_probe(PROBE_ASSISTANT) {
            Some(Role::Assistant)
        } else {
            None
        }
    }

    fn reply_busy(&self, root: &RootSnapshot) -> Option<BusyReason> {
        let lower = root.text.to_lowercase();
        BUSY_TEXTS.iter().find(|t| lower.contains(*t)).map(|t| BusyReason::StatusText(t))
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
