//! A Herdr protocol simulator for tests: a Unix-socket server speaking Herdr
//! 0.8.2's JSON API as recorded in spec/herdr.md — one request per connection, the
//! first line only (1 MiB, 5 s), `{"id","result":{"type":..}}` / `{"id","error":{..}}`,
//! `"id":""` for unparseable requests, and `events.subscribe` streams with
//! underscored lifecycle names and dotted parameterised ones. Tests script the
//! state (workspaces, panes, agents and their statuses) and inject faults.
//!
//! Events behave as section E of spec/herdr.md records real Herdr: a replaying
//! 512-event hub polled every 100 ms, one event per subscription per poll (see
//! [`hub`]); new agents `unknown` for about 3 s, then `idle` (E.5,
//! [`HerdrSim::detect_agent`]); agent targets by pane id or set name only (E.6); no
//! event when a pane's cwd changes (E.7, [`HerdrSim::set_pane_cwd`]). The timings
//! default to the real ones and tests may shorten them.
//!
//! Where section E is silent the simulator assumes (besides the hub's own, see [`hub`]):
//! a detected agent's `unknown` → `idle` bumps `state_change_seq` by one (E.5 saw 6);
//! `pane.get` shows a new cwd at once (Herdr: within about 1 s); a prompted agent
//! changes status as scripted, at once (E.8: Herdr takes about 0.9 s to say `working`);
//! a status subscription's `agent_status` also filters its later events.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::watch;

mod agent_waits;
pub mod harness;
pub mod hub;
mod output_wait;
pub mod params;
pub mod screen;
pub mod shell_panes;

pub const VERSION: &str = "0.8.2";
pub const PROTOCOL: u64 = 20;
const MAX_REQUEST_BYTES: usize = 1024 * 1024;
const FIRST_LINE_TIMEOUT: Duration = Duration::from_secs(5);
/// `agent.prompt` with `wait` from a non-working agent fails with
/// `agent_prompt_stalled` when its state does not change within this (spec §3).
pub const PROMPT_STALL: Duration = Duration::from_secs(5);
/// How long a freshly detected agent shows `unknown` before `idle` (spec E.5: about 3 s).
pub const DETECTION_DELAY: Duration = Duration::from_secs(3);

/// How the simulator misbehaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Accept, read the request, never answer (until the client hangs up).
    Silent,
    /// Answer with a line that is not JSON.
    Garbage,
    /// Answer with a line longer than 1 MiB.
    Oversized,
    /// Close the connection without answering.
    Hangup,
    /// Answer with the internal error upstream Herdr raises when a task group
    /// fails (an `ExceptionGroup` escaping its control plane).
    TaskGroup,
}

/// Timings a test may shorten; the defaults are Herdr's.
#[derive(Debug, Clone, Copy)]
struct Timing {
    poll: Duration,
    detection: Duration,
}

#[derive(Default)]
struct State {
    focused_workspace_id: Option<String>,
    focused_pane_id: Option<String>,
    workspaces: Vec<Value>,
    tabs: Vec<Value>,
    panes: Vec<Value>,
    agents: Vec<Value>,
    pane_text: HashMap<String, String>,
    prompts: Vec<(String, String)>,
    on_prompt: Vec<String>,
    /// How long `agent.prompt` with `wait` gives an agent to show a change (Herdr: 5 s).
    prompt_stall: Option<Duration>,
    snapshot_fails: bool,
    shell: shell_panes::ShellPanes,
}

struct Shared {
    state: Mutex<State>,
    fault: Mutex<Option<Fault>>,
    method_faults: Mutex<HashMap<String, Fault>>,
    requests: Mutex<Vec<Value>>,
    /// The event hub every subscription reads from (spec E.1).
    hub: Mutex<hub::Hub>,
    /// Open `events.subscribe` streams.
    streams: Mutex<usize>,
    /// Bumped to close every open stream (a restarting Herdr).
    kill: watch::Sender<u64>,
    timing: Mutex<Timing>,
    /// Methods whose answers are made but not yet sent, and how many wait per method.
    held: Mutex<HashMap<String, usize>>,
    /// Bumped on every state change, subscriber change and request (event-driven waits).
    changes: watch::Sender<u64>,
}

pub struct HerdrSim {
    _dir: tempfile::TempDir,
    pub socket: PathBuf,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for HerdrSim {
    fn drop(&mut self) {
        self.task.abort();
        self.drop_subscribers();
    }
}

fn str_of<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Value::as_str)
}

fn ok(result: Value) -> Result<Value, (String, String)> {
    Ok(result)
}

fn err(code: &str, message: impl Into<String>) -> Result<Value, (String, String)> {
    Err((code.to_string(), message.into()))
}

/// Herdr's agent name rule: `[a-z][a-z0-9_-]{0,31}`.
fn herdr_agent_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && name.len() <= 32
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

impl Shared {
    fn bump(&self) {
        self.changes.send_modify(|g| *g += 1);
    }

    /// Delays an answer already made (from the state as it was) while its method is
    /// held: a busy Herdr whose reply reaches the client after later calls are served.
    async fn hold_if_asked(&self, method: &str) {
        let mut rx = self.changes.subscribe();
        {
            let mut held = self.held.lock().unwrap();
            let Some(waiting) = held.get_mut(method) else { return };
            *waiting += 1;
        }
        self.bump();
        while self.held.lock().unwrap().contains_key(method) {
            if rx.changed().await.is_err() {
                return;
            }
        }
    }

    /// Puts a lifecycle event into the hub; subscriptions pick it up at their next poll.
    fn emit_lifecycle(&self, name: &str, mut data: Value) {
        data["type"] = json!(name);
        let line = json!({"data": data, "event": name}).to_string();
        self.hub.lock().unwrap().push(name, &data, line);
    }

    /// Puts a status change into the hub, for the status subscriptions of its pane.
    fn emit_status(&self, pane_id: &str, workspace_id: &str, status: &str, agent: Option<&str>) {
        let mut data = json!({"agent_status": status, "pane_id": pane_id, "workspace_id": workspace_id});
        if let Some(a) = agent {
            data["agent"] = json!(a);
        }
        let line = json!({"data": data, "event": hub::STATUS_EVENT}).to_string();
        self.hub.lock().unwrap().push(hub::STATUS_EVENT, &data, line);
    }

    /// Checks the panes of parameterised subscriptions; `Err` names the first unknown
    /// one. A status subscription filtered on the status its pane already has starts
    /// with that event, as Herdr's probe does.
    fn probe_subscriptions(&self, subscriptions: &[Value]) -> Result<Vec<String>, String> {
        let st = self.state.lock().unwrap();
        let mut initial = vec![];
        for sub in subscriptions {
            let Some(pane_id) = str_of(sub, "pane_id") else { continue };
            let Some(pane) = st.panes.iter().find(|p| str_of(p, "pane_id") == Some(pane_id)) else {
                return Err(pane_id.to_string());
            };
            let status = str_of(pane, "agent_status").unwrap_or("unknown");
            if str_of(sub, "type") == Some("pane.agent_status_changed") && str_of(sub, "agent_status") == Some(status) {
                let mut data = json!({"agent_status": status, "pane_id": pane_id, "workspace_id": pane["workspace_id"]});
                if let Some(agent) = pane.get("agent") {
                    data["agent"] = agent.clone();
                }
                initial.push(json!({"data": data, "event": "pane.agent_status_changed"}).to_string());
            }
        }
        Ok(initial)
    }

    /// Sets an agent's status the way Herdr does: bump its `state_change_seq`, mirror
    /// the status on its pane, and tell status subscribers.
    fn set_status(&self, pane_id: &str, status: &str) {
        let (ws, kind) = {
            let mut st = self.state.lock().unwrap();
            let Some(agent) = st.agents.iter_mut().find(|a| str_of(a, "pane_id") == Some(pane_id)) else {
                panic!("sim: no agent on {pane_id}");
            };
            agent["agent_status"] = json!(status);
            let seq = agent["state_change_seq"].as_u64().unwrap_or(0) + 1;
            agent["state_change_seq"] = json!(seq);
            let ws = str_of(agent, "workspace_id").unwrap().to_string();
            let kind = str_of(agent, "agent").unwrap().to_string();
            if let Some(p) = st.panes.iter_mut().find(|p| str_of(p, "pane_id") == Some(pane_id)) {
                p["agent_status"] = json!(status);
            }
            (ws, kind)
        };
        self.emit_status(pane_id, &ws, status, Some(&kind));
        self.bump();
    }

    fn agent_by_target(&self, target: &str) -> Option<Value> {
        let st = self.state.lock().unwrap();
        st.agents.iter().find(|a| str_of(a, "pane_id") == Some(target) || str_of(a, "name") == Some(target)).cloned()
    }

    fn list_filtered(&self, items: &[Value], params: &Value) -> Vec<Value> {
        match str_of(params, "workspace_id") {
            Some(ws) => items.iter().filter(|i| str_of(i, "workspace_id") == Some(ws)).cloned().collect(),
            None => items.to_vec(),
        }
    }

    async fn dispatch(self: &Arc<Self>, method: &str, params: &Value) -> Result<Value, (String, String)> {
        match method {
            "ping" => ok(json!({"type": "pong", "version": VERSION, "protocol": PROTOCOL,
                "capabilities": {"live_handoff": true, "detached_server_daemon": true}})),
            "session.snapshot" => {
                let st = self.state.lock().unwrap();
                if st.snapshot_fails {
                    return err("internal_error", "snapshot failed (scripted)");
                }
                let mut snapshot = json!({
                    "version": VERSION, "protocol": PROTOCOL,
                    "workspaces": st.workspaces, "tabs": st.tabs, "panes": st.panes, "layouts": [], "agents": st.agents,
                });
                // The focused ids are absent, not null, until something exists (transcript §B).
                if let Some(ws) = &st.focused_workspace_id {
                    snapshot["focused_workspace_id"] = json!(ws);
                    snapshot["focused_tab_id"] = json!(format!("{ws}:t1"));
                }
                if let Some(pane) = &st.focused_pane_id {
                    snapshot["focused_pane_id"] = json!(pane);
                }
                ok(json!({"type": "session_snapshot", "snapshot": snapshot}))
            }
            "workspace.list" => ok(json!({"type": "workspace_list", "workspaces": self.state.lock().unwrap().workspaces})),
            "tab.list" => {
                let tabs = self.list_filtered(&self.state.lock().unwrap().tabs, params);
                ok(json!({"type": "tab_list", "tabs": tabs}))
            }
            "pane.list" => {
                let panes = self.list_filtered(&self.state.lock().unwrap().panes, params);
                ok(json!({"type": "pane_list", "panes": panes}))
            }
            "agent.list" => ok(json!({"type": "agent_list", "agents": self.state.lock().unwrap().agents})),
            "pane.get" => {
                let pane = str_of(params, "pane_id").unwrap_or_default();
                match self.state.lock().unwrap().panes.iter().find(|p| str_of(p, "pane_id") == Some(pane)) {
                    Some(p) => ok(json!({"type": "pane_info", "pane": p})),
                    None => err("pane_not_found", format!("pane {pane} not found")),
                }
            }
            "workspace.get" => {
                let id = str_of(params, "workspace_id").unwrap_or_default();
                match self.state.lock().unwrap().workspaces.iter().find(|w| str_of(w, "workspace_id") == Some(id)) {
                    Some(w) => ok(json!({"type": "workspace_info", "workspace": w})),
                    None => err("workspace_not_found", format!("workspace {id} not found")),
                }
            }
            "tab.get" => {
                let id = str_of(params, "tab_id").unwrap_or_default();
                match self.state.lock().unwrap().tabs.iter().find(|t| str_of(t, "tab_id") == Some(id)) {
                    Some(t) => ok(json!({"type": "tab_info", "tab": t})),
                    None => err("tab_not_found", format!("tab {id} not found")),
                }
            }
            "agent.get" => {
                let target = str_of(params, "target").unwrap_or_default();
                match self.agent_by_target(target) {
                    Some(a) => ok(json!({"type": "agent_info", "agent": a})),
                    None => err("agent_not_found", format!("agent {target} not found")),
                }
            }
            "agent.prompt" => self.prompt(params).await,
            "agent.rename" => self.rename_agent(params),
            "pane.send_text" => {
                let pane = str_of(params, "pane_id").unwrap_or_default();
                let mut st = self.state.lock().unwrap();
                let Some(cwd) = st.panes.iter().find(|p| str_of(p, "pane_id") == Some(pane)).map(|p| p["cwd"].clone()) else {
                    return err("pane_not_found", format!("pane {pane} not found"));
                };
                let text = str_of(params, "text").unwrap_or_default().to_string();
                st.pane_text.entry(pane.to_string()).or_default().push_str(&text);
                if let Err(e) = st.shell.typed(pane, cwd.as_str().unwrap_or("/"), &text) {
                    return err("pane_send_failed", e.to_string());
                }
                drop(st);
                self.bump();
                ok(json!({"type": "ok"}))
            }
            "pane.split" => self.split(params),
            "pane.rename" => {
                let pane = str_of(params, "pane_id").unwrap_or_default();
                let mut st = self.state.lock().unwrap();
                let Some(p) = st.panes.iter_mut().find(|p| str_of(p, "pane_id") == Some(pane)) else {
                    return err("pane_not_found", format!("pane {pane} not found"));
                };
                p["label"] = params["label"].clone();
                ok(json!({"type": "pane_info", "pane": p.clone()}))
            }
            "pane.wait_for_output" => self.wait_for_output(params).await,
            "pane.process_info" => {
                let pane = str_of(params, "pane_id").unwrap_or_default();
                let mut st = self.state.lock().unwrap();
                let Some((i, cwd)) = st
                    .panes
                    .iter()
                    .enumerate()
                    .find(|(_, p)| str_of(p, "pane_id") == Some(pane))
                    .map(|(i, p)| (i, p["cwd"].clone()))
                else {
                    return err("pane_not_found", format!("pane {pane} not found"));
                };
                ok(st.shell.process_info(pane, i, &cwd))
            }
            "pane.send_keys" => {
                let pane = str_of(params, "pane_id").unwrap_or_default();
                let mut st = self.state.lock().unwrap();
                if !st.panes.iter().any(|p| str_of(p, "pane_id") == Some(pane)) {
                    return err("pane_not_found", format!("pane {pane} not found"));
                }
                let keys: Vec<String> = params["keys"]
                    .as_array()
                    .map(|k| k.iter().filter_map(Value::as_str).map(str::to_string).collect())
                    .unwrap_or_default();
                // Herdr takes key names ("space", "enter", "ctrl+c"); a blank key is refused (spec D.6).
                if let Some(bad) = keys.iter().find(|k| k.trim().is_empty()) {
                    return err("invalid_key", format!("unsupported key {bad}"));
                }
                st.shell.keys(pane, keys);
                drop(st);
                self.bump();
                ok(json!({"type": "ok"}))
            }
            "pane.read" => self.read_pane(str_of(params, "pane_id").unwrap_or_default(), params),
            "agent.read" => self.read_agent(params),
            "agent.wait" => self.wait_agent(params).await,
            "events.wait" => self.wait_event(params).await,
            _ => err("sim_unimplemented", format!("the Herdr simulator does not model {method}")),
        }
    }

    /// `agent.rename {target, name}`: answers the renamed agent's `agent_info` and, as
    /// Herdr 0.8.2 does (spec/herdr.md §3, §5), emits no event.
    fn rename_agent(&self, params: &Value) -> Result<Value, (String, String)> {
        let target = str_of(params, "target").unwrap_or_default();
        let name = str_of(params, "name").unwrap_or_default();
        if !herdr_agent_name(name) {
            return err("invalid_params", format!("invalid agent name {name:?}: expected [a-z][a-z0-9_-]{{0,31}}"));
        }
        let agent = {
            let mut st = self.state.lock().unwrap();
            let Some(i) =
                st.agents.iter().position(|a| str_of(a, "pane_id") == Some(target) || str_of(a, "name") == Some(target))
            else {
                return err("agent_not_found", format!("agent {target} not found"));
            };
            let pane = str_of(&st.agents[i], "pane_id").map(str::to_string);
            if st.agents.iter().any(|a| str_of(a, "name") == Some(name) && str_of(a, "pane_id").map(str::to_string) != pane) {
                return err("invalid_params", format!("agent name {name} is already in use"));
            }
            st.agents[i]["name"] = json!(name);
            st.agents[i].clone()
        };
        self.bump();
        ok(json!({"type": "agent_info", "agent": agent}))
    }

    /// `pane.split`: a new shell pane next to `target_pane_id` (or in `workspace_id`).
    fn split(&self, params: &Value) -> Result<Value, (String, String)> {
        let pane = {
            let mut st = self.state.lock().unwrap();
            let target =
                str_of(params, "target_pane_id").and_then(|t| st.panes.iter().find(|p| str_of(p, "pane_id") == Some(t)).cloned());
            let ws = match (&target, str_of(params, "workspace_id")) {
                (Some(t), _) => str_of(t, "workspace_id").unwrap_or_default().to_string(),
                (None, Some(ws)) if st.workspaces.iter().any(|w| str_of(w, "workspace_id") == Some(ws)) => ws.to_string(),
                _ => return err("pane_not_found", "pane not found"),
            };
            let cwd = params.get("cwd").cloned().or_else(|| target.as_ref().map(|t| t["cwd"].clone())).unwrap_or(json!("/"));
            let mut n = st.panes.len() + 1;
            while st.panes.iter().any(|p| str_of(p, "pane_id") == Some(format!("{ws}:p{n}").as_str())) {
                n += 1;
            }
            let id = format!("{ws}:p{n}");
            let pane = json!({"pane_id": id, "terminal_id": format!("term_{id}"), "workspace_id": ws,
                "tab_id": format!("{ws}:t1"), "focused": false, "cwd": cwd, "foreground_cwd": cwd,
                "agent_status": "unknown", "revision": 0});
            st.panes.push(pane.clone());
            st.shell.shells.insert(id);
            pane
        };
        self.emit_lifecycle("pane_created", json!({"pane": pane}));
        self.bump();
        ok(json!({"type": "pane_info", "pane": pane}))
    }

    async fn prompt(self: &Arc<Self>, params: &Value) -> Result<Value, (String, String)> {
        let target = str_of(params, "target").unwrap_or_default().to_string();
        let Some(agent) = self.agent_by_target(&target) else {
            return err("agent_not_found", format!("agent {target} not found"));
        };
        if str_of(&agent, "agent_status") == Some("blocked") {
            return err("agent_blocked", format!("agent {target} is blocked and requires interactive input"));
        }
        let pane = str_of(&agent, "pane_id").unwrap().to_string();
        let seq_before = agent["state_change_seq"].as_u64().unwrap_or(0);
        let (script, stall) = {
            let mut st = self.state.lock().unwrap();
            st.prompts.push((target.clone(), str_of(params, "text").unwrap_or_default().to_string()));
            (st.on_prompt.clone(), st.prompt_stall.unwrap_or(PROMPT_STALL))
        };
        self.bump();
        for status in script {
            self.set_status(&pane, &status);
        }
        if let Some(wait) = params.get("wait").filter(|w| w.is_object()) {
            let started = tokio::time::Instant::now();
            let until: Vec<String> = wait["until"]
                .as_array()
                .filter(|u| !u.is_empty())
                .map(|u| u.iter().filter_map(Value::as_str).map(str::to_string).collect())
                .unwrap_or_else(|| vec!["idle".into(), "done".into(), "blocked".into()]);
            let timeout = wait["timeout_ms"].as_u64().map(Duration::from_millis);
            let mut rx = self.changes.subscribe();
            // Herdr first wants to see the agent react: from a non-working state, no
            // change of state_change_seq within the stall window is `agent_prompt_stalled`
            // (the text was typed all the same). A working agent's running turn may
            // satisfy the wait, as Herdr does not track turns.
            if str_of(&agent, "agent_status") != Some("working") {
                let seq = || self.agent_by_target(&pane).and_then(|a| a["state_change_seq"].as_u64()).unwrap_or(0);
                let window = timeout.map_or(stall, |t| t.min(stall));
                let reacted = async {
                    while seq() == seq_before {
                        if rx.changed().await.is_err() {
                            std::future::pending::<()>().await;
                        }
                    }
                };
                if tokio::time::timeout(window, reacted).await.is_err() {
                    if timeout.is_some_and(|t| t <= stall) {
                        return err("timeout", "timed out waiting for agent status");
                    }
                    return err(
                        "agent_prompt_stalled",
                        format!(
                            "agent {target} showed no state change after the prompt (state_change_seq remained {seq_before})"
                        ),
                    );
                }
            }
            let timeout = timeout.map(|t| t.saturating_sub(started.elapsed()));
            let matched = async {
                loop {
                    let status = self.agent_by_target(&pane).and_then(|a| str_of(&a, "agent_status").map(str::to_string));
                    if status.is_some_and(|s| until.contains(&s)) {
                        return;
                    }
                    if rx.changed().await.is_err() {
                        std::future::pending::<()>().await;
                    }
                }
            };
            let done = match timeout {
                Some(t) => tokio::time::timeout(t, matched).await.is_ok(),
                None => {
                    matched.await;
                    true
                }
            };
            if !done {
                return err("timeout", "timed out waiting for agent status");
            }
        }
        let agent = self.agent_by_target(&pane).unwrap();
        ok(json!({"type": "agent_prompted", "agent": agent}))
    }
}

async fn read_first_line(reader: &mut BufReader<tokio::net::unix::OwnedReadHalf>) -> Option<Vec<u8>> {
    let mut line = Vec::new();
    let read = async {
        loop {
            let chunk = reader.fill_buf().await.ok()?;
            if chunk.is_empty() {
                return None;
            }
            if let Some(i) = chunk.iter().position(|&b| b == b'\n') {
                line.extend_from_slice(&chunk[..i]);
                reader.consume(i + 1);
                return Some(());
            }
            let n = chunk.len();
            line.extend_from_slice(chunk);
            reader.consume(n);
            if line.len() > MAX_REQUEST_BYTES {
                return None;
            }
        }
    };
    tokio::time::timeout(FIRST_LINE_TIMEOUT, read).await.ok().flatten()?;
    Some(line)
}

/// Counts an open stream while it lives.
struct StreamGuard(Arc<Shared>);

impl StreamGuard {
    fn open(shared: &Arc<Shared>) -> StreamGuard {
        *shared.streams.lock().unwrap() += 1;
        shared.bump();
        StreamGuard(Arc::clone(shared))
    }
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        *self.0.streams.lock().unwrap() -= 1;
        self.0.bump();
    }
}

async fn serve_connection(shared: Arc<Shared>, stream: UnixStream) {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    let Some(line) = read_first_line(&mut reader).await else { return };
    let parsed: Result<Value, String> = serde_json::from_slice(&line).map_err(|e| e.to_string());
    let bad = |msg: String| json!({"id": "", "error": {"code": "invalid_request", "message": format!("invalid request: {msg}")}});
    let request = match parsed {
        Ok(v) => v,
        Err(e) => {
            let _ = write.write_all(format!("{}\n", bad(e)).as_bytes()).await;
            return;
        }
    };
    shared.requests.lock().unwrap().push(request.clone());
    // Tests wait (event-driven) on request counts too.
    shared.bump();
    let (id, method) = match (params::string_field(&request, "id"), params::string_field(&request, "method")) {
        (Ok(id), Ok(method)) => (id, method),
        (Err(why), _) | (_, Err(why)) => {
            let _ = write.write_all(format!("{}\n", bad(why)).as_bytes()).await;
            return;
        }
    };
    let params = match params::verdict(method, request.get("params")) {
        params::Verdict::Invalid(why) => {
            let _ = write.write_all(format!("{}\n", bad(why)).as_bytes()).await;
            return;
        }
        params::Verdict::NotSimulated => {
            // A method real Herdr has but this simulator does not model: say so
            // plainly rather than pretend to be Herdr.
            let reply = json!({"id": id, "error": {"code": "sim_unimplemented",
                "message": format!("the Herdr simulator does not model {method}")}});
            let _ = write.write_all(format!("{reply}\n").as_bytes()).await;
            return;
        }
        params::Verdict::Served => &request["params"],
    };
    let fault = shared.method_faults.lock().unwrap().get(method).copied().or(*shared.fault.lock().unwrap());
    match fault {
        Some(Fault::Silent) => {
            // Hold the connection until the client gives up.
            let mut sink = [0u8; 64];
            while matches!(reader.read(&mut sink).await, Ok(n) if n > 0) {}
            return;
        }
        Some(Fault::Garbage) => {
            let _ = write.write_all(b"this is not json\n").await;
            return;
        }
        Some(Fault::Oversized) => {
            let mut big = vec![b'x'; MAX_REQUEST_BYTES + 16];
            big.push(b'\n');
            let _ = write.write_all(&big).await;
            return;
        }
        Some(Fault::Hangup) => return,
        Some(Fault::TaskGroup) => {
            let message = "unhandled errors in a TaskGroup (1 sub-exception)";
            let reply = json!({"id": id, "error": {"code": "internal_error", "message": message}});
            let _ = write.write_all(format!("{reply}\n").as_bytes()).await;
            return;
        }
        None => {}
    }
    if method == "events.subscribe" {
        let subscriptions = params["subscriptions"].as_array().cloned().unwrap_or_default();
        // Herdr probes the pane of every parameterised subscription (`pane.get`) when it
        // sets the stream up: one unknown pane fails the whole request.
        let initial = match shared.probe_subscriptions(&subscriptions) {
            Ok(initial) => initial,
            Err(pane) => {
                let reply = json!({"id": id, "error": {"code": "pane_not_found", "message": format!("pane {pane} not found")}});
                let _ = write.write_all(format!("{reply}\n").as_bytes()).await;
                return;
            }
        };
        // The cursors are set when the request is taken: lifecycle types at 0 (they
        // replay the ring), status types at the hub's current sequence (spec E.1, E.3).
        let mut cursors = shared.hub.lock().unwrap().cursors(&subscriptions);
        let _open = StreamGuard::open(&shared);
        let mut kill = shared.kill.subscribe();
        let ack = json!({"id": id, "result": {"type": "subscription_started"}});
        if write.write_all(format!("{ack}\n").as_bytes()).await.is_err() {
            return;
        }
        for line in initial {
            if write.write_all(format!("{line}\n").as_bytes()).await.is_err() {
                return;
            }
        }
        // Every poll interval, at most one event per subscription (spec E.2), until
        // the client hangs up (Herdr notices a closed peer, so does this) or the
        // simulator closes every stream.
        let poll = shared.timing.lock().unwrap().poll;
        let mut ticks = tokio::time::interval(poll);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut sink = [0u8; 64];
        loop {
            tokio::select! {
                _ = ticks.tick() => {
                    let lines = shared.hub.lock().unwrap().poll(&mut cursors);
                    for line in lines {
                        if write.write_all(format!("{line}\n").as_bytes()).await.is_err() {
                            return;
                        }
                    }
                }
                read = reader.read(&mut sink) => if matches!(read, Ok(0) | Err(_)) { break },
                _ = kill.changed() => break,
            }
        }
        return;
    }
    let reply = match shared.dispatch(method, params).await {
        Ok(result) => json!({"id": id, "result": result}),
        Err((code, message)) => {
            // Parse-level failures echo an empty id, as Herdr does.
            let id = if code == "invalid_request" { "" } else { id };
            json!({"id": id, "error": {"code": code, "message": message}})
        }
    };
    shared.hold_if_asked(method).await;
    let _ = write.write_all(format!("{reply}\n").as_bytes()).await;
}

impl HerdrSim {
    pub async fn start() -> HerdrSim {
        let dir = tempfile::Builder::new().prefix("hsim").tempdir_in("/tmp").unwrap();
        let socket = dir.path().join("herdr.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        Self::serve(dir, socket, listener)
    }

    /// Serves on a caller-chosen socket path (a process other than the test connects
    /// to it, so the path is agreed on beforehand); the bind error is the caller's.
    pub async fn start_at(socket: &Path) -> std::io::Result<HerdrSim> {
        let dir = tempfile::Builder::new().prefix("hsim").tempdir_in("/tmp")?;
        let listener = UnixListener::bind(socket)?;
        Ok(Self::serve(dir, socket.to_path_buf(), listener))
    }

    fn serve(dir: tempfile::TempDir, socket: PathBuf, listener: UnixListener) -> HerdrSim {
        let (changes, _) = watch::channel(0);
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            fault: Mutex::new(None),
            method_faults: Mutex::new(HashMap::new()),
            requests: Mutex::new(vec![]),
            hub: Mutex::new(hub::Hub::default()),
            streams: Mutex::new(0),
            kill: watch::channel(0).0,
            timing: Mutex::new(Timing { poll: hub::POLL_INTERVAL, detection: DETECTION_DELAY }),
            held: Mutex::new(HashMap::new()),
            changes,
        });
        let s = Arc::clone(&shared);
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve_connection(Arc::clone(&s), stream));
            }
        });
        HerdrSim { _dir: dir, socket, shared, task }
    }

    pub fn dir(&self) -> &Path {
        self._dir.path()
    }

    pub fn set_fault(&self, fault: Option<Fault>) {
        *self.shared.fault.lock().unwrap() = fault;
    }

    pub fn set_method_fault(&self, method: &str, fault: Option<Fault>) {
        let mut faults = self.shared.method_faults.lock().unwrap();
        match fault {
            Some(f) => faults.insert(method.to_string(), f),
            None => faults.remove(method),
        };
    }

    /// From now on, answers to `method` are made at once but sent only after
    /// [`HerdrSim::release_replies`].
    pub fn hold_replies(&self, method: &str) {
        self.shared.held.lock().unwrap().entry(method.to_string()).or_insert(0);
    }

    /// Sends the held answers to `method` and stops holding new ones.
    pub fn release_replies(&self, method: &str) {
        self.shared.held.lock().unwrap().remove(method);
        self.shared.bump();
    }

    /// How many answers to `method` have been made and are being held.
    pub fn held_replies(&self, method: &str) -> usize {
        self.shared.held.lock().unwrap().get(method).copied().unwrap_or(0)
    }

    pub fn set_snapshot_fails(&self, fails: bool) {
        self.shared.state.lock().unwrap().snapshot_fails = fails;
    }

    /// Shortens (or restores, with `None`) the window in which a prompted agent must
    /// react before `agent.prompt` with `wait` fails with `agent_prompt_stalled`.
    pub fn set_prompt_stall(&self, window: Option<Duration>) {
        self.shared.state.lock().unwrap().prompt_stall = window;
    }

    /// Statuses an agent goes through right after it is prompted.
    pub fn set_on_prompt(&self, statuses: &[&str]) {
        self.shared.state.lock().unwrap().on_prompt = statuses.iter().map(|s| s.to_string()).collect();
    }

    pub fn add_workspace(&self, id: &str, label: &str) {
        let ws = json!({"workspace_id": id, "number": 1, "label": label, "focused": false, "pane_count": 0,
            "tab_count": 1, "active_tab_id": format!("{id}:t1"), "agent_status": "unknown"});
        let tab = json!({"tab_id": format!("{id}:t1"), "workspace_id": id, "number": 1, "label": "1", "focused": true,
            "pane_count": 0, "agent_status": "unknown"});
        {
            let mut st = self.shared.state.lock().unwrap();
            if st.workspaces.is_empty() {
                st.focused_workspace_id = Some(id.to_string());
            }
            st.workspaces.push(ws.clone());
            st.tabs.push(tab.clone());
        }
        self.shared.emit_lifecycle("workspace_created", json!({"workspace": ws}));
        self.shared.emit_lifecycle("tab_created", json!({"tab": tab}));
        self.shared.bump();
    }

    pub fn add_pane(&self, workspace_id: &str, pane_id: &str, cwd: &str) {
        let pane = json!({"pane_id": pane_id, "terminal_id": format!("term_{pane_id}"), "workspace_id": workspace_id,
            "tab_id": format!("{workspace_id}:t1"), "focused": false, "cwd": cwd, "foreground_cwd": cwd,
            "agent_status": "unknown", "revision": 0});
        {
            let mut st = self.shared.state.lock().unwrap();
            if st.focused_pane_id.is_none() {
                st.focused_pane_id = Some(pane_id.to_string());
            }
            st.panes.push(pane.clone());
        }
        self.shared.emit_lifecycle("pane_created", json!({"pane": pane}));
        self.shared.bump();
    }

    /// Puts an agent of `kind` on a pane (as detection or `pane.report_agent` would).
    pub fn add_agent(&self, pane_id: &str, kind: &str, status: &str) {
        self.add_named_agent(pane_id, kind, status, None);
    }

    /// `add_agent` with the agent's name already set when it appears: a reader woken by the
    /// detection event must never see it without the name (naming it afterwards, as
    /// `name_agent` does, emits no event, so such a reader would keep the kind as its name).
    pub fn add_named_agent(&self, pane_id: &str, kind: &str, status: &str, name: Option<&str>) {
        let (ws, cwd) = {
            let st = self.shared.state.lock().unwrap();
            let p = st.panes.iter().find(|p| str_of(p, "pane_id") == Some(pane_id)).expect("pane exists");
            (str_of(p, "workspace_id").unwrap().to_string(), p["cwd"].clone())
        };
        let mut agent = json!({"terminal_id": format!("term_{pane_id}"), "agent": kind, "agent_status": status,
            "workspace_id": ws, "tab_id": format!("{ws}:t1"), "pane_id": pane_id, "focused": false,
            "state_change_seq": 1, "cwd": cwd, "foreground_cwd": cwd, "revision": 0,
            "screen_detection_skipped": false, "launch_pending": false, "interactive_ready": true});
        if let Some(name) = name {
            agent["name"] = json!(name);
        }
        {
            let mut st = self.shared.state.lock().unwrap();
            st.agents.push(agent);
            if let Some(p) = st.panes.iter_mut().find(|p| str_of(p, "pane_id") == Some(pane_id)) {
                p["agent_status"] = json!(status);
                p["agent"] = json!(kind);
            }
        }
        self.shared.emit_lifecycle("pane_agent_detected", json!({"agent": kind, "pane_id": pane_id, "workspace_id": ws}));
        self.shared.bump();
    }

    /// Sets an agent's name with no check and no event: a name given outside the API
    /// (or one breaking the rule, to test that a client does not adopt it).
    pub fn name_agent(&self, pane_id: &str, name: &str) {
        let mut st = self.shared.state.lock().unwrap();
        let a = st.agents.iter_mut().find(|a| str_of(a, "pane_id") == Some(pane_id)).expect("agent exists");
        a["name"] = json!(name);
    }

    pub fn set_agent_cwd(&self, pane_id: &str, cwd: &str) {
        let mut st = self.shared.state.lock().unwrap();
        let a = st.agents.iter_mut().find(|a| str_of(a, "pane_id") == Some(pane_id)).expect("agent exists");
        a["cwd"] = json!(cwd);
    }

    pub fn set_agent_status(&self, pane_id: &str, status: &str) {
        self.shared.set_status(pane_id, status);
    }

    /// The agent process exits: Herdr reports status `unknown` without an agent, and
    /// the detection is released with the agent's last status (transcript §C).
    pub fn remove_agent(&self, pane_id: &str) {
        let (ws, kind, last) = {
            let mut st = self.shared.state.lock().unwrap();
            let agent = st.agents.iter().find(|a| str_of(a, "pane_id") == Some(pane_id)).cloned().expect("agent exists");
            st.agents.retain(|a| str_of(a, "pane_id") != Some(pane_id));
            if let Some(p) = st.panes.iter_mut().find(|p| str_of(p, "pane_id") == Some(pane_id)) {
                p["agent_status"] = json!("unknown");
                if let Some(p) = p.as_object_mut() {
                    p.remove("agent");
                }
            }
            let field = |k: &str| str_of(&agent, k).unwrap_or_default().to_string();
            (field("workspace_id"), field("agent"), field("agent_status"))
        };
        self.shared.emit_status(pane_id, &ws, "unknown", None);
        self.shared.emit_lifecycle(
            "pane_agent_detected",
            json!({"agent": kind, "final_status": last, "pane_id": pane_id, "released": true, "workspace_id": ws}),
        );
        self.shared.bump();
    }

    /// The pane's process exits (`exit` in its shell): the pane leaves every list, and
    /// Herdr says only `pane_exited` — no `pane_closed` (spec D.3).
    pub fn exit_pane(&self, pane_id: &str) {
        let ws = self.forget_pane(pane_id);
        self.shared.emit_lifecycle("pane_exited", json!({"pane_id": pane_id, "workspace_id": ws}));
        self.shared.bump();
    }

    fn forget_pane(&self, pane_id: &str) -> String {
        let mut st = self.shared.state.lock().unwrap();
        let ws = st
            .panes
            .iter()
            .find(|p| str_of(p, "pane_id") == Some(pane_id))
            .and_then(|p| str_of(p, "workspace_id").map(str::to_string))
            .expect("pane exists");
        st.panes.retain(|p| str_of(p, "pane_id") != Some(pane_id));
        st.agents.retain(|a| str_of(a, "pane_id") != Some(pane_id));
        if st.focused_pane_id.as_deref() == Some(pane_id) {
            st.focused_pane_id = None;
        }
        ws
    }

    /// `pane.close`: `pane_closed`, then focus moves to a surviving pane of the
    /// workspace, which Herdr reports with `pane_focused` and `layout_updated` (spec D.3).
    pub fn close_pane(&self, pane_id: &str) {
        let ws = self.forget_pane(pane_id);
        self.shared.emit_lifecycle("pane_closed", json!({"pane_id": pane_id, "workspace_id": ws}));
        let survivor = {
            let mut st = self.shared.state.lock().unwrap();
            let survivor = st
                .panes
                .iter()
                .find(|p| str_of(p, "workspace_id") == Some(ws.as_str()))
                .and_then(|p| str_of(p, "pane_id").map(str::to_string));
            if st.focused_pane_id.is_none() {
                st.focused_pane_id = survivor.clone();
            }
            survivor
        };
        if let Some(survivor) = survivor {
            self.shared.emit_lifecycle("pane_focused", json!({"pane_id": survivor, "workspace_id": ws}));
            self.shared.emit_lifecycle(
                "layout_updated",
                json!({"layout": {"workspace_id": ws, "tab_id": format!("{ws}:t1"), "focused_pane_id": survivor, "zoomed": false}}),
            );
        }
        self.shared.bump();
    }

    /// Makes a pane run the lines typed into it (panes from `pane.split` always do).
    pub fn set_pane_shell(&self, pane_id: &str) {
        self.shared.state.lock().unwrap().shell.shells.insert(pane_id.to_string());
    }

    /// Scripts another program into (or out of) a pane's foreground.
    pub fn set_pane_busy(&self, pane_id: &str, busy: bool) {
        let mut st = self.shared.state.lock().unwrap();
        if busy {
            st.shell.busy.insert(pane_id.to_string());
        } else {
            st.shell.busy.remove(pane_id);
        }
    }

    /// New panes never show a prompt.
    pub fn set_no_prompt(&self, no_prompt: bool) {
        self.shared.state.lock().unwrap().shell.no_prompt = no_prompt;
    }

    /// The process group of the job running in a pane, if one runs.
    pub fn pane_job(&self, pane_id: &str) -> Option<i32> {
        self.shared.state.lock().unwrap().shell.foreground_job(pane_id).map(|pid| pid as i32)
    }

    /// Keys sent to panes, in order.
    pub fn keys_sent(&self) -> Vec<(String, Vec<String>)> {
        self.shared.state.lock().unwrap().shell.keys.clone()
    }

    /// A pane as the simulator holds it.
    pub fn pane(&self, pane_id: &str) -> Option<Value> {
        self.shared.state.lock().unwrap().panes.iter().find(|p| str_of(p, "pane_id") == Some(pane_id)).cloned()
    }

    pub fn pane_ids(&self) -> Vec<String> {
        self.shared.state.lock().unwrap().panes.iter().filter_map(|p| str_of(p, "pane_id").map(str::to_string)).collect()
    }

    /// The terminal title changes (agents show their current task there): set on the pane
    /// and its agent record, and told to `pane.updated` subscribers with the whole pane.
    pub fn set_terminal_title(&self, pane_id: &str, title: &str) {
        let pane = {
            let mut st = self.shared.state.lock().unwrap();
            if let Some(a) = st.agents.iter_mut().find(|a| str_of(a, "pane_id") == Some(pane_id)) {
                a["terminal_title"] = json!(title);
            }
            let p = st.panes.iter_mut().find(|p| str_of(p, "pane_id") == Some(pane_id)).expect("pane exists");
            p["terminal_title"] = json!(title);
            p.clone()
        };
        self.shared.emit_lifecycle("pane_updated", json!({"pane": pane}));
        self.shared.bump();
    }

    pub fn set_pane_text(&self, pane_id: &str, text: &str) {
        self.shared.state.lock().unwrap().pane_text.insert(pane_id.to_string(), text.to_string());
        self.shared.bump();
    }

    /// Closes every open subscription (as a restarting Herdr would).
    pub fn drop_subscribers(&self) {
        self.shared.kill.send_modify(|g| *g += 1);
        self.shared.bump();
    }

    /// Open `events.subscribe` streams.
    pub fn subscriber_count(&self) -> usize {
        *self.shared.streams.lock().unwrap()
    }

    /// Shortens (or restores) how often subscriptions are polled (Herdr: 100 ms);
    /// streams opened from now on use it.
    pub fn set_poll_interval(&self, poll: Duration) {
        self.shared.timing.lock().unwrap().poll = poll;
    }

    /// Shortens (or restores) how long a detected agent stays `unknown` (Herdr: about 3 s).
    pub fn set_detection_delay(&self, delay: Duration) {
        self.shared.timing.lock().unwrap().detection = delay;
    }

    /// Events in the hub's ring now (at most 512), and ever.
    pub fn hub_events(&self) -> (usize, u64) {
        let hub = self.shared.hub.lock().unwrap();
        (hub.len(), hub.pushed())
    }

    /// Requests served so far (every method, subscriptions included).
    pub fn request_count(&self) -> usize {
        self.shared.requests.lock().unwrap().len()
    }

    /// A shell in the pane changes directory: `pane.get` (and the lists, the snapshot)
    /// show the new cwd, and nothing is emitted on any subscription (spec E.7). Its
    /// agent, if any, is in that directory too.
    pub fn set_pane_cwd(&self, pane_id: &str, cwd: &str) {
        {
            let mut st = self.shared.state.lock().unwrap();
            let p = st.panes.iter_mut().find(|p| str_of(p, "pane_id") == Some(pane_id)).expect("pane exists");
            p["cwd"] = json!(cwd);
            p["foreground_cwd"] = json!(cwd);
            if let Some(a) = st.agents.iter_mut().find(|a| str_of(a, "pane_id") == Some(pane_id)) {
                a["cwd"] = json!(cwd);
                a["foreground_cwd"] = json!(cwd);
            }
        }
        self.shared.bump();
    }

    /// An agent process starts in a pane and Herdr detects it (spec E.5, D.7): it shows
    /// `unknown` with `state_change_seq` 0 for the detection delay (about 3 s), then
    /// `idle` (a status change like any other). Unlike [`HerdrSim::add_agent`], which
    /// scripts an agent already settled in its status, this is the start of a new one.
    pub fn detect_agent(&self, pane_id: &str, kind: &str, name: Option<&str>) {
        self.add_named_agent(pane_id, kind, "unknown", name);
        {
            let mut st = self.shared.state.lock().unwrap();
            if let Some(a) = st.agents.iter_mut().find(|a| str_of(a, "pane_id") == Some(pane_id)) {
                a["state_change_seq"] = json!(0);
                a["interactive_ready"] = json!(false);
            }
        }
        let delay = self.shared.timing.lock().unwrap().detection;
        let shared = Arc::clone(&self.shared);
        let pane = pane_id.to_string();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            // Still an agent there, still unclassified (nothing reported meanwhile).
            let still = {
                let mut st = shared.state.lock().unwrap();
                st.agents
                    .iter_mut()
                    .find(|a| str_of(a, "pane_id") == Some(pane.as_str()))
                    .filter(|a| str_of(a, "agent_status") == Some("unknown"))
                    .map(|a| a["interactive_ready"] = json!(true))
                    .is_some()
            };
            if still {
                shared.set_status(&pane, "idle");
            }
        });
    }

    pub fn requests(&self) -> Vec<Value> {
        self.shared.requests.lock().unwrap().clone()
    }

    pub fn count(&self, method: &str) -> usize {
        self.requests().iter().filter(|r| str_of(r, "method") == Some(method)).count()
    }

    pub fn prompts(&self) -> Vec<(String, String)> {
        self.shared.state.lock().unwrap().prompts.clone()
    }

    /// Waits, event-driven and bounded, until `pred` holds for the simulator.
    pub async fn wait_until(&self, timeout: Duration, pred: impl Fn(&HerdrSim) -> bool) -> bool {
        let mut rx = self.shared.changes.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if pred(self) {
                return true;
            }
            if tokio::time::timeout_at(deadline, rx.changed()).await.is_err() {
                return pred(self);
            }
        }
    }
}
