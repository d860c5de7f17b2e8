//! Issue 22 item 10, connections are bounded: real `herdr-mcp serve` and
//! `herdr-mcp edge serve` processes flooded over real loopback sockets. A flood
//! of idle TCP connections (no token needed) must not lock the trusted Unix
//! socket out or stop the edge's `/health`, and idle or half-sent-header
//! connections are closed by the header-read timeout instead of staying open.
//!
//! The flood needs ~1100 descriptors in this process too: each test first raises
//! its own soft `RLIMIT_NOFILE` to the hard limit.

mod common;
mod edge_support;
#[path = "edge_support/links.rs"]
mod links;
#[path = "edge_support/procs.rs"]
mod procs;

use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};

/// The size of the flood: more than the 1024 descriptors a process gets by default.
const FLOOD: usize = 1100;
/// The production header-read timeout is 10 s; a connection must be gone by this.
const CLOSED_BY: Duration = Duration::from_secs(16);

/// Raises this test process's soft descriptor limit to its hard limit and
/// checks there is room for a flood (several tests flood at once).
fn raise_own_nofile_limit() {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
    lim.rlim_cur = lim.rlim_max;
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);
    assert!(
        lim.rlim_cur >= 8 * FLOOD as u64,
        "the test needs a hard RLIMIT_NOFILE of at least {}, have {}",
        8 * FLOOD,
        lim.rlim_max
    );
}

/// Starts `cmd` with the descriptor limits `soft` and `hard` (`None`: keep the
/// inherited hard limit), as a login with a small default would give it.
fn with_nofile(cmd: &mut Command, soft: u64, hard: Option<u64>) {
    unsafe {
        cmd.pre_exec(move || {
            let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            lim.rlim_cur = soft;
            if let Some(hard) = hard {
                lim.rlim_max = hard;
            }
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// `herdr-mcp serve` over one root with a file `a.txt`, on a Unix socket and
/// loopback TCP with the harness bearer, with the given descriptor limits.
struct Served {
    proc: procs::Proc,
    socket: PathBuf,
    tcp: SocketAddr,
    root: PathBuf,
    dir: tempfile::TempDir,
}

impl Served {
    async fn start(soft: u64, hard: Option<u64>) -> Served {
        let dir = common::short_tempdir();
        let root = dir.path().join("root");
        std::fs::create_dir(&root).unwrap();
        std::fs::write(root.join("a.txt"), "still here\n").unwrap();
        let socket = dir.path().join("s.sock");
        let tcp = common::free_loopback_addr();
        let mut cmd = procs::command(dir.path());
        for var in
            ["HERDR_MCP_READONLY", "HERDR_MCP_WRITE_ROOTS", "HERDR_MCP_CONFIG_DIR", "HERDR_MCP_RUNTIME_GENERATION"]
        {
            cmd.env_remove(var);
        }
        cmd.arg("serve")
            .arg("--socket")
            .arg(&socket)
            .arg("--root")
            .arg(&root)
            .arg("--listen")
            .arg(tcp.to_string())
            .env("HERDR_MCP_TOKEN", common::TOKEN)
            .env("HERDR_MCP_LOG", "info")
            .current_dir(&root);
        with_nofile(&mut cmd, soft, hard);
        let proc = procs::spawn_logged(&mut cmd, &dir.path().join("stderr.log"));
        let served = Served { proc, socket, tcp, root, dir };
        let deadline = Instant::now() + procs::DEADLINE;
        loop {
            if let Ok(r) = common::raw_unix(&served.socket, "GET", "/health", &[], None).await
                && r.status == 200
            {
                return served;
            }
            assert!(Instant::now() < deadline, "runtime did not start; stderr:\n{}", served.log());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("stderr.log")).unwrap_or_default()
    }

    fn pid(&self) -> u32 {
        self.proc.0.id()
    }

    /// `/health` over the Unix socket, given at most `limit` to answer.
    async fn unix_health_within(&self, limit: Duration) -> Result<u16, String> {
        match tokio::time::timeout(limit, common::raw_unix(&self.socket, "GET", "/health", &[], None)).await {
            Ok(Ok(r)) => Ok(r.status),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(format!("no answer within {limit:?}")),
        }
    }
}

/// Opens `n` idle TCP connections to `addr`; a connect that does not finish in
/// a second is left out (a full backlog), the count shows in the result.
async fn flood(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
    let mut open = Vec::with_capacity(n);
    for _ in 0..n {
        if let Ok(Ok(s)) = tokio::time::timeout(Duration::from_secs(1), TcpStream::connect(addr)).await {
            open.push(s);
        }
    }
    open
}

/// Connections waiting in the kernel's accept queue of the listener on `port`
/// (`rx_queue` of its LISTEN line in /proc/net/tcp).
fn accept_queue(port: u16) -> Option<u64> {
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    let local = format!(":{port:04X}");
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        (f.get(1)?.ends_with(&local) && *f.get(3)? == "0A").then(|| {
            let rx = f.get(4)?.split(':').nth(1)?;
            u64::from_str_radix(rx, 16).ok()
        })?
    })
}

/// Waits (up to 5 s) until the server has taken every flooded connection off its
/// accept queue; returns whether it did. A server that ran out of descriptors
/// never does, and the checks after it then see what a client would see.
async fn accept_queue_drained(port: u16) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if accept_queue(port) == Some(0) {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One `GET path` over a fresh TCP connection (`Connection: close`), with an
/// optional bearer; the status, or why there is none, within `limit`.
async fn tcp_get_within(addr: SocketAddr, path: &str, bearer: Option<&str>, limit: Duration) -> Result<u16, String> {
    let exchange = async {
        let mut s = TcpStream::connect(addr).await.map_err(|e| format!("connect: {e}"))?;
        let auth = bearer.map(|b| format!("Authorization: Bearer {b}\r\n")).unwrap_or_default();
        let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Connection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await.map_err(|e| format!("write: {e}"))?;
        let mut out = Vec::new();
        s.read_to_end(&mut out).await.map_err(|e| format!("read: {e}"))?;
        let text = String::from_utf8_lossy(&out);
        let status = text.split_whitespace().nth(1).and_then(|s| s.parse().ok());
        status.ok_or_else(|| format!("no HTTP status in {text:?}"))
    };
    tokio::time::timeout(limit, exchange).await.unwrap_or_else(|_| Err(format!("no answer within {limit:?}")))
}

/// Reads (and discards) until the peer closes; how long that took, or `None`
/// if the connection was still open after `limit`.
async fn closed_within<S: AsyncRead + Unpin>(stream: &mut S, limit: Duration) -> Option<Duration> {
    let start = Instant::now();
    let mut buf = [0u8; 4096];
    tokio::time::timeout(limit, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return start.elapsed(),
                Ok(_) => {}
            }
        }
    })
    .await
    .ok()
}

/// The three slow clients the finding names, on one stream each: one that says
/// nothing, one that stops in the middle of its headers, and one that finished a
/// request and keeps the connection idle. Returns how long each stayed open.
async fn slow_clients<S, F, Fut>(connect: F, host: &str) -> [Option<Duration>; 3]
where
    S: AsyncRead + AsyncWrite + Unpin,
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = S>,
{
    let mut silent = connect().await;
    let mut half = connect().await;
    half.write_all(format!("GET /health HTTP/1.1\r\nHost: {host}\r\nX-Slow: ").as_bytes()).await.unwrap();
    let mut idle = connect().await;
    idle.write_all(format!("GET /health HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes()).await.unwrap();
    let mut first = [0u8; 12];
    idle.read_exact(&mut first).await.unwrap();
    assert_eq!(&first, b"HTTP/1.1 200", "the keep-alive request was answered");
    let (a, b, c) = tokio::join!(
        closed_within(&mut silent, CLOSED_BY),
        closed_within(&mut half, CLOSED_BY),
        closed_within(&mut idle, CLOSED_BY)
    );
    [a, b, c]
}

/// The soft and hard "Max open files" of process `pid`.
fn nofile_of(pid: u32) -> (String, String) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits.lines().find(|l| l.starts_with("Max open files")).expect("Max open files line");
    let f: Vec<&str> = line.split_whitespace().collect();
    (f[3].to_string(), f[4].to_string())
}

/// Item 10: ~1100 idle TCP connections, no token, against a runtime whose hard
/// descriptor limit is 1024 (so raising the soft limit cannot help): the Unix
/// socket still answers `/health` within a second during the flood, and once the
/// flood is gone an authorised TCP `/health` and `tools/call` work again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_flood_does_not_lock_out_the_unix_socket() {
    raise_own_nofile_limit();
    let rt = Served::start(1024, Some(1024)).await;
    let flooded = flood(rt.tcp, FLOOD).await;
    let drained = accept_queue_drained(rt.tcp.port()).await;
    let unix = rt.unix_health_within(Duration::from_secs(1)).await;
    eprintln!(
        "observed: {} of {FLOOD} connected, accept queue drained: {drained}, Unix /health: {unix:?}",
        flooded.len()
    );
    assert!(flooded.len() >= 1000, "the flood did not happen: only {} connections", flooded.len());
    assert_eq!(unix, Ok(200), "the Unix socket is locked out by a TCP flood; runtime log:\n{}", rt.log());
    // Still answering a moment later (not one lucky accept).
    assert_eq!(rt.unix_health_within(Duration::from_secs(1)).await, Ok(200));
    // The TCP cap held the flood, and said so once.
    let log = rt.log();
    assert_eq!(log.matches("connection cap reached").count(), 1, "runtime log:\n{log}");

    drop(flooded);
    let deadline = Instant::now() + procs::DEADLINE;
    loop {
        let tcp = tcp_get_within(rt.tcp, "/health", Some(common::TOKEN), Duration::from_secs(1)).await;
        if tcp == Ok(200) {
            break;
        }
        assert!(Instant::now() < deadline, "authorised TCP /health after the flood: {tcp:?}; log:\n{}", rt.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let config =
        StreamableHttpClientTransportConfig::with_uri(format!("http://{}/mcp", rt.tcp)).auth_header(common::TOKEN);
    let client = ().serve(StreamableHttpClientTransport::from_config(config)).await.expect("rmcp client over TCP");
    let path = rt.root.join("a.txt");
    let read = common::call_tool(&client, "herdr_fs_read", json!({"path": path.to_str().unwrap()})).await;
    assert_eq!(read["content"], "still here\n", "tools/call over TCP after the flood: {read}");
}

/// Item 10: a runtime started with a small soft descriptor limit raises it to
/// the hard limit, so the caps are what bounds connections, not EMFILE.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_raises_its_soft_open_file_limit_to_the_hard_limit() {
    raise_own_nofile_limit();
    let rt = Served::start(512, None).await;
    let (soft, hard) = nofile_of(rt.pid());
    eprintln!("observed: runtime started with soft 512 has soft {soft}, hard {hard}");
    assert_eq!(soft, hard, "the soft RLIMIT_NOFILE was left at {soft}");
}

/// Item 10: on the runtime's TCP listener and on its Unix socket, a silent
/// connection, one with half-sent headers and an idle keep-alive one are closed
/// by the header-read timeout, not kept open for minutes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_and_half_sent_header_connections_are_closed() {
    raise_own_nofile_limit();
    let rt = Served::start(1024, None).await;
    let addr = rt.tcp;
    let socket = rt.socket.clone();
    let host = addr.to_string();
    let (tcp, unix) = tokio::join!(
        slow_clients(|| async move { TcpStream::connect(addr).await.unwrap() }, &host),
        slow_clients(
            || {
                let socket = socket.clone();
                async move { UnixStream::connect(&socket).await.unwrap() }
            },
            "localhost"
        ),
    );
    eprintln!("observed open for [silent, half-sent headers, idle keep-alive]: TCP {tcp:?}, Unix {unix:?}");
    for (listener, times) in [("TCP", tcp), ("Unix socket", unix)] {
        for (what, t) in ["silent", "half-sent headers", "idle keep-alive"].iter().zip(times) {
            assert!(t.is_some(), "{listener}: a {what} connection was still open after {CLOSED_BY:?}");
        }
    }
}

/// An `edge serve` started with a soft descriptor limit of 1024 (the usual login
/// default), its hard limit as inherited.
fn start_edge(home: &Path) -> procs::EdgeProcess {
    procs::EdgeProcess::start_with(home, |cmd| with_nofile(cmd, 1024, None))
}

fn edge_addr(edge: &procs::EdgeProcess) -> SocketAddr {
    edge.base.strip_prefix("http://").unwrap().parse().unwrap()
}

/// Item 10: the same flood against the edge: `/health` still answers within a
/// second, and idle and half-sent-header connections are closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_flood_does_not_stop_the_edge_health() {
    raise_own_nofile_limit();
    let home = tempfile::tempdir().unwrap();
    let home_path = home.path().to_path_buf();
    let edge = tokio::task::spawn_blocking(move || start_edge(&home_path)).await.unwrap();
    let addr = edge_addr(&edge);
    let flooded = flood(addr, FLOOD).await;
    let drained = accept_queue_drained(addr.port()).await;
    let health = tcp_get_within(addr, "/health", None, Duration::from_secs(1)).await;
    eprintln!(
        "observed: {} of {FLOOD} connected, accept queue drained: {drained}, edge /health: {health:?}",
        flooded.len()
    );
    assert!(flooded.len() >= 1000, "the flood did not happen: only {} connections", flooded.len());
    assert_eq!(health, Ok(200), "edge /health during a TCP flood; edge log:\n{}", edge.log_text());
    drop(flooded);

    let host = addr.to_string();
    let times = slow_clients(|| async move { TcpStream::connect(addr).await.unwrap() }, &host).await;
    eprintln!("observed open for [silent, half-sent headers, idle keep-alive] on the edge: {times:?}");
    for (what, t) in ["silent", "half-sent headers", "idle keep-alive"].iter().zip(times) {
        assert!(t.is_some(), "edge: a {what} connection was still open after {CLOSED_BY:?}");
    }
}

/// Item 10: the header-read timeout is for request heads only. A workstation's
/// WebSocket link (an upgraded connection) that stays quiet for longer than the
/// timeout is still the same link afterwards, and a call goes through it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_websocket_link_outlives_the_header_timeout() {
    use herdr_mcp::edge::clock::SystemClock;
    use herdr_mcp::edge::devices::DeviceRegistry;
    use herdr_mcp::edge::store::EdgeStore;
    use std::sync::Arc;

    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().to_path_buf();
    let edge = tokio::task::spawn_blocking(move || procs::EdgeProcess::start(&home)).await.unwrap();
    let home = tmp.path();
    let store = Arc::new(EdgeStore::open(&edge.edge_dir, Arc::new(SystemClock)).unwrap());
    let devices = DeviceRegistry::new(Arc::clone(&store));
    let pairing = devices.create_pairing(Some(120), None, "test").unwrap();
    let enrolled = devices.consume_pairing(&pairing.pairing_id, &pairing.code, Some("quiet")).unwrap();
    let ws = enrolled.device.workstation_id.clone();
    let runtime = links::runtime(home, "quiet", "q.txt", "through the link\n").await;
    let _link = links::link(home, &edge.base, &ws, &enrolled.device_secret, &runtime.socket);
    let link_log = home.join(format!("link-{ws}.log"));
    let links_made = || std::fs::read_to_string(&link_log).unwrap_or_default().matches(" linked").count();
    procs::poll("the link", || (links_made() >= 1).then_some(())).await;
    let linked_at = Instant::now();

    // Quiet past the timeout; a closed link would reconnect and log a second "linked".
    let quiet = Duration::from_secs(13);
    while linked_at.elapsed() < quiet {
        assert_eq!(
            links_made(),
            1,
            "the link was dropped and made again while quiet; link log:\n{}",
            std::fs::read_to_string(&link_log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let bearer = edge_support::Http::new(&edge.base).approved_bearer(&store).await;
    let config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", edge.base)).auth_header(bearer);
    let client = ().serve(StreamableHttpClientTransport::from_config(config)).await.expect("rmcp client to the edge");
    let mut params = rmcp::model::CallToolRequestParams::new("herdr_fs_read".to_string());
    params.arguments =
        json!({"device": enrolled.device.device_id, "path": runtime.root.join("q.txt")}).as_object().cloned();
    let read = serde_json::to_value(client.call_tool(params).await.unwrap()).unwrap();
    eprintln!(
        "observed after {:?} quiet: {} link(s) made, call through the link: {}",
        linked_at.elapsed(),
        links_made(),
        read["structuredContent"]
    );
    assert_eq!(read["structuredContent"]["content"], "through the link\n", "{read}");
    assert_eq!(links_made(), 1, "the link was made again");
}
