//! Reading and waiting on agents as Herdr 0.8.2 does (spec/herdr.md §3, §5, §B, D.1):
//! `pane.read` / `agent.read` (the same `pane_read` answer, the agent found by name or
//! pane), `agent.wait` (returns at once when the status already matches; `until`
//! defaults to idle|done|blocked) and `events.wait`, which in practice only waits for
//! `pane_agent_status_changed` and refuses every other match kind.

use std::time::Duration;

use serde_json::{Value, json};

use super::{Shared, err, ok, screen, str_of};

/// What an agent waits for when `until` is not given.
const SETTLED: [&str; 3] = ["idle", "done", "blocked"];

impl Shared {
    pub(super) fn read_pane(&self, pane: &str, params: &Value) -> Result<Value, (String, String)> {
        let st = self.state.lock().unwrap();
        let Some(p) = st.panes.iter().find(|p| str_of(p, "pane_id") == Some(pane)) else {
            return err("pane_not_found", format!("pane {pane} not found"));
        };
        let held = st.pane_text.get(pane).map(String::as_str).unwrap_or_default();
        let (text, truncated) = screen::read(held, str_of(params, "source").unwrap_or_default(), params["lines"].as_u64());
        ok(json!({"type": "pane_read", "read": {
            "pane_id": pane, "workspace_id": p["workspace_id"], "tab_id": p["tab_id"],
            "source": params["source"], "format": params.get("format").filter(|f| f.is_string()).unwrap_or(&json!("text")),
            "text": text, "revision": 0, "truncated": truncated,
        }}))
    }

    pub(super) fn read_agent(&self, params: &Value) -> Result<Value, (String, String)> {
        let target = str_of(params, "target").unwrap_or_default();
        let Some(agent) = self.agent_by_target(target) else {
            return err("agent_not_found", format!("agent {target} not found"));
        };
        self.read_pane(str_of(&agent, "pane_id").unwrap_or_default(), params)
    }

    /// Runs `check` now and after every change until it answers, or `timeout_ms` passes.
    async fn until<T>(
        &self,
        timeout_ms: Option<u64>,
        timeout_message: &str,
        mut check: impl FnMut() -> Option<Result<T, (String, String)>>,
    ) -> Result<T, (String, String)> {
        let mut rx = self.changes.subscribe();
        let answered = async {
            loop {
                if let Some(answer) = check() {
                    return answer;
                }
                if rx.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        };
        match timeout_ms {
            Some(ms) => tokio::time::timeout(Duration::from_millis(ms), answered)
                .await
                .unwrap_or_else(|_| Err(("timeout".to_string(), timeout_message.to_string()))),
            None => answered.await,
        }
    }

    pub(super) async fn wait_agent(&self, params: &Value) -> Result<Value, (String, String)> {
        let target = str_of(params, "target").unwrap_or_default().to_string();
        let Some(agent) = self.agent_by_target(&target) else {
            return err("agent_not_found", format!("agent {target} not found"));
        };
        // Pinned to the pane the target named when the wait began.
        let pane = str_of(&agent, "pane_id").unwrap_or_default().to_string();
        let until: Vec<String> = match params["until"].as_array().filter(|u| !u.is_empty()) {
            Some(u) => u.iter().filter_map(Value::as_str).map(str::to_string).collect(),
            None => SETTLED.iter().map(|s| s.to_string()).collect(),
        };
        self.until(params["timeout_ms"].as_u64(), "timed out waiting for agent status", || {
            let Some(agent) = self.agent_by_target(&pane) else {
                return Some(err("agent_not_found", format!("agent {target} is gone")));
            };
            let status = str_of(&agent, "agent_status").unwrap_or("unknown");
            until.iter().any(|u| u == status).then(|| ok(json!({"type": "agent_info", "agent": agent})))
        })
        .await
    }

    pub(super) async fn wait_event(&self, params: &Value) -> Result<Value, (String, String)> {
        let wanted = &params["match_event"];
        if str_of(wanted, "event") != Some("pane_agent_status_changed") {
            return err("unsupported_event_wait_match", "events.wait currently supports pane agent status matches");
        }
        let pane = str_of(wanted, "pane_id").unwrap_or_default().to_string();
        let status = str_of(wanted, "agent_status").unwrap_or_default().to_string();
        // Herdr serves it as a filtered status subscription, whose probe of the pane
        // already counts: a pane in that status matches at once.
        self.until(params["timeout_ms"].as_u64(), "timed out waiting for event", || {
            let st = self.state.lock().unwrap();
            let Some(p) = st.panes.iter().find(|p| str_of(p, "pane_id") == Some(pane.as_str())) else {
                return Some(err("pane_not_found", format!("pane {pane} not found")));
            };
            (str_of(p, "agent_status") == Some(status.as_str())).then(|| {
                let mut data = json!({"type": "pane_agent_status_changed", "pane_id": pane,
                    "workspace_id": p["workspace_id"], "agent_status": status});
                if let Some(kind) = p.get("agent") {
                    data["agent"] = kind.clone();
                }
                ok(json!({"type": "wait_matched", "event": {"event": "pane_agent_status_changed", "data": data}}))
            })
        })
        .await
    }
}
