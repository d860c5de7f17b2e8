//! Real `herdr-mcp link` and `herdr-mcp serve` processes for the link tests, and
//! a stand-in runtime on a Unix socket that records every `tools/call` (so a test
//! can count how often a mutation really reached a workstation). Included with
//! `#[path]` beside `procs.rs`, whose plumbing it uses.
#![allow(dead_code)]

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use herdr_mcp::edge::link_hub::LinkHub;
use serde_json::{Value, json};

use crate::procs::{Proc, command, poll};

pub struct Runtime {
    pub socket: PathBuf,
    pub root: PathBuf,
    pub _proc: Proc,
}

/// A real runtime whose only root holds `file` with `text`.
pub async fn runtime(home: &Path, tag: &str, file: &str, text: &str) -> Runtime {
    let root = home.join(format!("root-{tag}"));
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join(file), text).unwrap();
    let socket = home.join(format!("rt-{tag}.sock"));
    let proc = Proc(
        command(home)
            .args(["serve", "--socket"])
            .arg(&socket)
            .arg("--root")
            .arg(&root)
            .arg("--state-dir")
            .arg(home.join(format!("state-{tag}")))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let s = socket.clone();
    poll("the runtime socket", || std::os::unix::net::UnixStream::connect(&s).ok()).await;
    Runtime { socket, root: root.canonicalize().unwrap(), _proc: proc }
}

fn write_secret(home: &Path, ws: &str, secret: &str) -> PathBuf {
    let path = home.join(format!("{ws}.secret"));
    let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&path).unwrap();
    f.write_all(secret.as_bytes()).unwrap();
    path
}

pub fn link_command(home: &Path, edge: &str, ws: &str, secret: &str, socket: &Path) -> Command {
    let mut c = command(home);
    c.args(["link", "--edge", edge, "--workstation-id", ws, "--credential-file"])
        .arg(write_secret(home, ws, secret))
        .arg("--socket")
        .arg(socket)
        .stdout(Stdio::null());
    c
}

/// A link process; its log is `<home>/link-<ws>.log`.
pub fn link(home: &Path, edge: &str, ws: &str, secret: &str, socket: &Path) -> Proc {
    let log = std::fs::File::create(home.join(format!("link-{ws}.log"))).unwrap();
    Proc(link_command(home, edge, ws, secret, socket).stderr(log).spawn().unwrap())
}

pub async fn linked(hub: &LinkHub, ws: &str) {
    poll(&format!("the link of {ws}"), || hub.link(ws)).await;
}

/// The `tools/call` bodies a stand-in runtime received.
pub type Calls = Arc<Mutex<Vec<Value>>>;

/// A stand-in runtime on a Unix socket that records every `tools/call`. A call
/// whose `arguments.hold` is `true` is never answered (so a test can drop
/// the link while a mutation is in flight); one with `arguments.refuse` true gets
/// a runtime refusal before delivery; any other is answered at once with
/// `{"ok":true,"call":<its 1-based number>}`.
pub async fn recording_runtime(socket: &Path) -> (Calls, tokio::task::JoinHandle<()>) {
    use axum::routing::{get, post};
    let calls: Calls = Arc::default();
    let seen = Arc::clone(&calls);
    let (_, (epoch, hash)) = herdr_mcp::edge::forward::local_runtime_contract();
    let app = axum::Router::new()
        .route(
            "/health",
            get(move || async move {
                axum::Json(json!({"ok": true, "version": "0.0.0-test", "build": {"commit": "t", "boot_id": "holding-1"}, "contract": {"epoch": epoch, "hash": hash}}))
            }),
        )
        .route(
            "/mcp",
            post(move |axum::Json(body): axum::Json<Value>| async move {
                let hold = body["params"]["arguments"]["hold"] == true;
                let refuse = body["params"]["arguments"]["refuse"] == true;
                let n = {
                    let mut calls = seen.lock().unwrap();
                    calls.push(body);
                    calls.len()
                };
                if hold {
                    std::future::pending::<()>().await;
                }
                let text = if refuse {
                    // How the runtime refuses before running anything (the key is given back).
                    json!({"ok": false, "reason": "project_root_required", "safe_retry_mode": "retry_with_same_key", "call": n})
                } else {
                    json!({"ok": true, "call": n})
                }
                .to_string();
                axum::Json(json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": text}]}}))
            }),
        );
    let listener = tokio::net::UnixListener::bind(socket).unwrap();
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.ok();
    });
    (calls, task)
}

/// How many recorded calls named `tool`.
pub fn count(calls: &Calls, tool: &str) -> usize {
    calls.lock().unwrap().iter().filter(|c| c["params"]["name"] == tool).count()
}
