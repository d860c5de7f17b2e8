//! Policy: managed roots, secret paths, the mutation gate.
//! (Placeholder shape; the runtime-core work fills it in behind this interface.)

use std::path::{Path, PathBuf};

/// The configured policy of this runtime.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Canonical managed roots, deepest first.
    pub roots: Vec<PathBuf>,
    /// `HERDR_MCP_READONLY=1`.
    pub readonly: bool,
    /// `HERDR_MCP_WRITE_ROOTS` (None = every managed root is writable).
    pub write_roots: Option<Vec<PathBuf>>,
}

/// Why a policy could not be built at startup (shown to the user as is).
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("{0}")]
    Invalid(String),
}

impl Policy {
    /// Builds the policy from `--root` flags (or `HERDR_MCP_ROOTS`), `HERDR_MCP_READONLY`
    /// and `HERDR_MCP_WRITE_ROOTS`; with no roots given, the git top-level of `cwd`.
    pub fn from_env(cli_roots: &[PathBuf], cwd: &Path) -> Result<Policy, PolicyError> {
        let _ = (cli_roots, cwd);
        Err(PolicyError::Invalid("policy not implemented yet".into()))
    }

    /// A permissive policy over the given roots, for unit tests.
    pub fn for_tests(roots: Vec<PathBuf>) -> Self {
        Policy { roots, readonly: false, write_roots: None }
    }
}
