//! The Herdr simulator (tests/herdr_sim) as a process, for the browser e2e tests:
//!
//!   herdr_sim_server --serve <socket>
//!
//! serves the simulated Herdr API on `<socket>`, prints `{"ready":true,...}` once it
//! listens (with Herdr's timings; `HERDR_SIM_POLL_MS` and `HERDR_SIM_DETECTION_MS`
//! shorten the subscription poll and the `unknown` phase of a detected agent), then reads one JSON command per stdin line (see herdr_sim_server/commands.rs)
//! and prints one JSON ack line per command. It stops on `{"cmd":"stop"}` or when stdin
//! closes (the test that started it is gone).
//!
//! Run without `--serve` (as `cargo test` does) it checks itself: it starts a copy of
//! itself in serve mode and drives it as a test and as a Herdr client would.

mod herdr_sim;

#[path = "herdr_sim_server/commands.rs"]
mod commands;
#[path = "herdr_sim_server/self_check.rs"]
mod self_check;

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use tokio::runtime::Runtime;

use commands::{Command, Registry};
use herdr_sim::HerdrSim;

/// Longest command line accepted (pane output included), newline excluded.
pub const MAX_COMMAND_BYTES: usize = 1024 * 1024;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build();
    let runtime = match runtime {
        Ok(r) => r,
        Err(e) => {
            eprintln!("herdr_sim_server: cannot start tokio: {e}");
            std::process::exit(1);
        }
    };
    let result = match args.iter().position(|a| a == "--serve") {
        Some(i) => match args.get(i + 1) {
            Some(socket) => serve(&runtime, PathBuf::from(socket)),
            None => Err("--serve needs a socket path".to_string()),
        },
        // Anything else (libtest flags from `cargo test -- ...`) means: check yourself.
        None => runtime.block_on(self_check::run()),
    };
    if let Err(e) = result {
        eprintln!("herdr_sim_server: {e}");
        std::process::exit(1);
    }
}

fn print_line(value: &Value) -> Result<(), String> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{value}").and_then(|()| out.flush()).map_err(|e| format!("cannot write to stdout: {e}"))
}

/// One stdin line: its bytes, or `TooLong` (the rest of that line was skipped).
pub enum Line {
    Text(Vec<u8>),
    TooLong,
}

/// Reads one `\n`-terminated line of at most `max` bytes; `None` at end of input.
pub fn read_line_bounded(reader: &mut impl BufRead, max: usize) -> std::io::Result<Option<Line>> {
    let mut line = Vec::new();
    let mut too_long = false;
    loop {
        let chunk = reader.fill_buf()?;
        if chunk.is_empty() {
            // A last line without a newline still counts; nothing at all is the end.
            return Ok(match (line.is_empty() && !too_long, too_long) {
                (true, _) => None,
                (false, true) => Some(Line::TooLong),
                (false, false) => Some(Line::Text(line)),
            });
        }
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (chunk.len(), false),
        };
        if !too_long {
            if line.len() + take > max {
                too_long = true;
                line.clear();
            } else {
                line.extend_from_slice(&chunk[..take]);
            }
        }
        reader.consume(if done { take + 1 } else { take });
        if done {
            return Ok(Some(if too_long { Line::TooLong } else { Line::Text(line) }));
        }
    }
}

/// The socket is served by the runtime's worker threads; commands are read here, on
/// the main thread, with blocking stdin (the simulator's setters need no async context).
fn serve(runtime: &Runtime, socket: PathBuf) -> Result<(), String> {
    let _context = runtime.enter();
    let sim = runtime
        .block_on(HerdrSim::start_at(&socket))
        .map_err(|e| format!("cannot listen on {}: {e}", socket.display()))?;
    let ms = |var: &str| std::env::var(var).ok().and_then(|v| v.parse::<u64>().ok()).map(std::time::Duration::from_millis);
    if let Some(poll) = ms("HERDR_SIM_POLL_MS") {
        sim.set_poll_interval(poll);
    }
    if let Some(delay) = ms("HERDR_SIM_DETECTION_MS") {
        sim.set_detection_delay(delay);
    }
    print_line(&json!({"ready": true, "socket": socket, "pid": std::process::id()}))?;
    let result = command_loop(&sim);
    drop(sim);
    remove_socket(&socket);
    result
}

fn command_loop(sim: &HerdrSim) -> Result<(), String> {
    let mut stdin = std::io::stdin().lock();
    let mut registry = Registry::default();
    loop {
        let line = read_line_bounded(&mut stdin, MAX_COMMAND_BYTES).map_err(|e| format!("cannot read stdin: {e}"))?;
        let ack = match line {
            None => return Ok(()),
            Some(Line::TooLong) => json!({"ok": false, "error": format!("command longer than {MAX_COMMAND_BYTES} bytes")}),
            Some(Line::Text(bytes)) if bytes.iter().all(u8::is_ascii_whitespace) => continue,
            Some(Line::Text(bytes)) => match Command::parse(&bytes) {
                Err(e) => json!({"ok": false, "error": e}),
                Ok(command) => {
                    let stop = matches!(command, Command::Stop);
                    let ack = match registry.apply(sim, &command) {
                        Ok(mut extra) => {
                            extra["ok"] = json!(true);
                            extra["cmd"] = json!(command.name());
                            extra
                        }
                        Err(e) => json!({"ok": false, "cmd": command.name(), "error": e}),
                    };
                    if stop {
                        print_line(&ack)?;
                        return Ok(());
                    }
                    ack
                }
            },
        };
        print_line(&ack)?;
    }
}

fn remove_socket(socket: &Path) {
    if let Err(e) = std::fs::remove_file(socket)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        eprintln!("herdr_sim_server: cannot remove {}: {e}", socket.display());
    }
}
