//! Shared harness for the runtime's integration tests: starts the real
//! `herdr-mcp serve` binary on a short temp socket, waits until it answers, and
//! offers an rmcp client (Unix socket, or TCP + bearer), raw HTTP helpers and
//! temp git repositories. Dropping a [`Runtime`] kills the process.
//!
//! Typical use:
//! ```ignore
//! let repo = common::git_repo(&[("a.txt", "hello\n")]);
//! let rt = common::Runtime::start(&[repo.path()], &[]).await;
//! let client = rt.client().await;
//! let payload = common::call_tool(&client, "herdr_fs_read", json!({"path": "a.txt"})).await;
//! ```
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_herdr-mcp");
/// How long a runtime may take to answer `/health` after spawn.
pub const START_DEADLINE: Duration = Duration::from_secs(30);
pub const TOKEN: &str = "3f9a1c7e5b2d8046a1e9c3b7d5f20864e7a9c1b3d5f70e2a4c6b8d0f1e3a5c79";

pub type McpClient = RunningService<RoleClient, ()>;

/// Variables the harness never lets leak from the developer's shell into a runtime.
const SCRUBBED_ENV: &[&str] = &[
    "HERDR_MCP_ROOTS",
    "HERDR_MCP_READONLY",
    "HERDR_MCP_WRITE_ROOTS",
    "HERDR_MCP_TOKEN",
    "HERDR_EXTENSION_IPC_SOCKET",
    "HERDR_SOCKET_PATH",
    "HERDR_MCP_CONFIG_DIR",
    "HERDR_MCP_STATE_DIR",
    "HERDR_MCP_RUNTIME_GENERATION",
];

/// What to start; `Default` is a Unix-socket-only runtime in a fresh temp dir.
#[derive(Default, Clone)]
pub struct Options {
    pub roots: Vec<PathBuf>,
    pub env: Vec<(String, String)>,
    /// Also serve loopback TCP on a free port with [`TOKEN`].
    pub tcp: bool,
    /// Use this socket path instead of `<tempdir>/s.sock`.
    pub socket: Option<PathBuf>,
    /// Working directory (default: the first root, else the temp dir).
    pub cwd: Option<PathBuf>,
    pub extra_args: Vec<String>,
}

pub struct Runtime {
    child: Option<Child>,
    pub socket: PathBuf,
    pub tcp: Option<SocketAddr>,
    /// Holds the socket directory and the stderr log.
    pub dir: tempfile::TempDir,
    pub stderr_path: PathBuf,
}

/// A short temp dir under /tmp: socket paths must stay under 108 bytes.
pub fn short_tempdir() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("hm").tempdir_in("/tmp").expect("temp dir")
}

impl Runtime {
    /// Starts a runtime over `roots` with extra environment `env`, Unix socket only.
    pub async fn start(roots: &[&Path], env: &[(&str, &str)]) -> Runtime {
        Self::start_with(Options {
            roots: roots.iter().map(|p| p.to_path_buf()).collect(),
            env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            ..Options::default()
        })
        .await
    }

    /// Same as [`Runtime::start`], also serving TCP with bearer [`TOKEN`].
    pub async fn start_tcp(roots: &[&Path], env: &[(&str, &str)]) -> Runtime {
        Self::start_with(Options {
            roots: roots.iter().map(|p| p.to_path_buf()).collect(),
            env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            tcp: true,
            ..Options::default()
        })
        .await
    }

    pub async fn start_with(options: Options) -> Runtime {
        match Self::try_start(options).await {
            Ok(rt) => rt,
            Err(failure) => panic!("runtime did not start: {failure}"),
        }
    }

    /// Starts and waits for readiness; on failure returns the exit status and stderr.
    pub async fn try_start(options: Options) -> Result<Runtime, String> {
        let dir = short_tempdir();
        let socket = options.socket.clone().unwrap_or_else(|| dir.path().join("s.sock"));
        let tcp = options.tcp.then(free_loopback_addr);
        let stderr_path = dir.path().join("stderr.log");
        let mut cmd = spawn_command(&options, &socket, tcp, dir.path());
        cmd.stderr(Stdio::from(std::fs::File::create(&stderr_path).expect("stderr log")));
        let child = cmd.spawn().map_err(|e| format!("spawn {BIN}: {e}"))?;
        let mut rt = Runtime { child: Some(child), socket, tcp, dir, stderr_path };
        rt.wait_ready().await?;
        Ok(rt)
    }

    async fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + START_DEADLINE;
        loop {
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                return Err(format!("exited with {status}; stderr:\n{}", self.stderr()));
            }
            if let Ok(resp) = raw_unix(&self.socket, "GET", "/health", &[], None).await
                && resp.status == 200
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("no /health answer within {START_DEADLINE:?}; stderr:\n{}", self.stderr()));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// An rmcp client over the Unix socket (initialize handshake, session mode).
    pub async fn client(&self) -> McpClient {
        let transport = StreamableHttpClientTransport::from_unix_socket(
            self.socket.to_str().expect("utf-8 socket path"),
            "http://localhost/mcp",
        );
        ().serve(transport).await.expect("rmcp client over the Unix socket")
    }

    /// An rmcp client over TCP with the harness bearer.
    pub async fn tcp_client(&self) -> McpClient {
        self.tcp_client_with_token(TOKEN).await.expect("rmcp client over TCP")
    }

    pub async fn tcp_client_with_token(&self, token: &str) -> Result<McpClient, String> {
        let addr = self.tcp.expect("runtime started without TCP");
        let config = StreamableHttpClientTransportConfig::with_uri(format!("http://{addr}/mcp")).auth_header(token);
        let transport = StreamableHttpClientTransport::from_config(config);
        ().serve(transport).await.map_err(|e| e.to_string())
    }

    /// One raw HTTP request over the Unix socket.
    pub async fn raw(&self, method: &str, path: &str, headers: &[(&str, &str)], body: Option<&[u8]>) -> RawResponse {
        raw_unix(&self.socket, method, path, headers, body).await.expect("raw request over the Unix socket")
    }

    /// Opens a streamable-HTTP session over the Unix socket (initialize on 2025-06-18
    /// from an ordinary client) and returns its `Mcp-Session-Id`.
    pub async fn open_session(&self) -> String {
        let init = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
        let headers = [("content-type", "application/json"), ("accept", "application/json, text/event-stream")];
        let resp = self.raw("POST", "/mcp", &headers, Some(init.to_string().as_bytes())).await;
        assert_eq!(resp.status, 200, "{}", resp.text());
        resp.header("mcp-session-id").expect("session id").to_string()
    }

    /// A stateless JSON-RPC POST to `/mcp` over the Unix socket (no initialize, no
    /// session), as the extension sends them.
    pub async fn post_json(&self, message: &Value) -> RawResponse {
        let body = message.to_string();
        self.raw(
            "POST",
            "/mcp",
            &[("content-type", "application/json"), ("accept", "application/json, text/event-stream")],
            Some(body.as_bytes()),
        )
        .await
    }

    /// One raw HTTP request over TCP.
    pub async fn raw_tcp(&self, method: &str, path: &str, headers: &[(&str, &str)], body: Option<&[u8]>) -> RawResponse {
        let addr = self.tcp.expect("runtime started without TCP");
        let stream = tokio::net::TcpStream::connect(addr).await.expect("connect TCP");
        let host = addr.to_string();
        let has_host = headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host"));
        let mut all: Vec<(&str, &str)> = headers.to_vec();
        if !has_host {
            all.push(("host", &host));
        }
        send(stream, method, path, &all, body).await.expect("raw request over TCP")
    }

    /// Sends SIGTERM and waits (bounded) for the process to exit.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let child = self.child.as_mut().expect("running");
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(status) = child.try_wait().expect("wait") {
                self.child = None;
                return status;
            }
            assert!(Instant::now() < deadline, "runtime ignored SIGTERM; stderr:\n{}", self.stderr());
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Runs `herdr-mcp serve` with `options` expecting it to exit on its own (startup
/// failures); returns the exit status and stderr. Panics if it is still running
/// after `deadline`.
pub fn run_to_exit(options: &Options, deadline: Duration) -> (std::process::ExitStatus, String) {
    let dir = short_tempdir();
    let socket = options.socket.clone().unwrap_or_else(|| dir.path().join("s.sock"));
    let mut cmd = spawn_command(options, &socket, None, dir.path());
    cmd.stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn herdr-mcp");
    let until = Instant::now() + deadline;
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            let mut err = String::new();
            use std::io::Read;
            child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
            return (status, err);
        }
        if Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            panic!("herdr-mcp kept running although it should have refused to start");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn spawn_command(options: &Options, socket: &Path, tcp: Option<SocketAddr>, dir: &Path) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.arg("serve").arg("--socket").arg(socket);
    for root in &options.roots {
        cmd.arg("--root").arg(root);
    }
    for var in SCRUBBED_ENV {
        cmd.env_remove(var);
    }
    if let Some(addr) = tcp {
        cmd.arg("--listen").arg(addr.to_string()).env("HERDR_MCP_TOKEN", TOKEN);
    }
    cmd.args(&options.extra_args);
    // Keep the runtime away from the real user's config and state.
    cmd.env("XDG_CONFIG_HOME", dir.join("config"))
        .env("XDG_STATE_HOME", dir.join("state"))
        .env("HERDR_MCP_LOG", "info");
    for (k, v) in &options.env {
        cmd.env(k, v);
    }
    let cwd = options.cwd.clone().or_else(|| options.roots.first().cloned()).unwrap_or_else(|| dir.to_path_buf());
    cmd.current_dir(cwd).stdin(Stdio::null()).stdout(Stdio::null());
    cmd
}

/// A loopback address with a port free at the time of the call.
pub fn free_loopback_addr() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind probe");
    l.local_addr().expect("addr")
}

/// Calls `name` and returns its JSON payload (from `structuredContent`, checked
/// against the text block).
pub async fn call_tool(client: &McpClient, name: &str, arguments: Value) -> Value {
    let result = call_tool_raw(client, name, arguments).await;
    payload_of(&result)
}

/// Calls `name` and returns the whole `CallToolResult` as JSON.
pub async fn call_tool_raw(client: &McpClient, name: &str, arguments: Value) -> Value {
    let mut params = CallToolRequestParams::new(name.to_string());
    params.arguments = match arguments {
        Value::Object(map) => Some(map),
        Value::Null => None,
        other => panic!("tool arguments must be an object, got {other}"),
    };
    let result = client.call_tool(params).await.unwrap_or_else(|e| panic!("tools/call {name}: {e}"));
    serde_json::to_value(&result).expect("serialize result")
}

/// The payload of a `CallToolResult` JSON: text block 0 parsed, which must equal
/// `structuredContent`.
pub fn payload_of(result: &Value) -> Value {
    let text = result["content"][0]["text"].as_str().unwrap_or_else(|| panic!("no text block in {result}"));
    let payload: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("text block is not JSON ({e}): {text}"));
    assert_eq!(result["structuredContent"], payload, "structuredContent differs from the text block");
    payload
}

/// A temp git repository with `files` committed (paths relative, parents created).
pub fn git_repo(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::Builder::new().prefix("hmrepo").tempdir().expect("temp repo");
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir.path())
            .env("GIT_AUTHOR_NAME", "Test")
            .env("GIT_AUTHOR_EMAIL", "test@example.invalid")
            .env("GIT_COMMITTER_NAME", "Test")
            .env("GIT_COMMITTER_EMAIL", "test@example.invalid")
            .output()
            .expect("run git");
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    git(&["init", "-q", "-b", "main"]);
    for (path, content) in files {
        let full = dir.path().join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, content).unwrap();
    }
    git(&["add", "-A"]);
    git(&["commit", "-q", "--allow-empty", "-m", "initial"]);
    dir
}

/// A raw HTTP response, body fully read.
#[derive(Debug)]
pub struct RawResponse {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: Bytes,
}

impl RawResponse {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The JSON body; an SSE body yields the last `data:` event that parses.
    pub fn json(&self) -> Value {
        let text = self.text();
        if let Ok(v) = serde_json::from_str(&text) {
            return v;
        }
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .next_back()
            .unwrap_or_else(|| panic!("status {} body is not JSON: {text}", self.status))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

pub async fn raw_unix(
    socket: &Path,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> Result<RawResponse, String> {
    let stream = tokio::net::UnixStream::connect(socket).await.map_err(|e| format!("connect {}: {e}", socket.display()))?;
    let has_host = headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host"));
    let mut all: Vec<(&str, &str)> = headers.to_vec();
    if !has_host {
        all.push(("host", "localhost"));
    }
    send(stream, method, path, &all, body).await
}

async fn send<S>(stream: S, method: &str, path: &str, headers: &[(&str, &str)], body: Option<&[u8]>) -> Result<RawResponse, String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| format!("handshake: {e}"))?;
    tokio::spawn(conn);
    let mut builder = http::Request::builder().method(method).uri(path);
    for (k, v) in headers {
        builder = builder.header(*k, *v);
    }
    let request = builder
        .body(Full::new(Bytes::copy_from_slice(body.unwrap_or_default())))
        .map_err(|e| format!("build request: {e}"))?;
    let response = tokio::time::timeout(Duration::from_secs(30), sender.send_request(request))
        .await
        .map_err(|_| "no response within 30 s".to_string())?
        .map_err(|e| format!("send: {e}"))?;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    // SSE replies of session requests may stay open; read until the body ends or
    // a complete JSON-RPC response arrived.
    let mut body = response.into_body();
    let mut collected = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(remaining, body.frame()).await {
            Err(_) => return Err("body not finished within 30 s".into()),
            Ok(None) => break,
            Ok(Some(Err(e))) => return Err(format!("body: {e}")),
            Ok(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    collected.extend_from_slice(&data);
                }
                let is_sse = headers.get("content-type").and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with("text/event-stream"));
                if is_sse && sse_has_response(&collected) {
                    break;
                }
            }
        }
    }
    Ok(RawResponse { status, headers, body: Bytes::from(collected) })
}

fn sse_has_response(bytes: &[u8]) -> bool {
    let text = String::from_utf8_lossy(bytes);
    text.contains("\n\n")
        && text
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .any(|v| v.get("result").is_some() || v.get("error").is_some())
}
