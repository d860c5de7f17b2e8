//! Round-trip of `tools/call herdr_fs_read` (a 4 KiB file) against the real runtime, three ways:
//! direct HTTP over the Unix socket, through one persistent host process (the extension's
//! `connectNative` port), and through a fresh host process per call (`sendNativeMessage`).
//!
//! Run: `cargo bench -p herdr-nmhost --bench roundtrip` (prints figures; not a test).
//! Goals: persistent/direct ≤ 1.5×, one-shot/persistent ≥ 10×.

#[path = "../tests/support/real_runtime.rs"]
#[allow(dead_code)]
mod real_runtime;

use bytes::Bytes;
use herdr_nmhost::runtime_client::{ForwardRequest, RuntimeClient};
use http::header::{HeaderMap, HeaderValue, ACCEPT, CONTENT_TYPE};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

const HOST: &str = env!("CARGO_BIN_EXE_herdr-nmhost");
const ORIGIN: &str = "chrome-extension://ocghgnmfcfoelnpjkmemmjdjjacdjmcl/";
const FILE_BYTES: usize = 4096;
const WARMUP: usize = 20;
const FAST_RUNS: usize = 300;
const ONESHOT_RUNS: usize = 60;

fn rpc_body(path: &str) -> String {
    json!({"jsonrpc":"2.0","id":1,"method":"tools/call",
           "params":{"name":"herdr_fs_read","arguments":{"path":path}}})
    .to_string()
}

/// Checks the answer really is the file, so every timed call did the full work.
fn check_rpc(body: &str, content_type: &str) {
    let json_text = if content_type.starts_with("text/event-stream") {
        body.lines().filter_map(|l| l.strip_prefix("data:")).map(str::trim).rfind(|d| !d.is_empty()).unwrap()
    } else {
        body
    };
    let rpc: Value = serde_json::from_str(json_text).expect("JSON-RPC answer");
    let content = rpc["result"]["structuredContent"]["content"].as_str().unwrap_or_else(|| panic!("no content: {rpc}"));
    assert_eq!(content.len(), FILE_BYTES, "the whole 4 KiB file came back");
}

fn check_frame(frame: &Value) {
    assert_eq!(frame["ok"], true, "{frame}");
    check_rpc(frame["body"].as_str().unwrap(), frame["headers"]["content-type"].as_str().unwrap_or(""));
}

fn frame(message: &Value) -> Vec<u8> {
    let payload = message.to_string().into_bytes();
    let mut out = (payload.len() as u32).to_le_bytes().to_vec();
    out.extend(payload);
    out
}

fn read_frame(out: &mut ChildStdout) -> Value {
    let mut header = [0u8; 4];
    out.read_exact(&mut header).expect("frame header");
    let mut payload = vec![0u8; u32::from_le_bytes(header) as usize];
    out.read_exact(&mut payload).expect("frame payload");
    serde_json::from_slice(&payload).unwrap()
}

fn request_message(body: &str, oneshot: bool) -> Value {
    json!({"type":"request","id":"b","method":"POST","path":"/mcp","oneshot":oneshot,
           "headers":{"content-type":"application/json","accept":"application/json, text/event-stream"},
           "body":body})
}

fn spawn_host(socket: &std::path::Path) -> (Child, ChildStdin, ChildStdout) {
    let mut child = Command::new(HOST)
        .arg(ORIGIN)
        .env("HERDR_EXTENSION_IPC_SOCKET", socket)
        .env_remove("HERDR_EXTENSION_ORIGIN")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn herdr-nmhost");
    let stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    (child, stdin, stdout)
}

struct Stats {
    p50: Duration,
    p90: Duration,
    mean: Duration,
}

fn measure(runs: usize, mut call: impl FnMut()) -> Stats {
    for _ in 0..WARMUP.min(runs) {
        call();
    }
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            call();
            start.elapsed()
        })
        .collect();
    times.sort();
    let mean = times.iter().sum::<Duration>() / runs as u32;
    Stats { p50: times[runs / 2], p90: times[runs * 9 / 10], mean }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let runtime = match real_runtime::RealRuntime::start() {
        Ok(r) => r,
        Err(why) => {
            eprintln!("cannot run the benchmark without the real runtime: {why}");
            std::process::exit(1);
        }
    };
    let file = runtime.root.join("four-kib.txt");
    let line = format!("{}\n", "x".repeat(63));
    std::fs::write(&file, line.repeat(FILE_BYTES / line.len())).unwrap();
    let body = rpc_body(file.to_str().unwrap());

    // Direct: the same hyper client the host uses, one connection per call.
    let tokio_rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let client = RuntimeClient::new(&runtime.socket);
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(ACCEPT, HeaderValue::from_static("application/json, text/event-stream"));
    let direct = measure(FAST_RUNS, || {
        let request = ForwardRequest {
            method: http::Method::POST,
            path_and_query: http::uri::PathAndQuery::from_static("/mcp"),
            headers: headers.clone(),
            body: Bytes::from(body.clone()),
        };
        let response = tokio_rt.block_on(client.send(request, Duration::from_secs(30))).expect("direct call");
        let content_type = response.headers.get("content-type").cloned().unwrap_or_default();
        check_rpc(std::str::from_utf8(&response.body).unwrap(), &content_type);
    });

    // Persistent: one host process, calls one after another on its port.
    let (mut child, mut stdin, mut stdout) = spawn_host(&runtime.socket);
    let message = frame(&request_message(&body, false));
    let persistent = measure(FAST_RUNS, || {
        stdin.write_all(&message).unwrap();
        stdin.flush().unwrap();
        check_frame(&read_frame(&mut stdout));
    });
    drop(stdin);
    child.wait().unwrap();

    // One-shot: a fresh host process per call, as `sendNativeMessage` does.
    let oneshot_message = frame(&request_message(&body, true));
    let oneshot = measure(ONESHOT_RUNS, || {
        let (mut child, mut stdin, mut stdout) = spawn_host(&runtime.socket);
        stdin.write_all(&oneshot_message).unwrap();
        stdin.flush().unwrap();
        check_frame(&read_frame(&mut stdout));
        drop(stdin);
        child.wait().unwrap();
    });

    println!("herdr_fs_read (4 KiB) round trip, real runtime, {} CPUs", std::thread::available_parallelism().map_or(0, |n| n.get()));
    println!("{:<34} {:>9} {:>9} {:>9} {:>6}", "path", "p50 ms", "p90 ms", "mean ms", "runs");
    for (name, s, runs) in [
        ("direct Unix-socket HTTP", &direct, FAST_RUNS),
        ("persistent host (connectNative)", &persistent, FAST_RUNS),
        ("one-shot host (sendNativeMessage)", &oneshot, ONESHOT_RUNS),
    ] {
        println!("{name:<34} {:>9.3} {:>9.3} {:>9.3} {runs:>6}", ms(s.p50), ms(s.p90), ms(s.mean));
    }
    let persistent_vs_direct = ms(persistent.p50) / ms(direct.p50);
    let oneshot_vs_persistent = ms(oneshot.p50) / ms(persistent.p50);
    println!(
        "persistent/direct (p50) = {persistent_vs_direct:.2}x (goal <= 1.5x: {})",
        if persistent_vs_direct <= 1.5 { "met" } else { "NOT met" }
    );
    println!(
        "one-shot/persistent (p50) = {oneshot_vs_persistent:.1}x (goal >= 10x: {})",
        if oneshot_vs_persistent >= 10.0 { "met" } else { "NOT met" }
    );
}
