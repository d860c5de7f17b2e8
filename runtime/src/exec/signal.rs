//! Ending a session's process group: SIGTERM, a grace period, then SIGKILL.
//!
//! The whole group is signalled so that grandchildren (pipelines, `&` jobs) end too.
//! Before each signal the group must still contain a process proven to be ours
//! ([`super::procfs`]); once none is left, a recycled group id is never touched.

use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use super::procfs;

/// How often the group is re-checked during a grace period.
const POLL: Duration = Duration::from_millis(20);

/// Who may be signalled: the group id plus the proof of ownership.
#[derive(Debug, Clone)]
pub struct Target {
    pub pgid: i32,
    pub session_id: String,
    /// The leader's pid and start ticks as recorded at spawn.
    pub leader: Option<(i32, u64)>,
}

impl Target {
    /// Live members of the group that are provably ours.
    pub fn owned_members(&self) -> Vec<i32> {
        procfs::group_members(self.pgid)
            .into_iter()
            .filter(|m| {
                self.leader.is_some_and(|(pid, ticks)| m.pid == pid && m.start_ticks == ticks)
                    || procfs::has_exec_id(m.pid, &self.session_id)
            })
            .map(|m| m.pid)
            .collect()
    }
}

/// How a termination ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Nothing of ours was running any more.
    AlreadyGone,
    /// SIGTERM was enough.
    Terminated,
    /// The grace period ran out and SIGKILL was sent.
    Killed,
}

/// Sends SIGTERM to the group, waits up to `grace` for it to empty, then SIGKILL.
pub async fn terminate(target: &Target, grace: Duration) -> Ending {
    if !signal_if_owned(target, Signal::SIGTERM) {
        return Ending::AlreadyGone;
    }
    if wait_until_empty(target, grace).await {
        return Ending::Terminated;
    }
    signal_if_owned(target, Signal::SIGKILL);
    // SIGKILL cannot be ignored; this wait only lets the kernel finish the job.
    wait_until_empty(target, Duration::from_secs(2)).await;
    Ending::Killed
}

/// Signals the group when it still holds a process of ours; false when none is left.
pub fn signal_if_owned(target: &Target, signal: Signal) -> bool {
    if target.owned_members().is_empty() {
        return false;
    }
    // ESRCH here means the group emptied in between, which is the goal anyway.
    let _ = killpg(Pid::from_raw(target.pgid), signal);
    true
}

async fn wait_until_empty(target: &Target, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if target.owned_members().is_empty() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The spec's spelling of a signal number: `SIGTERM`, `SIGKILL`, `SIGINT`, `SIGHUP`,
/// otherwise `SIG<n>`.
pub fn signal_name(signal: i32) -> String {
    match signal {
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGKILL => "SIGKILL".into(),
        libc::SIGINT => "SIGINT".into(),
        libc::SIGHUP => "SIGHUP".into(),
        n => format!("SIG{n}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_names_follow_the_contract() {
        assert_eq!(signal_name(15), "SIGTERM");
        assert_eq!(signal_name(9), "SIGKILL");
        assert_eq!(signal_name(2), "SIGINT");
        assert_eq!(signal_name(1), "SIGHUP");
        assert_eq!(signal_name(10), "SIG10");
    }

    #[tokio::test]
    async fn a_group_without_our_processes_is_never_signalled() {
        // Our own test process group holds no process with this exec id and the
        // leader proof does not match, so nothing may be sent.
        let me = procfs::stat(std::process::id() as i32).unwrap();
        let target = Target { pgid: me.pgrp, session_id: "es_nobody".into(), leader: Some((me.pid, me.start_ticks + 1)) };
        assert!(target.owned_members().is_empty());
        assert_eq!(terminate(&target, Duration::from_millis(10)).await, Ending::AlreadyGone);
    }
}
