//! `cargo test`'s run of the simulator process: a copy of this binary in serve mode,
//! driven through stdin like the e2e helper drives it, and queried over its socket like
//! the runtime queries Herdr. Any mismatch is an error (exit 1).

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::net::UnixStream;
use tokio::process::{Child, ChildStdin, ChildStdout};

use crate::MAX_COMMAND_BYTES;

const WAIT: Duration = Duration::from_secs(10);

struct Served {
    child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
}

impl Served {
    async fn next_line(&mut self) -> Result<Value, String> {
        let line = tokio::time::timeout(WAIT, self.stdout.next_line())
            .await
            .map_err(|_| "no line from the server within 10 s".to_string())?
            .map_err(|e| format!("reading the server's stdout: {e}"))?
            .ok_or("the server closed its stdout")?;
        serde_json::from_str(&line).map_err(|e| format!("the server printed a non-JSON line {line:?}: {e}"))
    }

    async fn send_raw(&mut self, line: &[u8]) -> Result<Value, String> {
        self.stdin.write_all(line).await.map_err(|e| format!("writing to the server: {e}"))?;
        self.stdin.write_all(b"\n").await.map_err(|e| format!("writing to the server: {e}"))?;
        self.next_line().await
    }

    async fn send(&mut self, command: Value) -> Result<Value, String> {
        self.send_raw(command.to_string().as_bytes()).await
    }

    async fn ok(&mut self, command: Value) -> Result<Value, String> {
        let ack = self.send(command.clone()).await?;
        expect(ack["ok"] == true, format!("{command} was refused: {ack}"))?;
        Ok(ack)
    }
}

fn expect(cond: bool, what: impl Into<String>) -> Result<(), String> {
    if cond { Ok(()) } else { Err(what.into()) }
}

/// One Herdr API request as the runtime sends it; the reply's `result`.
async fn herdr_call(socket: &Path, method: &str, params: Value) -> Result<Value, String> {
    let stream = UnixStream::connect(socket).await.map_err(|e| format!("connect {}: {e}", socket.display()))?;
    let (read, mut write) = stream.into_split();
    let request = json!({"id": "check", "method": method, "params": params});
    write.write_all(format!("{request}\n").as_bytes()).await.map_err(|e| e.to_string())?;
    let mut lines = BufReader::new(read).lines();
    let line = tokio::time::timeout(WAIT, lines.next_line())
        .await
        .map_err(|_| format!("{method}: no reply"))?
        .map_err(|e| e.to_string())?
        .ok_or(format!("{method}: connection closed"))?;
    let reply: Value = serde_json::from_str(&line).map_err(|e| format!("{method}: {e}"))?;
    reply.get("result").cloned().ok_or(format!("{method} failed: {reply}"))
}

pub async fn run() -> Result<(), String> {
    let dir = tempfile::Builder::new().prefix("hsimsrv").tempdir_in("/tmp").map_err(|e| e.to_string())?;
    let socket = dir.path().join("herdr.sock");
    let exe = std::env::current_exe().map_err(|e| format!("own path: {e}"))?;
    let mut child = tokio::process::Command::new(exe)
        .arg("--serve")
        .arg(&socket)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start serve mode: {e}"))?;
    let stdin = child.stdin.take().ok_or("no stdin")?;
    let stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?).lines();
    let mut s = Served { child, stdin, stdout };

    let ready = s.next_line().await?;
    expect(ready["ready"] == true && socket.exists(), format!("not ready: {ready}"))?;

    s.ok(json!({"cmd": "add_workspace", "id": "w1", "label": "repo"})).await?;
    s.ok(json!({"cmd": "add_pane", "workspace": "w1", "pane": "w1:p1", "cwd": "/tmp"})).await?;
    s.ok(json!({"cmd": "add_agent", "pane": "w1:p1", "kind": "claude", "status": "idle", "name": "builder"})).await?;
    let agents = herdr_call(&socket, "agent.list", json!({})).await?;
    let agent = &agents["agents"][0];
    expect(
        agent["pane_id"] == "w1:p1" && agent["agent_status"] == "idle" && agent["name"] == "builder",
        format!("agent.list does not show the added agent: {agents}"),
    )?;

    // A status subscription sees the change; the pane then reads the given output.
    let stream = UnixStream::connect(&socket).await.map_err(|e| e.to_string())?;
    let (read, mut write) = stream.into_split();
    let subscribe = json!({"id": "sub", "method": "events.subscribe", "params": {"subscriptions": [
        {"type": "pane.agent_status_changed", "pane_id": "w1:p1"}]}});
    write.write_all(format!("{subscribe}\n").as_bytes()).await.map_err(|e| e.to_string())?;
    let mut events = BufReader::new(read).lines();
    let started = tokio::time::timeout(WAIT, events.next_line()).await.map_err(|_| "no subscription ack")?;
    expect(matches!(&started, Ok(Some(l)) if l.contains("subscription_started")), format!("{started:?}"))?;
    let ack = s.ok(json!({"cmd": "subscribers"})).await?;
    expect(ack["count"] == 1, format!("one open subscription expected: {ack}"))?;
    s.ok(json!({"cmd": "set_status", "pane": "w1:p1", "status": "done", "output": "tests passed: 12"})).await?;
    let event = tokio::time::timeout(WAIT, events.next_line()).await.map_err(|_| "no status event")?;
    expect(
        matches!(&event, Ok(Some(l)) if l.contains("\"agent_status\":\"done\"")),
        format!("status event expected: {event:?}"),
    )?;
    let read = herdr_call(&socket, "pane.read", json!({"pane_id": "w1:p1", "source": "recent_unwrapped"})).await?;
    expect(read["read"]["text"] == "tests passed: 12", format!("pane.read: {read}"))?;

    // A title change reaches the agent record (what the runtime's picture reads).
    s.ok(json!({"cmd": "set_title", "pane": "w1:p1", "title": "✳ Writing tests"})).await?;
    let agents = herdr_call(&socket, "agent.list", json!({})).await?;
    expect(agents["agents"][0]["terminal_title"] == "✳ Writing tests", format!("agent.list after set_title: {agents}"))?;
    let ack = s.send(json!({"cmd": "set_title", "pane": "w9:p9", "title": "x"})).await?;
    expect(ack["ok"] == false && ack["error"].as_str().is_some_and(|e| e.contains("w9:p9")), format!("{ack}"))?;

    // Mistakes are answered, not fatal.
    let ack = s.send(json!({"cmd": "set_status", "pane": "w9:p9", "status": "done"})).await?;
    expect(ack["ok"] == false && ack["error"].as_str().is_some_and(|e| e.contains("w9:p9")), format!("{ack}"))?;
    let ack = s.send(json!({"cmd": "set_status", "pane": "w1:p1", "status": "sleeping"})).await?;
    expect(ack["ok"] == false && ack["error"].as_str().is_some_and(|e| e.contains("sleeping")), format!("{ack}"))?;
    let ack = s.send_raw(b"not json").await?;
    expect(ack["ok"] == false, format!("{ack}"))?;

    // The line limit at its edge: exactly MAX_COMMAND_BYTES is taken, one more is not.
    let frame = json!({"cmd": "set_status", "pane": "w1:p1", "status": "idle", "output": ""}).to_string();
    let pad = "x".repeat(MAX_COMMAND_BYTES - frame.len());
    let at_limit = frame.replace("\"output\":\"\"", &format!("\"output\":\"{pad}\""));
    expect(at_limit.len() == MAX_COMMAND_BYTES, "at-limit line length")?;
    let ack = s.send_raw(at_limit.as_bytes()).await?;
    expect(ack["ok"] == true, format!("a command of exactly the limit was refused: {ack}"))?;
    let over = at_limit.replacen("\"output\":\"", "\"output\":\"x", 1);
    let ack = s.send_raw(over.as_bytes()).await?;
    expect(ack["ok"] == false && ack["error"].as_str().is_some_and(|e| e.contains("longer than")), format!("{ack}"))?;
    // The server is still in step after skipping the long line.
    s.ok(json!({"cmd": "remove_pane", "pane": "w1:p1"})).await?;
    let agents = herdr_call(&socket, "agent.list", json!({})).await?;
    expect(agents["agents"].as_array().is_some_and(Vec::is_empty), format!("agent left after remove_pane: {agents}"))?;

    s.ok(json!({"cmd": "stop"})).await?;
    let status = tokio::time::timeout(WAIT, s.child.wait()).await.map_err(|_| "the server did not exit on stop")?;
    expect(matches!(&status, Ok(st) if st.success()), format!("exit status {status:?}"))?;
    expect(!socket.exists(), "the socket file was left behind")?;
    println!("herdr_sim_server self-check: ok");
    Ok(())
}
