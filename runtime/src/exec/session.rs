//! One running or finished command: its identity, captured output and exit.

use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::output::{Output, Stream};
use super::ring::RingRead;
use super::signal::Target;

/// How a session ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Exit {
    /// None when a signal ended the shell (or the status could not be read).
    pub exit_code: Option<i32>,
    pub signal: Option<String>,
    pub ended_at_ms: i64,
    pub elapsed: Duration,
    pub ended: Instant,
}

#[derive(Debug)]
pub struct Session {
    pub id: String,
    pub pid: i32,
    /// Equal to `pid`: every session leads its own process group.
    pub pgid: i32,
    pub start_ticks: Option<u64>,
    pub root: PathBuf,
    pub cwd: PathBuf,
    pub command: String,
    pub started_at: String,
    pub started_at_ms: i64,
    pub started: Instant,
    /// The workspace named by the call that started it (herdr_exec), if any.
    pub workspace: Option<String>,
    output: Mutex<Output>,
    exit: watch::Sender<Option<Exit>>,
    kill_requested: AtomicBool,
    /// Whether the end of this session is announced on the push stream. A synchronous
    /// `herdr_exec` whose caller gets the result in its reply stays quiet, so a bound
    /// chat is not woken by a command it already saw finish; it is announced once the
    /// call answers `exec_timeout` and the command goes on without a waiting caller.
    announce_exit: AtomicBool,
}

/// A read of one stream plus the totals a reply reports.
#[derive(Debug)]
pub struct SessionRead {
    pub read: RingRead,
    pub stream_total: u64,
    pub bytes_total: u64,
}

impl Session {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        id: String,
        pid: i32,
        start_ticks: Option<u64>,
        root: PathBuf,
        cwd: PathBuf,
        command: String,
        started_at: String,
        started_at_ms: i64,
        ring_bytes: usize,
    ) -> Self {
        Session {
            id,
            pid,
            pgid: pid,
            start_ticks,
            root,
            cwd,
            command,
            started_at,
            started_at_ms,
            started: Instant::now(),
            workspace: None,
            output: Mutex::new(Output::new(ring_bytes)),
            exit: watch::channel(None).0,
            kill_requested: AtomicBool::new(false),
            announce_exit: AtomicBool::new(true),
        }
    }

    fn output(&self) -> std::sync::MutexGuard<'_, Output> {
        // Ring pushes cannot be left half-done by a panic elsewhere; keep going.
        self.output.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn push_output(&self, stream: Stream, data: &[u8]) {
        self.output().push(stream, data);
    }

    pub fn read(&self, stream: Stream, offset: u64, limit: usize) -> SessionRead {
        let out = self.output();
        SessionRead {
            read: out.read(stream, offset, limit),
            stream_total: out.ring(stream).total(),
            bytes_total: out.bytes_total(),
        }
    }

    pub fn with_output<T>(&self, f: impl FnOnce(&Output) -> T) -> T {
        f(&self.output())
    }

    pub fn exit(&self) -> Option<Exit> {
        self.exit.borrow().clone()
    }

    pub fn running(&self) -> bool {
        self.exit.borrow().is_none()
    }

    pub(super) fn set_announce_exit(&self, announce: bool) {
        self.announce_exit.store(announce, Ordering::SeqCst);
    }

    pub(super) fn announces_exit(&self) -> bool {
        self.announce_exit.load(Ordering::SeqCst)
    }

    /// Called when a waiting caller gives up (`exec_timeout`): from now on the end is
    /// announced. Returns true if the session ended meanwhile — then the caller should
    /// report the result itself, since the end may already have gone unannounced.
    pub fn hand_over_exit(&self) -> bool {
        self.announce_exit.store(true, Ordering::SeqCst);
        !self.running()
    }

    pub(super) fn set_exit(&self, exit: Exit) {
        self.exit.send_replace(Some(exit));
    }

    /// Waits up to `within` for the session to end.
    pub async fn wait(&self, within: Duration) -> Option<Exit> {
        let mut rx = self.exit.subscribe();
        let waited = tokio::time::timeout(within, rx.wait_for(Option::is_some)).await;
        match waited {
            Ok(Ok(exit)) => exit.clone(),
            _ => self.exit(),
        }
    }

    /// Milliseconds from start to exit, or to now while running.
    pub fn elapsed_ms(&self) -> u64 {
        match self.exit() {
            Some(exit) => exit.elapsed.as_millis() as u64,
            None => self.started.elapsed().as_millis() as u64,
        }
    }

    /// Marks a kill as requested; true for the first caller only.
    pub(super) fn request_kill(&self) -> bool {
        !self.kill_requested.swap(true, Ordering::SeqCst)
    }

    pub fn signal_target(&self) -> Target {
        Target { pgid: self.pgid, session_id: self.id.clone(), leader: self.start_ticks.map(|t| (self.pid, t)) }
    }
}
