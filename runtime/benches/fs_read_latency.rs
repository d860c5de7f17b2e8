//! Benchmark (not a test): `tools/call herdr_fs_read` of a 4 KiB file over the Unix
//! socket against a bare rmcp server with a trivial echo tool on the same transport,
//! measured in the same run. Each client keeps one HTTP/1.1 connection and sends
//! stateless JSON-RPC POSTs, as the native host does.
//!
//! `cargo bench -p herdr-mcp --bench fs_read_latency` (optionally
//! `-- --seconds 3`). Both servers run as separate processes, with the same
//! stateless, JSON-answering rmcp configuration and the same client.
//!
//! On a shared machine the load drifts within seconds, so each level alternates
//! short rounds of ours and bare (ours first, then bare first, …) and pools the
//! samples per server; the ratios then compare like with like.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

const FILE_BYTES: usize = 4096;
const WARMUP: Duration = Duration::from_millis(100);
/// Alternating rounds per level (even, so each server goes first equally often).
const ROUNDS: u32 = 4;
const READY_DEADLINE: Duration = Duration::from_secs(30);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--bare-server") {
        bare::run(Path::new(&args[i + 1]));
        return;
    }
    let seconds: f64 = args
        .iter()
        .position(|a| a == "--seconds")
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.0);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(bench(Duration::from_secs_f64(seconds)));
}

struct Server {
    child: Child,
    socket: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn bench(duration: Duration) {
    let dir = tempfile::Builder::new().prefix("hmb").tempdir_in("/tmp").unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    let status = Command::new("git").args(["init", "-q"]).current_dir(&repo).status().unwrap();
    assert!(status.success());
    let content: String = (0..FILE_BYTES).map(|i| (b'a' + (i % 26) as u8) as char).collect();
    std::fs::write(repo.join("four_k.txt"), &content).unwrap();

    let ours_socket = dir.path().join("ours.sock");
    let ours = Server {
        child: Command::new(env!("CARGO_BIN_EXE_herdr-mcp"))
            .arg("serve")
            .arg("--socket")
            .arg(&ours_socket)
            .arg("--root")
            .arg(&repo)
            .env("HERDR_MCP_LOG", "warn")
            .env("XDG_STATE_HOME", dir.path().join("state"))
            .env("XDG_CONFIG_HOME", dir.path().join("config"))
            .current_dir(&repo)
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn herdr-mcp"),
        socket: ours_socket,
    };
    let bare_socket = dir.path().join("bare.sock");
    let bare = Server {
        child: Command::new(std::env::current_exe().unwrap())
            .arg("--bare-server")
            .arg(&bare_socket)
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn bare server"),
        socket: bare_socket,
    };
    wait_ready(&ours.socket, &call_body("herdr_fs_read", json!({"path": "four_k.txt"}))).await;
    wait_ready(&bare.socket, &call_body("echo", json!({"text": "x"}))).await;

    // Check the measured call really reads the file.
    let first = post(&mut connect(&ours.socket).await, &call_body("herdr_fs_read", json!({"path": "four_k.txt"}))).await;
    let v: Value = serde_json::from_slice(&first).expect("JSON reply");
    let payload = &v["result"]["structuredContent"];
    assert_eq!(payload["ok"], true, "herdr_fs_read failed: {v}");
    assert!(v.to_string().contains(&content[..64]), "reply lacks the file content: {v}");

    println!(
        "tools/call over the Unix socket, stateless JSON-RPC POSTs, {:.1} s per server and level in {ROUNDS} alternating rounds",
        duration.as_secs_f64()
    );
    println!("load average at start: {}", load_average());
    println!("{:<28} {:>8} {:>10} {:>10} {:>12}", "server / clients", "calls", "p50 (µs)", "p99 (µs)", "calls/s");
    let ours_body = call_body("herdr_fs_read", json!({"path": "four_k.txt"}));
    let bare_body = call_body("echo", json!({"text": "x"}));
    let round = duration / ROUNDS;
    for clients in [1usize, 16] {
        let (mut ours_samples, mut bare_samples) = (Vec::new(), Vec::new());
        for r in 0..ROUNDS {
            let ours_first = r % 2 == 0;
            if ours_first {
                ours_samples.extend(run_round(&ours.socket, &ours_body, clients, round).await);
            }
            bare_samples.extend(run_round(&bare.socket, &bare_body, clients, round).await);
            if !ours_first {
                ours_samples.extend(run_round(&ours.socket, &ours_body, clients, round).await);
            }
        }
        let ours_stats = Stats::from_samples(ours_samples, round * ROUNDS);
        let bare_stats = Stats::from_samples(bare_samples, round * ROUNDS);
        ours_stats.print(&format!("herdr_fs_read (ours) x{clients}"));
        bare_stats.print(&format!("echo (bare rmcp) x{clients}"));
        println!(
            "  ratio ours/bare at {clients:>2} clients: p50 {:.2}x, p99 {:.2}x, throughput {:.2}x",
            ours_stats.p50 as f64 / bare_stats.p50 as f64,
            ours_stats.p99 as f64 / bare_stats.p99 as f64,
            ours_stats.rate / bare_stats.rate
        );
    }
    println!("load average at end: {}", load_average());
}

/// The 1, 5 and 15 minute load averages, to judge how busy the machine was.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

struct Stats {
    calls: usize,
    p50: u128,
    p99: u128,
    rate: f64,
}

impl Stats {
    fn from_samples(mut all: Vec<u128>, measured: Duration) -> Stats {
        assert!(!all.is_empty(), "no call completed in {measured:?}");
        all.sort_unstable();
        let pick = |q: f64| all[((all.len() as f64 * q) as usize).min(all.len() - 1)];
        Stats { calls: all.len(), p50: pick(0.50), p99: pick(0.99), rate: all.len() as f64 / measured.as_secs_f64() }
    }

    fn print(&self, label: &str) {
        println!("{label:<28} {:>8} {:>10} {:>10} {:>12.0}", self.calls, self.p50, self.p99, self.rate);
    }
}

/// `clients` connections calling in a loop for a warm-up and then `duration`;
/// returns the latencies (µs) of calls started after the warm-up.
async fn run_round(socket: &Path, body: &Bytes, clients: usize, duration: Duration) -> Vec<u128> {
    let body = Arc::new(body.clone());
    let start = Instant::now() + WARMUP;
    let end = start + duration;
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let socket = socket.to_path_buf();
        let body = Arc::clone(&body);
        tasks.push(tokio::spawn(async move {
            let mut sender = connect(&socket).await;
            let mut samples = Vec::new();
            loop {
                let t0 = Instant::now();
                if t0 >= end {
                    break;
                }
                let reply = post(&mut sender, &body).await;
                let elapsed = t0.elapsed();
                assert!(reply.starts_with(b"{\"jsonrpc\""), "unexpected reply");
                if t0 >= start {
                    samples.push(elapsed.as_micros());
                }
            }
            samples
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all
}

fn call_body(tool: &str, args: Value) -> Bytes {
    Bytes::from(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": args}}).to_string())
}

type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

async fn connect(socket: &Path) -> Sender {
    let stream = tokio::net::UnixStream::connect(socket).await.expect("connect");
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.expect("handshake");
    tokio::spawn(conn);
    sender
}

async fn post(sender: &mut Sender, body: &Bytes) -> Bytes {
    sender.ready().await.expect("connection ready");
    let request = http::Request::post("/mcp")
        .header("host", "localhost")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(Full::new(body.clone()))
        .unwrap();
    let response = sender.send_request(request).await.expect("send");
    assert_eq!(response.status(), 200);
    response.into_body().collect().await.expect("body").to_bytes()
}

async fn wait_ready(socket: &Path, body: &Bytes) {
    let deadline = Instant::now() + READY_DEADLINE;
    loop {
        if tokio::net::UnixStream::connect(socket).await.is_ok() {
            let mut s = connect(socket).await;
            let _ = post(&mut s, body).await;
            return;
        }
        assert!(Instant::now() < deadline, "{} did not come up", socket.display());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The baseline: rmcp's own stateless streamable HTTP service with one echo tool,
/// served by axum on a Unix socket — the same transport stack minus our layer and
/// tool registry.
mod bare {
    use std::path::Path;
    use std::sync::Arc;

    use rmcp::model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, InitializeResult, ListToolsResult,
        PaginatedRequestParams, ServerCapabilities, Tool,
    };
    use rmcp::service::RequestContext;
    use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
    use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
    use rmcp::{ErrorData, RoleServer, ServerHandler};
    use serde_json::json;

    #[derive(Clone)]
    struct Echo;

    impl ServerHandler for Echo {
        fn get_info(&self) -> InitializeResult {
            InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
        }

        async fn list_tools(
            &self,
            _: Option<PaginatedRequestParams>,
            _: RequestContext<RoleServer>,
        ) -> Result<ListToolsResult, ErrorData> {
            let schema = json!({"type": "object", "properties": {"text": {"type": "string"}}});
            let tool = Tool::new("echo", "Echo text back.", Arc::new(schema.as_object().unwrap().clone()));
            Ok(ListToolsResult::with_all_items(vec![tool]))
        }

        async fn call_tool(
            &self,
            request: CallToolRequestParams,
            _: RequestContext<RoleServer>,
        ) -> Result<CallToolResponse, ErrorData> {
            let text = request.arguments.and_then(|a| a.get("text").cloned()).unwrap_or_default();
            Ok(CallToolResponse::Complete(CallToolResult::success(vec![ContentBlock::text(text.to_string())])))
        }
    }

    pub fn run(socket: &Path) {
        let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let _ = std::fs::remove_file(socket);
            let listener = tokio::net::UnixListener::bind(socket).expect("bind bare socket");
            let config = StreamableHttpServerConfig::default()
                .disable_allowed_hosts()
                .with_legacy_session_mode(false)
                .with_json_response(true)
                .with_sse_retry(None);
            let service = StreamableHttpService::new(|| Ok(Echo), Arc::new(NeverSessionManager::default()), config);
            let app = axum::Router::new().route_service("/mcp", service);
            axum::serve(listener, app).await.expect("serve bare");
        });
    }
}
