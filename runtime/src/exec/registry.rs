//! The session registry: spawns commands, keeps their sessions, persists metadata,
//! prunes finished sessions and answers lookups (including sessions of a previous
//! runtime process).

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use tokio::io::AsyncReadExt;
use tokio::sync::broadcast;

use super::output::{STREAM_RING_BYTES, Stream};
use super::session::{Exit, Session};
use super::shell::{self, ShellError};
use super::signal::{self, Ending};
use super::{EXEC_ID_ENV, procfs};
use crate::state::sessions::{self, SessionRow};
use crate::state::{StateDb, StateError, now_ms};

/// Finished sessions are forgotten this long after they end (spec §1.15).
pub const SESSION_RETENTION: Duration = Duration::from_secs(60 * 60);
/// SIGTERM → SIGKILL grace of `herdr_exec_kill` (spec §1.16).
pub const KILL_GRACE: Duration = Duration::from_millis(1500);
/// SIGTERM → SIGKILL grace for orphans found at startup (spec §1.15).
pub const ORPHAN_GRACE: Duration = Duration::from_secs(2);
/// After the shell exits, how long to keep collecting output still in the pipes.
/// Background jobs may hold the pipes open forever, so the wait must be bounded.
const DRAIN_GRACE: Duration = Duration::from_millis(250);
/// Size of one pipe read.
const READ_CHUNK: usize = 64 * 1024;
/// Completion events buffered for slow subscribers (the push bus).
const COMPLETION_BACKLOG: usize = 256;

/// Who reports the end of a started session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitReport {
    /// The end goes out as a completion (push stream, wakes): `herdr_exec_start`.
    Announced,
    /// The caller waits for the result itself (`herdr_exec`); the end is announced
    /// only once it gives up and calls [`Session::hand_over_exit`].
    AwaitedByCaller,
}

/// Tunables, mostly for tests; [`ExecConfig::from_env`] gives the production values.
#[derive(Debug, Clone)]
pub struct ExecConfig {
    pub shell: PathBuf,
    pub path_env: OsString,
    pub ring_bytes: usize,
    pub retention: Duration,
    pub kill_grace: Duration,
    pub orphan_grace: Duration,
}

impl ExecConfig {
    pub fn from_env() -> Result<ExecConfig, ShellError> {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        Ok(ExecConfig {
            shell: shell::shell_from_env()?,
            path_env: shell::enriched_path(std::env::var("PATH").ok().as_deref(), home.as_deref()),
            ring_bytes: STREAM_RING_BYTES,
            retention: SESSION_RETENTION,
            kill_grace: KILL_GRACE,
            orphan_grace: ORPHAN_GRACE,
        })
    }
}

/// Published when a session ends (the push stream turns it into `exec_completed`).
#[derive(Debug, Clone, PartialEq)]
pub struct ExecCompleted {
    pub session_id: String,
    pub root: PathBuf,
    pub exit_code: Option<i32>,
    pub signal: Option<String>,
    /// The workspace the command was started for, when the caller named one.
    pub workspace: Option<String>,
}

/// What a session id refers to.
#[derive(Debug, Clone)]
pub enum Lookup {
    Live(Arc<Session>),
    /// A session of an earlier runtime process; its output is gone.
    Recovered { recovery_state: String, row: Box<SessionRow> },
    /// A session of another herdr-mcp process that shares the state directory.
    OtherRuntime,
    NotFound,
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot start {shell}: {message}")]
    Spawn { shell: String, message: String },
}

/// What `kill` did.
#[derive(Debug, Clone, PartialEq)]
pub enum KillOutcome {
    /// SIGTERM went out; SIGKILL follows after the grace period if needed.
    Signalled,
    /// The session had already ended.
    AlreadyEnded(Exit),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecStats {
    pub count: usize,
    pub running: usize,
}

pub struct ExecRegistry {
    db: Arc<StateDb>,
    config: ExecConfig,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    seq: AtomicU64,
    completions: broadcast::Sender<ExecCompleted>,
}

impl ExecRegistry {
    pub fn new(db: Arc<StateDb>, config: ExecConfig) -> Arc<ExecRegistry> {
        Arc::new(ExecRegistry {
            db,
            config,
            sessions: Mutex::new(HashMap::new()),
            seq: AtomicU64::new(0),
            completions: broadcast::channel(COMPLETION_BACKLOG).0,
        })
    }

    pub fn db(&self) -> &Arc<StateDb> {
        &self.db
    }

    pub fn config(&self) -> &ExecConfig {
        &self.config
    }

    /// Session ends, for the push stream.
    pub fn subscribe(&self) -> broadcast::Receiver<ExecCompleted> {
        self.completions.subscribe()
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Session>>> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `es_<hex runtime pid>-<hex epoch ms>-<hex sequence>`: unique within a process
    /// by the sequence, across restarts by the pid and clock.
    fn next_id(&self) -> String {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
        format!("es_{:x}-{:x}-{:x}", std::process::id(), now_ms(), seq)
    }

    /// Starts `<shell> -lc <command>` in `cwd`, in its own process group, stdin null,
    /// on behalf of `workspace` (which its completion carries); `exit_report` says
    /// who reports the end.
    pub async fn start(
        self: &Arc<Self>,
        root: &Path,
        cwd: &Path,
        command: &str,
        workspace: Option<&str>,
        exit_report: ExitReport,
    ) -> Result<Arc<Session>, StartError> {
        self.prune().await;
        let id = self.next_id();
        let mut cmd = tokio::process::Command::new(&self.config.shell);
        cmd.arg0(format!("herdr-mcp-exec:{id}"))
            .arg("-lc")
            .arg(command)
            .current_dir(cwd)
            .env(EXEC_ID_ENV, &id)
            .env("PATH", &self.config.path_env)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            // The session, not the handle, decides when the command ends.
            .kill_on_drop(false);
        let mut child = cmd.spawn().map_err(|e| StartError::Spawn {
            shell: self.config.shell.display().to_string(),
            message: e.to_string(),
        })?;
        let pid = child.id().map(|p| p as i32).unwrap_or(0);
        let start_ticks = procfs::stat(pid).map(|s| s.start_ticks);
        let started_at_ms = now_ms();
        let mut session = Session::new(
            id.clone(),
            pid,
            start_ticks,
            root.to_path_buf(),
            cwd.to_path_buf(),
            command.to_string(),
            crate::runtime_info::rfc3339(SystemTime::now()),
            started_at_ms,
            self.config.ring_bytes,
        );
        session.workspace = workspace.map(str::to_string);
        session.set_announce_exit(exit_report == ExitReport::Announced);
        let session = Arc::new(session);
        self.sessions().insert(id.clone(), Arc::clone(&session));

        let row = SessionRow {
            session_id: id.clone(),
            boot_id: self.db.boot_id().to_string(),
            pid: pid as i64,
            pgid: pid as i64,
            proc_start_ticks: start_ticks.map(|t| t as i64),
            root: root.display().to_string(),
            cwd: cwd.display().to_string(),
            command: command.to_string(),
            started_at_ms,
            state: "running".into(),
            exit_code: None,
            signal: None,
            ended_at_ms: None,
            recovery_state: None,
        };
        if let Err(e) = self.db.run(move |c| sessions::insert(c, &row)).await {
            // The command is already running; refusing now would hide that. It keeps
            // working, it just cannot be recovered after a crash.
            tracing::warn!(session = %id, "exec session not persisted: {e}");
        }

        let mut readers = Vec::with_capacity(2);
        if let Some(pipe) = child.stdout.take() {
            let session = Arc::clone(&session);
            readers.push(tokio::spawn(async move { pump(pipe, Stream::Stdout, &session).await }));
        }
        if let Some(pipe) = child.stderr.take() {
            let session = Arc::clone(&session);
            readers.push(tokio::spawn(async move { pump(pipe, Stream::Stderr, &session).await }));
        }
        let registry = Arc::clone(self);
        let waiting = Arc::clone(&session);
        tokio::spawn(async move {
            let status = child.wait().await;
            let _ = tokio::time::timeout(DRAIN_GRACE, futures::future::join_all(readers)).await;
            registry.finish(&waiting, status).await;
        });
        Ok(session)
    }

    async fn finish(&self, session: &Arc<Session>, status: std::io::Result<std::process::ExitStatus>) {
        use std::os::unix::process::ExitStatusExt;
        let (exit_code, signal) = match status {
            Ok(s) => (s.code(), s.signal().map(signal::signal_name)),
            Err(e) => {
                tracing::warn!(session = %session.id, "cannot read exit status: {e}");
                (None, None)
            }
        };
        let exit = Exit {
            exit_code,
            signal: signal.clone(),
            ended_at_ms: now_ms(),
            elapsed: session.started.elapsed(),
            ended: Instant::now(),
        };
        let (id, ended) = (session.id.clone(), exit.ended_at_ms);
        let sig = signal.clone();
        if let Err(e) = self.db.run(move |c| sessions::mark_completed(c, &id, exit_code, sig.as_deref(), ended)).await {
            tracing::warn!(session = %session.id, "exec session end not persisted: {e}");
        }
        session.set_exit(exit);
        // Read after set_exit: pairs with hand_over_exit (store, then check for an exit), so
        // an end is either announced here or reported by the caller that gave up waiting.
        if !session.announces_exit() {
            return;
        }
        // No subscriber is fine: nobody is listening for pushes.
        let _ = self.completions.send(ExecCompleted {
            session_id: session.id.clone(),
            root: session.root.clone(),
            exit_code,
            signal,
            workspace: session.workspace.clone(),
        });
    }

    /// Finds a session of this process, or the record of one from an earlier process.
    pub async fn lookup(&self, session_id: &str) -> Result<Lookup, StateError> {
        self.prune().await;
        if let Some(s) = self.sessions().get(session_id) {
            return Ok(Lookup::Live(Arc::clone(s)));
        }
        let id = session_id.to_string();
        let Some(row) = self.db.run(move |c| sessions::get(c, &id)).await? else {
            return Ok(Lookup::NotFound);
        };
        let retention_ms = self.config.retention.as_millis() as i64;
        let expired = row.ended_at_ms.is_some_and(|end| end + retention_ms <= now_ms());
        if row.boot_id == self.db.boot_id() || expired {
            // Ours but pruned from memory, or past its retention: it is gone.
            return Ok(Lookup::NotFound);
        }
        if row.state == "running" && row.recovery_state.is_none() {
            // Not yet recovered: either another runtime sharing this state dir still
            // runs it (not ours to read), or recovery has not run yet.
            let boot = row.boot_id.clone();
            if self.db.run(move |c| crate::state::boots::alive(c).map(|a| a.contains(&boot))).await? {
                return Ok(Lookup::OtherRuntime);
            }
        }
        let recovery_state = match (row.state.as_str(), row.recovery_state.as_deref()) {
            (_, Some(state)) => state.to_string(),
            ("completed", None) => "closed_before_restart".to_string(),
            _ => "detached_unverified".to_string(),
        };
        Ok(Lookup::Recovered { recovery_state, row: Box::new(row) })
    }

    /// Ends a session's process group: SIGTERM now, SIGKILL after the grace period
    /// (in the background, so the caller is not held for 1.5 s).
    pub fn kill(self: &Arc<Self>, session: &Arc<Session>) -> KillOutcome {
        if let Some(exit) = session.exit() {
            return KillOutcome::AlreadyEnded(exit);
        }
        if session.request_kill() {
            let target = session.signal_target();
            let grace = self.config.kill_grace;
            let id = session.id.clone();
            tokio::spawn(async move {
                let ending = signal::terminate(&target, grace).await;
                tracing::debug!(session = %id, ?ending, "exec session kill finished");
            });
        }
        KillOutcome::Signalled
    }

    /// Every session this process still holds (running, or ended within the
    /// retention period), in no particular order.
    pub fn list(&self) -> Vec<Arc<Session>> {
        self.sessions().values().cloned().collect()
    }

    pub fn stats(&self) -> ExecStats {
        let sessions = self.sessions();
        ExecStats { count: sessions.len(), running: sessions.values().filter(|s| s.running()).count() }
    }

    /// Forgets sessions that ended more than the retention period ago, in memory and
    /// on disk.
    pub async fn prune(&self) {
        let retention = self.config.retention;
        let expired: Vec<String> = {
            let mut sessions = self.sessions();
            let expired: Vec<String> = sessions
                .values()
                .filter(|s| s.exit().is_some_and(|e| e.ended.elapsed() >= retention))
                .map(|s| s.id.clone())
                .collect();
            for id in &expired {
                sessions.remove(id);
            }
            expired
        };
        if expired.is_empty() {
            return;
        }
        let result = self
            .db
            .run(move |c| {
                for id in &expired {
                    sessions::delete(c, id)?;
                }
                Ok(())
            })
            .await;
        if let Err(e) = result {
            tracing::warn!("pruned exec sessions not removed from the state database: {e}");
        }
    }

    /// Sessions a dead runtime process left running: their process groups are
    /// terminated when still provably ours, and each row is marked with what
    /// happened. Returns `(session_id, recovery_state)` per row.
    /// `alive` lists boots whose runtime process still runs; their sessions are
    /// theirs, not orphans.
    pub async fn recover_orphans(&self, alive: &HashSet<String>) -> Result<Vec<(String, String)>, StateError> {
        let boot = self.db.boot_id().to_string();
        let rows = self.db.run(move |c| sessions::running_from_other_boots(c, &boot)).await?;
        let rows: Vec<SessionRow> = rows.into_iter().filter(|r| !alive.contains(&r.boot_id)).collect();
        let grace = self.config.orphan_grace;
        let outcomes = futures::future::join_all(rows.into_iter().map(|row| async move {
            let target = signal::Target {
                pgid: row.pgid as i32,
                session_id: row.session_id.clone(),
                leader: row.proc_start_ticks.map(|t| (row.pid as i32, t as u64)),
            };
            let state = match signal::terminate(&target, grace).await {
                Ending::AlreadyGone => "detached_unverified",
                Ending::Terminated | Ending::Killed => "reaped_on_restart",
            };
            (row.session_id, state.to_string())
        }))
        .await;
        let marks = outcomes.clone();
        let retention_ms = self.config.retention.as_millis() as i64;
        self.db
            .run(move |c| {
                let now = now_ms();
                for (id, state) in &marks {
                    sessions::mark_recovered(c, id, state, now)?;
                }
                sessions::delete_ended_before(c, now - retention_ms)?;
                Ok(())
            })
            .await?;
        Ok(outcomes)
    }
}

/// Copies one pipe into the session until EOF.
async fn pump(mut pipe: impl tokio::io::AsyncRead + Unpin, stream: Stream, session: &Session) {
    let mut buf = vec![0u8; READ_CHUNK];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) => return,
            Ok(n) => session.push_output(stream, &buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                tracing::debug!(session = %session.id, "reading {}: {e}", stream.as_str());
                return;
            }
        }
    }
}
