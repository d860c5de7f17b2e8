//! ChatGPT (`https://chatgpt.com/*`), spec §4.4. Continuity only: ChatGPT speaks MCP
//! natively, so no JSON bridge and no submit interception.

use super::strings;
use crate::adapter::{MigrationRule, SiteAdapter};
use crate::composer::*;
use crate::interpret::BusyReason;
use crate::messages::RootSnapshot;
use crate::selectors::*;
use crate::site::{ConversationIdentity, Scope, Site};
use crate::url::PageUrl;

pub struct ChatGpt;

/// Keys use one canonical origin whichever host alias the tab shows.
pub const CHATGPT_ORIGIN: &str = "https://chatgpt.com";

impl SiteAdapter for ChatGpt {
    fn site(&self) -> Site {
        Site::ChatGpt
    }

    fn handles_host(&self, host: &str) -> bool {
        host == "chatgpt.com" || host == "www.chatgpt.com"
    }

    fn identity(&self, url: &PageUrl) -> ConversationIdentity {
        let segments = url.segments();
        let plain = || format!("{CHATGPT_ORIGIN}{}", url.path);
        let (conv_key, scope) = match segments.as_slice() {
            [] => (CHATGPT_ORIGIN.to_owned(), Scope::NewChat),
            ["c", id] => (format!("{CHATGPT_ORIGIN}/c/{id}"), Scope::Conversation { conversation_id: (*id).to_owned() }),
            ["g", gizmo, rest @ ..] => match project_id(gizmo) {
                Some(project_id) => {
                    let project_key = format!("{CHATGPT_ORIGIN}/g/{project_id}");
                    match rest {
                        ["c", id] => (
                            format!("{project_key}/c/{id}"),
                            Scope::ProjectConversation {
                                conversation_id: (*id).to_owned(),
                                project_id: project_id.to_owned(),
                                project_key,
                            },
                        ),
                        [] | ["project"] => {
                            (project_key.clone(), Scope::ProjectHome { project_id: project_id.to_owned(), project_key })
                        }
                        _ => (plain(), Scope::Other),
                    }
                }
                // A custom GPT (`g-<id>`, not a Project): its chats are plain conversations.
                None => match rest {
                    ["c", id] => (plain(), Scope::Conversation { conversation_id: (*id).to_owned() }),
                    _ => (plain(), Scope::Other),
                },
            },
            _ => (plain(), Scope::Other),
        };
        ConversationIdentity { site: Site::ChatGpt, conv_key, scope }
    }

    fn selectors(&self) -> SelectorSet {
        SelectorSet {
            composer: strings(&[r#"#prompt-textarea[contenteditable="true"]"#]),
            send_buttons: strings(&[
                r#"button[data-testid="send-button"]"#,
                r#"button[data-testid="composer-send-button"]"#,
                r#"button[aria-label="发送提示"]"#,
                r#"[aria-label="Send prompt"]"#,
                r#"[aria-label*="发送提示"]"#,
                r#"[aria-label*="Send prompt" i]"#,
                r#"[aria-label*="发送"]"#,
                r#"[aria-label*="Send" i]"#,
            ]),
            message_root: "[data-message-author-role]".to_owned(),
            content: ".markdown, .whitespace-pre-wrap".to_owned(),
            probes: vec![
                Probe::new(PROBE_USER, r#"[data-message-author-role="user"]"#),
                Probe::new(PROBE_ASSISTANT, r#"[data-message-author-role="assistant"]"#),
                Probe::new(PROBE_STREAMING, r#"[data-is-streaming="true"]"#),
            ],
            head_chars: HEAD_CHARS,
            max_roots: MAX_ROOTS,
            history_text_chars: HISTORY_TEXT_CHARS,
            line_break_tags: line_break_tags(),
        }
    }

    fn reply_busy(&self, root: &RootSnapshot) -> Option<BusyReason> {
        root.has_probe(PROBE_STREAMING).then_some(BusyReason::Streaming)
    }

    fn composer(&self) -> ComposerStrategy {
        ComposerStrategy {
            insert: InsertMethod::ContentEditable { main_world: true },
            submit: vec![SubmitMethod::ClickSendButton, SubmitMethod::PressEnter],
            focus_before_enter_ms: FOCUS_BEFORE_ENTER_MS,
            settle_after_insert_ms: SETTLE_AFTER_INSERT_MS,
            clear_timeout_ms: CLEAR_TIMEOUT_MS,
            intercept: None,
        }
    }

    fn migration_rule(&self) -> MigrationRule {
        MigrationRule::PendingToScoped
    }

    fn json_bridge(&self) -> bool {
        false
    }
}

/// `^(g-p-[0-9a-f]{32})(?:-[^/]*)?$`: the Project id with its display slug dropped.
fn project_id(segment: &str) -> Option<&str> {
    let id = segment.get(..36)?;
    let hex = id.strip_prefix("g-p-")?;
    let valid_hex = hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    let rest = &segment[36..];
    (valid_hex && (rest.is_empty() || rest.starts_with('-'))).then_some(id)
}
