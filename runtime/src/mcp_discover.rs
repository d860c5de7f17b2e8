//! `server/discover` (spec contract.md §3, edge.md §10), answered alike by the
//! runtime's endpoint and the edge's public one, and how both tell OpenAI's
//! connector from other clients.
//!
//! The result is metadata about the answering side only: which protocol versions
//! its `initialize` really negotiates, and the capabilities, instructions, server
//! name and contract identity that its `initialize` returns. It needs no session
//! and no `initialize` first, and it is always answered as `application/json`.
//!
//! Which clients count as OpenAI's (our reading of spec §3, where "stateless"
//! clients are those whose User-Agent contains `openai-mcp` or whose
//! `clientInfo.name` is `chatgpt` or contains `openai`/`chatgpt`): a
//! `server/discover` request has no `params.clientInfo`, so the name is taken
//! from the request's `_meta["io.modelcontextprotocol/clientInfo"]` when the
//! client sends one (the 2026-07-28 discover lifecycle puts it there). Being
//! served without a session is *not* enough: the runtime serves every
//! session-less request statelessly, the browser extension's included, and the
//! spec offers the probe version to OpenAI's clients only.

use http::{HeaderMap, header};
use serde_json::{Map, Value, json};

pub const METHOD: &str = "server/discover";
/// How long a client may keep the result before asking again (spec §3).
pub const TTL_MS: u64 = 3_600_000;
/// The stateless revision. Both sides serve it now (rmcp), so it is in every
/// side's `supported_versions` and this append is a no-op there; it stays for a
/// side that would list only handshake versions.
pub const PROBE_VERSION: &str = "2026-07-28";
/// The `_meta` key that carries the server's name and version (MCP 2026-07-28).
pub const SERVER_INFO_META_KEY: &str = "io.modelcontextprotocol/serverInfo";
const CLIENT_INFO_META_KEY: &str = "io.modelcontextprotocol/clientInfo";
const OPENAI_USER_AGENT: &str = "openai-mcp";

/// What one side reports about itself; the same values its `initialize` returns.
#[derive(Debug, Clone)]
pub struct Discovery {
    /// The versions that side's `initialize` negotiates, newest first.
    pub supported_versions: Vec<String>,
    pub capabilities: Value,
    pub instructions: String,
    pub server_name: String,
    pub server_version: String,
    /// `_meta` members beside the server info: the contract identity.
    pub meta: Map<String, Value>,
}

impl Discovery {
    /// The `result` member of the answer; `openai` appends [`PROBE_VERSION`].
    pub fn result(&self, openai: bool) -> Value {
        let mut versions: Vec<Value> = self.supported_versions.iter().map(|v| json!(v)).collect();
        if openai && !self.supported_versions.iter().any(|v| v == PROBE_VERSION) {
            versions.push(json!(PROBE_VERSION));
        }
        let mut meta = self.meta.clone();
        meta.insert(SERVER_INFO_META_KEY.into(), json!({"name": self.server_name, "version": self.server_version}));
        json!({
            "resultType": "complete",
            "supportedVersions": versions,
            "capabilities": self.capabilities,
            "instructions": self.instructions,
            "ttlMs": TTL_MS,
            "cacheScope": "private",
            "_meta": meta,
        })
    }
}

/// True when the User-Agent names OpenAI's MCP client (`openai-mcp`, any case).
/// Compared in place: the runtime's endpoint asks this on requests that carry a
/// session id, tool calls included, and a lower-cased copy would cost an allocation.
pub fn has_openai_user_agent(headers: &HeaderMap) -> bool {
    headers.get_all(header::USER_AGENT).iter().any(|ua| {
        ua.as_bytes().windows(OPENAI_USER_AGENT.len()).any(|w| w.eq_ignore_ascii_case(OPENAI_USER_AGENT.as_bytes()))
    })
}

/// True for a client name the spec counts as OpenAI's: `chatgpt`, or one that
/// contains `openai` or `chatgpt`, in any case.
pub fn is_openai_client_name(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    name.contains("openai") || name.contains("chatgpt")
}

/// Whether a `server/discover` request (its headers and its JSON-RPC `params`)
/// comes from one of OpenAI's clients; see the module notes.
pub fn is_openai_request(headers: &HeaderMap, params: Option<&Value>) -> bool {
    has_openai_user_agent(headers)
        || params.and_then(|p| p.get("_meta")).and_then(Value::as_object).is_some_and(meta_names_openai_client)
}

/// Whether a request's `_meta` names one of OpenAI's clients in
/// `io.modelcontextprotocol/clientInfo` (see the module notes).
pub fn meta_names_openai_client(meta: &Map<String, Value>) -> bool {
    meta.get(CLIENT_INFO_META_KEY)
        .and_then(|c| c.get("name"))
        .and_then(Value::as_str)
        .is_some_and(is_openai_client_name)
}

/// `params` of a `server/discover` request, when they are acceptable: absent,
/// `null` or an object (the method defines none of its own; `_meta` is read).
pub fn check_params(params: Option<&Value>) -> Result<(), &'static str> {
    match params {
        None | Some(Value::Null) | Some(Value::Object(_)) => Ok(()),
        Some(_) => Err("params must be an object when present"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn sample() -> Discovery {
        let mut meta = Map::new();
        meta.insert("herdr_contract_epoch".into(), json!(5));
        meta.insert("herdr_contract_hash".into(), json!("sha256:00"));
        Discovery {
            supported_versions: vec!["2025-11-25".into(), "2025-06-18".into()],
            capabilities: json!({"tools": {"listChanged": true}}),
            instructions: "use the tools".into(),
            server_name: "herdr-mcp".into(),
            server_version: "1.2.3".into(),
            meta,
        }
    }

    #[test]
    fn the_result_has_exactly_the_spec_members() {
        let r = sample().result(false);
        let mut keys: Vec<&str> = r.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["_meta", "cacheScope", "capabilities", "instructions", "resultType", "supportedVersions", "ttlMs"]);
        assert_eq!(r["supportedVersions"], json!(["2025-11-25", "2025-06-18"]));
        assert_eq!(r["ttlMs"], 3_600_000);
        assert_eq!(r["_meta"][SERVER_INFO_META_KEY], json!({"name": "herdr-mcp", "version": "1.2.3"}));
        assert_eq!(r["_meta"]["herdr_contract_hash"], "sha256:00");
        assert_eq!(sample().result(true)["supportedVersions"], json!(["2025-11-25", "2025-06-18", "2026-07-28"]));
    }

    #[test]
    fn openai_clients_are_told_by_user_agent_or_client_name() {
        let mut headers = HeaderMap::new();
        assert!(!is_openai_request(&headers, None));
        headers.insert(header::USER_AGENT, HeaderValue::from_static("OpenAI-MCP/1.0 (+https://openai.com)"));
        assert!(is_openai_request(&headers, None));
        for (ua, openai) in
            [("x openai-mcp", true), ("openai-mc", false), ("OPENAI-MCP", true), ("openai_mcp/1", false)]
        {
            let mut h = HeaderMap::new();
            h.insert(header::USER_AGENT, HeaderValue::from_static(ua));
            assert_eq!(has_openai_user_agent(&h), openai, "{ua}");
        }
        let plain = HeaderMap::new();
        let named = |name: &str| json!({"_meta": {CLIENT_INFO_META_KEY: {"name": name, "version": "1"}}});
        assert!(is_openai_request(&plain, Some(&named("ChatGPT"))));
        assert!(is_openai_request(&plain, Some(&named("openai-connector"))));
        assert!(!is_openai_request(&plain, Some(&named("herdr-extension"))));
        assert!(!is_openai_request(&plain, Some(&json!({"clientInfo": {"name": "chatgpt"}}))), "only _meta carries it");
    }

    #[test]
    fn params_must_be_an_object_when_present() {
        assert!(check_params(None).is_ok());
        assert!(check_params(Some(&Value::Null)).is_ok());
        assert!(check_params(Some(&json!({}))).is_ok());
        assert!(check_params(Some(&json!([1]))).is_err());
        assert!(check_params(Some(&json!("x"))).is_err());
    }
}
