//! Panes whose typed text really runs, as in a terminal: what the utility-pane
//! backend of `herdr_exec` needs from Herdr (`pane.split`, `pane.rename`,
//! `pane.wait_for_output`, `pane.process_info`, `pane.send_text`, `pane.send_keys`).
//!
//! A line sent with a final newline to a shell pane is run by `/bin/sh -c` in the
//! pane's cwd, in its own process group (the terminal's foreground job). While it
//! runs, `pane.process_info` shows it holding the foreground, and `ctrl+c` interrupts
//! that group, as a terminal would.

use std::collections::{HashMap, HashSet};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

/// Pid the simulator reports for a shell pane's interactive shell.
const SHELL_PID_BASE: i64 = 40_000;

#[derive(Default)]
pub struct ShellPanes {
    /// Panes whose text is executed (every pane made by `pane.split`, and any marked so).
    pub shells: HashSet<String>,
    /// Panes scripted to have another program in the foreground.
    pub busy: HashSet<String>,
    /// New panes never show a prompt (`pane.wait_for_output` times out).
    pub no_prompt: bool,
    /// Keys sent per pane, in order.
    pub keys: Vec<(String, Vec<String>)>,
    /// The running foreground job of a pane.
    jobs: HashMap<String, Child>,
}

impl ShellPanes {
    /// Whether something other than the shell holds the pane's foreground.
    pub fn foreground_job(&mut self, pane: &str) -> Option<u32> {
        if self.busy.contains(pane) {
            return Some(99_999);
        }
        let job = self.jobs.get_mut(pane)?;
        match job.try_wait() {
            Ok(None) => Some(job.id()),
            _ => {
                self.jobs.remove(pane);
                None
            }
        }
    }

    pub fn process_info(&mut self, pane: &str, index: usize, cwd: &Value) -> Value {
        let shell = SHELL_PID_BASE + index as i64;
        let (fg, procs) = match self.foreground_job(pane) {
            Some(pid) => (pid as i64, json!([{"pid": pid, "name": "vim", "cwd": cwd}])),
            None => (shell, json!([{"pid": shell, "name": "bash", "argv": ["/bin/bash"], "cwd": cwd}])),
        };
        json!({"type": "pane_process_info", "process_info": {
            "pane_id": pane, "shell_pid": shell, "foreground_process_group_id": fg, "foreground_processes": procs}})
    }

    /// Runs `text` when it is a complete line typed into a shell pane.
    pub fn typed(&mut self, pane: &str, cwd: &str, text: &str) -> std::io::Result<()> {
        if !self.shells.contains(pane) || !text.ends_with('\n') {
            return Ok(());
        }
        let mut job = Command::new("/bin/sh");
        job.arg("-c")
            .arg(text.trim_end_matches('\n'))
            .current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        // A terminal's foreground job starts with Ctrl-C at its default action,
        // whatever the simulator inherited (a shell starts background jobs with
        // SIGINT ignored, and `sh` can neither trap nor reset an ignored signal).
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            job.pre_exec(|| {
                nix::sys::signal::signal(nix::sys::signal::Signal::SIGINT, nix::sys::signal::SigHandler::SigDfl)
                    .map(|_| ())
                    .map_err(std::io::Error::from)
            });
        }
        let child = job.spawn()?;
        self.jobs.insert(pane.to_string(), child);
        Ok(())
    }

    /// `ctrl+c` interrupts the pane's foreground job.
    pub fn keys(&mut self, pane: &str, keys: Vec<String>) {
        if keys.iter().any(|k| k == "ctrl+c")
            && let Some(job) = self.jobs.get(pane)
        {
            let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(job.id() as i32), nix::sys::signal::Signal::SIGINT);
        }
        self.keys.push((pane.to_string(), keys));
    }
}

impl Drop for ShellPanes {
    fn drop(&mut self) {
        for job in self.jobs.values() {
            let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(job.id() as i32), nix::sys::signal::Signal::SIGKILL);
        }
    }
}
