//! The real host binary against a fake runtime on a temp socket: multiplexing, chunking,
//! streams, cancel, failures and refusals, as the extension will meet them.

mod support;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde_json::{json, Value};
use support::fake_runtime::{pattern, FakeRuntime};
use support::host::{eventually, frame, Host, PINNED_ORIGIN};

const MIB: usize = 1 << 20;

struct Setup {
    _dir: tempfile::TempDir,
    runtime: FakeRuntime,
    host: Host,
}

async fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("extension.sock");
    let runtime = FakeRuntime::start(&socket).await;
    let host = Host::spawn(PINNED_ORIGIN, &socket);
    Setup { _dir: dir, runtime, host }
}

fn post(id: &str, path: &str, body: &str) -> Value {
    json!({"type":"request","id":id,"method":"POST","path":path,
           "headers":{"content-type":"application/json","accept":"application/json, text/event-stream"},
           "body":body})
}

fn echo_of(response: &Value) -> Value {
    serde_json::from_str(response["body"].as_str().expect("a body")).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_are_answered_as_they_complete_and_matched_by_id() {
    let mut s = setup().await;
    // Sent slowest first; the runtime answers after 900, 450 and 0 ms.
    for (id, delay) in [("slow", 900), ("mid", 450), ("fast", 0)] {
        s.host.send(&post(id, &format!("/mcp?delay_ms={delay}"), &format!("body of {id}"))).await;
    }
    let mut order = Vec::new();
    for _ in 0..3 {
        let r = s.host.recv().await;
        assert_eq!(r["type"], "response");
        assert_eq!(r["ok"], true);
        assert_eq!(r["status"], 200);
        let id = r["id"].as_str().unwrap().to_owned();
        assert_eq!(echo_of(&r)["echo"], format!("body of {id}"), "response matched to its request");
        order.push(id);
    }
    assert_eq!(order, ["fast", "mid", "slow"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_interleaved_requests_all_come_back_matched() {
    let mut s = setup().await;
    for i in 0..40u64 {
        s.host.send(&post(&format!("r{i}"), &format!("/mcp?delay_ms={}", (i * 37) % 200), &format!("#{i}"))).await;
    }
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..40 {
        let r = s.host.recv().await;
        let id = r["id"].as_str().unwrap().to_owned();
        assert_eq!(echo_of(&r)["echo"], format!("#{}", &id[1..]));
        assert!(seen.insert(id));
    }
    assert_eq!(seen.len(), 40);
}

/// Reassembles a chunked response the way the extension is told to in `chunking`.
fn reassemble(frames: &[support::host::Received]) -> (Value, Vec<u8>) {
    let last = frames.last().unwrap().value.clone();
    let mut bytes = Vec::new();
    for (seq, f) in frames[..frames.len() - 1].iter().enumerate() {
        assert_eq!(f.value["type"], "chunk");
        assert_eq!(f.value["seq"], seq);
        bytes.extend(B64.decode(f.value["data_b64"].as_str().unwrap()).unwrap());
    }
    (last, bytes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_over_one_mebibyte_arrives_in_chunks_and_reassembles_byte_exact() {
    let mut s = setup().await;
    let reps = 3 * MIB / support::fake_runtime::PATTERN.len();
    s.host.send(&post("big", &format!("/mcp?reps={reps}"), "{}")).await;
    // A small request behind it still gets through.
    s.host.send(&json!({"type":"request","id":"small","path":"/health"})).await;
    let mut frames = Vec::new();
    let mut small_seen = false;
    loop {
        let r = s.host.next().await.unwrap();
        assert!(r.len <= MIB, "frame of {} bytes exceeds Chrome's limit", r.len);
        if r.value["id"] == "small" {
            small_seen = true;
            continue;
        }
        let done = r.value["type"] == "response";
        frames.push(r);
        if done {
            break;
        }
    }
    let (last, bytes) = reassemble(&frames);
    assert_eq!(last["ok"], true);
    assert!(last.get("body").is_none());
    assert_eq!(last["chunked"]["count"], frames.len() - 1);
    assert_eq!(last["chunked"]["bytes"], bytes.len());
    assert_eq!(last["chunked"]["encoding"], "utf8");
    assert_eq!(last["headers"]["content-type"], "text/plain; charset=utf-8");
    assert_eq!(bytes, pattern(reps).into_bytes());
    if !small_seen {
        assert_eq!(s.host.recv().await["id"], "small");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_up_to_eight_mebibytes_pass_and_larger_ones_are_refused() {
    let mut s = setup().await;
    let unit = support::fake_runtime::PATTERN.len();
    let at_limit = 8 * MIB / unit; // the largest whole number of patterns within 8 MiB
    s.host.send(&post("at", &format!("/mcp?reps={at_limit}"), "")).await;
    let frames = s.host.recv_until(|v| v["type"] == "response").await;
    let (last, bytes) = reassemble(&frames);
    assert_eq!(last["ok"], true);
    assert_eq!(bytes.len(), at_limit * unit);

    s.host.send(&post("over", &format!("/mcp?reps={}", at_limit + 1), "")).await;
    let r = s.host.recv().await;
    assert_eq!((r["id"].as_str(), r["ok"].as_bool(), r["error"].as_str()), (Some("over"), Some(false), Some("native_response_too_large")));
}

fn stream_text(frames: &[support::host::Received]) -> String {
    let mut bytes = Vec::new();
    for f in frames.iter().filter(|f| f.value["type"] == "stream_chunk") {
        bytes.extend(B64.decode(f.value["chunk_b64"].as_str().unwrap()).unwrap());
    }
    String::from_utf8(bytes).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_stream_delivers_its_events_then_ends() {
    let mut s = setup().await;
    s.host.send(&json!({"type":"stream","id":"ev","path":"/push/events?events=3"})).await;
    let frames = s.host.recv_until(|v| v["type"] == "stream_end").await;
    assert_eq!(frames[0].value, json!({"type":"stream_open","id":"ev","status":200,"transport":"ipc"}));
    assert!(frames.iter().all(|f| f.value["id"] == "ev"));
    let text = stream_text(&frames);
    let blocks: Vec<&str> = text.split("\n\n").filter(|b| !b.is_empty()).collect();
    assert_eq!(blocks, ["id: 0\nevent: agent\ndata: {\"n\":0}", "id: 1\nevent: agent\ndata: {\"n\":1}", "id: 2\nevent: agent\ndata: {\"n\":2}"]);
    let seen = s.runtime.seen();
    let req = seen.iter().find(|r| r.path_and_query.starts_with("/push/events")).unwrap();
    assert_eq!(req.method, "GET");
    assert!(req.headers.contains(&("accept".into(), "text/event-stream".into())));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_with_an_error_status_opens_with_that_status_and_ends() {
    let mut s = setup().await;
    s.host.send(&json!({"type":"stream","id":"e","path":"/push/events?status=503"})).await;
    let frames = s.host.recv_until(|v| v["type"] == "stream_end").await;
    let types: Vec<&str> = frames.iter().map(|f| f.value["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["stream_open", "stream_end"]);
    assert_eq!(frames[0].value["status"], 503);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_a_stream_and_closes_its_runtime_connection() {
    let mut s = setup().await;
    s.host.send(&json!({"type":"stream","id":9,"path":"/push/events?events=2&hold=1"})).await;
    // Wait for both events (and at least one keep-alive) to be sure the stream is live.
    let mut frames = Vec::new();
    while !stream_text(&frames).contains(": keep-alive") {
        frames.push(s.host.next().await.unwrap());
    }
    assert_eq!(s.runtime.stream_drops(), 0);
    s.host.send(&json!({"type":"cancel","id":9})).await;
    let after = s.host.recv_until(|v| v["type"] == "cancelled").await;
    assert_eq!(after.last().unwrap().value, json!({"type":"cancelled","id":9}));
    eventually("the runtime sees the stream connection close", || s.runtime.stream_drops() == 1).await;
    // Nothing more for id 9: the next frame is the answer to a new call.
    s.host.send(&json!({"type":"request","id":"after","path":"/health"})).await;
    let next = s.host.recv().await;
    assert_eq!(next["id"], "after");
    // Cancelling again finds nothing.
    s.host.send(&json!({"type":"cancel","id":9})).await;
    let r = s.host.recv().await;
    assert_eq!((r["ok"].as_bool(), r["error"].as_str()), (Some(false), Some("unknown_request_id")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_request_never_answers() {
    let mut s = setup().await;
    s.host.send(&post("gone", "/mcp?delay_ms=700", "x")).await;
    eventually("the request reached the runtime", || s.runtime.seen().len() == 1).await;
    s.host.send(&json!({"type":"cancel","id":"gone"})).await;
    assert_eq!(s.host.recv().await, json!({"type":"cancelled","id":"gone"}));
    // This one answers after the cancelled one would have.
    s.host.send(&post("later", "/mcp?delay_ms=1200", "y")).await;
    let r = s.host.recv().await;
    assert_eq!(r["id"], "later");
    assert_eq!(r["ok"], true);
    // The id is free again.
    s.host.send(&post("gone", "/mcp", "z")).await;
    assert_eq!(echo_of(&s.host.recv().await)["echo"], "z");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_down_answers_extension_ipc_unavailable_and_the_port_recovers_when_it_starts() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("extension.sock");
    let mut host = Host::spawn(PINNED_ORIGIN, &socket);
    host.send(&post("a", "/mcp", "{}")).await;
    let r = host.recv().await;
    assert_eq!((r["id"].as_str(), r["ok"].as_bool(), r["error"].as_str()), (Some("a"), Some(false), Some("extension_ipc_unavailable")));
    host.send(&json!({"type":"stream","id":"s","path":"/push/events"})).await;
    let r = host.recv().await;
    assert_eq!((r["type"].as_str(), r["error"].as_str()), (Some("stream_error"), Some("extension_ipc_unavailable")));
    host.send(&json!({"type":"identity","id":"i"})).await;
    let r = host.recv().await;
    assert_eq!(r["runtime_available"], false);
    assert!(host.still_running());

    let _runtime = FakeRuntime::start(&socket).await;
    host.send(&post("b", "/mcp", "back")).await;
    let r = host.recv().await;
    assert_eq!((r["id"].as_str(), r["ok"].as_bool()), (Some("b"), Some(true)));
    host.send(&json!({"type":"identity","id":"i2"})).await;
    assert_eq!(host.recv().await["runtime_available"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identity_reports_version_origin_and_socket() {
    let mut s = setup().await;
    s.host.send(&json!({"type":"identity","id":1})).await;
    let r = s.host.recv().await;
    assert_eq!(r["type"], "identity");
    assert_eq!(r["id"], 1);
    assert_eq!(r["ok"], true);
    assert_eq!(r["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(r["extension_origin"], PINNED_ORIGIN);
    assert_eq!(r["runtime_socket"], s.runtime.socket.display().to_string());
    assert_eq!(r["runtime_available"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_frames_get_error_frames_and_the_port_keeps_working() {
    let mut s = setup().await;
    s.host.send_raw(&frame(b"this is not json")).await;
    let r = s.host.recv().await;
    assert_eq!((r["type"].as_str(), r["ok"].as_bool(), r["error"].as_str()), (Some("error"), Some(false), Some("invalid_native_message")));
    s.host.send_raw(&frame(&[0xff, 0xfe])).await;
    assert_eq!(s.host.recv().await["error"], "invalid_native_message");
    s.host.send_raw(&frame(b"{\"type\":\"request\",\"id\":\"n\",\"path\":7}")).await;
    let r = s.host.recv().await;
    assert_eq!((r["id"].as_str(), r["error"].as_str()), (Some("n"), Some("invalid_native_message")));

    // Exactly 1 MiB is accepted (a JSON request padded with spaces); one byte more is not.
    let mut at_limit = post("edge", "/mcp", "ok").to_string().into_bytes();
    at_limit.resize(MIB, b' ');
    s.host.send_raw(&frame(&at_limit)).await;
    assert_eq!(echo_of(&s.host.recv().await)["echo"], "ok");
    let mut over = post("over", "/mcp", "no").to_string().into_bytes();
    over.resize(MIB + 1, b' ');
    s.host.send_raw(&frame(&over)).await;
    let r = s.host.recv().await;
    assert_eq!((r["ok"].as_bool(), r["error"].as_str()), (Some(false), Some("native_message_too_large")));

    s.host.send(&post("still", "/mcp", "alive")).await;
    assert_eq!(echo_of(&s.host.recv().await)["echo"], "alive");

    // A frame cut short by the end of input: reported, then a clean exit.
    let mut truncated = 50u32.to_le_bytes().to_vec();
    truncated.extend_from_slice(b"{\"type\":");
    s.host.send_raw(&truncated).await;
    s.host.close_stdin();
    let r = s.host.recv().await;
    assert_eq!(r["error"], "invalid_native_message");
    assert!(s.host.next().await.is_none(), "stdout closes");
    assert!(s.host.wait().await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_absurd_length_prefix_is_reported_and_the_host_exits() {
    let mut s = setup().await;
    s.host.send_raw(&u32::MAX.to_le_bytes()).await;
    let r = s.host.recv().await;
    assert_eq!(r["error"], "native_message_too_large");
    assert_eq!(s.host.wait().await.code(), Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_list_refusals_each_have_their_code() {
    let mut s = setup().await;
    let cases = [
        (json!({"type":"request","id":1,"path":"/admin"}), "response", "path_not_allowed"),
        (json!({"type":"request","id":2,"path":"/mcp/../admin"}), "response", "path_not_allowed"),
        (json!({"type":"request","id":3,"path":"/push/events"}), "response", "path_not_allowed"),
        (json!({"type":"request","id":4,"method":"PUT","path":"/mcp"}), "response", "proxy_method_not_allowed"),
        (json!({"type":"request","id":5,"method":"POST","path":"/health"}), "response", "proxy_method_not_allowed"),
        (json!({"type":"request","id":6,"path":"/mcp","headers":{"accept":"a\nb"}}), "response", "invalid_proxy_header"),
        (json!({"type":"request","id":7,"path":"/mcp","base_url":"http://example.com"}), "response", "base_url_not_allowed"),
        (json!({"type":"stream","id":8,"path":"/mcp"}), "stream_error", "stream_path_not_allowed"),
        (json!({"type":"request_batch","id":9,"requests":[]}), "error", "unsupported_message"),
        (json!({"type":"session","id":10}), "error", "legacy_session_requires_compat_host"),
        (json!({"type":"cancel","id":11}), "error", "unknown_request_id"),
    ];
    for (message, kind, code) in &cases {
        s.host.send(message).await;
        let r = s.host.recv().await;
        assert_eq!(r["id"], message["id"], "{message}");
        assert_eq!((r["type"].as_str(), r["ok"].as_bool(), r["error"].as_str()), (Some(*kind), Some(false), Some(*code)), "{message}");
        assert!(r["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
    // None of them reached the runtime.
    assert!(s.runtime.seen().is_empty(), "{:?}", s.runtime.seen());
}

/// A request whose `body` is a JSON array: the host sends it on as its compact text, and
/// `1E2` comes out as `100.0`, so a frame under 1 MiB can carry a body over it. The body is
/// `out_len` bytes once re-serialised.
fn request_with_growing_body(id: &str, out_len: usize) -> String {
    let numbers = 100_000;
    let pad = out_len - 6 * numbers - 4;
    let body = format!(r#"[{}"{}"]"#, "1E2,".repeat(numbers), "x".repeat(pad));
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap().to_string().len(), out_len, "the body grows as planned");
    let message = format!(
        r#"{{"type":"request","id":"{id}","method":"POST","path":"/mcp","headers":{{"content-type":"application/json"}},"body":{body}}}"#
    );
    assert!(message.len() <= MIB, "the frame itself fits");
    message
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_bodies_up_to_one_mebibyte_pass_and_larger_ones_are_refused() {
    let mut s = setup().await;
    s.host.send_raw(&frame(request_with_growing_body("at", MIB).as_bytes())).await;
    let frames = s.host.recv_until(|v| v["type"] == "response").await;
    let (last, bytes) = reassemble(&frames);
    assert_eq!((last["id"].as_str(), last["ok"].as_bool()), (Some("at"), Some(true)), "{last}");
    let echoed: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(echoed["echo"].as_str().map(str::len), Some(MIB));

    s.host.send_raw(&frame(request_with_growing_body("over", MIB + 1).as_bytes())).await;
    let r = s.host.recv().await;
    assert_eq!((r["id"].as_str(), r["ok"].as_bool(), r["error"].as_str()), (Some("over"), Some(false), Some("native_request_too_large")));
    assert_eq!(s.runtime.seen().len(), 1, "the refused body never reached the runtime");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_id_cannot_be_reused() {
    let mut s = setup().await;
    s.host.send(&post("dup", "/mcp?delay_ms=400", "first")).await;
    s.host.send(&post("dup", "/mcp", "second")).await;
    let r = s.host.recv().await;
    assert_eq!((r["id"].as_str(), r["error"].as_str()), (Some("dup"), Some("duplicate_request_id")));
    assert_eq!(echo_of(&s.host.recv().await)["echo"], "first");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_runtime_answers_time_out_at_the_clamped_minimum() {
    let mut s = setup().await;
    let started = std::time::Instant::now();
    s.host.send(&json!({"type":"request","id":"t","path":"/mcp?delay_ms=5000","method":"POST","timeout_ms":10})).await;
    let r = s.host.recv().await;
    let took = started.elapsed();
    assert_eq!(r["error"], "native_request_timeout");
    assert!(took >= std::time::Duration::from_millis(1000), "clamped up to 1 s, took {took:?}");
    assert!(took < std::time::Duration::from_millis(4000), "took {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_flight_calls_are_capped_at_sixty_four() {
    let mut s = setup().await;
    for i in 0..64 {
        s.host.send(&post(&format!("p{i}"), "/mcp?delay_ms=1500", "")).await;
    }
    s.host.send(&post("one-too-many", "/mcp", "")).await;
    let r = s.host.recv().await;
    assert_eq!((r["id"].as_str(), r["error"].as_str()), (Some("one-too-many"), Some("too_many_in_flight")));
    for _ in 0..64 {
        assert_eq!(s.host.recv().await["ok"], true);
    }
    s.host.send(&post("room-again", "/mcp", "")).await;
    assert_eq!(s.host.recv().await["ok"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_allow_listed_headers_reach_the_runtime_and_never_authorization() {
    let mut s = setup().await;
    s.host
        .send(&json!({"type":"request","id":"h","method":"POST","path":"/mcp?x=1","body":"{}","headers":{
            "Authorization":"Bearer secret-token","authorization":"Basic eA==","cookie":"a=b","x-api-key":"k",
            "Content-Type":"application/json","accept":"application/json, text/event-stream",
            "mcp-protocol-version":"2025-06-18","mcp-session-id":"sess-1","x-herdr-client":"ext"}}))
        .await;
    let r = s.host.recv().await;
    assert_eq!(r["ok"], true);
    // Response headers are filtered too.
    assert_eq!(r["headers"], json!({"cache-control":"no-store","content-type":"application/json"}));
    let seen = s.runtime.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path_and_query, "/mcp?x=1");
    let mut names: Vec<&str> = seen[0].headers.iter().map(|(k, _)| k.as_str()).collect();
    names.sort();
    assert_eq!(
        names,
        ["accept", "content-length", "content-type", "host", "mcp-protocol-version", "mcp-session-id", "x-herdr-client"]
    );
    assert!(seen[0].headers.iter().all(|(_, v)| !v.contains("secret") && !v.contains("eA==")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_shot_callers_get_one_answer_and_the_host_exits() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("extension.sock");
    let _runtime = FakeRuntime::start(&socket).await;

    // Marked one-shot, stdin left open (as sendNativeMessage does).
    let mut host = Host::spawn(PINNED_ORIGIN, &socket);
    host.send(&json!({"type":"request","path":"/mcp?delay_ms=100","method":"POST","body":"one","oneshot":true})).await;
    let r = host.recv().await;
    assert_eq!((r["ok"].as_bool(), r.get("id")), (Some(true), None));
    assert_eq!(echo_of(&r)["echo"], "one");
    assert!(host.next().await.is_none());
    assert!(host.wait().await.success());

    // Unmarked, stdin closed right after the message: the answer still comes.
    let mut host = Host::spawn(PINNED_ORIGIN, &socket);
    host.send(&json!({"type":"request","path":"/mcp?delay_ms=100","method":"POST","body":"two"})).await;
    host.close_stdin();
    assert_eq!(echo_of(&host.recv().await)["echo"], "two");
    assert!(host.next().await.is_none());
    assert!(host.wait().await.success());
}

#[test]
fn started_by_hand_in_a_terminal_it_says_so_and_exits_instead_of_waiting() {
    let pty = nix::pty::openpty(None, None).unwrap();
    let mut child = std::process::Command::new(support::host::binary())
        .arg(PINNED_ORIGIN)
        .env_remove("HERDR_EXTENSION_ORIGIN")
        .stdin(std::process::Stdio::from(pty.slave))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The master stays open: without the check the host would wait on the terminal for ever.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the host kept waiting on a terminal");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains("herdr-nmhost status"), "{err}");
    assert!(out.stdout.is_empty(), "no frame for a person: {:?}", out.stdout);
    drop(pty.master);
}

#[test]
fn the_refusal_logged_to_chromes_stderr_carries_no_colour_escapes() {
    // Chrome writes a host's stderr into its own log, never to a terminal.
    let out = std::process::Command::new(support::host::binary())
        .arg("chrome-extension://aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/")
        .env_remove("HERDR_EXTENSION_ORIGIN")
        .env_remove("NO_COLOR")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("refusing the caller"), "{err}");
    assert!(!err.contains('\u{1b}'), "escape codes in a non-terminal log: {err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_origin_is_refused_and_the_host_exits() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("extension.sock");
    let runtime = FakeRuntime::start(&socket).await;
    let mut host = Host::spawn("chrome-extension://aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/", &socket);
    let r = host.recv().await;
    assert_eq!((r["type"].as_str(), r["ok"].as_bool(), r["error"].as_str()), (Some("error"), Some(false), Some("extension_origin_not_allowed")));
    assert_eq!(host.wait().await.code(), Some(1));
    assert!(runtime.seen().is_empty());

    // The development override admits another id, and only that one.
    let other = "chrome-extension://bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb/";
    let mut host = Host::spawn_with(other, &socket, &[("HERDR_EXTENSION_ORIGIN", other)]);
    host.send(&json!({"type":"identity","id":"o"})).await;
    assert_eq!(host.recv().await["extension_origin"], other);
    let mut host = Host::spawn_with(PINNED_ORIGIN, &socket, &[("HERDR_EXTENSION_ORIGIN", other)]);
    assert_eq!(host.recv().await["error"], "extension_origin_not_allowed");

    // A malformed override refuses everyone rather than fall back.
    let mut host = Host::spawn_with(PINNED_ORIGIN, &socket, &[("HERDR_EXTENSION_ORIGIN", "chrome-extension://nope/")]);
    assert_eq!(host.recv().await["error"], "extension_origin_not_allowed");
    assert_eq!(host.wait().await.code(), Some(1));
}
