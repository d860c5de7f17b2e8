//! Which page messages are protocol traffic and get folded behind a bar (spec §3). The page
//! only reports messages and applies the labels decided here; nothing is removed from the DOM.

use ext_core::journal::{Role, is_bridge_user_message};
use ext_core::parser::{ReplyState, parse_reply};
use ext_core::protocol_text::BRIDGE_MARKER;

pub const LABEL_TOOLS: &str = "Herdr tools";
pub const LABEL_CALL: &str = "Herdr tool call";
pub const LABEL_RESULT: &str = "Herdr tool result";

/// The bar label for a message, or None when it stays as it is.
pub fn label_for(role: Role, text: &str) -> Option<&'static str> {
    match role {
        Role::User if text.contains(BRIDGE_MARKER) => Some(LABEL_TOOLS),
        Role::User if is_bridge_user_message(text) => Some(LABEL_RESULT),
        Role::User => None,
        // Only a finished call reply is folded; prose answers and half-streamed JSON stay visible.
        Role::Assistant => (parse_reply(text).state == ReplyState::Complete).then_some(LABEL_CALL),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_follow_the_protocol_markers() {
        assert_eq!(label_for(Role::User, "[HERDR_JSON_BRIDGE_V1]\n- rules\n\nUSER_TASK:\nhi"), Some(LABEL_TOOLS));
        assert_eq!(label_for(Role::User, "TOOL_RESULT:\n[]"), Some(LABEL_RESULT));
        assert_eq!(label_for(Role::User, "just chatting"), None);
        assert_eq!(label_for(Role::Assistant, "{\"tool\":\"herdr_fs_read\",\"args\":{}}"), Some(LABEL_CALL));
        assert_eq!(label_for(Role::Assistant, "The answer is 42."), None);
        assert_eq!(label_for(Role::Assistant, "{\"tool\":\"herdr_fs_read\",\"args\":{"), None);
    }
}
