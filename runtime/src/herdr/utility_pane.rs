//! The `utility_pane` backend of `herdr_exec` (spec §1.17, §4): a command is typed
//! into a Herdr pane labelled `herdr-mcp:utility` in the target workspace, so it
//! runs with the terminal's permissions rather than the runtime's.
//!
//! The pane's shell writes the command's output and then its exit status to files in
//! a private directory of this runtime. A native exec session *watches* those files,
//! so the command gets a normal session id: herdr_exec_read follows it, the push
//! stream reports its end, and the idempotency ledger records it like any other.
//!
//! Preparing the pane: reuse the labelled pane (`pane.list`), else split one off
//! (`pane.split`, `pane.rename`) and wait for its prompt (`pane.wait_for_output`).
//! Before typing, the shell must own the terminal's foreground (`pane.process_info`):
//! text typed while another program runs would go to that program.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Value, json};

use super::client::HerdrClient;
use super::error::HerdrError;
use super::topology::str_of;
use crate::exec::steps::quote;

/// Label of the pane this runtime runs commands in.
pub const LABEL: &str = "herdr-mcp:utility";
/// A shell prompt at the end of a line (`%`, `#`, `$`, `>` or `❯`).
pub const PROMPT_REGEX: &str = "[%#$>❯] ?$";
/// How long a new pane may take to show its prompt.
pub const PROMPT_TIMEOUT_MS: u64 = 5000;
/// Pauses before retrying a transient control-plane failure while preparing the pane.
pub const RETRY_BACKOFF_MS: [u64; 3] = [100, 300, 500];
/// How often the watcher looks at the output and status files.
pub const WATCH_INTERVAL: &str = "0.05";

/// Why the pane could not take a command. Nothing was typed in either case.
#[derive(Debug, Clone)]
pub enum PaneError {
    /// Herdr could not provide a pane (`utility_pane_unavailable`).
    Unavailable(HerdrError),
    /// The pane exists but is busy with another program (`utility_pane_not_ready`).
    NotReady { pane_id: String, detail: String },
}

/// A Herdr error that upstream Herdr raises for a passing internal hiccup (an
/// unhandled task-group failure), worth a retry.
pub fn is_transient(err: &HerdrError) -> bool {
    let m = err.message.to_lowercase();
    m.contains("exceptiongroup")
        || m.contains("unhandled errors in a taskgroup")
        || (m.contains("taskgroup") && (m.contains("unhandled") || m.contains("sub-exception")))
}

/// One call, retried with [`RETRY_BACKOFF_MS`] while the failure is transient.
async fn call_retrying(client: &HerdrClient, method: &str, params: Value) -> Result<Value, HerdrError> {
    let mut attempt = 0;
    loop {
        match client.call(method, params.clone()).await {
            Err(e) if is_transient(&e) && attempt < RETRY_BACKOFF_MS.len() => {
                tokio::time::sleep(Duration::from_millis(RETRY_BACKOFF_MS[attempt])).await;
                attempt += 1;
            }
            other => return other,
        }
    }
}

/// The id of the workspace's utility pane, created (and shown its prompt) if needed.
pub async fn prepare(client: &HerdrClient, workspace_id: &str, cwd: &Path) -> Result<String, PaneError> {
    let listed = call_retrying(client, "pane.list", json!({"workspace_id": workspace_id})).await.map_err(PaneError::Unavailable)?;
    let panes = listed.get("panes").and_then(Value::as_array).cloned().unwrap_or_default();
    if let Some(id) = panes.iter().find(|p| str_of(p, "label") == Some(LABEL)).and_then(|p| str_of(p, "pane_id")) {
        return Ok(id.to_string());
    }
    let mut split = json!({"direction": "right", "cwd": cwd.display().to_string(), "focus": false});
    match panes.first().and_then(|p| str_of(p, "pane_id")) {
        Some(target) => split["target_pane_id"] = json!(target),
        None => split["workspace_id"] = json!(workspace_id),
    }
    let created = call_retrying(client, "pane.split", split).await.map_err(PaneError::Unavailable)?;
    let Some(pane_id) = created.get("pane").and_then(|p| str_of(p, "pane_id")).map(str::to_string) else {
        return Err(PaneError::Unavailable(HerdrError::local("parse_error", "pane.split answered without a pane id")));
    };
    call_retrying(client, "pane.rename", json!({"pane_id": pane_id, "label": LABEL})).await.map_err(PaneError::Unavailable)?;
    let wait = json!({
        "pane_id": pane_id,
        "source": "recent_unwrapped",
        "match": {"type": "regex", "value": PROMPT_REGEX},
        "timeout_ms": PROMPT_TIMEOUT_MS,
    });
    let budget = Duration::from_millis(PROMPT_TIMEOUT_MS) + client.timeouts().ping;
    match client.call_with_timeout("pane.wait_for_output", wait, budget).await {
        Ok(_) => Ok(pane_id),
        Err(e) if e.code == "timeout" => {
            Err(PaneError::NotReady { pane_id, detail: "the new pane showed no shell prompt in time".into() })
        }
        Err(e) => Err(PaneError::Unavailable(e)),
    }
}

/// The pane's shell must lead the foreground process group.
pub async fn check_foreground(client: &HerdrClient, pane_id: &str) -> Result<(), PaneError> {
    let info = call_retrying(client, "pane.process_info", json!({"pane_id": pane_id})).await.map_err(PaneError::Unavailable)?;
    let info = info.get("process_info").unwrap_or(&info);
    let shell = info.get("shell_pid").and_then(Value::as_i64);
    let foreground = info.get("foreground_process_group_id").and_then(Value::as_i64);
    if shell.is_some() && shell == foreground {
        return Ok(());
    }
    let running: Vec<&str> = info
        .get("foreground_processes")
        .and_then(Value::as_array)
        .map(|ps| ps.iter().filter_map(|p| str_of(p, "name")).collect())
        .unwrap_or_default();
    Err(PaneError::NotReady {
        pane_id: pane_id.to_string(),
        detail: format!("another program holds the pane's foreground ({})", if running.is_empty() { "unknown".into() } else { running.join(", ") }),
    })
}

/// The files one pane command writes: its output, then its exit status.
#[derive(Debug, Clone)]
pub struct Handoff {
    pub output: PathBuf,
    pub status: PathBuf,
}

impl Handoff {
    /// Fresh file names for one command in `dir` (a private directory of this runtime).
    pub fn new(dir: &Path, op: &str) -> Handoff {
        Handoff { output: dir.join(format!("{op}.out")), status: dir.join(format!("{op}.status")) }
    }

    /// The line typed into the pane. It runs under `/bin/sh` whatever the pane's
    /// interactive shell is, starts with a space (kept out of shell history where
    /// that is configured), and publishes the status atomically after the output is
    /// complete. Ctrl-C in the pane ends the command but not this wrapper (a no-op
    /// handler, which unlike an ignored signal is not inherited), so an interrupted
    /// command still reports its status.
    pub fn pane_line(&self, shell: &Path, root: &Path, command: &str) -> String {
        let status_tmp = format!("{}.tmp", self.status.display());
        let script = format!(
            "trap : INT; cd {root} && {shell} -lc {command} > {out} 2>&1; echo $? > {tmp} && mv {tmp} {status}",
            root = quote(&root.display().to_string()),
            shell = quote(&shell.display().to_string()),
            command = quote(command),
            out = quote(&self.output.display().to_string()),
            tmp = quote(&status_tmp),
            status = quote(&self.status.display().to_string()),
        );
        format!(" /bin/sh -c {}\n", quote(&script))
    }

    /// The watcher run as a native session: it copies new output as it appears and,
    /// once the status file exists, copies the rest and exits with that status. The
    /// status is checked before the last copy, so no output written before it is lost.
    /// It usually starts before the pane's shell has created the output file, so the
    /// size probe silences stderr *before* its input redirection can fail (the shell
    /// applies redirections left to right and would report the missing file).
    pub fn watcher(&self) -> String {
        format!(
            "out={out}; st={status}; sent=0; \
             while :; do \
               done=0; [ -f \"$st\" ] && done=1; \
               size=$(wc -c 2>/dev/null < \"$out\" || echo 0); size=$((size+0)); \
               if [ \"$size\" -gt \"$sent\" ]; then tail -c +$((sent+1)) \"$out\" | head -c $((size-sent)); sent=$size; fi; \
               if [ $done = 1 ]; then code=$(cat \"$st\"); rm -f \"$out\" \"$st\"; exit \"$code\"; fi; \
               sleep {interval}; \
             done",
            out = quote(&self.output.display().to_string()),
            status = quote(&self.status.display().to_string()),
            interval = WATCH_INTERVAL,
        )
    }
}

/// The private directory for handoff files: `<tmp>/herdr-mcp-<uid>/utility`, 0700.
pub fn handoff_dir() -> std::io::Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let uid = nix::unistd::getuid().as_raw();
    let dir = std::env::temp_dir().join(format!("herdr-mcp-{uid}")).join("utility");
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir)?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
    Ok(dir)
}

/// Which pane each utility-pane session's command was typed into, so that killing
/// the session also interrupts the command there.
#[derive(Default)]
pub struct PaneSessions {
    panes: Mutex<HashMap<String, String>>,
}

impl PaneSessions {
    pub fn record(&self, session_id: &str, pane_id: &str) {
        self.panes.lock().unwrap_or_else(|e| e.into_inner()).insert(session_id.to_string(), pane_id.to_string());
    }

    pub fn pane_of(&self, session_id: &str) -> Option<String> {
        self.panes.lock().unwrap_or_else(|e| e.into_inner()).get(session_id).cloned()
    }
}

/// Interrupts whatever runs in the pane (Ctrl-C), best effort.
pub async fn interrupt(client: &HerdrClient, pane_id: &str) -> Result<(), HerdrError> {
    client.call("pane.send_keys", json!({"pane_id": pane_id, "keys": ["ctrl+c"]})).await.map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transient_control_plane_messages_are_recognised() {
        let e = |m: &str| HerdrError::daemon("internal_error", m);
        assert!(is_transient(&e("ExceptionGroup: boom")));
        assert!(is_transient(&e("unhandled errors in a TaskGroup (1 sub-exception)")));
        assert!(is_transient(&e("TaskGroup: unhandled")));
        assert!(!is_transient(&e("TaskGroup finished")));
        assert!(!is_transient(&e("pane w1:p9 not found")));
    }

    #[tokio::test]
    async fn the_pane_line_and_the_watcher_hand_over_output_and_status() {
        let dir = tempfile::tempdir().unwrap();
        let h = Handoff::new(dir.path(), "op1");
        let line = h.pane_line(Path::new("/bin/sh"), dir.path(), "printf 'a b'; echo \"it's\" >&2; exit 7");
        assert!(line.starts_with(' ') && line.ends_with('\n'));
        // What the pane's shell would do with the line, then what the watcher reports.
        let typed = std::process::Command::new("/bin/sh").arg("-c").arg(line.trim()).status().unwrap();
        assert!(typed.success());
        let watched = std::process::Command::new("/bin/sh").arg("-c").arg(h.watcher()).output().unwrap();
        assert_eq!(watched.status.code(), Some(7));
        assert_eq!(String::from_utf8_lossy(&watched.stdout), "a bit's\n");
        assert!(!h.output.exists() && !h.status.exists(), "the watcher cleans up");
    }

    #[test]
    fn the_watcher_reads_a_missing_output_file_as_empty_without_a_complaint() {
        // The watcher usually starts before the pane's shell creates the output file.
        // With the status already there, its first look is also its last, so this
        // checks that probe deterministically.
        let dir = tempfile::tempdir().unwrap();
        let h = Handoff::new(dir.path(), "op3");
        std::fs::write(&h.status, "3\n").unwrap();
        let watched = std::process::Command::new("/bin/sh").arg("-c").arg(h.watcher()).output().unwrap();
        assert_eq!(watched.status.code(), Some(3));
        assert_eq!(String::from_utf8_lossy(&watched.stdout), "");
        assert_eq!(String::from_utf8_lossy(&watched.stderr), "", "no complaint about the file not there yet");
    }

    #[tokio::test]
    async fn ctrl_c_in_the_pane_ends_the_command_and_still_reports_its_status() {
        use std::os::unix::process::CommandExt;
        let dir = tempfile::tempdir().unwrap();
        let h = Handoff::new(dir.path(), "op2");
        let line = h.pane_line(Path::new("/bin/sh"), dir.path(), "echo before; sleep 30; echo after");
        // The terminal's foreground job: its own process group, as the pane's shell
        // makes it, with Ctrl-C at its default action whatever this test process
        // inherited (a shell starts background jobs with SIGINT ignored, and an
        // ignored signal can be neither trapped nor reset by `sh`).
        let mut job = std::process::Command::new("/bin/sh");
        job.arg("-c").arg(line.trim()).process_group(0);
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            job.pre_exec(|| {
                nix::sys::signal::signal(nix::sys::signal::Signal::SIGINT, nix::sys::signal::SigHandler::SigDfl)
                    .map(|_| ())
                    .map_err(std::io::Error::from)
            });
        }
        let mut job = job.spawn().unwrap();
        let pgid = nix::unistd::Pid::from_raw(job.id() as i32);
        let started = std::time::Instant::now();
        // Signal only once `sleep` itself runs: a Ctrl-C that lands between the
        // shell's fork and the child's exec reaches a copy of the shell's handler and
        // is lost with it, so `sleep` would run its full 30 s.
        let sleeping = || {
            crate::exec::procfs::group_members(pgid.as_raw()).iter().any(|m| crate::exec::procfs::name(m.pid).as_deref() == Some("sleep"))
        };
        while !sleeping() {
            assert!(started.elapsed() < Duration::from_secs(10), "the command never reached `sleep`");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGINT).unwrap();
        // The `sh -c` standing in for the pane's interactive shell may die of the
        // signal (a real one does not); the wrapper it started must not.
        let _ = job.wait();
        while !h.status.exists() {
            assert!(started.elapsed() < Duration::from_secs(10), "no status after the interrupt");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let code: i32 = std::fs::read_to_string(&h.status).unwrap().trim().parse().unwrap();
        assert_ne!(code, 0, "an interrupted command reports failure");
        assert_eq!(std::fs::read_to_string(&h.output).unwrap(), "before\n");
    }
}
