//! In-process harness for tool tests: real temp git repositories (via the git CLI)
//! and calls through `ToolRegistry::call`, exactly as the server dispatches them.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};

use herdr_mcp::policy::Policy;
use herdr_mcp::runtime_info::RuntimeInfo;
use herdr_mcp::tools::{ToolContext, ToolOutput, ToolRegistry};
use serde_json::Value;

/// A temporary git repository with one commit, removed on drop.
pub struct Repo {
    pub dir: tempfile::TempDir,
    /// Canonical path of the repository root.
    pub root: PathBuf,
}

impl Repo {
    /// `git init` plus an initial commit of `files` (path, content).
    pub fn with_files(files: &[(&str, &str)]) -> Repo {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical tempdir");
        git(&root, &["init", "-q", "-b", "main"]);
        git(&root, &["config", "user.email", "t@example.invalid"]);
        git(&root, &["config", "user.name", "Test"]);
        git(&root, &["config", "commit.gpgsign", "false"]);
        let repo = Repo { dir, root };
        for (p, c) in files {
            repo.write(p, c);
        }
        git(&repo.root, &["add", "-A"]);
        git(&repo.root, &["commit", "-q", "--allow-empty", "-m", "init"]);
        repo
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    pub fn p(&self, rel: &str) -> String {
        self.path(rel).display().to_string()
    }

    pub fn write(&self, rel: &str, content: &str) {
        self.write_bytes(rel, content.as_bytes());
    }

    pub fn write_bytes(&self, rel: &str, content: &[u8]) {
        let p = self.path(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(&p, content).expect("write");
    }

    pub fn read(&self, rel: &str) -> Vec<u8> {
        std::fs::read(self.path(rel)).expect("read")
    }

    pub fn commit_all(&self) {
        git(&self.root, &["add", "-A"]);
        git(&self.root, &["commit", "-q", "-m", "more"]);
    }

    pub fn policy(&self) -> Policy {
        Policy::for_tests(vec![self.root.clone()])
    }

    pub fn ctx(&self) -> Arc<ToolContext> {
        ctx(self.policy())
    }
}

pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git").arg("-C").arg(dir).args(args).output().expect("run git");
    assert!(out.status.success(), "git {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn ctx(policy: Policy) -> Arc<ToolContext> {
    Arc::new(ToolContext::new(RuntimeInfo::new(), policy))
}

fn registry() -> &'static ToolRegistry {
    static REG: OnceLock<ToolRegistry> = OnceLock::new();
    REG.get_or_init(ToolRegistry::standard)
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap())
}

/// Calls a tool through the standard registry and returns the whole output.
pub fn call_out(ctx: &Arc<ToolContext>, tool: &str, args: Value) -> ToolOutput {
    runtime().block_on(registry().call(ctx, tool, Some(args)))
}

/// Calls a tool and returns its payload.
pub fn call(ctx: &Arc<ToolContext>, tool: &str, args: Value) -> Value {
    let out = call_out(ctx, tool, args);
    assert!(out.payload.get("ok").is_some_and(Value::is_boolean), "payload without ok: {}", out.payload);
    out.payload
}

/// Asserts a refusal with this `reason` and returns the payload.
#[track_caller]
pub fn assert_reason(payload: &Value, reason: &str) {
    assert_eq!(payload["ok"], false, "expected refusal {reason}: {payload}");
    assert_eq!(payload["reason"], reason, "expected reason {reason}: {payload}");
}

/// Asserts a failure with this `code`.
#[track_caller]
pub fn assert_code(payload: &Value, code: &str) {
    assert_eq!(payload["ok"], false, "expected code {code}: {payload}");
    assert_eq!(payload["code"], code, "expected code {code}: {payload}");
}
