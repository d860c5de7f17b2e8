//! `herdr-mcp edge init|serve` and `herdr-mcp connector approve|list|revoke|cancel`.
//!
//! The connector commands work on the edge's state directory directly (see
//! [`super::store`]): run them as the same user on the machine that hosts the edge.
//! `approve` reads the 6-digit code from the controlling terminal (`/dev/tty`),
//! never from arguments or stdin, so a code cannot leak into shell history or be
//! piped in by a script; before that it checks that the local runtime answers.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::clock::SystemClock;
use super::connectors::{self, ApprovalError};
use super::forward::{LinkRouter, local_runtime_contract};
use super::link_hub::LinkHub;
use super::devices::DeviceRegistry;
use super::store::EdgeStore;
use super::{EdgeConfig, EdgeState};

#[derive(clap::Args, Debug, Clone)]
pub struct StateDirArg {
    /// Edge state directory [default: <state dir>/edge, where the state dir is
    /// $HERDR_MCP_STATE_DIR, else $XDG_STATE_HOME/herdr-mcp, else ~/.local/state/herdr-mcp]
    #[arg(long = "edge-dir", value_name = "DIR", env = "HERDR_MCP_EDGE_DIR")]
    pub edge_dir: Option<PathBuf>,
}

impl StateDirArg {
    pub fn resolve(&self) -> anyhow::Result<PathBuf> {
        if let Some(d) = self.edge_dir.as_ref().filter(|d| !d.as_os_str().is_empty()) {
            return Ok(d.clone());
        }
        let env = |n: &str| std::env::var(n).ok();
        let base = crate::state::resolve_state_dir(
            None,
            env("HERDR_MCP_STATE_DIR").as_deref(),
            env("XDG_STATE_HOME").as_deref(),
            env("HOME").as_deref(),
        )?;
        Ok(base.join("edge"))
    }
}

#[derive(clap::Subcommand, Debug)]
pub enum EdgeCommand {
    /// Create the edge state (database and code pepper); safe to run again.
    Init(EdgeInitArgs),
    /// Create a pairing for a new workstation from the edge host itself (the
    /// operator's way in when no enrolled device is at hand).
    Pair(EdgePairArgs),
    /// Serve OAuth and the public /mcp endpoint over HTTP. Terminate TLS in front
    /// of it (a reverse proxy) and pass the public https URL as --issuer.
    Serve(EdgeServeArgs),
}

#[derive(clap::Args, Debug)]
pub struct EdgeInitArgs {
    /// Public base URL; with it, init also prints a first pairing for the first workstation
    #[arg(long, env = "HERDR_EDGE_ISSUER")]
    pub issuer: Option<String>,
    #[command(flatten)]
    pub state: StateDirArg,
}

#[derive(clap::Args, Debug)]
pub struct EdgePairArgs {
    /// Public base URL, as given to `edge serve`
    #[arg(long, env = "HERDR_EDGE_ISSUER")]
    pub issuer: String,
    /// Name for the new device
    #[arg(long)]
    pub name: Option<String>,
    /// How long the pairing stays valid, 60 to 600 seconds
    #[arg(long, default_value_t = super::pairing::DEFAULT_TTL_S)]
    pub ttl: i64,
    #[command(flatten)]
    pub state: StateDirArg,
}

/// Creates the edge's live pairing directly in its state and prints it.
fn local_pairing(dir: &Path, issuer: &str, ttl: Option<i64>, name: Option<&str>) -> anyhow::Result<()> {
    let config = EdgeConfig::new(issuer).map_err(anyhow::Error::msg)?;
    let registry = DeviceRegistry::new(open_store(dir)?);
    let p = registry.create_pairing(ttl, name, &format!("operator:{}", whoami())).map_err(|e| anyhow::anyhow!("{e}"))?;
    super::devices_cli::print_local_pairing(&config.issuer, &p);
    Ok(())
}

#[derive(clap::Args, Debug)]
pub struct EdgeServeArgs {
    /// Public base URL, e.g. https://edge.example.com (http only for loopback)
    #[arg(long, env = "HERDR_EDGE_ISSUER")]
    pub issuer: String,
    /// Address to listen on; port 0 picks a free one
    #[arg(long, default_value = "127.0.0.1:8787")]
    pub listen: SocketAddr,
    /// Write the bound address to this file once listening
    #[arg(long, value_name = "FILE")]
    pub addr_file: Option<PathBuf>,
    /// Serve HTTPS with this PEM certificate chain (needs --tls-key); without it,
    /// terminate TLS in a reverse proxy in front of a loopback listener
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    #[command(flatten)]
    pub state: StateDirArg,
}

#[derive(clap::Subcommand, Debug)]
pub enum ConnectorCommand {
    /// Approve a pending connection; asks for the 6-digit code on the terminal.
    Approve {
        request_id: String,
        /// The local runtime's Unix socket to check first [default: as `serve`]
        #[arg(long, value_name = "PATH", env = crate::server::config::SOCKET_ENV)]
        socket: Option<PathBuf>,
        #[command(flatten)]
        state: StateDirArg,
    },
    /// List connectors (id, name, status, authorized at, last used).
    List {
        /// Print JSON instead of a table
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        state: StateDirArg,
    },
    /// Revoke a connector: its tokens stop working on the next request.
    Revoke {
        connector_id: String,
        /// Required: revocation cannot be undone
        #[arg(long)]
        confirm: bool,
        #[command(flatten)]
        state: StateDirArg,
    },
    /// Withdraw a pending (or approved but unused) connection request.
    Cancel {
        request_id: String,
        #[command(flatten)]
        state: StateDirArg,
    },
}

pub(crate) fn open_store(dir: &Path) -> anyhow::Result<Arc<EdgeStore>> {
    Ok(Arc::new(EdgeStore::open(dir, Arc::new(SystemClock))?))
}

pub fn run_edge(cmd: EdgeCommand) -> anyhow::Result<()> {
    match cmd {
        EdgeCommand::Init(args) => {
            let dir = args.state.resolve()?;
            let created = EdgeStore::init(&dir)?;
            println!("edge state {} in {}", if created { "created" } else { "already present" }, dir.display());
            if let Some(issuer) = args.issuer {
                local_pairing(&dir, &issuer, None, None)?;
            }
            Ok(())
        }
        EdgeCommand::Pair(args) => local_pairing(&args.state.resolve()?, &args.issuer, Some(args.ttl), args.name.as_deref()),
        EdgeCommand::Serve(args) => serve(args),
    }
}

fn serve(args: EdgeServeArgs) -> anyhow::Result<()> {
    let config = EdgeConfig::new(&args.issuer).map_err(anyhow::Error::msg)?;
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(super::tls::server_config(cert, key)?),
        _ => None,
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    let store = open_store(&args.state.resolve()?)?;
    let orphans = super::forward_pending::settle_orphans(&store)?;
    if orphans > 0 {
        eprintln!("herdr-mcp edge: {orphans} mutation(s) sent before the last stop are marked uncertain");
    }
    let (catalog, contract) = local_runtime_contract();
    let devices = Arc::new(DeviceRegistry::new(Arc::clone(&store)));
    let hub = LinkHub::new(Arc::clone(&devices) as Arc<dyn super::link_hub_auth::LinkAuthenticator>, contract, Arc::clone(&store));
    let revocations = devices.subscribe_revocations();
    let router = LinkRouter::new(Arc::clone(&hub), Arc::clone(&store), catalog);
    let state = Arc::new(EdgeState { config, store, router: Arc::new(router), devices, allow_loopback_cimd: false });
    let _ = tracing_subscriber::fmt().with_writer(std::io::stderr).with_env_filter(
        tracing_subscriber::EnvFilter::try_from_env("HERDR_MCP_LOG").unwrap_or_else(|_| "info".into()),
    ).try_init();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| anyhow::anyhow!("cannot start the async runtime: {e}"))?;
    rt.block_on(async move {
        let shutdown = CancellationToken::new();
        crate::server::cancel_on_signals(shutdown.clone())?;
        let addr_file = args.addr_file.clone();
        let _follower = super::link_hub::follow_revocations(Arc::clone(&hub), revocations);
        let _watcher = super::link_hub_watch::watch_registry(Arc::clone(&hub), super::link_hub_watch::WATCH_EVERY, shutdown.clone());
        super::http::serve(state, args.listen, Some(hub), tls, shutdown, move |addr| {
            if let Some(f) = addr_file {
                // Written then renamed, so a poller never reads half an address.
                let tmp = f.with_extension("tmp");
                std::fs::write(&tmp, addr.to_string())?;
                std::fs::rename(&tmp, &f)?;
            }
            println!("herdr-mcp edge listening on {scheme}://{addr}");
            std::io::stdout().flush()
        })
        .await
    })
}

pub fn run_connector(cmd: ConnectorCommand) -> anyhow::Result<()> {
    match cmd {
        ConnectorCommand::Approve { request_id, socket, state } => approve(&request_id, socket, &state.resolve()?),
        ConnectorCommand::List { json, state } => list(json, &state.resolve()?),
        ConnectorCommand::Revoke { connector_id, confirm, state } => {
            if !confirm {
                anyhow::bail!("revoking {connector_id} cannot be undone; run again with --confirm");
            }
            let store = open_store(&state.resolve()?)?;
            let who = format!("cli:{}", whoami());
            let r = connectors::revoke(&store, &connector_id, &who).map_err(anyhow::Error::msg)?;
            println!("{}", serde_json::to_string(&r)?);
            Ok(())
        }
        ConnectorCommand::Cancel { request_id, state } => {
            let store = open_store(&state.resolve()?)?;
            connectors::cancel(&store, &request_id).map_err(anyhow::Error::msg)?;
            println!("cancelled {request_id}");
            Ok(())
        }
    }
}

pub(crate) fn whoami() -> String {
    std::env::var("USER").ok().filter(|u| !u.is_empty()).unwrap_or_else(|| nix::unistd::getuid().to_string())
}

/// Asks the local runtime's `/health` over its Unix socket; an edge whose
/// workstation runtime is down would approve a connector that can do nothing.
fn check_runtime(socket: Option<PathBuf>) -> anyhow::Result<Value> {
    let env = |n: &str| std::env::var(n).ok();
    let socket = match socket {
        Some(s) => s,
        None => crate::server::config::default_socket_path(env("XDG_CONFIG_HOME").as_deref(), env("HOME").as_deref())?,
    };
    let fail = |m: String| anyhow::anyhow!("the local runtime at {} does not answer ({m}); start it with `herdr-mcp serve`", socket.display());
    let mut s = UnixStream::connect(&socket).map_err(|e| fail(e.to_string()))?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
    s.set_write_timeout(Some(Duration::from_secs(5))).ok();
    s.write_all(b"GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").map_err(|e| fail(e.to_string()))?;
    let mut raw = Vec::new();
    s.take(1 << 20).read_to_end(&mut raw).map_err(|e| fail(e.to_string()))?;
    let text = String::from_utf8_lossy(&raw);
    if !text.starts_with("HTTP/1.1 200") {
        return Err(fail(text.lines().next().unwrap_or("no answer").to_string()));
    }
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    serde_json::from_str(body).map_err(|_| fail("its /health is not JSON".into()))
}

fn approve(request_id: &str, socket: Option<PathBuf>, dir: &Path) -> anyhow::Result<()> {
    let health = check_runtime(socket)?;
    let herdr = health.pointer("/herdr/status").and_then(Value::as_str).unwrap_or("unknown");
    let store = open_store(dir)?;
    let info = connectors::inspect(&store, request_id).map_err(anyhow::Error::msg)?;
    let tty = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
        .map_err(|e| anyhow::anyhow!("approve needs an interactive terminal to read the code (it is never taken from arguments or pipes): {e}"))?;
    let mut out = tty.try_clone()?;
    let mut input = BufReader::new(tty);
    writeln!(out, "Local runtime: ok (Herdr: {herdr})")?;
    writeln!(out, "Connection request {}", info.request_id)?;
    writeln!(out, "  client:       {} ({})", info.client_name.as_deref().unwrap_or("(unnamed)"), info.client_id)?;
    writeln!(out, "  redirect_uri: {}", info.redirect_uri)?;
    writeln!(out, "  scope:        {}", info.scope)?;
    writeln!(out, "  connector:    {}", info.connector_id)?;
    let who = format!("cli:{}", whoami());
    loop {
        write!(out, "Enter the 6-digit code shown on the approval page: ")?;
        out.flush()?;
        let mut line = String::new();
        if input.read_line(&mut line)? == 0 {
            anyhow::bail!("no code entered (end of input)");
        }
        match connectors::approve(&store, request_id, line.trim(), &who) {
            Ok(info) => {
                writeln!(out, "Approved: connector {} may now use MCP.", info.connector_id)?;
                println!("approved {} connector {}", info.request_id, info.connector_id);
                return Ok(());
            }
            Err(ApprovalError::InvalidCode { remaining }) => {
                writeln!(out, "That code does not match; {remaining} attempts left.")?;
            }
            Err(e) => anyhow::bail!("{e}"),
        }
    }
}

fn format_ms(ms: Option<i64>) -> String {
    let Some(ms) = ms else { return "-".into() };
    time::OffsetDateTime::from_unix_timestamp_nanos(ms as i128 * 1_000_000)
        .ok()
        .and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok())
        .unwrap_or_else(|| ms.to_string())
}

fn list(json: bool, dir: &Path) -> anyhow::Result<()> {
    let store = open_store(dir)?;
    let rows = connectors::list(&store)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    if rows.is_empty() {
        println!("no connectors");
        return Ok(());
    }
    println!("{:<28} {:<24} {:<8} {:<30} {:<30}", "CONNECTOR", "NAME", "STATUS", "AUTHORIZED", "LAST USED");
    for r in rows {
        let status = match (&r.status[..], &r.revoked_by) {
            ("revoked", Some(by)) if by == connectors::INACTIVE_REASON => format!("revoked ({by})"),
            _ => r.status.clone(),
        };
        println!(
            "{:<28} {:<24} {:<8} {:<30} {:<30}",
            r.connector_id,
            r.name,
            status,
            format_ms(Some(r.approved_at_ms)),
            format_ms(r.last_used_at_ms)
        );
    }
    Ok(())
}
