//! Who may ask the bridge for a catalog or a tool call (spec §8): the claimed site, the claimed
//! conversation's origin and the sending tab's origin must all agree, and the site must be
//! switched on. Anything else is refused before a byte reaches the native host.

use crate::sites::{BridgeSite, conversation_key, key_origin, parse_url};

pub const ERR_SITE_MISMATCH: &str = "json-bridge-site-mismatch";
pub const ERR_SENDER_MISMATCH: &str = "json-bridge-sender-mismatch";
pub const ERR_SITE_DISABLED: &str = "experimental-site-disabled";

/// A page message that passed the identity checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedSender {
    pub site: BridgeSite,
    /// The conversation key, as derived from the claim (equal origin to the tab).
    pub conv_key: String,
    pub tab_id: i32,
    pub frame_id: i32,
}

/// The parts of `chrome.runtime.MessageSender` the check needs.
#[derive(Debug, Clone, Default)]
pub struct SenderInfo {
    pub tab_id: Option<i32>,
    pub tab_url: Option<String>,
    pub frame_id: i32,
}

/// Checks `{site, convKey}` of a page message against the sending tab and the site switches.
pub fn verify(
    claimed_site: &str,
    claimed_key: &str,
    sender: &SenderInfo,
    enabled: impl Fn(BridgeSite) -> bool,
) -> Result<VerifiedSender, &'static str> {
    let conv_key = conversation_key(claimed_key).ok_or(ERR_SITE_MISMATCH)?;
    let origin = key_origin(&conv_key).ok_or(ERR_SITE_MISMATCH)?;
    let site = BridgeSite::from_origin(&origin).ok_or(ERR_SITE_MISMATCH)?;
    // `msg.site` must be the site's exact wire name (spec §8), not the options page's short id.
    if claimed_site != site.name() {
        return Err(ERR_SITE_MISMATCH);
    }
    let (Some(tab_id), Some(tab_url)) = (sender.tab_id, sender.tab_url.as_deref()) else {
        return Err(ERR_SENDER_MISMATCH);
    };
    let tab_origin = parse_url(tab_url).map(|u| u.origin).ok_or(ERR_SENDER_MISMATCH)?;
    if tab_origin != origin {
        return Err(ERR_SENDER_MISMATCH);
    }
    if !enabled(site) {
        return Err(ERR_SITE_DISABLED);
    }
    Ok(VerifiedSender { site, conv_key, tab_id, frame_id: sender.frame_id })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tab(url: &str) -> SenderInfo {
        SenderInfo { tab_id: Some(7), tab_url: Some(url.to_string()), frame_id: 0 }
    }

    #[test]
    fn matching_site_conversation_and_tab_pass() {
        let v = verify("z.ai", "https://chat.z.ai/c/1/", &tab("https://chat.z.ai/c/1"), |_| true).unwrap();
        assert_eq!((v.site, v.conv_key.as_str(), v.tab_id), (BridgeSite::Zai, "https://chat.z.ai/c/1", 7));
    }

    #[test]
    fn every_mismatch_is_refused_with_its_code() {
        let on = |_| true;
        assert_eq!(verify("deepseek", "https://chat.z.ai/c/1", &tab("https://chat.z.ai/c/1"), on), Err(ERR_SITE_MISMATCH));
        assert_eq!(verify("z.ai", "https://evil.example/c/1", &tab("https://evil.example/c/1"), on), Err(ERR_SITE_MISMATCH));
        assert_eq!(verify("z.ai", "not a url", &tab("https://chat.z.ai/"), on), Err(ERR_SITE_MISMATCH));
        assert_eq!(verify("z.ai", "https://chat.z.ai/c/1", &tab("https://chat.deepseek.com/"), on), Err(ERR_SENDER_MISMATCH));
        assert_eq!(verify("z.ai", "https://chat.z.ai/c/1", &SenderInfo::default(), on), Err(ERR_SENDER_MISMATCH));
        assert_eq!(verify("z.ai", "https://chat.z.ai/c/1", &tab("https://chat.z.ai/c/1"), |_| false), Err(ERR_SITE_DISABLED));
    }

    #[test]
    fn the_claimed_site_is_the_exact_wire_name() {
        // The options page's short ids are not what a content script sends.
        let on = |_| true;
        assert_eq!(verify("zai", "https://chat.z.ai/c/1", &tab("https://chat.z.ai/c/1"), on), Err(ERR_SITE_MISMATCH));
        assert_eq!(verify("Z.AI", "https://chat.z.ai/c/1", &tab("https://chat.z.ai/c/1"), on), Err(ERR_SITE_MISMATCH));
        assert_eq!(verify("", "https://chat.deepseek.com/a/chat/s/1", &tab("https://chat.deepseek.com/a/chat/s/1"), on), Err(ERR_SITE_MISMATCH));
        assert!(verify("deepseek", "https://chat.deepseek.com/a/chat/s/1", &tab("https://chat.deepseek.com/a/chat/s/1"), on).is_ok());
    }
}
