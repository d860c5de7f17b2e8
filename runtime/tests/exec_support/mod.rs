//! Shared rig for the exec tests: a managed root in a temp dir, a state database,
//! a real exec registry and the standard tool registry, called in-process. Every
//! wait is a poll with a deadline.
#![allow(dead_code)]

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use herdr_mcp::exec::{ExecConfig, ExecRegistry};
use herdr_mcp::policy::Policy;
use herdr_mcp::runtime_info::RuntimeInfo;
use herdr_mcp::state::StateDb;
use herdr_mcp::tools::{ToolContext, ToolRegistry};
use serde_json::{Value, json};

pub const DEADLINE: Duration = Duration::from_secs(30);

pub struct Rig {
    /// Owns the rig's directory unless it was opened over an existing one.
    pub tmp: tempfile::TempDir,
    /// The managed root; its directory name `proj` is the standalone workspace id.
    pub root: PathBuf,
    pub state_dir: PathBuf,
    pub exec: Arc<ExecRegistry>,
    pub ctx: Arc<ToolContext>,
    pub tools: ToolRegistry,
}

/// The production config with `/bin/sh` as the shell, so results do not depend on
/// the developer's login shell.
pub fn test_config() -> ExecConfig {
    let mut config = ExecConfig::from_env().expect("a shell");
    config.shell = PathBuf::from("/bin/sh");
    config
}

impl Rig {
    pub fn new() -> Rig {
        Rig::build(None, test_config(), |p| p)
    }

    pub fn with_config(config: ExecConfig) -> Rig {
        Rig::build(None, config, |p| p)
    }

    pub fn with_policy(f: impl FnOnce(Policy) -> Policy) -> Rig {
        Rig::build(None, test_config(), f)
    }

    /// A rig over an existing directory (a "restarted runtime" on the same state);
    /// the directory is not removed when the rig drops.
    pub fn reopen_at(dir: &Path) -> Rig {
        Rig::build(Some(dir), test_config(), |p| p)
    }

    fn build(dir: Option<&Path>, config: ExecConfig, f: impl FnOnce(Policy) -> Policy) -> Rig {
        let tmp = tempfile::tempdir().unwrap();
        let base = dir.unwrap_or(tmp.path()).to_path_buf();
        let root = base.join("proj");
        std::fs::create_dir_all(&root).unwrap();
        let root = root.canonicalize().unwrap();
        let state_dir = base.join("state");
        let info = RuntimeInfo::new();
        let db = Arc::new(StateDb::open(&state_dir, &info.boot_id).unwrap());
        let exec = ExecRegistry::new(Arc::clone(&db), config);
        let mut ctx = ToolContext::new(info, f(Policy::for_tests(vec![root.clone()])));
        ctx.services.state = Some(db);
        ctx.services.exec = Some(Arc::clone(&exec));
        Rig { tmp, root, state_dir, exec, ctx: Arc::new(ctx), tools: ToolRegistry::standard() }
    }

    pub fn root_str(&self) -> String {
        self.root.display().to_string()
    }

    pub async fn call(&self, tool: &str, args: Value) -> Value {
        self.tools.call(&self.ctx, tool, Some(args)).await.payload
    }

    pub async fn start(&self, command: &str) -> String {
        let out = self.call("herdr_exec_start", json!({"root": self.root_str(), "command": command})).await;
        assert_eq!(out["ok"], true, "{out}");
        out["session_id"].as_str().unwrap().to_string()
    }

    pub async fn read(&self, session_id: &str, stream: &str, offset: u64, limit: u64) -> Value {
        self.call("herdr_exec_read", json!({"session_id": session_id, "stream": stream, "offset": offset, "limit": limit}))
            .await
    }

    /// Polls the session until it has ended; returns the last read.
    pub async fn wait_done(&self, session_id: &str) -> Value {
        poll(DEADLINE, || async {
            let r = self.read(session_id, "both", 0, 1).await;
            (r["running"] == false).then_some(r)
        })
        .await
        .unwrap_or_else(|| panic!("session {session_id} did not end within {DEADLINE:?}"))
    }

    /// Reads a whole stream verbatim by following next_offset. A whole offset-0 read
    /// may come back compacted; then the first page is taken again as a single byte,
    /// which is never compacted.
    pub async fn read_all(&self, session_id: &str, stream: &str) -> (String, bool) {
        let (mut text, mut offset, mut truncated) = (String::new(), 0u64, false);
        let mut first_limit = 262_144;
        loop {
            let limit = if offset == 0 { first_limit } else { 262_144 };
            let r = self.read(session_id, stream, offset, limit).await;
            assert_eq!(r["ok"], true, "{r}");
            if r["compacted"] == true {
                first_limit = 1;
                continue;
            }
            truncated |= r["truncated"] == true;
            text.push_str(r["text"].as_str().unwrap());
            let next = r["next_offset"].as_u64().unwrap();
            if next == offset {
                return (text, truncated);
            }
            offset = next;
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }
}

/// Calls `f` until it yields `Some` or the deadline passes.
pub async fn poll<T, F, Fut>(deadline: Duration, mut f: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let end = Instant::now() + deadline;
    loop {
        if let Some(v) = f().await {
            return Some(v);
        }
        if Instant::now() >= end {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Lines of a file (0 when it does not exist).
pub fn line_count(path: &Path) -> usize {
    std::fs::read_to_string(path).map(|s| s.lines().count()).unwrap_or(0)
}

/// Whether `pid` is gone (or a zombie nobody reaped yet, which runs nothing).
pub fn process_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => {
            let state = stat.rsplit(')').next().and_then(|r| r.split_whitespace().next()).unwrap_or("");
            state == "Z" || state == "X"
        }
    }
}
