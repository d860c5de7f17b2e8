//! The argument summary of a logged call: what a person needs to know what was
//! done (paths, command lines, flags, numbers), never what was carried (file
//! contents, patch bodies, old/new strings, prompt texts, `herdr_call` params,
//! anything not listed). A dropped value becomes `"<N bytes>"` (strings) or
//! `"<redacted>"`.
//!
//! Paths the secret-path policy calls secret-like are replaced by
//! `"<secret-like path>"`, and bearer- or password-looking words in the kept
//! strings (`Bearer x`, `token=x`, `Authorization: x`, the runtime's own
//! `HERDR_MCP_TOKEN`) become `<redacted>`.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value};

use crate::policy::secret::is_secret;

/// Longest kept string, in characters.
const MAX_STRING_CHARS: usize = 240;
/// Most elements kept of an array.
const MAX_ITEMS: usize = 16;
/// Longest summary, in bytes (a long `steps` list is cut).
const MAX_SUMMARY_BYTES: usize = 2048;

/// Keys holding a path, checked against the secret-path policy.
const PATH_KEYS: &[&str] = &["path", "root", "cwd", "project_root", "workspace", "target"];
/// Keys kept (strings scrubbed, nested values walked with the same rules).
const KEPT_KEYS: &[&str] = &[
    "path",
    "root",
    "cwd",
    "project_root",
    "workspace",
    "target",
    "command",
    "steps",
    "program",
    "args",
    "glob",
    "pattern",
    "regex",
    "query",
    "method",
    "action",
    "session_id",
    "stream",
    "until",
    "intent",
    "cursor",
    "idempotency_key",
    "ref",
    "rev",
    "name",
    "agent",
    "pane",
];

static SECRET_WORDS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(?i)(authorization:\s*(?:(?:bearer|basic|token)\s+)?|bearer\s+|(?:token|secret|password|passwd|api[_-]?key|access[_-]?key)\s*[=:]\s*)("[^"]*"|'[^']*'|\S+)"#,
    )
    .expect("static regex")
});

/// The redactor of one runtime: knows its own bearer so it can never be logged.
#[derive(Clone, Default)]
pub struct Redactor {
    token: Option<String>,
}

impl Redactor {
    pub fn from_env() -> Redactor {
        Redactor { token: std::env::var(crate::server::config::TOKEN_ENV).ok().filter(|t| t.len() >= 8) }
    }

    /// The summary of `arguments` as compact JSON.
    pub fn summary(&self, arguments: Option<&Map<String, Value>>) -> String {
        let Some(args) = arguments else { return "{}".into() };
        let mut out = Map::new();
        for (k, v) in args {
            out.insert(k.clone(), self.value(k, v, 0));
        }
        let mut text = Value::Object(out).to_string();
        if text.len() > MAX_SUMMARY_BYTES {
            let mut cut = MAX_SUMMARY_BYTES;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
            text.push('…');
        }
        text
    }

    fn value(&self, key: &str, v: &Value, depth: usize) -> Value {
        let kept = KEPT_KEYS.contains(&key);
        match v {
            Value::Bool(_) | Value::Number(_) | Value::Null => v.clone(),
            Value::String(s) if kept => {
                if PATH_KEYS.contains(&key) && is_secret(s) {
                    Value::from("<secret-like path>")
                } else {
                    Value::from(self.scrub(s))
                }
            }
            Value::String(s) => Value::from(format!("<{} bytes>", s.len())),
            Value::Array(items) if kept && depth < 3 => {
                let mut out: Vec<Value> = items.iter().take(MAX_ITEMS).map(|i| self.value(key, i, depth + 1)).collect();
                if items.len() > MAX_ITEMS {
                    out.push(Value::from(format!("… {} more", items.len() - MAX_ITEMS)));
                }
                Value::Array(out)
            }
            Value::Object(map) if kept && depth < 3 => {
                Value::Object(map.iter().map(|(k, v)| (k.clone(), self.value(k, v, depth + 1))).collect())
            }
            _ => Value::from("<redacted>"),
        }
    }

    /// `s` shortened, with bearer/password-looking words and the runtime's token removed.
    pub fn scrub(&self, s: &str) -> String {
        let mut s = SECRET_WORDS.replace_all(s, "${1}<redacted>").into_owned();
        if let Some(token) = &self.token {
            s = s.replace(token.as_str(), "<redacted>");
        }
        if s.chars().count() > MAX_STRING_CHARS {
            s = s.chars().take(MAX_STRING_CHARS).collect::<String>() + "…";
        }
        s
    }
}

/// The managed root a call worked in: the payload's `root`, else a root-naming
/// argument, else the deepest managed root holding an absolute path argument,
/// else the only managed root. Secret-like names are not returned.
pub fn root_of(payload: &Value, arguments: Option<&Map<String, Value>>, roots: &[PathBuf]) -> Option<String> {
    let pick = |s: &str| (!is_secret(s)).then(|| s.to_string());
    if let Some(root) = payload.get("root").and_then(Value::as_str) {
        return pick(root);
    }
    let args = arguments?;
    for key in ["root", "project_root", "cwd"] {
        if let Some(s) = args.get(key).and_then(Value::as_str) {
            return pick(s);
        }
    }
    if let Some(path) = args.get("path").and_then(Value::as_str).map(Path::new).filter(|p| p.is_absolute()) {
        let best = roots.iter().filter(|r| path.starts_with(r)).max_by_key(|r| r.as_os_str().len());
        if let Some(root) = best {
            return Some(root.display().to_string());
        }
    }
    match roots {
        [only] => Some(only.display().to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn summary(args: Value) -> Value {
        let r = Redactor { token: Some("tok-3f9a1c7e5b2d8046".into()) };
        serde_json::from_str(&r.summary(args.as_object())).unwrap()
    }

    #[test]
    fn contents_go_and_paths_and_commands_stay() {
        let s = summary(json!({"path": "src/a.rs", "content": "SECRET_CONTENT", "overwrite": true}));
        assert_eq!(s, json!({"path": "src/a.rs", "content": "<14 bytes>", "overwrite": true}));
        let s = summary(json!({"patch": "--- a\n+++ b\n", "old_string": "x", "new_string": "yy", "text": "hi agent"}));
        assert_eq!(
            s,
            json!({"patch": "<12 bytes>", "old_string": "<1 bytes>", "new_string": "<2 bytes>", "text": "<8 bytes>"})
        );
        let s = summary(json!({"workspace": "w1", "steps": [{"program": "cargo", "args": ["test", "-q"]}]}));
        assert_eq!(s, json!({"workspace": "w1", "steps": [{"program": "cargo", "args": ["test", "-q"]}]}));
        // Unknown members and nested values of unknown members never pass.
        let s = summary(json!({"params": "{\"k\":1}", "stdin": "pw", "blob": {"a": 1}}));
        assert_eq!(s, json!({"params": "<7 bytes>", "stdin": "<2 bytes>", "blob": "<redacted>"}));
    }

    #[test]
    fn secret_paths_and_bearers_are_masked() {
        let s = summary(json!({"path": "config/.env.local"}));
        assert_eq!(s["path"], "<secret-like path>");
        let s = summary(json!({"command": "curl -H 'Authorization: Bearer abcdef123' https://x && TOKEN=zzz9 make"}));
        let c = s["command"].as_str().unwrap();
        assert!(!c.contains("abcdef123") && !c.contains("zzz9"), "{c}");
        assert!(c.starts_with("curl -H"), "{c}");
        let s = summary(json!({"command": "echo tok-3f9a1c7e5b2d8046"}));
        assert_eq!(s["command"], "echo <redacted>");
    }

    #[test]
    fn long_values_are_cut() {
        let s = summary(json!({"command": "x".repeat(5000)}));
        assert!(s["command"].as_str().unwrap().chars().count() <= MAX_STRING_CHARS + 1);
        let many: Vec<Value> = (0..40).map(|i| json!({"program": format!("p{i}")})).collect();
        let s = summary(json!({"steps": many}));
        assert_eq!(s["steps"].as_array().unwrap().len(), MAX_ITEMS + 1);
    }

    #[test]
    fn the_root_comes_from_the_payload_the_arguments_or_the_only_root() {
        let roots = vec![PathBuf::from("/r/a"), PathBuf::from("/r/a/inner"), PathBuf::from("/r/b")];
        assert_eq!(root_of(&json!({"root": "/r/b"}), None, &roots).as_deref(), Some("/r/b"));
        let args = json!({"path": "/r/a/inner/x.rs"});
        assert_eq!(root_of(&json!({}), args.as_object(), &roots).as_deref(), Some("/r/a/inner"));
        let rel = json!({"path": "x.rs"});
        assert_eq!(root_of(&json!({}), rel.as_object(), &roots), None);
        assert_eq!(root_of(&json!({}), rel.as_object(), &roots[..1]).as_deref(), Some("/r/a"));
    }
}
