//! Stopping `herdr-mcp serve` while the extension's push stream (/push/events) is open:
//! the stream ends at once and the process exits well inside the 5 s grace period it
//! used to wait out ("connections still open after 5s").

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_herdr-mcp");

#[test]
fn sigterm_ends_open_push_streams_at_once() {
    let home = tempfile::Builder::new().prefix("ps").tempdir_in("/tmp").unwrap();
    let root = home.path().join("project");
    std::fs::create_dir_all(&root).unwrap();
    assert!(Command::new("git").args(["init", "-q"]).current_dir(&root).status().unwrap().success());
    let socket = home.path().join("rt.sock");
    let log = home.path().join("runtime.log");
    let mut child = Command::new(BIN)
        .args(["serve", "--root"])
        .arg(&root)
        .arg("--socket")
        .arg(&socket)
        .arg("--log-file")
        .arg(&log)
        .env("HOME", home.path())
        .env("HERDR_MCP_STATE_DIR", home.path().join("state"))
        .env("HERDR_SOCKET_PATH", home.path().join("no-herdr.sock"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();

    let deadline = Instant::now() + Duration::from_secs(30);
    let stream = loop {
        if let Ok(s) = UnixStream::connect(&socket) {
            break s;
        }
        assert!(Instant::now() < deadline, "the runtime did not listen within 30 s");
        std::thread::sleep(Duration::from_millis(20));
    };
    (&stream).write_all(b"GET /push/events HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\n\r\n").unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut reader = BufReader::new(stream);
    let mut seen = String::new();
    while !seen.contains("event: hello") {
        let mut line = String::new();
        assert!(reader.read_line(&mut line).unwrap() > 0, "stream ended before hello: {seen}");
        seen.push_str(&line);
    }
    assert!(seen.starts_with("HTTP/1.1 200"), "{seen}");

    let stop = Instant::now();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGTERM).unwrap();
    // The open stream ends (the response completes, the connection closes).
    let mut rest = Vec::new();
    reader.read_to_end(&mut rest).expect("the push stream ends instead of timing out");
    let ended = stop.elapsed();
    let status = child.wait().unwrap();
    let exited = stop.elapsed();
    assert!(status.success(), "{status:?}");
    assert!(ended < Duration::from_secs(2), "push stream ended {ended:?} after SIGTERM");
    assert!(exited < Duration::from_secs(2), "runtime exited {exited:?} after SIGTERM");
    let log = std::fs::read_to_string(&log).unwrap();
    assert!(!log.contains("connections still open"), "{log}");
    assert!(log.contains("herdr-mcp stopped"), "{log}");
    assert!(!Path::new(&socket).exists(), "socket removed");
}
