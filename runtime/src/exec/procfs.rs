//! Process facts from `/proc`, used to decide whether a pid or process group still
//! belongs to one of our sessions before anything is signalled.
//!
//! A pid alone proves nothing after a restart (pids are reused), so ownership is
//! shown by the recorded start time and process group of the leader, or by the
//! `HERDR_MCP_EXEC_ID` each session's processes inherit in their environment.

use std::fs;

/// The fields of `/proc/<pid>/stat` we need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    pub pid: i32,
    /// One-letter state (`R`, `S`, `Z`, …).
    pub state: char,
    pub pgrp: i32,
    /// Start time in clock ticks after boot (field 22).
    pub start_ticks: u64,
}

impl ProcStat {
    pub fn is_zombie(&self) -> bool {
        matches!(self.state, 'Z' | 'X')
    }
}

/// Parses a `/proc/<pid>/stat` line. The command name (field 2) may contain spaces
/// and parentheses, so fields are counted from the last `)`.
pub fn parse_stat(line: &str) -> Option<ProcStat> {
    let pid = line.split_whitespace().next()?.parse().ok()?;
    let rest = &line[line.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state); field n is fields[n - 3].
    Some(ProcStat {
        pid,
        state: fields.first()?.chars().next()?,
        pgrp: fields.get(5 - 3)?.parse().ok()?,
        start_ticks: fields.get(22 - 3)?.parse().ok()?,
    })
}

pub fn stat(pid: i32) -> Option<ProcStat> {
    parse_stat(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Live (non-zombie) processes whose process group is `pgid`.
pub fn group_members(pgid: i32) -> Vec<ProcStat> {
    let Ok(dir) = fs::read_dir("/proc") else { return Vec::new() };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(stat)
        .filter(|s| s.pgrp == pgid && !s.is_zombie())
        .collect()
}

/// The program name of `pid` (`/proc/<pid>/comm`); it changes at `exec`, so it
/// tells a forked shell from the program it is about to become.
pub fn name(pid: i32) -> Option<String> {
    Some(fs::read_to_string(format!("/proc/{pid}/comm")).ok()?.trim_end_matches('\n').to_string())
}

/// Whether `pid` runs with `HERDR_MCP_EXEC_ID=<session_id>` in its environment
/// (readable only for our own processes, which is the point).
pub fn has_exec_id(pid: i32, session_id: &str) -> bool {
    let Ok(env) = fs::read(format!("/proc/{pid}/environ")) else { return false };
    let wanted = format!("{}={session_id}", super::EXEC_ID_ENV);
    env.split(|b| *b == 0).any(|kv| kv == wanted.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_with_spaces_and_parentheses() {
        let line = "1234 (we ird) (x)) S 1 1200 1200 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10";
        let s = parse_stat(line).unwrap();
        assert_eq!(s, ProcStat { pid: 1234, state: 'S', pgrp: 1200, start_ticks: 987654 });
        assert!(parse_stat("garbage").is_none());
    }

    #[test]
    fn reads_this_process() {
        let me = stat(std::process::id() as i32).unwrap();
        assert_eq!(me.pid, std::process::id() as i32);
        assert!(!me.is_zombie());
        assert!(group_members(me.pgrp).iter().any(|m| m.pid == me.pid));
        let exe = std::env::current_exe().unwrap();
        let expected: String = exe.file_name().unwrap().to_str().unwrap().chars().take(15).collect();
        assert_eq!(name(me.pid).as_deref(), Some(expected.as_str()), "comm is the executable's name cut to 15 bytes");
        assert_eq!(name(-1), None);
    }
}
