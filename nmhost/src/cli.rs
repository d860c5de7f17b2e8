//! Command line: host mode when Chrome starts us (argv[1] is the caller's origin), otherwise
//! `install` / `status` / `uninstall` of the host manifest.

use crate::chunking::failure_frame;
use crate::install::{self, Browser, Inspected, Location, Manifest, Removal};
use crate::messages::HostError;
use crate::origin;
use crate::runtime_client::RuntimeClient;
use crate::session::{run_session, HostContext, SessionEnd};
use crate::socket_path;
use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

const ABOUT: &str = "Native Messaging host for the herdr-mcp browser extension.

Chrome (or Chromium, Brave, Edge) starts this program itself when the extension connects; it then
relays the extension's calls over stdin/stdout to the herdr-mcp runtime's Unix socket
($HERDR_EXTENSION_IPC_SOCKET, else $XDG_CONFIG_HOME/herdr-mcp/extension.sock, else
~/.config/herdr-mcp/extension.sock). Only the pinned extension origin is accepted
($HERDR_EXTENSION_ORIGIN overrides it for development).

You run it yourself only to register it with a browser:
  herdr-nmhost install                      # every browser installed or with a profile folder
  herdr-nmhost install --browser chromium   # one browser
  herdr-nmhost install --user-data-dir DIR  # a browser started with --user-data-dir=DIR
  herdr-nmhost status                       # what is registered where, and whether it works
                                            # (exit 1 when nothing works or one is broken)
  herdr-nmhost uninstall                    # remove what install wrote (nothing else)

Logs go to stderr; set HERDR_NMHOST_LOG (e.g. debug) for more.";

#[derive(Parser, Debug)]
#[command(name = "herdr-nmhost", version, about = "Native Messaging host for the herdr-mcp browser extension", long_about = ABOUT)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args, Debug)]
struct Target {
    /// chrome, chromium, brave, edge or all (default: all; install writes only where the
    /// browser's profile folder exists or its program is on PATH)
    #[arg(long, value_name = "BROWSER")]
    browser: Option<String>,
    /// A browser profile started with --user-data-dir=DIR: use DIR/NativeMessagingHosts.
    #[arg(long, value_name = "DIR", conflicts_with = "browser")]
    user_data_dir: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Register this host with the browser(s).
    Install {
        #[command(flatten)]
        target: Target,
        /// Extension id to allow (32 letters a-p); default: $HERDR_EXTENSION_ORIGIN or the pinned id.
        #[arg(long, value_name = "ID")]
        extension_id: Option<String>,
        /// Host binary the manifest points at (default: this executable).
        #[arg(long, value_name = "PATH")]
        binary: Option<PathBuf>,
    },
    /// Show where the host is registered and whether each registration works; exits 1 when no
    /// registration works or one points at a missing binary.
    Status {
        #[command(flatten)]
        target: Target,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Remove the manifests that install wrote (others are left alone).
    Uninstall {
        #[command(flatten)]
        target: Target,
    },
}

/// Returns the process exit code.
pub fn main(args: Vec<OsString>) -> i32 {
    if let Some(caller) = args.get(1).and_then(|a| a.to_str()).filter(|a| a.starts_with("chrome-extension://")) {
        return host_mode(caller);
    }
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    match run_command(cli.command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("herdr-nmhost: {e:#}");
            1
        }
    }
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("HERDR_NMHOST_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    // stdout carries frames only; logs must never reach it. Chrome hands stderr to its
    // own log, where colour escapes would only garble the lines.
    use std::io::IsTerminal;
    let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_ansi(colour).with_writer(std::io::stderr).try_init();
}

fn refuse_and_exit(error: &HostError) -> i32 {
    tracing::warn!(%error, "refusing the caller");
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(&failure_frame("error", None, error)).and_then(|()| stdout.flush());
    1
}

fn host_mode(caller: &str) -> i32 {
    // Chrome always connects pipes; a terminal means a person ran the manifest's command
    // by hand, and would otherwise face a silent wait for a binary frame.
    use std::io::IsTerminal;
    if std::io::stdin().is_terminal() {
        eprintln!(
            "herdr-nmhost: the browser starts this host itself and talks to it over pipes, not a terminal; \
             check its registration with `{me} status`, or register it with `{me} install`",
            me = self_command()
        );
        return 2;
    }
    init_logging();
    let expected = match origin::expected_origin(std::env::var(origin::ORIGIN_ENV).ok().as_deref()) {
        Ok(o) => o,
        Err(e) => return refuse_and_exit(&e),
    };
    if let Err(e) = origin::check_caller(caller, &expected) {
        return refuse_and_exit(&e);
    }
    let socket = socket_path::resolve_from_env().unwrap_or_default();
    let ctx = Arc::new(HostContext { client: RuntimeClient::new(socket), extension_origin: expected });
    // One thread is plenty for a relay, and it starts fastest (one-shot calls pay for startup).
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "cannot start the async runtime");
            return 1;
        }
    };
    let end = runtime.block_on(async move {
        let (input, output) = stdio();
        run_session(input, output, ctx).await
    });
    tracing::debug!(?end, "session ended");
    // Tokio's stdin reader sits in a blocking read that runtime shutdown would wait for;
    // everything worth writing has been flushed, so leave without waiting.
    runtime.shutdown_background();
    match end {
        SessionEnd::Desync => 1,
        SessionEnd::InputClosed | SessionEnd::OneShotDone | SessionEnd::Truncated | SessionEnd::OutputClosed => 0,
    }
}

type Input = Box<dyn tokio::io::AsyncRead + Unpin + Send>;
type Output = Box<dyn tokio::io::AsyncWrite + Unpin + Send>;

/// Stdin/stdout as non-blocking pipes registered with the reactor when they are pipes (always,
/// under Chrome), else tokio's thread-backed stdio. The pipe path saves a thread hand-off per
/// read and per write, which is most of the host's own share of a round trip.
fn stdio() -> (Input, Output) {
    use std::os::fd::AsFd;
    use tokio::net::unix::pipe;
    let input: Input = match std::io::stdin().as_fd().try_clone_to_owned().map(pipe::Receiver::from_owned_fd) {
        Ok(Ok(pipe)) => Box::new(pipe),
        _ => Box::new(tokio::io::stdin()),
    };
    let output: Output = match std::io::stdout().as_fd().try_clone_to_owned().map(pipe::Sender::from_owned_fd) {
        Ok(Ok(pipe)) => Box::new(pipe),
        _ => Box::new(tokio::io::stdout()),
    };
    (input, output)
}

fn locations_for(target: &Target, for_writing: bool) -> Result<Vec<Location>> {
    if let Some(dir) = &target.user_data_dir {
        return install::locations(&[], Some(dir));
    }
    let explicit = target.browser.as_deref().filter(|b| *b != "all");
    let browsers = match target.browser.as_deref() {
        None => Browser::ALL.to_vec(),
        Some(name) => Browser::parse(name)
            .with_context(|| format!("unknown browser {name:?} (chrome, chromium, brave, edge or all)"))?,
    };
    let all = install::locations(&browsers, None)?;
    if !for_writing || explicit.is_some() {
        return Ok(all);
    }
    // Without an explicit browser, only register with browsers that are there, so installing
    // does not create config trees for browsers that are not. A browser installed but never
    // started has no profile folder yet; its program on PATH counts, so that a first install
    // on a fresh machine already works when the browser starts.
    let path = std::env::var_os("PATH").unwrap_or_default();
    let present: Vec<Location> = browsers
        .iter()
        .zip(all)
        .filter(|(browser, l)| l.dir.parent().is_some_and(|p| p.is_dir()) || browser.is_on_path(&path))
        .map(|(_, l)| l)
        .collect();
    if present.is_empty() {
        bail!(
            "no Chrome, Chromium, Brave or Edge found (neither a profile folder nor its program on PATH): install one, or name it with --browser chrome|chromium|brave|edge (or --user-data-dir DIR)"
        );
    }
    Ok(present)
}

/// What `status` found, as its exit code: 0 only when at least one registration works and none
/// is broken, so scripts (and a user's `&&`) can tell without parsing the text.
fn status_exit_code(statuses: &[install::Status]) -> i32 {
    let working = statuses.iter().any(|s| matches!(s.kind, Inspected::Ours { binary_ok: true, .. }));
    let broken = statuses.iter().any(|s| matches!(s.kind, Inspected::Ours { binary_ok: false, .. }));
    if working && !broken { 0 } else { 1 }
}

fn run_command(command: Command) -> Result<i32> {
    match command {
        Command::Install { target, extension_id, binary } => {
            let origin = match extension_id {
                Some(id) if origin::is_extension_id(&id) => origin::origin_for_id(&id),
                Some(id) => bail!("--extension-id {id:?} is not 32 letters a-p"),
                None => origin::expected_origin(std::env::var(origin::ORIGIN_ENV).ok().as_deref())?,
            };
            let binary = match binary {
                Some(b) => b,
                None => std::env::current_exe().context("cannot find this executable")?,
            };
            let binary = install::resolve_binary(&binary)?;
            let manifest = Manifest::ours(&binary, &origin);
            let path_env = std::env::var_os("PATH").unwrap_or_default();
            let home = std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
            let (mut installed, mut refused) = (0, 0);
            for location in locations_for(&target, true)? {
                // A Snap browser never starts a native host: writing its manifest and saying
                // "installed" would be false. (A --user-data-dir location names no browser.)
                let profile = location.dir.parent().unwrap_or(&location.dir);
                let snap = Browser::parse(&location.label)
                    .filter(|b| b.len() == 1)
                    .and_then(|b| b[0].snap_location(&path_env, home.as_deref(), profile));
                if let Some(at) = snap {
                    refused += 1;
                    eprintln!(
                        "{}: not installed: this {} is a Snap ({}), and Snap confinement does not let a browser start native messaging hosts; use Google Chrome, Brave or a Chromium from a .deb/.rpm package",
                        location.label,
                        location.label,
                        at.display()
                    );
                    continue;
                }
                let path = install::install_at(&location, &manifest)?;
                installed += 1;
                println!("{}: installed {} → {} (origin {origin})", location.label, path.display(), binary.display());
            }
            Ok(if installed == 0 && refused > 0 { 1 } else { 0 })
        }
        Command::Status { target, json } => {
            let statuses: Vec<_> = locations_for(&target, false)?.iter().map(install::status_at).collect();
            if json {
                let rows: Vec<serde_json::Value> = statuses.iter().map(status_json).collect();
                println!("{}", serde_json::to_string_pretty(&rows)?);
            } else {
                for s in &statuses {
                    println!("{}", status_line(s));
                }
            }
            let code = status_exit_code(&statuses);
            if code != 0 && !statuses.iter().any(|s| matches!(s.kind, Inspected::Ours { .. })) {
                eprintln!("herdr-nmhost: not registered with any browser here; run `{} install`", self_command());
            }
            Ok(code)
        }
        Command::Uninstall { target } => {
            for location in locations_for(&target, false)? {
                match install::uninstall_at(&location)? {
                    Removal::Removed(p) => println!("{}: removed {}", location.label, p.display()),
                    Removal::NotInstalled => println!("{}: nothing installed", location.label),
                    Removal::KeptForeign(p) => {
                        println!("{}: left {} alone (not written by herdr-nmhost)", location.label, p.display())
                    }
                }
            }
            Ok(0)
        }
    }
}

/// How a message names this program in a command to run: `herdr-nmhost` when `PATH` finds this
/// very executable under that name, else its absolute path (a build folder, a moved install),
/// so that the command works as printed.
fn self_command() -> String {
    let Some(exe) = std::env::current_exe().ok().and_then(|p| p.canonicalize().ok()) else {
        return "herdr-nmhost".to_owned();
    };
    let path = std::env::var_os("PATH").unwrap_or_default();
    let first = std::env::split_paths(&path)
        .filter(|d| d.is_absolute())
        .map(|d| d.join("herdr-nmhost"))
        .find(|p| p.is_file())
        .and_then(|p| p.canonicalize().ok());
    if first.as_deref() == Some(exe.as_path()) {
        return "herdr-nmhost".to_owned();
    }
    let shown = exe.display().to_string();
    if shown.bytes().all(|b| b.is_ascii_alphanumeric() || b"/._-+=:,@".contains(&b)) {
        shown
    } else {
        format!("'{}'", shown.replace('\'', "'\\''"))
    }
}

fn status_json(s: &install::Status) -> serde_json::Value {
    let path = s.location.manifest_path().display().to_string();
    match &s.kind {
        Inspected::Missing => serde_json::json!({"location": s.location.label, "manifest": path, "installed": false}),
        Inspected::Foreign => {
            serde_json::json!({"location": s.location.label, "manifest": path, "installed": false, "foreign": true})
        }
        Inspected::Ours { manifest, binary_ok } => serde_json::json!({
            "location": s.location.label, "manifest": path, "installed": true,
            "binary": manifest.path, "binary_ok": binary_ok, "allowed_origins": manifest.allowed_origins,
        }),
    }
}

fn status_line(s: &install::Status) -> String {
    let path = s.location.manifest_path();
    match &s.kind {
        Inspected::Missing => format!("{}: not installed ({})", s.location.label, path.display()),
        Inspected::Foreign => format!("{}: {} exists but was not written by herdr-nmhost", s.location.label, path.display()),
        Inspected::Ours { manifest, binary_ok } => format!(
            "{}: installed {} → {} ({}), origins {}",
            s.location.label,
            path.display(),
            manifest.path,
            if *binary_ok { "binary ok".to_string() } else { format!("binary MISSING: run `{} install` again", self_command()) },
            manifest.allowed_origins.join(", ")
        ),
    }
}
