//! `herdr-mcp` command line: parses flags, sets up logging and policy, and hands
//! over to `herdr_mcp::server`. Every startup failure is one line on stderr and a
//! non-zero exit.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use herdr_mcp::policy::Policy;
use herdr_mcp::runtime_info::RuntimeInfo;
use herdr_mcp::server::{self, config, mcp::ServerState};
use herdr_mcp::tools::{Services, ToolContext, ToolRegistry};
use tokio_util::sync::CancellationToken;

/// Every tool call allocates its arguments, its payload and a reply of several KiB on
/// whichever async worker runs it, and frees them on another. glibc's malloc pays
/// for that with arena locks and heap trimming in the kernel; mimalloc's per-thread
/// heaps do not. Measured with `benches/fs_read_latency` at 16 clients on 2 cores:
/// server CPU per `herdr_fs_read` fell from 115–118 µs to 79–100 µs, system time
/// from 38–39 µs to 26–32 µs (see benches/README.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "herdr-mcp", version, about = "MCP server for the files, Git, commands and Herdr workspaces of this machine.")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve MCP (streamable HTTP at /mcp, / and /mcp/, plus GET /health).
    #[command(long_about = SERVE_ABOUT)]
    Serve(ServeArgs),
    /// Edge mode: OAuth 2.1 and the public /mcp endpoint for ChatGPT connectors.
    #[command(subcommand)]
    Edge(herdr_mcp::edge::cli::EdgeCommand),
    /// Approve, list, revoke or cancel the connectors of this machine's edge.
    #[command(subcommand)]
    Connector(herdr_mcp::edge::cli::ConnectorCommand),
    /// Pair, enroll, rename or revoke devices (workstations) of an edge.
    #[command(subcommand)]
    Worker(herdr_mcp::edge::devices_cli::WorkerCommand),
    /// List or rename this workstation's devices; on the edge host, revoke, suspend or resume one.
    #[command(subcommand)]
    Device(herdr_mcp::edge::devices_cli::DeviceCommand),
    /// Link this workstation to an edge: forwards the edge's tool calls to the local runtime.
    Link(herdr_mcp::link::cli::LinkArgs),
    /// Serve MCP on stdin/stdout for desktop clients (Claude Desktop, Claude Code, Cursor).
    #[command(long_about = herdr_mcp::stdio::STDIO_ABOUT)]
    Stdio(herdr_mcp::stdio::StdioArgs),
    /// Check every layer (runtime, native host, Herdr, edge link): ok, or the command that fixes it.
    #[command(long_about = herdr_mcp::doctor::DOCTOR_ABOUT)]
    Doctor(herdr_mcp::doctor::DoctorArgs),
    /// Whether this workstation's runtime and its edge agree on the tool contract.
    #[command(subcommand, long_about = herdr_mcp::update::UPDATE_ABOUT)]
    Update(herdr_mcp::update::UpdateCommand),
    /// Print the tool calls this machine's runtime served (the activity log).
    #[command(long_about = herdr_mcp::activity::cli::LOG_ABOUT)]
    Log(herdr_mcp::activity::cli::LogArgs),
}

const SERVE_ABOUT: &str = "\
Serve MCP (streamable HTTP at /mcp, / and /mcp/, plus GET /health).

Always listens on a Unix socket (mode 0600, its directory created 0700) that is trusted:
no bearer is asked there. With --listen it also serves loopback TCP, where every request
needs `Authorization: Bearer $HERDR_MCP_TOKEN` and non-loopback Host/Origin are refused.

Environment:
  HERDR_EXTENSION_IPC_SOCKET  socket path (same as --socket)
  HERDR_MCP_TOKEN             bearer for --listen (required with --listen): at least 32
                              random characters, e.g. `openssl rand -hex 32`
  HERDR_MCP_ROOTS             managed roots, separated by ':' or ',' (when no --root is given)
  HERDR_MCP_READONLY=1        refuse every change to the machine (unset, 0, false, no, off:
                              allow changes; any other value stops the start)
  HERDR_MCP_WRITE_ROOTS       the file tools change files only in these roots, and commands
                              (herdr_exec, herdr_exec_start) start only in a workspace whose
                              root is one of them, ','-separated (default: all). Commands are
                              not sandboxed: a command runs as you and can change any file
                              you can, inside a write root or not.
  HERDR_MCP_STATE_DIR         state database directory (same as --state-dir)
  HERDR_MCP_EXEC_BACKEND      how commands run: auto (default), native or utility_pane
  HERDR_SOCKET_PATH           Herdr's socket (default: Herdr's own, ~/.config/herdr/herdr.sock);
                              Herdr is optional, without it its tools say herdr_unavailable
  HERDR_MCP_AGENT_ALLOW       Herdr agents the tools show, ','-separated names, or all
                              (default: pi, cline, opencode, anti, droid, grok; others are hidden)
  HERDR_BIN_PATH              the herdr CLI, for herdr_methods and herdr_call (default: on PATH)
  HERDR_LINK_CA_FILE          extra CA certificate (PEM) the --link trusts for its edge
  HERDR_MCP_LOG / RUST_LOG    log filter (default: info,rmcp=warn)

Stops cleanly on SIGINT/SIGTERM and removes its socket.";

#[derive(clap::Args)]
struct ServeArgs {
    /// Unix socket to listen on [default: $XDG_CONFIG_HOME/herdr-mcp/extension.sock,
    /// else ~/.config/herdr-mcp/extension.sock]
    #[arg(long, value_name = "PATH", env = config::SOCKET_ENV)]
    socket: Option<PathBuf>,

    /// Also listen on this loopback TCP address, e.g. 127.0.0.1:8772 (needs HERDR_MCP_TOKEN)
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,

    /// A managed root (repeatable) [default: $HERDR_MCP_ROOTS, else the git top-level
    /// of the working directory]
    #[arg(long = "root", value_name = "DIR")]
    roots: Vec<PathBuf>,

    /// Append logs to this file instead of stderr
    #[arg(long, value_name = "FILE")]
    log_file: Option<PathBuf>,

    /// Directory of the state database (exec sessions, idempotency ledger) [default:
    /// $XDG_STATE_HOME/herdr-mcp, else ~/.local/state/herdr-mcp]
    #[arg(long, value_name = "DIR", env = "HERDR_MCP_STATE_DIR")]
    state_dir: Option<PathBuf>,

    /// Also hold this computer's link to its edge (as `herdr-mcp link` would),
    /// using the device credential of `herdr-mcp worker connect`. If another
    /// process (a standalone `herdr-mcp link`) already holds this workstation's
    /// link on the same state directory, serve warns in its log, serves local
    /// clients without a link of its own, and takes the link over once that
    /// process stops (it looks every 2 seconds)
    #[arg(long)]
    link: bool,
}

fn main() -> ExitCode {
    if let Some(refusal) = herdr_mcp::platform::unsupported(std::env::consts::OS) {
        eprintln!("herdr-mcp: {refusal}");
        return ExitCode::FAILURE;
    }
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => match serve(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("herdr-mcp: error: {e:#}");
                ExitCode::FAILURE
            }
        },
        Command::Edge(cmd) => exit_with(herdr_mcp::edge::cli::run_edge(cmd)),
        Command::Connector(cmd) => exit_with(herdr_mcp::edge::cli::run_connector(cmd)),
        Command::Worker(cmd) => exit_with(herdr_mcp::edge::devices_cli::run_worker(cmd)),
        Command::Device(cmd) => exit_with(herdr_mcp::edge::devices_cli::run_device(cmd)),
        Command::Link(args) => exit_with(herdr_mcp::link::cli::run_link(args)),
        Command::Stdio(args) => exit_with(herdr_mcp::stdio::run(args)),
        Command::Doctor(args) => herdr_mcp::doctor::main(args),
        Command::Update(cmd) => herdr_mcp::update::run(cmd).unwrap_or_else(|e| {
            eprintln!("herdr-mcp: error: {e:#}");
            ExitCode::FAILURE
        }),
        Command::Log(args) => exit_with(herdr_mcp::activity::cli::run(args)),
    }
}

fn exit_with(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("herdr-mcp: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let env = |name: &str| std::env::var(name).ok();
    let listen = config::resolve(
        args.socket,
        args.listen,
        env(config::TOKEN_ENV),
        env("XDG_CONFIG_HOME").as_deref(),
        env("HOME").as_deref(),
    )?;
    server::logging::init(args.log_file.as_deref()).map_err(anyhow::Error::msg)?;
    // Checked before anything starts, so a missing enrollment is a clear exit.
    let link = args.link.then(|| herdr_mcp::link::cli::enrolled_config(listen.socket_path.clone())).transpose()?;
    let cwd = std::env::current_dir().map_err(|e| anyhow::anyhow!("cannot read the working directory: {e}"))?;
    let policy = Policy::from_env(&args.roots, &cwd)?;
    let info = RuntimeInfo::new();
    let exec = herdr_mcp::exec::startup(args.state_dir.as_deref(), &info.boot_id).map_err(anyhow::Error::msg)?;
    let mut services = Services::default();
    if let Some((db, registry)) = &exec {
        services.state = Some(Arc::clone(db));
        services.exec = Some(Arc::clone(registry));
    }
    // Herdr is optional: without a server its tools say so; the cache keeps trying.
    let herdr = herdr_mcp::herdr::attach(&mut services, &policy);
    let ctx = Arc::new(ToolContext { info, policy, services });
    let state = Arc::new(ServerState::new(ToolRegistry::standard(), ctx)?);

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| anyhow::anyhow!("cannot start the async runtime: {e}"))?;
    runtime.block_on(async move {
        let shutdown = CancellationToken::new();
        server::cancel_on_signals(shutdown.clone())?;
        if let Some(herdr) = &herdr {
            herdr.start(shutdown.clone());
        }
        if let (Some((_, registry)), Some(bus)) = (&exec, &state.ctx.services.push) {
            bus.follow_exec(registry);
        }
        if let Some((_, registry)) = &exec {
            // Before serving: orphans of a killed runtime end, its open ledger rows settle.
            herdr_mcp::exec::recover_logged(registry).await;
        }
        // Kept mutation answers go to the state database too, to outlive a restart.
        if let Some(cfg) = link {
            use herdr_mcp::link::cli::{ServeLinkState, claim_when_free, serve_link_state};
            let link_state = serve_link_state(&cfg, exec.as_ref().map(|(db, _)| db));
            let stop = shutdown.clone();
            tokio::spawn(async move {
                let claim = match link_state {
                    ServeLinkState::Ready(claim) => claim,
                    // Served without a link until the other holder stops.
                    ServeLinkState::HeldElsewhere(db) => match claim_when_free(&cfg, db, &stop).await {
                        Some(claim) => Some(claim),
                        None => return,
                    },
                };
                // A refused credential ends the link, not the runtime serving local clients.
                if let Err(reason) = herdr_mcp::link::run_with_state(cfg, stop, claim).await {
                    tracing::error!("edge link stopped: {reason}");
                }
            });
        }
        server::serve(listen, state, shutdown).await
    })
}
