//! Benchmark (not a test): `tools/call herdr_fs_read` of a 4 KiB file over the Unix
//! socket against a bare rmcp server with a trivial echo tool on the same transport,
//! measured in the same run. Each client keeps one HTTP/1.1 connection and sends
//! stateless JSON-RPC POSTs, as the native host does.
//!
//! The bare server has a second tool, `fixed_reply`, that does no work but answers
//! with a reply of the same shape and size as ours (the file's payload as a text
//! block and again as `structuredContent`, built once at start). The echo is the
//! baseline the issue fixes; `fixed_reply` is the floor that the reply size alone
//! imposes on any rmcp server, so ours/floor shows what ours adds beyond it.
//!
//! `cargo bench -p herdr-mcp --bench fs_read_latency` (optionally
//! `-- --seconds 3`). Both servers run as separate processes, with the same
//! stateless, JSON-answering rmcp configuration, the same client and the same
//! allocator: `herdr-mcp` ships with mimalloc, and the bare server uses it too
//! unless `--bare-alloc system` asks for the system allocator (the default of a
//! plain rmcp server). `--focus ours|bare|floor [--clients N]` runs one measurement
//! only, for attaching a profiler to a server.
//!
//! On a shared machine the load drifts within seconds, so each level runs short
//! rounds of the three measurements in rotating order (each goes first, second and
//! third equally often) and pools the samples per measurement; the ratios then
//! compare like with like.

#[path = "support/mod.rs"]
mod support;
use support::{SwitchableAlloc, load_average};

/// The bare server's allocator follows `HERDR_BENCH_ALLOC` (see [`SwitchableAlloc`]);
/// the bench sets it when it spawns that server.
#[global_allocator]
static GLOBAL: SwitchableAlloc = SwitchableAlloc;
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
/// Rounds per level; a multiple of the three measurements, so each takes every
/// place in the rotation equally often.
const ROUNDS: u32 = 6;
/// How far the floor's reply length may differ from ours before the bench refuses
/// to run (the floor must stay size-matched as the payload evolves).
const FLOOR_SIZE_TOLERANCE: f64 = 0.03;
const READY_DEADLINE: Duration = Duration::from_secs(30);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--bare-server") {
        let (Some(socket), Some(file)) = (args.get(i + 1), args.get(i + 2)) else {
            eprintln!("usage: --bare-server SOCKET FILE (FILE: the file whose read `fixed_reply` imitates)");
            std::process::exit(2);
        };
        assert_eq!(
            SwitchableAlloc::name(),
            std::env::var("HERDR_BENCH_ALLOC").unwrap_or_else(|_| "system".into()),
            "the bare server runs with another allocator than asked"
        );
        bare::run(Path::new(socket), Path::new(file));
        return;
    }
    let seconds: f64 = args
        .iter()
        .position(|a| a == "--seconds")
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.0);
    // `--focus ours|bare|floor --clients N`: one measurement only, for as long as
    // `--seconds` says, with the server pids printed first so a profiler can attach.
    let focus = args.iter().position(|a| a == "--focus").map(|i| {
        let which = match args.get(i + 1).map(String::as_str) {
            Some("ours") => 0,
            Some("bare") => 1,
            Some("floor") => 2,
            other => {
                eprintln!("--focus takes ours, bare or floor, not {other:?}");
                std::process::exit(2);
            }
        };
        let clients = args.iter().position(|a| a == "--clients").and_then(|i| args.get(i + 1)).and_then(|s| s.parse().ok()).unwrap_or(16);
        (which, clients)
    });
    // herdr-mcp ships with mimalloc; by default the bare server uses it too, so the
    // ratios show what our code adds, not what the allocator choice saves.
    let bare_alloc = match args.iter().position(|a| a == "--bare-alloc").map(|i| args.get(i + 1).map(String::as_str)) {
        None | Some(Some("mimalloc")) => "mimalloc",
        Some(Some("system")) => "system",
        Some(other) => {
            eprintln!("--bare-alloc takes mimalloc or system, not {other:?}");
            std::process::exit(2);
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(bench(Duration::from_secs_f64(seconds), focus, bare_alloc));
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

async fn bench(duration: Duration, focus: Option<(usize, usize)>, bare_alloc: &str) {
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
            .arg(repo.join("four_k.txt"))
            .env("HERDR_BENCH_ALLOC", bare_alloc)
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn bare server"),
        socket: bare_socket,
    };
    let ours_body = call_body("herdr_fs_read", json!({"path": "four_k.txt"}));
    let bare_body = call_body("echo", json!({"text": "x"}));
    let floor_body = call_body("fixed_reply", json!({}));
    wait_ready(&ours.socket, &ours_body).await;
    wait_ready(&bare.socket, &bare_body).await;

    // Check the measured call really reads the file, and that the floor's reply
    // matches it in size and shape.
    let first = post(&mut connect(&ours.socket).await, &ours_body).await;
    let v: Value = serde_json::from_slice(&first).expect("JSON reply");
    let payload = &v["result"]["structuredContent"];
    assert_eq!(payload["ok"], true, "herdr_fs_read failed: {v}");
    assert!(v.to_string().contains(&content[..64]), "reply lacks the file content: {v}");
    let floor_reply = post(&mut connect(&bare.socket).await, &floor_body).await;
    check_floor_matches(&first, &floor_reply);

    println!(
        "tools/call over the Unix socket, stateless JSON-RPC POSTs, {:.1} s per server and level in {ROUNDS} rotating rounds",
        duration.as_secs_f64()
    );
    println!(
        "reply bytes: herdr_fs_read {}, fixed_reply {} (floor), echo {}",
        first.len(),
        floor_reply.len(),
        post(&mut connect(&bare.socket).await, &bare_body).await.len()
    );
    println!("allocators: herdr-mcp mimalloc, bare rmcp server {bare_alloc} (--bare-alloc mimalloc|system)");
    println!("load average at start: {}", load_average());
    println!("{:<28} {:>8} {:>10} {:>10} {:>12}", "server / clients", "calls", "p50 (µs)", "p99 (µs)", "calls/s");
    let (ours_pid, bare_pid) = (ours.child.id(), bare.child.id());
    let targets = [
        (&ours.socket, &ours_body, ours_pid),
        (&bare.socket, &bare_body, bare_pid),
        (&bare.socket, &floor_body, bare_pid),
    ];
    if let Some((which, clients)) = focus {
        let (socket, body, pid) = targets[which];
        let name = ["ours", "bare", "floor"][which];
        println!("focus on {name} x{clients} for {duration:?}; server pids: ours {ours_pid}, bare and floor {bare_pid}");
        let (before, client_before) = (ServerCpu::of(pid), ServerCpu::of(std::process::id()));
        let (measured, all_calls) = run_round(socket, body, clients, duration).await;
        let (user, sys) = ServerCpu::default().tap_add(&before, &ServerCpu::of(pid)).per_call(all_calls);
        let (c_user, c_sys) =
            ServerCpu::default().tap_add(&client_before, &ServerCpu::of(std::process::id())).per_call(all_calls);
        Stats::from_samples(measured, duration).print(&format!("{name} x{clients}"));
        println!("  server CPU per call: user {user:6.1} µs, system {sys:6.1} µs, total {:6.1} µs", user + sys);
        println!("  client CPU per call: user {c_user:6.1} µs, system {c_sys:6.1} µs, total {:6.1} µs", c_user + c_sys);
        return;
    }
    let round = duration / ROUNDS;
    for clients in [1usize, 16] {
        let mut samples: [Vec<u128>; 3] = Default::default();
        let mut cpu = [ServerCpu::default(); 3];
        // Every call of the rounds, warm-ups included: the calls the CPU time paid for.
        let mut calls_in_rounds = [0usize; 3];
        for r in 0..ROUNDS as usize {
            for k in 0..targets.len() {
                let which = (r + k) % targets.len();
                let (socket, body, pid) = targets[which];
                let before = ServerCpu::of(pid);
                let (measured, all_calls) = run_round(socket, body, clients, round).await;
                samples[which].extend(measured);
                calls_in_rounds[which] += all_calls;
                cpu[which].add_since(&before, &ServerCpu::of(pid));
            }
        }
        let [ours_stats, bare_stats, floor_stats] = samples.map(|s| Stats::from_samples(s, round * ROUNDS));
        ours_stats.print(&format!("herdr_fs_read (ours) x{clients}"));
        bare_stats.print(&format!("echo (bare rmcp) x{clients}"));
        floor_stats.print(&format!("fixed_reply (floor) x{clients}"));
        let [ours_cpu, bare_cpu, floor_cpu] = [0, 1, 2].map(|k| cpu[k].per_call(calls_in_rounds[k]));
        for (label, (user, sys)) in [("ours", ours_cpu), ("bare", bare_cpu), ("floor", floor_cpu)] {
            println!("  server CPU per call, {label:<5}: user {user:6.1} µs, system {sys:6.1} µs, total {:6.1} µs", user + sys);
        }
        // floor/bare is what the reply alone costs: no tool that answers with the
        // contract's reply can do better than it against the echo.
        for (label, (one, one_cpu), (other, other_cpu)) in [
            ("ours/bare  ", (&ours_stats, ours_cpu), (&bare_stats, bare_cpu)),
            ("ours/floor ", (&ours_stats, ours_cpu), (&floor_stats, floor_cpu)),
            ("floor/bare ", (&floor_stats, floor_cpu), (&bare_stats, bare_cpu)),
        ] {
            println!(
                "  ratio {label} at {clients:>2} clients: p50 {:.2}x, p99 {:.2}x, throughput {:.2}x, server CPU per call {:.2}x",
                one.p50 as f64 / other.p50 as f64,
                one.p99 as f64 / other.p99 as f64,
                one.rate / other.rate,
                (one_cpu.0 + one_cpu.1) / (other_cpu.0 + other_cpu.1)
            );
        }
    }
    println!("load average at end: {}", load_average());
}

/// Refuses to run when the floor's reply no longer matches ours: the same members in
/// its result and its payload, and a length within [`FLOOR_SIZE_TOLERANCE`].
fn check_floor_matches(ours: &[u8], floor: &[u8]) {
    let parse = |bytes: &[u8], who: &str| -> Value {
        serde_json::from_slice(bytes).unwrap_or_else(|e| panic!("{who} reply is not JSON: {e}"))
    };
    let (o, f) = (parse(ours, "herdr_fs_read"), parse(floor, "fixed_reply"));
    let keys = |v: &Value| v.as_object().map(|m| m.keys().cloned().collect::<Vec<_>>()).unwrap_or_default();
    assert_eq!(keys(&o["result"]), keys(&f["result"]), "the results of ours and the floor have different members");
    let (o_payload, f_payload) = (&o["result"]["structuredContent"], &f["result"]["structuredContent"]);
    assert_eq!(keys(o_payload), keys(f_payload), "payload members differ");
    assert_eq!(o_payload["content"], f_payload["content"], "the floor carries other content than ours");
    let text = |v: &Value| v["result"]["content"][0]["text"].as_str().map(str::to_string).expect("a text block");
    assert_eq!(text(&f), f_payload.to_string(), "the floor's text block is not its payload");
    let drift = (floor.len() as f64 - ours.len() as f64).abs() / ours.len() as f64;
    assert!(
        drift <= FLOOR_SIZE_TOLERANCE,
        "fixed_reply is {} bytes, herdr_fs_read {}: the floor no longer matches ours in size",
        floor.len(),
        ours.len()
    );
}

/// User and system CPU time a server process spent (all its threads), in clock
/// ticks, read from `/proc/PID/stat`. Server CPU per call does not depend on how
/// long calls waited for a core, so it drifts less with the load than wall clock.
#[derive(Clone, Copy, Default)]
struct ServerCpu {
    user: u64,
    system: u64,
}

impl ServerCpu {
    fn of(pid: u32) -> ServerCpu {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("server's /proc stat");
        // The command name may hold spaces; the fields counted from 3 follow its ')'.
        let fields: Vec<&str> = stat.rsplit_once(')').expect("stat has a command name").1.split_whitespace().collect();
        let tick = |i: usize| fields[i].parse::<u64>().expect("numeric CPU time");
        // utime and stime are fields 14 and 15 of the line, 12 and 13 after ')'.
        ServerCpu { user: tick(11), system: tick(12) }
    }

    fn add_since(&mut self, before: &ServerCpu, after: &ServerCpu) {
        self.user += after.user - before.user;
        self.system += after.system - before.system;
    }

    fn tap_add(mut self, before: &ServerCpu, after: &ServerCpu) -> ServerCpu {
        self.add_since(before, after);
        self
    }

    /// (user, system) µs per call over `calls` calls.
    fn per_call(&self, calls: usize) -> (f64, f64) {
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        let micros = |ticks: u64| ticks as f64 * 1e6 / hz / calls.max(1) as f64;
        (micros(self.user), micros(self.system))
    }
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
/// returns the latencies (µs) of calls started after the warm-up, and how many calls
/// were made in all.
async fn run_round(socket: &Path, body: &Bytes, clients: usize, duration: Duration) -> (Vec<u128>, usize) {
    let body = Arc::new(body.clone());
    let start = Instant::now() + WARMUP;
    let end = start + duration;
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let socket = socket.to_path_buf();
        let body = Arc::clone(&body);
        tasks.push(tokio::spawn(async move {
            let mut sender = connect(&socket).await;
            let (mut samples, mut calls) = (Vec::new(), 0);
            loop {
                let t0 = Instant::now();
                if t0 >= end {
                    break;
                }
                let reply = post(&mut sender, &body).await;
                let elapsed = t0.elapsed();
                calls += 1;
                assert!(reply.starts_with(b"{\"jsonrpc\""), "unexpected reply");
                if t0 >= start {
                    samples.push(elapsed.as_micros());
                }
            }
            (samples, calls)
        }));
    }
    let (mut all, mut calls) = (Vec::new(), 0);
    for t in tasks {
        let (samples, n) = t.await.unwrap();
        all.extend(samples);
        calls += n;
    }
    (all, calls)
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

/// The baseline: rmcp's own stateless streamable HTTP service with an echo tool,
/// served by axum on a Unix socket — the same transport stack minus our layer and
/// tool registry. Its `fixed_reply` tool is the size-matched floor (see the top).
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
    use serde_json::{Value, json};

    #[derive(Clone)]
    struct Echo {
        /// `fixed_reply`'s answer, built once; each call only clones it.
        fixed_reply: Arc<CallToolResult>,
    }

    /// A payload with the members and values `herdr_fs_read` gives for a whole
    /// single-line file (the bench's file has no newline), written the way ours is:
    /// compact JSON text plus the same object as `structuredContent`.
    fn fixed_reply(file: &Path) -> CallToolResult {
        let file = std::fs::canonicalize(file).expect("fixed_reply's file exists");
        let content = std::fs::read_to_string(&file).expect("fixed_reply's file is UTF-8 text");
        let root = file.parent().expect("the file has a directory");
        let payload = json!({
            "ok": true,
            "path": file.to_string_lossy(),
            "root": root.to_string_lossy(),
            "lines": {"start": 1, "end": 1, "total": 1},
            "next_start_line": Value::Null,
            "truncated_by": Value::Null,
            "bytes": content.len(),
            "budget": 16384,
            "truncated": false,
            "content": content,
        });
        let mut result = CallToolResult::success(vec![ContentBlock::text(payload.to_string())]);
        result.structured_content = Some(payload);
        // Ours leaves `isError` out unless the call failed (`success` says false).
        result.is_error = None;
        result
    }

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
            let echo = Tool::new("echo", "Echo text back.", Arc::new(schema.as_object().unwrap().clone()));
            let empty = json!({"type": "object"});
            let fixed = Tool::new("fixed_reply", "The same reply every time.", Arc::new(empty.as_object().unwrap().clone()));
            Ok(ListToolsResult::with_all_items(vec![echo, fixed]))
        }

        async fn call_tool(
            &self,
            request: CallToolRequestParams,
            _: RequestContext<RoleServer>,
        ) -> Result<CallToolResponse, ErrorData> {
            if request.name == "fixed_reply" {
                return Ok(CallToolResponse::Complete(CallToolResult::clone(&self.fixed_reply)));
            }
            let text = request.arguments.and_then(|a| a.get("text").cloned()).unwrap_or_default();
            Ok(CallToolResponse::Complete(CallToolResult::success(vec![ContentBlock::text(text.to_string())])))
        }
    }

    pub fn run(socket: &Path, file: &Path) {
        let echo = Echo { fixed_reply: Arc::new(fixed_reply(file)) };
        let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let _ = std::fs::remove_file(socket);
            let listener = tokio::net::UnixListener::bind(socket).expect("bind bare socket");
            let config = StreamableHttpServerConfig::default()
                .disable_allowed_hosts()
                .with_legacy_session_mode(false)
                .with_json_response(true)
                .with_sse_retry(None);
            let service =
                StreamableHttpService::new(move || Ok(echo.clone()), Arc::new(NeverSessionManager::default()), config);
            let app = axum::Router::new().route_service("/mcp", service);
            axum::serve(listener, app).await.expect("serve bare");
        });
    }
}
