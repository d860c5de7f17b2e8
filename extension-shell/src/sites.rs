//! The chat sites the bridge runs on: origin → site, conversation keys, the selector sets the
//! content script is driven with, and when a reply counts as finished.
//!
//! The wire values (origins, selectors, done patterns) follow spec/extension.md §4. This is a
//! thin local table until `ext-adapters` publishes its `SiteAdapter` API; the content script only
//! ever sees the JSON produced here, so swapping the source later changes nothing in the page.

use ext_core::protocol_text::Site;
use serde::Serialize;

/// Sites that may be bridged. ChatGPT has a native MCP connector and is not bridged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum BridgeSite {
    #[serde(rename = "z.ai")]
    Zai,
    #[serde(rename = "deepseek")]
    DeepSeek,
}

pub const ALL_SITES: [BridgeSite; 2] = [BridgeSite::Zai, BridgeSite::DeepSeek];

impl BridgeSite {
    /// The wire name (`msg.site`).
    pub fn name(self) -> &'static str {
        match self {
            BridgeSite::Zai => "z.ai",
            BridgeSite::DeepSeek => "deepseek",
        }
    }

    /// Short id used in storage keys, script ids and the options page.
    pub fn slug(self) -> &'static str {
        match self {
            BridgeSite::Zai => "zai",
            BridgeSite::DeepSeek => "deepseek",
        }
    }

    pub fn origin(self) -> &'static str {
        match self {
            BridgeSite::Zai => "https://chat.z.ai",
            BridgeSite::DeepSeek => "https://chat.deepseek.com",
        }
    }

    /// The match pattern the content script is registered for.
    pub fn match_pattern(self) -> String {
        format!("{}/*", self.origin())
    }

    pub fn core_site(self) -> Site {
        match self {
            BridgeSite::Zai => Site::Zai,
            BridgeSite::DeepSeek => Site::DeepSeek,
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        ALL_SITES.into_iter().find(|s| s.name() == name || s.slug() == name)
    }

    pub fn from_origin(origin: &str) -> Option<Self> {
        ALL_SITES.into_iter().find(|s| s.origin() == origin)
    }

    /// Selector set and page strategy for the content script.
    pub fn selectors(self) -> Selectors {
        match self {
            BridgeSite::Zai => Selectors {
                composer: "textarea",
                send_button: Some("#send-message-button:not(:disabled), form button[type=submit]:not(:disabled)"),
                message_root: "[id^=\"message-\"]:not([id$=\"-start\"])",
                user_marker: Some(".user-message, .chat-user"),
                assistant_marker: ".markdown-prose, .chat-assistant",
                reply_body: ".markdown-prose, [class*=markdown], [class*=answer], [class*=message-content], [class*=prose]",
                busy_marker: None,
                message_id: "attr:id",
            },
            BridgeSite::DeepSeek => Selectors {
                composer: "textarea[name=search], textarea",
                send_button: None,
                message_root: ".ds-message",
                user_marker: None,
                assistant_marker: ".ds-assistant-message-main-content",
                reply_body: ".ds-assistant-message-main-content",
                busy_marker: Some("[class*=cursor], [class*=blink], [class*=loading]"),
                message_id: "index",
            },
        }
    }

    /// Whether the site shows the reply as finished (stability over time is checked apart).
    /// `busy` says whether the reply's root contains the site's busy marker.
    pub fn reply_looks_done(self, text: &str, root_text: &str, busy: bool) -> bool {
        if text.trim().is_empty() {
            return false;
        }
        match self {
            BridgeSite::Zai => {
                let lower = text.to_lowercase();
                !["thinking...", "generating", "loading...", "思考中", "生成中", "加载中"].iter().any(|p| lower.contains(p))
            }
            BridgeSite::DeepSeek => thought_for_seconds(root_text) || !busy,
        }
    }
}

/// `/Thought for \d+/`: DeepSeek's finished-thinking label.
fn thought_for_seconds(text: &str) -> bool {
    text.match_indices("Thought for ").any(|(i, m)| text[i + m.len()..].starts_with(|c: char| c.is_ascii_digit()))
}

/// What the content script needs to read and drive one site's page.
#[derive(Debug, Clone, Serialize)]
pub struct Selectors {
    pub composer: &'static str,
    /// None: the site sends with Enter only.
    pub send_button: Option<&'static str>,
    pub message_root: &'static str,
    /// None: a root is the user's when it has no assistant marker.
    pub user_marker: Option<&'static str>,
    pub assistant_marker: &'static str,
    pub reply_body: &'static str,
    pub busy_marker: Option<&'static str>,
    /// `attr:id` (the root's id attribute) or `index` (position among roots).
    pub message_id: &'static str,
}

/// A URL split into what identity checks need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageUrl {
    pub origin: String,
    pub path: String,
}

/// Parses an absolute http(s) URL without a URL library: scheme://host[:port]/path?query#frag.
pub fn parse_url(url: &str) -> Option<PageUrl> {
    let (scheme, rest) = url.split_once("://")?;
    if scheme != "https" && scheme != "http" {
        return None;
    }
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let host = &rest[..end];
    if host.is_empty() || host.contains('@') {
        return None;
    }
    let tail = &rest[end..];
    let path_end = tail.find(['?', '#']).unwrap_or(tail.len());
    Some(PageUrl { origin: format!("{scheme}://{}", host.to_ascii_lowercase()), path: tail[..path_end].to_string() })
}

/// `origin + pathname` without trailing slashes (spec §4.1); the z.ai root is `https://chat.z.ai`.
pub fn conversation_key(url: &str) -> Option<String> {
    let u = parse_url(url)?;
    Some(format!("{}{}", u.origin, u.path.trim_end_matches('/')))
}

/// The origin part of a conversation key.
pub fn key_origin(key: &str) -> Option<String> {
    parse_url(key).map(|u| u.origin)
}

/// True for a site's new-chat launcher (the origin itself).
pub fn is_root_key(key: &str) -> bool {
    parse_url(key).is_some_and(|u| u.path.trim_end_matches('/').is_empty())
}

/// z.ai `/c/<id>` → `<id>`.
pub fn zai_conversation_id(key: &str) -> Option<String> {
    let u = parse_url(key)?;
    if u.origin != BridgeSite::Zai.origin() {
        return None;
    }
    let id = u.path.strip_prefix("/c/")?;
    (!id.is_empty() && !id.contains('/')).then(|| id.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversation_keys_drop_trailing_slashes_query_and_fragment() {
        assert_eq!(conversation_key("https://chat.z.ai/").as_deref(), Some("https://chat.z.ai"));
        assert_eq!(conversation_key("https://chat.z.ai/c/abc/?x=1#y").as_deref(), Some("https://chat.z.ai/c/abc"));
        assert_eq!(conversation_key("https://Chat.Z.ai/c/abc").as_deref(), Some("https://chat.z.ai/c/abc"));
        assert_eq!(conversation_key("chrome-extension://x/y"), None);
        assert_eq!(conversation_key("https://user@chat.z.ai/"), None);
    }

    #[test]
    fn roots_and_zai_ids() {
        assert!(is_root_key("https://chat.z.ai"));
        assert!(!is_root_key("https://chat.z.ai/c/1"));
        assert_eq!(zai_conversation_id("https://chat.z.ai/c/42").as_deref(), Some("42"));
        assert_eq!(zai_conversation_id("https://chat.z.ai/c/42/x"), None);
        assert_eq!(zai_conversation_id("https://chat.deepseek.com/c/42"), None);
    }

    #[test]
    fn done_rules_per_site() {
        let z = BridgeSite::Zai;
        assert!(!z.reply_looks_done("Thinking...", "", false));
        assert!(!z.reply_looks_done("", "", false));
        assert!(z.reply_looks_done("{\"tool\":\"a\"}", "", false));
        let d = BridgeSite::DeepSeek;
        assert!(!d.reply_looks_done("partial", "partial", true));
        assert!(d.reply_looks_done("partial", "Thought for 3 seconds partial", true));
        assert!(!d.reply_looks_done("partial", "Thought for a while", true));
        assert!(d.reply_looks_done("final", "final", false));
    }

    #[test]
    fn sites_by_name_and_origin() {
        assert_eq!(BridgeSite::from_name("z.ai"), Some(BridgeSite::Zai));
        assert_eq!(BridgeSite::from_name("zai"), Some(BridgeSite::Zai));
        assert_eq!(BridgeSite::from_origin("https://chat.deepseek.com"), Some(BridgeSite::DeepSeek));
        assert_eq!(BridgeSite::from_origin("https://chatgpt.com"), None);
    }
}
