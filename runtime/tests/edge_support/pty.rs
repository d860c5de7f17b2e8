//! Drives a command that reads a code from its controlling terminal (`connector approve`,
//! `worker connect`): the child gets a fresh pty as stdin and controlling terminal, and the
//! test types answers at the prompts it sees, as a person would.
#![allow(dead_code)]

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub struct PtySession {
    child: Child,
    writer: File,
    rx: mpsc::Receiver<Vec<u8>>,
    transcript: String,
    started: Instant,
    deadline: Duration,
}

impl PtySession {
    /// Starts `cmd` with a new pty as its stdin and controlling terminal; stdout and stderr
    /// stay pipes so the test can tell what the command printed from what it prompted.
    pub fn spawn(mut cmd: Command, deadline: Duration) -> PtySession {
        let pty = nix::pty::openpty(None, None).unwrap();
        let slave: OwnedFd = pty.slave;
        cmd.stdin(Stdio::from(slave.try_clone().unwrap())).stdout(Stdio::piped()).stderr(Stdio::piped());
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY as _, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().unwrap();
        drop(slave);
        let master = File::from(pty.master);
        let writer = master.try_clone().unwrap();
        let (tx, rx) = mpsc::channel::<Vec<u8>>();
        let mut reader = master;
        std::thread::spawn(move || {
            let mut buf = [0u8; 1024];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                    break;
                }
            }
        });
        PtySession { child, writer, rx, transcript: String::new(), started: Instant::now(), deadline }
    }

    /// Waits until `prompt` has appeared at least `count` times on the terminal.
    pub fn wait_for_prompt(&mut self, prompt: &str, count: usize) {
        while self.transcript.matches(prompt).count() < count {
            let left = self.deadline.checked_sub(self.started.elapsed()).expect("timed out waiting for the code prompt");
            match self.rx.recv_timeout(left) {
                Ok(chunk) => self.transcript.push_str(&String::from_utf8_lossy(&chunk)),
                Err(_) => {
                    let err = self.stderr_if_exited();
                    panic!("no {prompt:?} prompt; terminal so far:\n{}\n[stderr] {err}", self.transcript)
                }
            }
        }
    }

    /// The command's stderr when it has already exited (it usually says why it
    /// never prompted); nothing while it still runs, as reading would block.
    fn stderr_if_exited(&mut self) -> String {
        if !matches!(self.child.try_wait(), Ok(Some(_))) {
            return "(still running)".into();
        }
        let mut err = String::new();
        if let Some(mut pipe) = self.child.stderr.take() {
            pipe.read_to_string(&mut err).ok();
        }
        err
    }

    pub fn type_line(&mut self, line: &str) {
        self.writer.write_all(format!("{line}\n").as_bytes()).unwrap();
    }

    /// Waits for the command to exit; returns (exit ok, terminal transcript + stderr, stdout).
    pub fn finish(mut self, what: &str) -> (bool, String, String) {
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(self.started.elapsed() < self.deadline, "timed out waiting for {what} to exit");
            std::thread::sleep(Duration::from_millis(20));
        };
        while let Ok(chunk) = self.rx.recv_timeout(Duration::from_millis(200)) {
            self.transcript.push_str(&String::from_utf8_lossy(&chunk));
        }
        let mut out = String::new();
        self.child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
        let mut err = String::new();
        self.child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        (status.success(), format!("{}\n[stderr] {err}", self.transcript), out)
    }
}
