//! Runs the real `herdr-nmhost` binary and speaks Chrome's framing to it.

use serde_json::Value;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

pub const PINNED_ORIGIN: &str = "chrome-extension://ocghgnmfcfoelnpjkmemmjdjjacdjmcl/";
/// Generous bound for anything that should happen promptly; only reached when a test fails.
pub const DEADLINE: Duration = Duration::from_secs(20);

pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_herdr-nmhost")
}

/// One frame as received: its raw payload length and the parsed JSON.
#[derive(Debug, Clone)]
pub struct Received {
    pub len: usize,
    pub value: Value,
}

pub struct Host {
    child: Child,
    stdin: Option<ChildStdin>,
    frames: mpsc::UnboundedReceiver<Received>,
}

pub fn frame(payload: &[u8]) -> Vec<u8> {
    let mut v = (payload.len() as u32).to_le_bytes().to_vec();
    v.extend_from_slice(payload);
    v
}

impl Host {
    /// Starts the host as Chrome would: origin as argv[1], runtime socket from the environment.
    pub fn spawn(origin: &str, socket: &Path) -> Host {
        Self::spawn_with(origin, socket, &[])
    }

    pub fn spawn_with(origin: &str, socket: &Path, env: &[(&str, &str)]) -> Host {
        let mut cmd = Command::new(binary());
        cmd.arg(origin)
            .env("HERDR_EXTENSION_IPC_SOCKET", socket)
            .env_remove("HERDR_EXTENSION_ORIGIN")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn herdr-nmhost");
        let stdin = child.stdin.take();
        let mut stdout = child.stdout.take().unwrap();
        let (tx, frames) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            loop {
                let mut header = [0u8; 4];
                if stdout.read_exact(&mut header).await.is_err() {
                    return;
                }
                let len = u32::from_le_bytes(header) as usize;
                let mut payload = vec![0u8; len];
                stdout.read_exact(&mut payload).await.expect("the host wrote a whole frame");
                let value = serde_json::from_slice(&payload).expect("the host wrote JSON");
                if tx.send(Received { len, value }).is_err() {
                    return;
                }
            }
        });
        Host { child, stdin, frames }
    }

    pub async fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin still open");
        stdin.write_all(bytes).await.unwrap();
        stdin.flush().await.unwrap();
    }

    pub async fn send(&mut self, message: &Value) {
        self.send_raw(&frame(message.to_string().as_bytes())).await;
    }

    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Next frame, or `None` when stdout closed; panics after `DEADLINE`.
    pub async fn next(&mut self) -> Option<Received> {
        tokio::time::timeout(DEADLINE, self.frames.recv()).await.expect("no frame from the host in time")
    }

    pub async fn recv(&mut self) -> Value {
        self.next().await.expect("host closed stdout").value
    }

    /// Frames until (and including) the first one for which `done` holds.
    pub async fn recv_until(&mut self, mut done: impl FnMut(&Value) -> bool) -> Vec<Received> {
        let mut out = Vec::new();
        loop {
            let r = self.next().await.expect("host closed stdout");
            let stop = done(&r.value);
            out.push(r);
            if stop {
                return out;
            }
        }
    }

    pub async fn wait(&mut self) -> ExitStatus {
        tokio::time::timeout(DEADLINE, self.child.wait()).await.expect("host did not exit in time").unwrap()
    }

    pub fn still_running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

/// Polls `check` until it holds or `DEADLINE` passes.
pub async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let start = tokio::time::Instant::now();
    while !check() {
        assert!(start.elapsed() < DEADLINE, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
