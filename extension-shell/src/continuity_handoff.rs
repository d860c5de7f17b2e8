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

/// Page answers to a send that show the text certainly never went out: the page had no
/// composer to put it in.
const NOT_SENT: [&str; 2] = ["composer not found", "composer-missing"];

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
    let reason = if answer.is_null() || answer.get("error").and_then(Value::as_str) == Some("tab-unreachable") {
        "no-response"
    } else {
        "submit-failed"
    };
    SeedOutcome::Uncertain(reason.into())
}

/// The newest assistant reply of a page, once it has finished (the packet is read only from
/// a complete reply).
pub fn finished_reply(snapshot: &PageSnapshot) -> Option<String> {
    let view = ext_adapters::interpret(snapshot).ok()?;
    let reply = view.latest_reply.as_ref()?;
    (reply.finished() && !view.awaiting_reply).then(|| reply.entry.text.to_string())
}

/// The newest assistant reply as it is now, finished or not (the pre-request fingerprint).
pub fn current_reply(snapshot: &PageSnapshot) -> String {
    ext_adapters::interpret(snapshot).ok().and_then(|v| v.latest_reply.map(|r| r.entry.text.to_string())).unwrap_or_default()
}

/// The target page confirms the seed of transfer `id` when it shows a conversation of its
/// own (not a new-chat launcher, not the source) whose user messages carry the seed marker.
/// Returns that conversation's scope.
pub fn confirmed_target(snapshot: &PageSnapshot, id: &str, source_page_key: &str) -> Option<ConvTarget> {
    let view = ext_adapters::interpret(snapshot).ok()?;
    let target = target_of(&snapshot.url).ok()?;
    let page_key = match &target {
        ConvTarget::Conversation { conv_key, .. } => conv_key.clone(),
        ConvTarget::Project { active_conv_key: Some(active), .. } => active.clone(),
        _ => return None,
    };
    if page_key == source_page_key {
        return None;
    }
    let transcript: Vec<TranscriptEntry> = view.transcript();
    transcript.iter().any(|e| e.role == Role::User && has_seed_marker(&e.text, id)).then_some(target)
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
        let landed = zai_snapshot("https://chat.z.ai/c/B", &[("user", &seed())]);
        assert_eq!(
            confirmed_target(&landed, ID, source),
            Some(ConvTarget::Conversation { site: "z.ai".into(), conv_key: "https://chat.z.ai/c/B".into() })
        );
        // Still on the launcher (the page has not moved to its chat yet).
        assert_eq!(confirmed_target(&zai_snapshot("https://chat.z.ai/", &[("user", &seed())]), ID, source), None);
        // The source itself, another transfer's seed, or the marker only in a reply.
        assert_eq!(confirmed_target(&zai_snapshot(source, &[("user", &seed())]), ID, source), None);
        assert_eq!(confirmed_target(&landed, "ht:abc:2", source), None);
        assert_eq!(confirmed_target(&zai_snapshot("https://chat.z.ai/c/B", &[("user", "hi"), ("assistant", &seed())]), ID, source), None);
    }

    #[test]
    fn the_packet_is_read_from_a_finished_reply_only() {
        let done = zai_snapshot("https://chat.z.ai/c/A", &[("user", "q"), ("assistant", "the packet")]);
        assert_eq!(finished_reply(&done).as_deref(), Some("the packet"));
        assert_eq!(current_reply(&done), "the packet");
        let thinking = zai_snapshot("https://chat.z.ai/c/A", &[("user", "q"), ("assistant", "Thinking...")]);
        assert_eq!(finished_reply(&thinking), None);
        let asked = zai_snapshot("https://chat.z.ai/c/A", &[("user", "q"), ("assistant", "a"), ("user", "next")]);
        assert_eq!(finished_reply(&asked), None);
    }
}
