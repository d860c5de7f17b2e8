//! `herdr-mcp link` arguments. The device secret comes from a file or the
//! environment, never from argv, where other users could read it. On a computer
//! enrolled with `herdr-mcp worker connect`, no argument is needed: the edge,
//! workstation id and secret come from its device credential file. The answers
//! to changes go to the runtime's state database (`--state-dir`), so that a
//! restart of the link between a change and its delivery does not lose them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::LinkConfig;
use super::answer_store::ClaimedState;
use super::holder_lock::{HolderKind, HolderLockError};
use crate::state::{StateDb, StateError};

#[derive(clap::Args, Debug)]
pub struct LinkArgs {
    /// The edge's public base URL, e.g. https://edge.example.com [default: from
    /// the device credential of `worker connect`]
    #[arg(long, env = "HERDR_LINK_EDGE")]
    pub edge: Option<String>,
    /// This device's workstation id (its dev_… id for paired devices) [default:
    /// from the device credential]
    #[arg(long, env = "HERDR_LINK_WORKSTATION_ID")]
    pub workstation_id: Option<String>,
    /// File holding the device secret (must not be readable by others); else
    /// $HERDR_LINK_SECRET; else the device credential
    #[arg(long, value_name = "FILE", env = "HERDR_LINK_CREDENTIAL_FILE")]
    pub credential_file: Option<PathBuf>,
    /// The local runtime's Unix socket [default: as `serve`]
    #[arg(long, value_name = "PATH", env = crate::server::config::SOCKET_ENV)]
    pub socket: Option<PathBuf>,
    /// Device name offered to the edge, which takes it only while the device has
    /// no chosen name [default: the name in the device credential]
    #[arg(long)]
    pub name: Option<String>,
    /// Extra CA certificate (PEM) to trust for an https edge with a private CA
    #[arg(long, value_name = "FILE", env = "HERDR_LINK_CA_FILE")]
    pub ca_file: Option<PathBuf>,
    /// Directory of the state database, the same one `serve` uses, where the
    /// answers to changes wait until the edge has them, across a restart of the
    /// link too [default: $XDG_STATE_HOME/herdr-mcp, else ~/.local/state/herdr-mcp].
    /// A directory given here or in HERDR_MCP_STATE_DIR that cannot be used stops
    /// the link; if the default cannot be used, the link warns and keeps those
    /// answers in memory only, so a restart loses them. One process at a time
    /// holds a workstation's link on a state directory: while a `herdr-mcp serve
    /// --link` or another `link` holds it, this link refuses to start
    #[arg(long, value_name = "DIR", env = "HERDR_MCP_STATE_DIR")]
    pub state_dir: Option<PathBuf>,
}

/// Edge, workstation id, secret and offered name: flags and environment first,
/// then the device credential file for whatever they leave out.
fn identity(args: &LinkArgs) -> anyhow::Result<(String, String, String, Option<String>)> {
    let explicit_secret = args.credential_file.is_some() || std::env::var("HERDR_LINK_SECRET").is_ok_and(|s| !s.is_empty());
    if let (Some(edge), Some(ws), true) = (&args.edge, &args.workstation_id, explicit_secret) {
        return Ok((edge.clone(), ws.clone(), read_secret(args.credential_file.as_ref())?, args.name.clone()));
    }
    let path = crate::edge::devices_local::default_path()?;
    let device = crate::edge::devices_local::load(&path).map_err(|e| anyhow::anyhow!("{e} (or pass --edge, --workstation-id and --credential-file)"))?;
    let secret = if explicit_secret { read_secret(args.credential_file.as_ref())? } else { device.device_secret };
    Ok((
        args.edge.clone().unwrap_or(device.edge_origin),
        args.workstation_id.clone().unwrap_or(device.workstation_id),
        secret,
        Some(args.name.clone().unwrap_or(device.name)),
    ))
}

/// The link of an enrolled computer to its edge, serving the runtime at `socket`
/// (what `serve --link` runs beside the server).
pub fn enrolled_config(socket: PathBuf) -> anyhow::Result<LinkConfig> {
    let path = crate::edge::devices_local::default_path()?;
    let device = crate::edge::devices_local::load(&path).map_err(|e| anyhow::anyhow!("--link: {e}"))?;
    Ok(LinkConfig {
        edge: device.edge_origin,
        workstation_id: device.workstation_id,
        secret: device.device_secret,
        socket,
        name: Some(device.name),
        ca_file: std::env::var_os("HERDR_LINK_CA_FILE").map(PathBuf::from),
        timings: Default::default(),
    })
}

/// Where `serve --link` stands with its link at start.
pub enum ServeLinkState {
    /// The link is this runtime's; with the claimed state database, or None when
    /// the database is not open (answers then stay in memory).
    Ready(Option<ClaimedState>),
    /// Another process on this state directory (a standalone `link`, usually)
    /// holds the link: that one already links this workstation, and a second
    /// socket would only retire it at the edge and share its kept answers. So the
    /// runtime serves its local clients without a link of its own, rather than
    /// refusing to serve at all, and takes the link over once that holder stops
    /// ([`claim_when_free`] on this database).
    HeldElsewhere(Arc<StateDb>),
}

/// Claims the link for `serve --link`, saying in the log what it means when it
/// cannot.
pub fn serve_link_state(cfg: &LinkConfig, db: Option<&Arc<StateDb>>) -> ServeLinkState {
    let Some(db) = db else {
        tracing::warn!(
            "the state database is not open: the link keeps the answers to changes in memory only, and a restart loses those the edge has not received yet"
        );
        return ServeLinkState::Ready(None);
    };
    match ClaimedState::claim(Arc::clone(db), &cfg.workstation_id, HolderKind::Serve) {
        Ok(claim) => ServeLinkState::Ready(Some(claim)),
        Err(e) => {
            tracing::warn!(
                "--link: {e}; this runtime serves its local clients without the edge link until that process stops"
            );
            ServeLinkState::HeldElsewhere(Arc::clone(db))
        }
    }
}

/// How often `serve --link` looks whether the process holding its link has
/// stopped. A look is one `open` and one non-blocking `flock`.
pub const TAKEOVER_POLL: std::time::Duration = std::time::Duration::from_secs(2);

/// Waits until the link that another process held when `serve --link` started is
/// free, and claims it; None when the runtime shuts down first, or when the lock
/// cannot be taken for another reason than a holder (said in the log).
pub async fn claim_when_free(cfg: &LinkConfig, db: Arc<StateDb>, stop: &CancellationToken) -> Option<ClaimedState> {
    let mut poll = tokio::time::interval(TAKEOVER_POLL);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    poll.tick().await;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return None,
            _ = poll.tick() => {}
        }
        match ClaimedState::claim(Arc::clone(&db), &cfg.workstation_id, HolderKind::Serve) {
            Ok(claim) => {
                tracing::info!("--link: the other holder of workstation {}'s link stopped; this runtime links it now", cfg.workstation_id);
                return Some(claim);
            }
            Err(HolderLockError::Held { .. }) => {}
            Err(e) => {
                tracing::warn!("--link: {e}; this runtime stops waiting for the edge link");
                return None;
            }
        }
    }
}

fn read_secret(file: Option<&PathBuf>) -> anyhow::Result<String> {
    use std::os::unix::fs::PermissionsExt;
    let secret = match file {
        Some(f) => {
            let meta = std::fs::metadata(f).map_err(|e| anyhow::anyhow!("cannot read the credential file {}: {e}", f.display()))?;
            if meta.permissions().mode() & 0o077 != 0 {
                anyhow::bail!("the credential file {} is readable by others; make it 0600", f.display());
            }
            std::fs::read_to_string(f).map_err(|e| anyhow::anyhow!("cannot read the credential file {}: {e}", f.display()))?
        }
        None => std::env::var("HERDR_LINK_SECRET")
            .map_err(|_| anyhow::anyhow!("no device secret: pass --credential-file or set HERDR_LINK_SECRET"))?,
    };
    let secret = secret.trim().to_string();
    if secret.is_empty() {
        anyhow::bail!("the device secret is empty");
    }
    Ok(secret)
}

pub fn run_link(args: LinkArgs) -> anyhow::Result<()> {
    let env = |n: &str| std::env::var(n).ok();
    let (edge, workstation_id, secret, name) = identity(&args)?;
    // Checked now: the link otherwise first waits for the local runtime, and only
    // then finds that it can never reach this edge.
    super::session::ws_url_of(&edge, &workstation_id).map_err(anyhow::Error::msg)?;
    let socket = match args.socket {
        Some(s) => s,
        None => crate::server::config::default_socket_path(env("XDG_CONFIG_HOME").as_deref(), env("HOME").as_deref())?,
    };
    // Claimed before anything connects: a second holder must stop here, not
    // after it has replayed or forgotten the first one's answers.
    let state = match open_state(args.state_dir.as_deref())? {
        Some(db) => Some(ClaimedState::claim(db, &workstation_id, HolderKind::Standalone)?),
        None => None,
    };
    let cfg = LinkConfig {
        edge,
        workstation_id,
        secret,
        socket,
        name,
        ca_file: args.ca_file,
        timings: Default::default(),
    };
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(crate::server::logging::stderr_wants_colour())
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("HERDR_MCP_LOG").unwrap_or_else(|_| crate::server::logging::DEFAULT_FILTER.into()))
        .try_init();
    if let Some(claim) = &state {
        tracing::info!(state_db = %claim.db_path().display(), "answers to changes are kept on disk until the edge has them");
    }
    // One thread: a call through the link is a few socket reads and writes, and
    // on one thread they cost no wake-ups of other threads (measured on 2 cores:
    // with two workers most of the link's CPU per call went to waking them).
    // Database work runs on the blocking pool as before.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| anyhow::anyhow!("cannot start the async runtime: {e}"))?;
    rt.block_on(async move {
        let stop = CancellationToken::new();
        crate::server::cancel_on_signals(stop.clone())?;
        super::run_with_state(cfg, stop, state).await.map_err(|reason| anyhow::anyhow!("link stopped: {reason}"))
    })
}

/// The state database for the kept answers, resolved as `serve` resolves it.
/// As with `serve`, a directory the user chose must work, while a default that
/// does not only costs durability: the link still forwards calls, and says on
/// stderr (whatever the log filter) what is lost.
fn open_state(flag: Option<&Path>) -> anyhow::Result<Option<Arc<StateDb>>> {
    let (dir, explicit) = crate::state::state_dir_from_env(flag);
    // Registered as a boot like any process that opens the database; it owns no
    // exec session or ledger row, so the runtime's recovery forgets it once it ends.
    let opened =
        dir.map_err(StateError::from).and_then(|dir| StateDb::open(&dir, &crate::edge::secrets::random_hex::<8>()));
    match opened {
        Ok(db) => Ok(Some(Arc::new(db))),
        Err(e) if explicit => Err(anyhow::anyhow!("{e} (the link keeps the answers to changes there until the edge has them)")),
        Err(e) => {
            eprintln!(
                "herdr-mcp: warning: {e}; the answers to changes are kept in memory only, and a restart of this link \
                 loses those the edge has not received yet (pass --state-dir DIR to keep them on disk)"
            );
            Ok(None)
        }
    }
}
