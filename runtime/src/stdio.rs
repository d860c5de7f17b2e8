//! `herdr-mcp stdio`: MCP over stdin/stdout for desktop clients (Claude Desktop,
//! Claude Code, Cursor) that start their servers as child processes.
//!
//! The tools are served in this process, not relayed to a running `herdr-mcp serve`:
//! a desktop client starts the server itself and expects it to answer without a
//! second program already running, and serving in-process builds exactly what
//! `serve` builds — the same [`ToolRegistry`], the same [`Policy`] from the same
//! flags and environment, the same state database (exec sessions and the operations
//! ledger are shared with a `serve` on the same state directory, each process under
//! its own boot id) and the same Herdr attachment. Only the transport differs: one
//! JSON-RPC message per line (MCP's stdio transport), nothing but protocol on stdout,
//! logs on stderr or `--log-file`.

use std::path::PathBuf;
use std::sync::Arc;

use rmcp::ServiceExt;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio_util::sync::CancellationToken;

use crate::policy::Policy;
use crate::runtime_info::RuntimeInfo;
use crate::server::mcp::{McpHandler, ServerState};
use crate::tools::{Services, ToolContext, ToolRegistry};

pub const STDIO_ABOUT: &str = "\
Serve MCP on stdin/stdout, for desktop MCP clients (Claude Desktop, Claude Code, Cursor)
that start their servers as child processes. One JSON-RPC message per line; stdout carries
nothing else, logs go to stderr (or --log-file).

The tools are served by this process itself, not relayed to a running `herdr-mcp serve`:
a desktop client starts the server on its own and needs no other program running, and
this process builds exactly what `serve` builds — the same 18 tools, the same policy from
the same flags and environment (managed roots, secret paths, HERDR_MCP_READONLY,
HERDR_MCP_WRITE_ROOTS), the same state database (exec sessions, the idempotency ledger)
and the same Herdr socket. Desktop clients start servers from an arbitrary directory, so
pass --root (or HERDR_MCP_ROOTS).

Environment: as for `herdr-mcp serve --help` (HERDR_MCP_ROOTS, HERDR_MCP_READONLY,
HERDR_MCP_WRITE_ROOTS, HERDR_MCP_STATE_DIR, HERDR_SOCKET_PATH, HERDR_MCP_AGENT_ALLOW,
HERDR_MCP_EXEC_BACKEND, HERDR_MCP_LOG). Ends when stdin closes, or on SIGINT/SIGTERM.";

#[derive(clap::Args, Debug)]
pub struct StdioArgs {
    /// A managed root (repeatable) [default: $HERDR_MCP_ROOTS, else the git top-level
    /// of the working directory]
    #[arg(long = "root", value_name = "DIR")]
    pub roots: Vec<PathBuf>,

    /// Append logs to this file instead of stderr
    #[arg(long, value_name = "FILE")]
    pub log_file: Option<PathBuf>,

    /// Directory of the state database (exec sessions, idempotency ledger) [default:
    /// $XDG_STATE_HOME/herdr-mcp, else ~/.local/state/herdr-mcp]
    #[arg(long, value_name = "DIR", env = "HERDR_MCP_STATE_DIR")]
    pub state_dir: Option<PathBuf>,
}

/// Serves MCP on stdin/stdout until stdin closes or a signal arrives.
pub fn run(args: StdioArgs) -> anyhow::Result<()> {
    crate::server::logging::init(args.log_file.as_deref()).map_err(anyhow::Error::msg)?;
    let cwd = std::env::current_dir().map_err(|e| anyhow::anyhow!("cannot read the working directory: {e}"))?;
    let policy = Policy::from_env(&args.roots, &cwd)?;
    let info = RuntimeInfo::new();
    let exec = crate::exec::startup(args.state_dir.as_deref(), &info.boot_id).map_err(anyhow::Error::msg)?;
    let mut services = Services::default();
    if let Some((db, registry)) = &exec {
        services.state = Some(Arc::clone(db));
        services.exec = Some(Arc::clone(registry));
    }
    let herdr = crate::herdr::attach(&mut services, &policy);
    let ctx = Arc::new(ToolContext { info, policy, services });
    let state = Arc::new(ServerState::new(ToolRegistry::standard(), ctx)?);

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| anyhow::anyhow!("cannot start the async runtime: {e}"))?;
    let result = runtime.block_on(async move {
        let shutdown = CancellationToken::new();
        crate::server::cancel_on_signals(shutdown.clone())?;
        if let Some(herdr) = &herdr {
            herdr.start(shutdown.clone());
        }
        if let (Some((_, registry)), Some(bus)) = (&exec, &state.ctx.services.push) {
            bus.follow_exec(registry);
        }
        if let Some((_, registry)) = &exec {
            crate::exec::recover_logged(registry).await;
        }
        serve_stdio(state, shutdown).await
    });
    // A read of stdin may still be parked on a blocking thread; do not wait for it.
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    result
}

async fn serve_stdio(state: Arc<ServerState>, shutdown: CancellationToken) -> anyhow::Result<()> {
    let stdin = stdio_file(0)?;
    let stdout = stdio_file(1)?;
    // rmcp writes into one end of a pipe; the pump below completes each `tools/list`
    // answer with the catalog members rmcp's `Tool` cannot carry (as the HTTP
    // endpoint does), so the listed tools hash to the advertised contract.
    let (to_pump, from_rmcp) = tokio::io::duplex(1 << 16);
    let catalog = state.catalog.clone();
    let pump = tokio::spawn(pump_lines(from_rmcp, stdout, catalog));
    tracing::info!(
        roots = %state.ctx.policy.managed_roots().iter().map(|r| r.display().to_string()).collect::<Vec<_>>().join(","),
        tools = state.registry.len(),
        contract = %state.contract_hash,
        "herdr-mcp serving on stdio"
    );
    let service = McpHandler::new(state)
        .serve((stdin, to_pump))
        .await
        .map_err(|e| anyhow::anyhow!("MCP on stdio did not start: {e}"))?;
    let cancel = service.cancellation_token();
    let stop = shutdown.clone();
    tokio::spawn(async move {
        stop.cancelled().await;
        cancel.cancel();
    });
    let quit = service.waiting().await;
    shutdown.cancel();
    // The writer half is dropped with the service: the pump flushes what is left and ends.
    let _ = pump.await;
    match quit {
        Ok(reason) => tracing::info!(?reason, "herdr-mcp stdio stopped"),
        Err(e) => tracing::warn!("herdr-mcp stdio stopped: {e}"),
    }
    Ok(())
}

/// The process's stdin or stdout as a tokio file (reads and writes on the blocking
/// pool, as `tokio::io::stdin` does).
fn stdio_file(fd: i32) -> anyhow::Result<tokio::fs::File> {
    use std::os::fd::{AsFd, OwnedFd};
    let borrowed = match fd {
        0 => std::io::stdin().as_fd().try_clone_to_owned(),
        _ => std::io::stdout().as_fd().try_clone_to_owned(),
    };
    let owned: OwnedFd = borrowed.map_err(|e| anyhow::anyhow!("cannot use file descriptor {fd}: {e}"))?;
    Ok(tokio::fs::File::from_std(std::fs::File::from(owned)))
}

/// Copies rmcp's output to stdout line by line, completing `tools/list` answers.
async fn pump_lines(
    from_rmcp: tokio::io::DuplexStream,
    mut stdout: tokio::fs::File,
    catalog: Vec<Value>,
) -> std::io::Result<()> {
    let mut lines = BufReader::new(from_rmcp).lines();
    while let Some(line) = lines.next_line().await? {
        let line = complete_tools_line(&catalog, &line).unwrap_or(line);
        stdout.write_all(line.as_bytes()).await?;
        stdout.write_all(b"\n").await?;
        stdout.flush().await?;
    }
    Ok(())
}

/// A JSON-RPC answer whose `result.tools` lists tools, with each tool's catalog
/// members merged back; `None` for any other line.
pub fn complete_tools_line(catalog: &[Value], line: &str) -> Option<String> {
    if !line.contains("\"tools\"") {
        return None;
    }
    crate::server::endpoint::complete_tools(catalog, line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tools_list_answers_get_the_catalog_members_back() {
        let catalog = vec![json!({"name": "a", "execution": {"taskSupport": "forbidden"}})];
        let line = r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a"},{"name":"b"}]}}"#;
        let v: Value = serde_json::from_str(&complete_tools_line(&catalog, line).unwrap()).unwrap();
        assert_eq!(v["result"]["tools"][0]["execution"]["taskSupport"], "forbidden");
        assert!(v["result"]["tools"][1].get("execution").is_none());
        assert_eq!(complete_tools_line(&catalog, r#"{"jsonrpc":"2.0","id":1,"result":{}}"#), None);
    }
}
