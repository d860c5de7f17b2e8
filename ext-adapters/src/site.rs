//! The supported chat sites and their conversation identities.

use serde::{Deserialize, Serialize};

/// A supported chat site. The wire names are the reference adapter names (spec §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Site {
    #[serde(rename = "z.ai")]
    ZAi,
    #[serde(rename = "deepseek")]
    DeepSeek,
    #[serde(rename = "chatgpt")]
    ChatGpt,
}

impl Site {
    /// The same site as `ext_core::protocol_text` names it (per-site preamble hints).
    pub fn protocol_site(self) -> ext_core::protocol_text::Site {
        match self {
            Site::ZAi => ext_core::protocol_text::Site::Zai,
            Site::DeepSeek => ext_core::protocol_text::Site::DeepSeek,
            Site::ChatGpt => ext_core::protocol_text::Site::ChatGpt,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Site::ZAi => "z.ai",
            Site::DeepSeek => "deepseek",
            Site::ChatGpt => "chatgpt",
        }
    }
}

/// Where on its site a page is, as far as bindings care.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "scope", rename_all = "snake_case")]
pub enum Scope {
    /// The new-chat launcher (site root). On ChatGPT this is the *pending* binding scope.
    NewChat,
    /// A persisted conversation.
    Conversation { conversation_id: String },
    /// A ChatGPT conversation inside a Project.
    ProjectConversation { conversation_id: String, project_id: String, project_key: String },
    /// A ChatGPT Project's own page (its new-chat launcher).
    ProjectHome { project_id: String, project_key: String },
    /// Any other page of the site (settings, search, …): no conversation to bind.
    Other,
}

/// Identity of the page a content script runs in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConversationIdentity {
    pub site: Site,
    /// Binding key: origin + path without trailing slashes (ChatGPT: canonical host, project
    /// slug dropped).
    pub conv_key: String,
    #[serde(flatten)]
    pub scope: Scope,
}

impl ConversationIdentity {
    pub fn conversation_id(&self) -> Option<&str> {
        match &self.scope {
            Scope::Conversation { conversation_id } | Scope::ProjectConversation { conversation_id, .. } => {
                Some(conversation_id)
            }
            _ => None,
        }
    }
}
