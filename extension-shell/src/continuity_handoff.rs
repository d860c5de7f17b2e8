//! The page-facing rules of a handoff (spec/extension.md §7.7) that do not need a browser:
//! where the target conversation is opened, what a page's answer to the raw seed send means
//! for the transfer, and when a look at the target page confirms the seed. The transfer
//! state machine itself is ext-core's `continuity::handoff`.

use ext_adapters::PageSnapshot;
use ext_core::continuity::bindings::ConvTarget;
use ext_core::continuity::handoff::has_seed_marker;
use ext_core::continuity::SeedOutcome;
use ext_core::journal::TranscriptEntry;
use ext_core::fold::Role;
use serde_json::Value;

use crate::continuity_page::target_of;

/// z.ai's new-chat launcher: a chat sent from it moves to `/c/<id>`.
pub const ZAI_LAUNCH_URL: &str = "https://chat.z.ai/";

/// Where the target of a handoff from `source` is opened: a new z.ai chat, or a new chat in
/// the same ChatGPT Project (its launcher page).
pub fn launch_url(source: &ConvTarget) -> Result<String, &'static str> {
    match source {
        ConvTarget::Conversation { site, .. } if site == "z.ai" => Ok(ZAI_LAUNCH_URL.to_string()),
        ConvTarget::Project { site, project_key, .. } if site == "chatgpt" => Ok(format!("{project_key}/project")),
        _ => Err("handoff-unsupported"),
    }
}

/// Page answers to a send that show the text certainly never went out: no composer to put
/// it in, or the user's own draft there (never overwritten).
const NOT_SENT: [&str; 3] = ["composer not found", "composer-missing", "user-typing"];

/// What the content script's answer to the raw seed send means. Anything but a clear
/// "sent" or a clear "never left" is uncertain, so the seed is not sent again blindly.
pub fn seed_outcome(answer: &Value) -> SeedOutcome {
    if answer.get("ok") == Some(&Value::Bool(true)) {
        return SeedOutcome::Submitted;
    }
    let detail = answer.get("detail").or(answer.get("error")).and_then(Value::as_str).unwrap_or("");
    if NOT_SENT.iter().any(|n| detail.contains(n)) {
        return SeedOutcome::Failed("insert-failed".into());
    }
    let reason = match answer.get("error").and_then(Value::as_str) {
        _ if answer.is_null() => "no-response",
        Some("tab-unreachable") => "no-response",
        Some("insert-failed") => "insert-failed",
        _ => "submit-failed",
    };
    SeedOutcome::Uncertain(reason.into())
}

/// What the handoff reads from a page: its URL, its messages in order, and whether a reply
/// is still being written. Built from the bridge's snapshot (z.ai) or from the ChatGPT
/// content script's turns.
#[derive(Debug, Clone, PartialEq)]
pub struct PageRead {
    pub url: String,
    pub entries: Vec<TranscriptEntry>,
    pub busy: bool,
    pub composer: bool,
}

impl PageRead {
    /// Through the site adapter, as the bridge reads its pages.
    pub fn from_snapshot(snapshot: &PageSnapshot) -> Option<PageRead> {
        let view = ext_adapters::interpret(snapshot).ok()?;
        Some(PageRead {
            url: snapshot.url.clone(),
            entries: view.transcript(),
            busy: view.latest_reply.as_ref().is_some_and(|r| !r.finished()),
            composer: snapshot.composer.present,
        })
    }

    /// The ChatGPT content script's `h2w_turns` answer: `{url, generating, composer,
    /// turns:[{role:"user"|"assistant", text}]}`.
    pub fn from_chatgpt_turns(answer: &Value) -> Option<PageRead> {
        if answer.get("ok") != Some(&Value::Bool(true)) {
            return None;
        }
        let entries = answer
            .get("turns")?
            .as_array()?
            .iter()
            .filter_map(|t| {
                let role = match t.get("role")?.as_str()? {
                    "user" => Role::User,
                    "assistant" => Role::Assistant,
                    _ => return None,
                };
                Some(TranscriptEntry { role, text: t.get("text")?.as_str()?.to_string() })
            })
            .collect();
        Some(PageRead {
            url: answer.get("url")?.as_str()?.to_string(),
            entries,
            busy: answer.get("generating") == Some(&Value::Bool(true)),
            composer: answer.get("composer") == Some(&Value::Bool(true)),
        })
    }

    /// The newest assistant reply, once complete and not followed by a user message (the
    /// packet is read only from a finished reply).
    pub fn finished_reply(&self) -> Option<&str> {
        let last = self.entries.last()?;
        (last.role == Role::Assistant && !self.busy).then_some(last.text.as_str())
    }

    /// The newest assistant reply as it is now (the pre-request fingerprint).
    pub fn current_reply(&self) -> &str {
        self.entries.iter().rev().find(|e| e.role == Role::Assistant).map(|e| e.text.as_str()).unwrap_or("")
    }

    /// The page confirms the seed of transfer `id` when it shows a conversation of its own
    /// (not a new-chat launcher, not the source) whose user messages carry the seed marker.
    /// Returns that conversation's scope.
    pub fn confirmed_target(&self, id: &str, source_page_key: &str) -> Option<ConvTarget> {
        let target = target_of(&self.url).ok()?;
        let page_key = match &target {
            ConvTarget::Conversation { conv_key, .. } => conv_key.clone(),
            ConvTarget::Project { active_conv_key: Some(active), .. } => active.clone(),
            _ => return None,
        };
        if page_key == source_page_key {
            return None;
        }
        self.entries.iter().any(|e| e.role == Role::User && has_seed_marker(&e.text, id)).then_some(target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const ID: &str = "ht:abc:1";

    fn zai_snapshot(url: &str, messages: &[(&str, &str)]) -> PageSnapshot {
        let roots: Vec<Value> = messages
            .iter()
            .enumerate()
            .map(|(i, (role, text))| {
                let probe = if *role == "user" { "user" } else { "assistant" };
                json!({ "index": i, "dom_id": format!("message-{i}"), "probes": [probe], "text": text, "head": text })
            })
            .collect();
        serde_json::from_value(json!({
            "seq": 1, "url": url, "visible": true, "total_roots": roots.len(), "roots": roots,
            "composer": { "present": true, "kind": "textarea", "text": "", "composing": false, "disabled": false },
        }))
        .unwrap()
    }

    fn read(url: &str, messages: &[(&str, &str)]) -> PageRead {
        PageRead::from_snapshot(&zai_snapshot(url, messages)).unwrap()
    }

    fn seed() -> String {
        ext_core::continuity::handoff::seed_text(ID, "goal: ship it", ext_core::continuity::Lang::En)
    }

    #[test]
    fn targets_are_a_new_zai_chat_or_the_project_launcher() {
        let zai = ConvTarget::Conversation { site: "z.ai".into(), conv_key: "https://chat.z.ai/c/A".into() };
        assert_eq!(launch_url(&zai).unwrap(), "https://chat.z.ai/");
        let p = "g-p-0123456789abcdef0123456789abcdef";
        let project = target_of(&format!("https://chatgpt.com/g/{p}-demo/c/x1")).unwrap();
        assert_eq!(launch_url(&project).unwrap(), format!("https://chatgpt.com/g/{p}/project"));
        let plain = target_of("https://chatgpt.com/c/x1").unwrap();
        assert_eq!(launch_url(&plain), Err("handoff-unsupported"));
        let deepseek = ConvTarget::Conversation { site: "deepseek".into(), conv_key: "https://chat.deepseek.com/a/chat/s/1".into() };
        assert_eq!(launch_url(&deepseek), Err("handoff-unsupported"));
    }

    #[test]
    fn only_a_clear_answer_is_certain() {
        assert_eq!(seed_outcome(&json!({ "ok": true })), SeedOutcome::Submitted);
        assert_eq!(seed_outcome(&json!({ "ok": false, "detail": "composer not found" })), SeedOutcome::Failed("insert-failed".into()));
        assert_eq!(seed_outcome(&json!({ "ok": false, "error": "user-typing" })), SeedOutcome::Failed("insert-failed".into()));
        assert_eq!(seed_outcome(&json!({ "ok": false, "error": "insert-failed" })), SeedOutcome::Uncertain("insert-failed".into()));
        assert_eq!(
            seed_outcome(&json!({ "ok": false, "detail": "the page did not take the message (composer still full)" })),
            SeedOutcome::Uncertain("submit-failed".into())
        );
        assert_eq!(seed_outcome(&Value::Null), SeedOutcome::Uncertain("no-response".into()));
        assert_eq!(seed_outcome(&json!({ "ok": false, "error": "tab-unreachable" })), SeedOutcome::Uncertain("no-response".into()));
    }

    #[test]
    fn the_seed_is_confirmed_only_in_a_new_conversation_with_the_marker() {
        let source = "https://chat.z.ai/c/A";
        let landed = read("https://chat.z.ai/c/B", &[("user", &seed())]);
        assert_eq!(
            landed.confirmed_target(ID, source),
            Some(ConvTarget::Conversation { site: "z.ai".into(), conv_key: "https://chat.z.ai/c/B".into() })
        );
        // Still on the launcher (the page has not moved to its chat yet).
        assert_eq!(read("https://chat.z.ai/", &[("user", &seed())]).confirmed_target(ID, source), None);
        // The source itself, another transfer's seed, or the marker only in a reply.
        assert_eq!(read(source, &[("user", &seed())]).confirmed_target(ID, source), None);
        assert_eq!(landed.confirmed_target("ht:abc:2", source), None);
        assert_eq!(read("https://chat.z.ai/c/B", &[("user", "hi"), ("assistant", &seed())]).confirmed_target(ID, source), None);
    }

    #[test]
    fn the_packet_is_read_from_a_finished_reply_only() {
        let done = read("https://chat.z.ai/c/A", &[("user", "q"), ("assistant", "the packet")]);
        assert_eq!(done.finished_reply(), Some("the packet"));
        assert_eq!(done.current_reply(), "the packet");
        let thinking = read("https://chat.z.ai/c/A", &[("user", "q"), ("assistant", "Thinking...")]);
        assert_eq!(thinking.finished_reply(), None);
        let asked = read("https://chat.z.ai/c/A", &[("user", "q"), ("assistant", "a"), ("user", "next")]);
        assert_eq!(asked.finished_reply(), None);
        assert_eq!(asked.current_reply(), "a");
    }

    #[test]
    fn chatgpt_turns_are_read_and_confirm_in_the_project() {
        let p = "g-p-0123456789abcdef0123456789abcdef";
        let answer = json!({ "ok": true, "url": format!("https://chatgpt.com/g/{p}-demo/c/B"), "generating": false, "composer": true,
            "turns": [{ "role": "user", "text": seed() }, { "role": "assistant", "text": "On it." }, { "role": "tool", "text": "x" }] });
        let page = PageRead::from_chatgpt_turns(&answer).unwrap();
        assert_eq!(page.entries.len(), 2);
        assert_eq!(page.finished_reply(), Some("On it."));
        assert_eq!(
            page.confirmed_target(ID, &format!("https://chatgpt.com/g/{p}/c/A")),
            Some(ConvTarget::Project {
                site: "chatgpt".into(),
                project_id: p.into(),
                project_key: format!("https://chatgpt.com/g/{p}"),
                active_conv_key: Some(format!("https://chatgpt.com/g/{p}/c/B")),
            })
        );
        // The launcher itself is not a conversation; a generating reply is not finished.
        let home = json!({ "ok": true, "url": format!("https://chatgpt.com/g/{p}/project"), "turns": [{ "role": "user", "text": seed() }] });
        assert_eq!(PageRead::from_chatgpt_turns(&home).unwrap().confirmed_target(ID, "x"), None);
        let busy = json!({ "ok": true, "url": "https://chatgpt.com/c/A", "generating": true, "turns": [{ "role": "assistant", "text": "half" }] });
        assert_eq!(PageRead::from_chatgpt_turns(&busy).unwrap().finished_reply(), None);
        assert_eq!(PageRead::from_chatgpt_turns(&json!({ "ok": false, "error": "not-ready" })), None);
    }
}
