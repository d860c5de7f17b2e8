//! Which Herdr agents this runtime shows to a model (soft hiding, spec §1.2):
//! an allowlist of agent names/kinds, or everything.

use serde_json::{Value, json};

/// Agents shown when `HERDR_MCP_AGENT_ALLOW` is unset.
pub const DEFAULT_ALLOW: &[&str] = &["pi", "cline", "opencode", "anti", "droid", "grok"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentVisibility {
    All,
    /// Lowercased tokens.
    Allowlist(Vec<String>),
}

impl AgentVisibility {
    /// `*`/`all` shows everything, a CSV replaces the default list, unset or blank
    /// keeps the default list.
    pub fn from_setting(setting: Option<&str>) -> Self {
        let Some(raw) = setting.map(str::trim).filter(|s| !s.is_empty()) else {
            return AgentVisibility::Allowlist(DEFAULT_ALLOW.iter().map(|s| s.to_string()).collect());
        };
        if raw == "*" || raw.eq_ignore_ascii_case("all") {
            return AgentVisibility::All;
        }
        AgentVisibility::Allowlist(raw.split(',').map(|t| t.trim().to_ascii_lowercase()).filter(|t| !t.is_empty()).collect())
    }

    pub fn mode(&self) -> &'static str {
        match self {
            AgentVisibility::All => "all",
            AgentVisibility::Allowlist(_) => "allowlist",
        }
    }

    pub fn allow_list(&self) -> Vec<String> {
        match self {
            AgentVisibility::All => vec![],
            AgentVisibility::Allowlist(tokens) => tokens.clone(),
        }
    }

    /// A name or kind is visible when it equals a token or starts with `token-` / `token_`.
    pub fn allows_word(&self, word: &str) -> bool {
        match self {
            AgentVisibility::All => true,
            AgentVisibility::Allowlist(tokens) => {
                let word = word.to_ascii_lowercase();
                tokens.iter().any(|t| {
                    word == *t || word.strip_prefix(t.as_str()).is_some_and(|rest| rest.starts_with('-') || rest.starts_with('_'))
                })
            }
        }
    }

    /// Visibility of one Herdr agent record (its `name` or its kind `agent`).
    pub fn allows_agent(&self, agent: &Value) -> bool {
        let words = [agent.get("name"), agent.get("agent"), agent.get("kind")];
        matches!(self, AgentVisibility::All) || words.iter().flatten().filter_map(|v| v.as_str()).any(|w| self.allows_word(w))
    }

    /// The report fields every agent-listing tool carries.
    pub fn report(&self, hidden: usize) -> Value {
        json!({"agent_visibility": self.mode(), "agent_allow": self.allow_list(), "agents_hidden": hidden})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_list_and_prefix_rules() {
        let v = AgentVisibility::from_setting(None);
        assert_eq!(v.mode(), "allowlist");
        assert!(v.allows_word("pi"));
        assert!(v.allows_word("PI-2"));
        assert!(v.allows_word("opencode_x"));
        assert!(!v.allows_word("pirate"));
        assert!(!v.allows_word("claude"));
        assert!(v.allows_agent(&json!({"agent": "claude", "name": "droid-1"})));
        assert!(!v.allows_agent(&json!({"agent": "claude"})));
    }

    #[test]
    fn all_and_csv_overrides() {
        assert_eq!(AgentVisibility::from_setting(Some("*")), AgentVisibility::All);
        assert_eq!(AgentVisibility::from_setting(Some("ALL")), AgentVisibility::All);
        let v = AgentVisibility::from_setting(Some("claude, Codex"));
        assert!(v.allows_word("codex"));
        assert!(!v.allows_word("pi"));
        assert_eq!(AgentVisibility::from_setting(Some("  ")), AgentVisibility::from_setting(None));
    }
}
