//! The sites the bridge may be switched on for (z.ai, DeepSeek): their origins, switch names and
//! content-script match patterns, plus the conversation-key parsing the sender check needs.
//! Everything about reading a site's page (selectors, roles, reply finished) is
//! `ext_adapters`'s job.

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
    fn new_chat_roots() {
        assert!(is_root_key("https://chat.z.ai"));
        assert!(!is_root_key("https://chat.z.ai/c/1"));
    }

    #[test]
    fn sites_by_name_and_origin() {
        assert_eq!(BridgeSite::from_name("z.ai"), Some(BridgeSite::Zai));
        assert_eq!(BridgeSite::from_name("zai"), Some(BridgeSite::Zai));
        assert_eq!(BridgeSite::from_origin("https://chat.deepseek.com"), Some(BridgeSite::DeepSeek));
        assert_eq!(BridgeSite::from_origin("https://chatgpt.com"), None);
    }
}
