//! Policy: which directories this runtime manages, which paths it never touches, and
//! when it may change anything. Values are read once at startup into [`Policy`];
//! tools consult it on every call, and tests build it directly (no process env).
//!
//! - [`roots`]: startup configuration of managed roots and write roots.
//! - [`live_roots`]: the managed roots in force now (configured plus Herdr-derived).
//! - [`paths`]: resolving a caller's path to a real path inside a managed root
//!   (`lexical` does the per-call path work on bytes).
//! - [`open`]: opening an existing file inside a root without a check-then-open gap
//!   (`no_symlinks`: `openat2`, and the legacy open where the kernel lacks it).
//! - [`secret`]: the secret-like path denylist.
//! - [`atomic`]: all-or-nothing file changes with rollback, relative to directory
//!   descriptors opened without following symlinks (`dir_fd`).

pub mod atomic;
mod changed;
mod dir_fd;
mod lexical;
pub mod live_roots;
mod new_name;
mod no_symlinks;
pub mod open;
pub mod paths;
pub mod roots;
pub mod secret;
pub mod walk;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};

pub use live_roots::LiveRoots;
pub use open::OpenedFile;
pub use paths::{Resolved, Target};

/// The configured policy of this runtime.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Canonical configured roots, deepest first. The roots in force at a given
    /// moment ([`Policy::managed_roots`]) are these plus any that Herdr's panes add.
    pub roots: Vec<PathBuf>,
    /// `HERDR_MCP_READONLY=1`.
    pub readonly: bool,
    /// `HERDR_MCP_WRITE_ROOTS` (None = every managed root is writable).
    pub write_roots: Option<Vec<PathBuf>>,
    /// Where relative paths are anchored: the first root as configured (before the
    /// deepest-first sort), so `--root A --root A/sub` still anchors at `A`.
    pub relative_base: Option<PathBuf>,
    /// The managed roots in force now, shared by every clone of this policy.
    live: LiveRoots,
}

/// Why a policy could not be built at startup (shown to the user as is).
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("{0}")]
    Invalid(String),
}

/// A policy refusal: becomes `{ok:false, reason, message, ...extra}` in a tool result
/// (or `{ok:false, code, ...}` when `is_code`, e.g. `invalid_params` for a path with
/// control characters).
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub reason: &'static str,
    pub message: String,
    /// Extra members of the payload (an object, or `Null` for none).
    pub extra: Value,
    /// Report under `code` instead of `reason`.
    pub is_code: bool,
}

impl Refusal {
    pub fn new(reason: &'static str, message: impl Into<String>, extra: Value) -> Self {
        Refusal { reason, message: message.into(), extra, is_code: false }
    }

    /// A refusal reported as `code` (argument errors such as `invalid_params`).
    pub fn code(code: &'static str, message: impl Into<String>, extra: Value) -> Self {
        Refusal { reason: code, message: message.into(), extra, is_code: true }
    }
}

impl Policy {
    /// Builds the policy from `--root` flags (or `HERDR_MCP_ROOTS`), `HERDR_MCP_READONLY`
    /// and `HERDR_MCP_WRITE_ROOTS`; with no roots given, the git top-level of `cwd`.
    pub fn from_env(cli_roots: &[PathBuf], cwd: &Path) -> Result<Policy, PolicyError> {
        let env = |k: &str| std::env::var(k).ok();
        roots::build(&roots::Settings {
            cli_roots,
            env_roots: env("HERDR_MCP_ROOTS").as_deref(),
            readonly: env("HERDR_MCP_READONLY").as_deref(),
            write_roots: env("HERDR_MCP_WRITE_ROOTS").as_deref(),
            cwd,
            home: std::env::var_os("HOME").map(PathBuf::from).as_deref(),
        })
    }

    /// A permissive policy over the given roots, for unit tests. Roots are
    /// canonicalized when they exist so that temp dirs behind symlinks still match.
    pub fn for_tests(roots: Vec<PathBuf>) -> Self {
        let roots: Vec<PathBuf> = roots.into_iter().map(|r| r.canonicalize().unwrap_or(r)).collect();
        let relative_base = roots.first().cloned();
        Policy::assemble(roots::deepest_first(roots), false, None, relative_base)
    }

    /// A policy whose live roots start as the configured ones.
    pub(crate) fn assemble(
        roots: Vec<PathBuf>,
        readonly: bool,
        write_roots: Option<Vec<PathBuf>>,
        relative_base: Option<PathBuf>,
    ) -> Self {
        let live = LiveRoots::new(roots.clone());
        Policy { roots, readonly, write_roots, relative_base, live }
    }

    /// This policy in read-only mode.
    pub fn with_readonly(mut self, readonly: bool) -> Self {
        self.readonly = readonly;
        self
    }

    /// This policy with a write-root whitelist (canonicalized when the entries exist).
    pub fn with_write_roots(mut self, write_roots: Option<Vec<PathBuf>>) -> Self {
        self.write_roots =
            write_roots.map(|v| v.into_iter().map(|r| r.canonicalize().unwrap_or(r)).collect());
        self
    }

    /// The managed roots in force now, deepest first.
    pub fn managed_roots(&self) -> Arc<Vec<PathBuf>> {
        self.live.snapshot()
    }

    /// Whether `root` is exactly one of the managed roots in force now.
    pub fn is_managed_root(&self, root: &Path) -> bool {
        self.live.with(|roots| roots.iter().any(|r| r == root))
    }

    /// The managed roots as strings, for refusals and reports.
    pub fn roots_json(&self) -> Value {
        self.live.with(|roots| json!(roots.iter().map(|r| r.display().to_string()).collect::<Vec<_>>()))
    }

    /// Makes the managed roots the configured ones plus `derived` (roots Herdr's panes
    /// work in). A derived root must be an existing directory and is never `/`, `home`
    /// or a parent of `home`; refused ones are skipped. Returns whether the set changed.
    pub fn set_derived_roots(&self, derived: &[PathBuf], home: Option<&Path>) -> bool {
        let home = home.map(|h| h.canonicalize().unwrap_or_else(|_| h.to_path_buf()));
        let mut all = self.roots.clone();
        for root in derived {
            let Ok(canonical) = root.canonicalize() else { continue };
            if !canonical.is_dir() {
                continue;
            }
            if let Some(why) = live_roots::refusal_of(&canonical, home.as_deref()) {
                tracing::debug!(root = %canonical.display(), "not a managed root: {why}");
                continue;
            }
            all.push(canonical);
        }
        self.live.replace(roots::deepest_first(all))
    }

    /// Changes whenever the managed roots change.
    pub fn roots_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.live.changes()
    }

    /// Steps 1 and 2 of the mutation gate (spec §2.4): read-only mode, then the
    /// write-root whitelist for the project `root`. The busy check needs Herdr agents,
    /// which a standalone runtime does not have.
    pub fn check_mutation(&self, root: &Path) -> Result<(), Refusal> {
        if self.readonly {
            return Err(Refusal::new(
                "readonly_mode",
                "this runtime runs in read-only mode (HERDR_MCP_READONLY=1): no file is changed and no command is run",
                json!({
                    "root": root.display().to_string(),
                    "hint": "Nothing can be changed here; read and report instead, or ask the user to restart herdr-mcp without HERDR_MCP_READONLY.",
                }),
            ));
        }
        if let Some(write_roots) = &self.write_roots
            && !write_roots.iter().any(|w| root.starts_with(w))
        {
            return Err(Refusal::new(
                "root_not_whitelisted",
                format!("{} is not inside any of the write roots (HERDR_MCP_WRITE_ROOTS)", root.display()),
                json!({
                    "root": root.display().to_string(),
                    "write_roots": write_roots.iter().map(|w| w.display().to_string()).collect::<Vec<_>>(),
                    "hint": "Only projects inside write_roots may be changed; change one of those, or ask the user to add this root to HERDR_MCP_WRITE_ROOTS.",
                }),
            ));
        }
        Ok(())
    }
}
