//! `herdr-mcp edge init|pair|serve` (and `edge automation`, in
//! [`super::automation_cli`]); the `connector` commands live in
//! [`super::connectors_cli`] and are re-exported here.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

pub use super::connectors_cli::{ConnectorCommand, run_connector};

use super::clock::SystemClock;
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
    /// Serve OAuth and the public /mcp endpoint: HTTPS with --tls-cert and --tls-key,
    /// else plain HTTP behind a reverse proxy that terminates TLS. --issuer is always
    /// the public https URL.
    Serve(EdgeServeArgs),
    /// Create, list, rotate or revoke automation clients: scripts that get
    /// 1-hour tokens bound to one device (client_credentials).
    #[command(subcommand)]
    Automation(super::automation_cli::AutomationCommand),
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
    /// Name of this deployment, reported as `edgeEnv` by GET /health so monitors
    /// can tell e.g. a staging edge from production: 1 to 32 characters of a-z,
    /// 0-9, '_' or '-'
    #[arg(long = "env", value_name = "NAME", env = "HERDR_EDGE_ENV", default_value = super::DEFAULT_ENV,
          value_parser = super::parse_env_name)]
    pub env: String,
    /// A reverse proxy in front of this edge (repeatable). Only for requests
    /// whose TCP peer is one of these is `X-Forwarded-For` believed, and then only
    /// its right-most entry that is not itself a listed proxy: the address the
    /// per-source rate limits count and the approval page shows. Without it the
    /// header is ignored (anyone can send it), and requests through a proxy all
    /// count as the proxy's address
    #[arg(long = "trusted-proxy", value_name = "IP")]
    pub trusted_proxy: Vec<std::net::IpAddr>,
    /// A browser origin allowed to call /mcp (repeatable; `scheme://host[:port]`,
    /// `:*` for any port). A request carrying another `Origin` gets 403; requests
    /// without one, as server-to-server clients send them, pass. Default:
    /// https://chatgpt.com and https://chat.openai.com
    #[arg(long = "mcp-allowed-origin", value_name = "ORIGIN", env = "HERDR_EDGE_MCP_ALLOWED_ORIGINS",
          value_delimiter = ',')]
    pub mcp_allowed_origin: Vec<String>,
    /// Workstation links held at most. Past it a new link is refused (WebSocket
    /// close 1013 "edge_capacity_exceeded", logged) and retries later, while
    /// /health, /mcp and the links already held go on
    #[arg(long = "max-links", value_name = "N", env = "HERDR_EDGE_MAX_LINKS",
          default_value_t = super::link_hub::DEFAULT_MAX_LINKS as u64, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_links: u64,
    #[command(flatten)]
    pub state: StateDirArg,
}

pub(crate) fn open_store(dir: &Path) -> anyhow::Result<Arc<EdgeStore>> {
    Ok(Arc::new(EdgeStore::open(dir, Arc::new(SystemClock))?))
}

pub fn run_edge(cmd: EdgeCommand) -> anyhow::Result<()> {
    match cmd {
        EdgeCommand::Init(args) => {
            // A wrong --issuer stops init before it creates anything.
            if let Some(issuer) = &args.issuer {
                EdgeConfig::new(issuer).map_err(anyhow::Error::msg)?;
            }
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
        EdgeCommand::Automation(cmd) => super::automation_cli::run_automation(cmd),
    }
}

fn serve(args: EdgeServeArgs) -> anyhow::Result<()> {
    let mut config = EdgeConfig::new(&args.issuer).and_then(|c| c.with_env(&args.env)).map_err(anyhow::Error::msg)?;
    if !args.mcp_allowed_origin.is_empty() {
        config = config.with_mcp_allowed_origins(args.mcp_allowed_origin.clone());
    }
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(super::tls::server_config(cert, key)?),
        _ => None,
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    // Only a warning: inside a container or a private network a proxy on another
    // address may be the one that terminates TLS.
    if tls.is_none() && !args.listen.ip().is_loopback() {
        eprintln!(
            "herdr-mcp edge: warning: plain HTTP on {}, not a loopback address: tokens and device secrets cross that network unencrypted unless a TLS proxy sits in front; else pass --tls-cert and --tls-key, or listen on 127.0.0.1",
            args.listen
        );
    }
    let store = open_store(&args.state.resolve()?)?;
    let orphans = super::forward_pending::settle_orphans(&store)?;
    if orphans > 0 {
        eprintln!("herdr-mcp edge: {orphans} mutation(s) sent before the last stop are marked uncertain");
    }
    let (catalog, contract) = local_runtime_contract();
    let devices = Arc::new(DeviceRegistry::new(Arc::clone(&store)));
    let hub = LinkHub::new(Arc::clone(&devices) as Arc<dyn super::link_hub_auth::LinkAuthenticator>, contract, Arc::clone(&store));
    hub.set_max_links(usize::try_from(args.max_links).unwrap_or(usize::MAX));
    let revocations = devices.subscribe_revocations();
    let router = LinkRouter::new(Arc::clone(&hub), Arc::clone(&store), catalog);
    let limits = super::ratelimit::SourceLimits::with_trusted_proxies(args.trusted_proxy.clone());
    let state = Arc::new(EdgeState { config, store, router: Arc::new(router), devices, allow_loopback_cimd: false, limits });
    let _ = tracing_subscriber::fmt().with_writer(std::io::stderr).with_ansi(crate::server::logging::stderr_wants_colour()).with_env_filter(
        tracing_subscriber::EnvFilter::try_from_env("HERDR_MCP_LOG").unwrap_or_else(|_| crate::server::logging::DEFAULT_FILTER.into()),
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

pub(crate) fn whoami() -> String {
    std::env::var("USER").ok().filter(|u| !u.is_empty()).unwrap_or_else(|| nix::unistd::getuid().to_string())
}
