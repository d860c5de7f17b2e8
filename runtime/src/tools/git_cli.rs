//! Running the git CLI with a deadline and bounded output: `herdr_git`, the dirty
//! checks of the mutating tools and `herdr_inspect` all go through here.

use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The deadline of every git command (spec §1.13).
pub const GIT_TIMEOUT: Duration = Duration::from_secs(15);
/// stderr kept from a git command (spec §1.13).
pub const STDERR_CAP: usize = 2000;
/// How often a running git is checked against its deadline.
const POLL: Duration = Duration::from_millis(5);

/// A finished git command.
#[derive(Debug)]
pub struct GitRun {
    pub exit_code: Option<i32>,
    pub stdout: Vec<u8>,
    /// stdout exceeded its cap; the rest was read and dropped.
    pub stdout_truncated: bool,
    pub stderr: Vec<u8>,
}

impl GitRun {
    pub fn success(&self) -> bool {
        self.exit_code == Some(0)
    }

    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).trim_end().to_string()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("cannot run git: {0}")]
    Spawn(std::io::Error),
    #[error("git did not finish within {} s and was stopped", .0.as_secs_f64())]
    Timeout(Duration),
}

/// Runs `git -C dir <args>` without a pager, prompts or optional locks, keeping at
/// most `max_stdout` bytes of stdout and [`STDERR_CAP`] of stderr.
pub fn run_git<S: AsRef<OsStr>>(dir: &Path, args: &[S], max_stdout: usize, timeout: Duration) -> Result<GitRun, GitError> {
    let mut child = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_PAGER", "cat")
        .env("PAGER", "cat")
        .env("GIT_TERMINAL_PROMPT", "0")
        // Read-only commands must not take the index lock a user's git may need.
        .env("GIT_OPTIONAL_LOCKS", "0")
        // Own process group, so a timeout also stops helpers git started (hooks,
        // aliases, credential helpers).
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(GitError::Spawn)?;
    let out = drain(child.stdout.take(), max_stdout);
    let err = drain(child.stderr.take(), STDERR_CAP);
    let status = match wait_with_deadline(&mut child, timeout) {
        Some(status) => status,
        None => {
            // SAFETY: kill(2) on the process group we created; no memory is involved.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.kill();
            let _ = child.wait();
            return Err(GitError::Timeout(timeout));
        }
    };
    let (stdout, stdout_truncated) = join(out);
    let (stderr, _) = join(err);
    Ok(GitRun { exit_code: status.code(), stdout, stdout_truncated, stderr })
}

fn wait_with_deadline(child: &mut Child, timeout: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) => {}
            Err(_) => return None,
        }
        let now = Instant::now();
        if now >= deadline {
            return None;
        }
        std::thread::sleep(POLL.min(deadline - now));
    }
}

type Drain = Option<JoinHandle<(Vec<u8>, bool)>>;

/// Reads a pipe to its end on a thread, keeping the first `cap` bytes, so that a
/// chatty git never blocks on a full pipe.
fn drain<R: Read + Send + 'static>(pipe: Option<R>, cap: usize) -> Drain {
    let mut pipe = pipe?;
    Some(std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut truncated = false;
        let mut buf = [0u8; 16 * 1024];
        loop {
            match pipe.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let room = cap.saturating_sub(kept.len());
                    if n > room {
                        truncated = true;
                    }
                    kept.extend_from_slice(&buf[..n.min(room)]);
                }
            }
        }
        (kept, truncated)
    }))
}

fn join(handle: Drain) -> (Vec<u8>, bool) {
    handle.and_then(|h| h.join().ok()).unwrap_or_default()
}

/// True when `root` is a git work tree root (has a `.git` directory or file).
pub fn is_repo(root: &Path) -> bool {
    root.join(".git").exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captures_output_and_exit_code() {
        let tmp = tempfile::tempdir().unwrap();
        let run = run_git(tmp.path(), &["--version"], 1000, GIT_TIMEOUT).unwrap();
        assert!(run.success());
        assert!(run.stdout_text().starts_with("git version"));
        let run = run_git(tmp.path(), &["status"], 1000, GIT_TIMEOUT).unwrap();
        assert!(!run.success());
        assert!(run.stderr_text().contains("not a git repository"));
    }

    #[test]
    fn stdout_cap_is_exact() {
        let tmp = tempfile::tempdir().unwrap();
        let full = run_git(tmp.path(), &["--version"], 1000, GIT_TIMEOUT).unwrap().stdout;
        let run = run_git(tmp.path(), &["--version"], full.len(), GIT_TIMEOUT).unwrap();
        assert!(!run.stdout_truncated);
        let run = run_git(tmp.path(), &["--version"], full.len() - 1, GIT_TIMEOUT).unwrap();
        assert!(run.stdout_truncated);
        assert_eq!(run.stdout, full[..full.len() - 1]);
    }

    /// stderr keeps exactly STDERR_CAP bytes: a git writing that many loses
    /// none, one more is cut at the cap. An alias running printf writes them.
    #[test]
    fn stderr_cap_is_exact() {
        let tmp = tempfile::tempdir().unwrap();
        for (written, kept) in [(STDERR_CAP - 1, STDERR_CAP - 1), (STDERR_CAP, STDERR_CAP), (STDERR_CAP + 1, STDERR_CAP)] {
            let alias = format!("alias.err=!printf %{written}s x >&2");
            let run = run_git(tmp.path(), &["-c", &alias, "err"], 1000, GIT_TIMEOUT).unwrap();
            assert!(run.success(), "{}", run.stderr_text());
            assert_eq!(run.stderr.len(), kept, "{written} bytes written");
        }
    }

    #[test]
    fn a_slow_git_is_stopped_at_the_deadline() {
        let tmp = tempfile::tempdir().unwrap();
        std::process::Command::new("git").args(["init", "-q"]).arg(tmp.path()).status().unwrap();
        // An alias that runs a shell sleeping far longer than the deadline.
        let alias = "alias.nap=!sleep 30";
        let started = Instant::now();
        let err = run_git(tmp.path(), &["-c", alias, "nap"], 1000, Duration::from_millis(300)).unwrap_err();
        assert!(matches!(err, GitError::Timeout(_)), "{err}");
        assert!(started.elapsed() < Duration::from_secs(10));
    }
}
