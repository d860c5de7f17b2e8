//! What continuity needs to know about a chat page: which binding scope a URL is
//! (ext-adapters' identity turned into ext-core's `ConvTarget`), and the selectors the ChatGPT
//! content script probes the composer with.

use ext_adapters::{Scope, Site, adapter_for_site, identify};
use ext_core::continuity::bindings::ConvTarget;
use serde_json::{Value, json};

/// The binding scope of the page at `url`, or why there is none.
pub fn target_of(url: &str) -> Result<ConvTarget, &'static str> {
    let identity = identify(url).map_err(|_| "conversation-unavailable")?;
    let site = identity.site.name().to_string();
    Ok(match identity.scope {
        Scope::NewChat if identity.site == Site::DeepSeek => return Err("conversation-unavailable"),
        Scope::NewChat => ConvTarget::PendingRoot { site, root_key: identity.conv_key },
        Scope::Conversation { .. } => ConvTarget::Conversation { site, conv_key: identity.conv_key },
        Scope::ProjectConversation { project_id, project_key, .. } => {
            ConvTarget::Project { site, project_id, project_key, active_conv_key: Some(identity.conv_key) }
        }
        Scope::ProjectHome { project_id, project_key } => ConvTarget::Project { site, project_id, project_key, active_conv_key: None },
        Scope::Other => return Err("conversation-unavailable"),
    })
}

/// `conv_key` itself when Auto may be kept under it: the binding key of a page of a
/// supported site (a conversation, a Project, a new-chat page with pending bindings), as
/// the popup shows it. Spec §8 ties an automation toggle to a real conversation of the
/// site; anything else would only leave a flag that no binding ever reads.
pub fn auto_key(conv_key: &str) -> Result<String, &'static str> {
    let target = target_of(conv_key)?;
    if target.binding_conv_key() == conv_key { Ok(conv_key.to_string()) } else { Err("conversation-unavailable") }
}

/// The conversation a page shows (what a wake for it must find in the tab).
pub fn shown_conversation(url: &str) -> Option<String> {
    identify(url).ok().map(|i| i.conv_key)
}

/// What the tab a binding remembers says about where its wake goes (spec §7.5 target, step 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RememberedTab {
    /// It shows the wake's conversation: deliver there.
    Shows,
    /// A Project binding's tab shows something else now (`project-target-moved`): the binding
    /// follows that tab, so another tab still showing the old chat is not where the wake goes.
    ProjectTargetMoved,
    /// No tab, a closed one, or one that went elsewhere: look for another tab showing it.
    Search,
}

/// `tab_url` is the remembered tab's URL now (None when there is none or it was closed).
pub fn remembered_tab(project: bool, tab_url: Option<&str>, conv: &str) -> RememberedTab {
    let Some(url) = tab_url else { return RememberedTab::Search };
    if shown_conversation(url).as_deref() == Some(conv) {
        RememberedTab::Shows
    } else if project {
        RememberedTab::ProjectTargetMoved
    } else {
        RememberedTab::Search
    }
}

/// The composer the MAIN-world insert writes into (the ChatGPT adapter's first choice).
pub fn chatgpt_composer_selector() -> String {
    adapter_for_site(Site::ChatGpt).selectors().composer.into_iter().next().unwrap_or_default()
}

/// Stop buttons ChatGPT shows while a reply is generating (a wake must wait for them to go).
pub const CHATGPT_STOP_BUTTONS: [&str; 4] =
    [r#"button[data-testid="stop-button"]"#, r#"[aria-label="Stop streaming"]"#, r#"[aria-label*="Stop generating" i]"#, r#"[aria-label*="停止"]"#];

/// The selectors the ChatGPT content script needs, from the ChatGPT adapter plus the stop
/// buttons.
pub fn chatgpt_probe_selectors() -> Value {
    let set = adapter_for_site(Site::ChatGpt).selectors();
    let probe = |name: &str| set.probes.iter().find(|p| p.name == name).map(|p| p.selector.clone()).unwrap_or_default();
    json!({
        "composer": set.composer,
        "send_buttons": set.send_buttons,
        "stop_buttons": CHATGPT_STOP_BUTTONS,
        "user_turn": probe("user"),
        "assistant_turn": probe("assistant"),
        "streaming": probe("streaming"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chatgpt_scopes() {
        assert_eq!(
            target_of("https://chatgpt.com/c/abc"),
            Ok(ConvTarget::Conversation { site: "chatgpt".into(), conv_key: "https://chatgpt.com/c/abc".into() })
        );
        assert_eq!(target_of("https://chatgpt.com/"), Ok(ConvTarget::PendingRoot { site: "chatgpt".into(), root_key: "https://chatgpt.com".into() }));
        let p = "g-p-0123456789abcdef0123456789abcdef";
        assert_eq!(
            target_of(&format!("https://chatgpt.com/g/{p}-my-project/c/x1")),
            Ok(ConvTarget::Project {
                site: "chatgpt".into(),
                project_id: p.into(),
                project_key: format!("https://chatgpt.com/g/{p}"),
                active_conv_key: Some(format!("https://chatgpt.com/g/{p}/c/x1")),
            })
        );
        assert_eq!(target_of("https://chatgpt.com/settings"), Err("conversation-unavailable"));
        assert_eq!(target_of("https://example.com/c/1"), Err("conversation-unavailable"));
    }

    #[test]
    fn deepseek_has_no_pending_scope() {
        assert_eq!(target_of("https://chat.deepseek.com/"), Err("conversation-unavailable"));
        assert!(matches!(target_of("https://chat.z.ai/"), Ok(ConvTarget::PendingRoot { .. })));
    }

    #[test]
    fn auto_is_only_kept_under_a_binding_key() {
        let p = "g-p-0123456789abcdef0123456789abcdef";
        for key in ["https://chatgpt.com/c/abc", "https://chat.z.ai/c/1", "https://chat.z.ai", "https://chatgpt.com"] {
            assert_eq!(auto_key(key), Ok(key.to_string()));
        }
        assert_eq!(auto_key(&format!("https://chatgpt.com/g/{p}")), Ok(format!("https://chatgpt.com/g/{p}")));
        for key in [
            "",
            "not a key",
            "https://evil.example/c/1",
            "https://chat.deepseek.com",
            "https://chat.z.ai/c/1/",
            "https://chatgpt.com/settings",
            // A Project conversation's Auto is its Project's; the slug is no part of a key.
            &format!("https://chatgpt.com/g/{p}/c/x1"),
            &format!("https://chatgpt.com/g/{p}-my-project"),
        ] {
            assert_eq!(auto_key(key), Err("conversation-unavailable"), "{key:?}");
        }
    }

    #[test]
    fn a_project_tab_that_shows_another_chat_is_a_moved_target() {
        let p = "g-p-0123456789abcdef0123456789abcdef";
        let active = format!("https://chatgpt.com/g/{p}/c/x1");
        let shows = format!("https://chatgpt.com/g/{p}-release/c/x1?model=a");
        assert_eq!(remembered_tab(true, Some(&shows), &active), RememberedTab::Shows);
        for elsewhere in [format!("https://chatgpt.com/g/{p}/c/x2"), format!("https://chatgpt.com/g/{p}/project"), "https://chatgpt.com/c/y".into()] {
            assert_eq!(remembered_tab(true, Some(&elsewhere), &active), RememberedTab::ProjectTargetMoved, "{elsewhere}");
            assert_eq!(remembered_tab(false, Some(&elsewhere), &active), RememberedTab::Search, "{elsewhere}");
        }
        assert_eq!(remembered_tab(true, None, &active), RememberedTab::Search, "a closed tab: look for another");
    }

    #[test]
    fn probe_selectors_come_from_the_adapter() {
        let s = chatgpt_probe_selectors();
        assert_eq!(s["composer"][0], r#"#prompt-textarea[contenteditable="true"]"#);
        assert!(s["user_turn"].as_str().unwrap().contains("user"));
        assert!(s["streaming"].as_str().unwrap().contains("data-is-streaming"));
        assert_eq!(s["stop_buttons"].as_array().unwrap().len(), CHATGPT_STOP_BUTTONS.len());
    }
}
