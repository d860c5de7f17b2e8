//! `pane.wait_for_output` as Herdr 0.8.2 serves it (spec/herdr.md §3, §B): the
//! pane's current text is checked first, then again on every change, line by line,
//! against a substring or a Rust regex; `timeout` when `timeout_ms` passes without a
//! match (no `timeout_ms`: wait for ever), `invalid_regex` for a pattern that does
//! not compile, `pane_not_found` for an unknown pane.
//!
//! A shell pane shows its prompt (`$ `) on its last line while no job holds its
//! foreground, unless the test scripted it to show none.

use std::time::Duration;

use serde_json::{Value, json};

use super::{Shared, err, ok, str_of};

/// The prompt line a shell pane shows while it waits for a command.
pub const SHELL_PROMPT: &str = "$ ";

enum Matcher {
    Substring(String),
    Regex(regex::Regex),
}

impl Matcher {
    fn from_params(m: &Value) -> Result<Matcher, String> {
        let value = str_of(m, "value").unwrap_or_default();
        match str_of(m, "type") {
            Some("regex") => regex::Regex::new(value).map(Matcher::Regex).map_err(|e| e.to_string()),
            _ => Ok(Matcher::Substring(value.to_string())),
        }
    }

    fn first_line<'a>(&self, text: &'a str) -> Option<&'a str> {
        text.lines().find(|line| match self {
            Matcher::Substring(s) => line.contains(s.as_str()),
            Matcher::Regex(r) => r.is_match(line),
        })
    }
}

impl Shared {
    /// What the pane shows now, or `None` when the pane does not exist.
    fn screen(&self, pane: &str) -> Option<String> {
        let mut st = self.state.lock().unwrap();
        if !st.panes.iter().any(|p| str_of(p, "pane_id") == Some(pane)) {
            return None;
        }
        let mut text = st.pane_text.get(pane).cloned().unwrap_or_default();
        let prompting = st.shell.shells.contains(pane) && !st.shell.no_prompt && st.shell.foreground_job(pane).is_none();
        if prompting {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(SHELL_PROMPT);
        }
        Some(text)
    }

    pub(super) async fn wait_for_output(&self, params: &Value) -> Result<Value, (String, String)> {
        let pane = str_of(params, "pane_id").unwrap_or_default().to_string();
        let matcher = match Matcher::from_params(&params["match"]) {
            Ok(m) => m,
            Err(e) => return err("invalid_regex", format!("invalid regex: {e}")),
        };
        let timeout = params["timeout_ms"].as_u64().map(Duration::from_millis);
        let mut rx = self.changes.subscribe();
        let matched = async {
            loop {
                let Some(text) = self.screen(&pane) else {
                    return err("pane_not_found", format!("pane {pane} not found"));
                };
                if let Some(line) = matcher.first_line(&text) {
                    return ok(json!({"type": "output_matched", "pane_id": pane, "revision": 0, "matched_line": line,
                        "read": {"pane_id": pane, "source": "recent_unwrapped", "format": "text", "text": text,
                            "revision": 0, "truncated": false}}));
                }
                if rx.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        };
        match timeout {
            Some(t) => {
                tokio::time::timeout(t, matched).await.unwrap_or_else(|_| err("timeout", "timed out waiting for output match"))
            }
            None => matched.await,
        }
    }
}
