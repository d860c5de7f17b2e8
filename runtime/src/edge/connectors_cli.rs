//! `herdr-mcp connector approve|list|revoke|revoke-client|cancel`, from any
//! enrolled computer.
//!
//! Which edge the commands act on:
//! 1. `--edge-dir` (or `$HERDR_MCP_EDGE_DIR`) given: that state directory, opened
//!    directly — the edge host's own way in, as the same user as `edge serve`;
//! 2. else this computer's device credential (`device.json`, see
//!    [`super::devices_local`]): the edge's `/connectors/*` routes, authenticated
//!    as this device;
//! 3. else the default edge state directory, if `edge init` created one here;
//! 4. else an error saying how to get either.
//!
//! `approve` first checks that the local runtime answers (an approved connector
//! on a computer whose runtime is down can do nothing), shows the request, then
//! reads the 6-digit code from the controlling terminal with echo off — never from
//! arguments or stdin, so a code cannot leak into shell history or be scripted.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use serde_json::{Value, json};

use super::cli::{StateDirArg, open_store, whoami};
use super::connectors::{self, ApprovalError, ApprovalInfo};
use super::connectors_inventory::inventory;
use super::connectors_listing::{Listing, parse_listing};
use super::connectors_table::{older_note, render_older, render_table};
use super::connectors_revoke_client::revoke_client;
use super::devices_cli::{DeviceFileArgs, call_answer, read_code_no_echo};
use super::devices_local::{self, LocalDevice, LocalDeviceError};
use super::store::{EdgeStore, StoreError};

const CODE_PROMPT: &str = "Enter the 6-digit code shown on the approval page: ";
const RUNTIME_CHECK_TIMEOUT: Duration = Duration::from_secs(5);
const MAX_HEALTH_BYTES: u64 = 1 << 20;

/// Where the edge is: its state directory, or this computer's enrollment.
#[derive(clap::Args, Debug, Clone)]
pub struct EdgeAccess {
    #[command(flatten)]
    pub state: StateDirArg,
    #[command(flatten)]
    pub device: DeviceFileArgs,
}

#[derive(clap::Subcommand, Debug)]
pub enum ConnectorCommand {
    /// Approve a pending connection; asks for the 6-digit code on the terminal.
    Approve {
        /// The request id the sign-in page shows
        request_id: String,
        /// The local runtime's Unix socket to check first [default: as `serve`]
        #[arg(long, value_name = "PATH", env = crate::server::config::SOCKET_ENV)]
        socket: Option<PathBuf>,
        #[command(flatten)]
        edge: EdgeAccess,
    },
    /// List connectors (id, name, status, authorized at, last used, live
    /// tokens, client) and the clients fenced without one.
    List {
        /// Print the raw inventory as JSON instead of a table
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        edge: EdgeAccess,
    },
    /// Revoke a connector: its tokens stop working on the next request.
    Revoke {
        /// The connector (conn_…), as `connector list` shows it
        connector_id: String,
        /// Required: revocation cannot be undone
        #[arg(long)]
        confirm: bool,
        #[command(flatten)]
        edge: EdgeAccess,
    },
    /// Revoke every connector of one OAuth client (the CLIENT column of `list`)
    /// and refuse the client from then on, even one never approved.
    RevokeClient {
        /// The OAuth client: `dcr-…` for a registered one, or its metadata URL
        client_id: String,
        /// Required: revocation cannot be undone
        #[arg(long)]
        confirm: bool,
        #[command(flatten)]
        edge: EdgeAccess,
    },
    /// Withdraw a pending (or approved but unused) connection request.
    Cancel {
        /// The request id the sign-in page shows
        request_id: String,
        #[command(flatten)]
        edge: EdgeAccess,
    },
}

/// The connector actions, whichever way the edge is reached. Approval failures
/// are [`ApprovalError`]s inside the `anyhow::Error`, so `approve` can tell a
/// wrong code (ask again) from the rest.
trait ConnectorAdmin {
    fn describe(&self) -> String;
    fn inspect(&self, request_id: &str) -> anyhow::Result<ApprovalInfo>;
    fn approve(&self, request_id: &str, code: &str) -> anyhow::Result<ApprovalInfo>;
    fn cancel(&self, request_id: &str) -> anyhow::Result<()>;
    /// The inventory, or the plainer list of an edge that predates it.
    fn list(&self) -> anyhow::Result<Listing>;
    /// The revocation receipt `{ok, connector_id, revoked_at_ms, deleted_tokens}`.
    fn revoke(&self, connector_id: &str) -> anyhow::Result<Value>;
    /// The receipt `{ok, client_id, revoked_connectors, deleted_tokens, …,
    /// legacy_tombstone_created}`.
    fn revoke_client(&self, client_id: &str) -> anyhow::Result<Value>;
}

struct LocalEdge {
    store: Arc<EdgeStore>,
    who: String,
}

impl ConnectorAdmin for LocalEdge {
    fn describe(&self) -> String {
        format!("edge state {}", self.store.dir().display())
    }
    fn inspect(&self, request_id: &str) -> anyhow::Result<ApprovalInfo> {
        Ok(connectors::inspect(&self.store, request_id)?)
    }
    fn approve(&self, request_id: &str, code: &str) -> anyhow::Result<ApprovalInfo> {
        Ok(connectors::approve(&self.store, request_id, code, &self.who)?)
    }
    fn cancel(&self, request_id: &str) -> anyhow::Result<()> {
        Ok(connectors::cancel(&self.store, request_id)?)
    }
    fn list(&self) -> anyhow::Result<Listing> {
        Ok(Listing::Current(inventory(&self.store)?))
    }
    fn revoke(&self, connector_id: &str) -> anyhow::Result<Value> {
        Ok(serde_json::to_value(connectors::revoke(&self.store, connector_id, &self.who)?)?)
    }
    fn revoke_client(&self, client_id: &str) -> anyhow::Result<Value> {
        Ok(serde_json::to_value(revoke_client(&self.store, client_id, &self.who)?)?)
    }
}

struct RemoteEdge {
    me: LocalDevice,
    ca: Option<PathBuf>,
}

/// The approval failure an edge answered with, by its wire code.
fn approval_error(code: &str, answer: &Value) -> Option<ApprovalError> {
    Some(match code {
        "not_found" => ApprovalError::NotFound,
        "expired" => ApprovalError::Expired,
        "locked" => ApprovalError::Locked,
        "already_approved" => ApprovalError::AlreadyApproved,
        "already_used" => ApprovalError::AlreadyUsed,
        "rejected" => ApprovalError::Rejected,
        "invalid_code" => ApprovalError::InvalidCode {
            remaining: answer.get("attempts_remaining").and_then(Value::as_i64).unwrap_or(0),
        },
        _ => return None,
    })
}

impl RemoteEdge {
    /// One call as this device; a refusal becomes an [`ApprovalError`] when
    /// `approval` and the code is one, else an error quoting the edge.
    fn call(&self, method: &str, path: &str, body: Option<Value>, approval: bool) -> anyhow::Result<Value> {
        let (status, v) = call_answer(&self.me.edge_origin, path, method, body, Some(&self.me), self.ca.as_ref())?;
        if (200..300).contains(&status) {
            return Ok(v);
        }
        let code = v.get("code").and_then(Value::as_str).unwrap_or("http_error");
        if let Some(e) = approval.then(|| approval_error(code, &v)).flatten() {
            return Err(e.into());
        }
        let message = v.get("message").and_then(Value::as_str).unwrap_or("");
        let hint = if status == 401 {
            format!(" (the edge no longer accepts device {}; was it revoked?)", self.me.device_id)
        } else {
            String::new()
        };
        anyhow::bail!("the edge refused ({status} {code}): {message}{hint}")
    }

    fn info(v: Value) -> anyhow::Result<ApprovalInfo> {
        serde_json::from_value(v).map_err(|e| anyhow::anyhow!("the edge's answer is not an approval request: {e}"))
    }
}

impl ConnectorAdmin for RemoteEdge {
    fn describe(&self) -> String {
        format!("edge {} as device {}", self.me.edge_origin, self.me.device_id)
    }
    fn inspect(&self, request_id: &str) -> anyhow::Result<ApprovalInfo> {
        Self::info(self.call("POST", "/connectors/inspect", Some(json!({"request_id": request_id})), true)?)
    }
    fn approve(&self, request_id: &str, code: &str) -> anyhow::Result<ApprovalInfo> {
        Self::info(self.call("POST", "/connectors/approve", Some(json!({"request_id": request_id, "code": code})), true)?)
    }
    fn cancel(&self, request_id: &str) -> anyhow::Result<()> {
        self.call("POST", "/connectors/cancel", Some(json!({"request_id": request_id})), true).map(|_| ())
    }
    fn list(&self) -> anyhow::Result<Listing> {
        let v = self.call("GET", "/connectors", None, false)?;
        parse_listing(v).map_err(|e| anyhow::anyhow!("the edge's connector inventory is malformed: {e}"))
    }
    fn revoke(&self, connector_id: &str) -> anyhow::Result<Value> {
        self.call("POST", "/connectors/revoke", Some(json!({"connector_id": connector_id, "confirm": true})), false)
    }
    fn revoke_client(&self, client_id: &str) -> anyhow::Result<Value> {
        self.call("POST", "/connectors/revoke-client", Some(json!({"client_id": client_id, "confirm": true})), false)
    }
}

/// Picks the way to the edge (see the module docs for the order).
fn reach(access: &EdgeAccess) -> anyhow::Result<Box<dyn ConnectorAdmin>> {
    let who = format!("cli:{}", whoami());
    if let Some(dir) = access.state.edge_dir.as_ref().filter(|d| !d.as_os_str().is_empty()) {
        return Ok(Box::new(LocalEdge { store: open_store(dir)?, who }));
    }
    let device_file = access.device.path()?;
    match devices_local::load(&device_file) {
        Ok(me) => return Ok(Box::new(RemoteEdge { me, ca: access.device.ca_file.clone() })),
        Err(LocalDeviceError::NotEnrolled(_)) => {}
        Err(e) => return Err(e.into()),
    }
    let dir = access.state.resolve()?;
    match EdgeStore::open(&dir, Arc::new(super::clock::SystemClock)) {
        Ok(store) => Ok(Box::new(LocalEdge { store: Arc::new(store), who })),
        Err(StoreError::NotInitialised(_)) => anyhow::bail!(
            "no edge to act on: this computer is not enrolled ({} does not exist) and holds no edge state ({}); \
             enroll it with `herdr-mcp worker connect <address>`, or on the edge host pass --edge-dir",
            device_file.display(),
            dir.display()
        ),
        Err(e) => Err(e.into()),
    }
}

pub fn run_connector(cmd: ConnectorCommand) -> anyhow::Result<()> {
    match cmd {
        ConnectorCommand::Approve { request_id, socket, edge } => approve(&request_id, socket, reach(&edge)?.as_ref()),
        ConnectorCommand::List { json, edge } => list(json, reach(&edge)?.as_ref()),
        ConnectorCommand::Revoke { connector_id, confirm, edge } => {
            if !confirm {
                anyhow::bail!("revoking {connector_id} cannot be undone; run again with --confirm");
            }
            println!("{}", serde_json::to_string(&reach(&edge)?.revoke(&connector_id)?)?);
            Ok(())
        }
        ConnectorCommand::RevokeClient { client_id, confirm, edge } => {
            if !confirm {
                anyhow::bail!("revoking every connector of client {client_id} cannot be undone; run again with --confirm");
            }
            let receipt = reach(&edge)?.revoke_client(&client_id).with_context(|| format!("cannot revoke client {client_id}"))?;
            println!("{}", serde_json::to_string(&receipt)?);
            Ok(())
        }
        ConnectorCommand::Cancel { request_id, edge } => {
            reach(&edge)?.cancel(&request_id)?;
            println!("cancelled {request_id}");
            Ok(())
        }
    }
}

/// Asks the local runtime's `/health` over its Unix socket.
fn check_runtime(socket: Option<PathBuf>) -> anyhow::Result<Value> {
    let env = |n: &str| std::env::var(n).ok();
    let socket = match socket {
        Some(s) => s,
        None => crate::server::config::default_socket_path(env("XDG_CONFIG_HOME").as_deref(), env("HOME").as_deref())?,
    };
    let fail = |m: String| anyhow::anyhow!("the local runtime at {} does not answer ({m}); start it with `herdr-mcp serve`", socket.display());
    let mut s = UnixStream::connect(&socket).map_err(|e| fail(e.to_string()))?;
    s.set_read_timeout(Some(RUNTIME_CHECK_TIMEOUT)).ok();
    s.set_write_timeout(Some(RUNTIME_CHECK_TIMEOUT)).ok();
    s.write_all(b"GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").map_err(|e| fail(e.to_string()))?;
    let mut raw = Vec::new();
    s.take(MAX_HEALTH_BYTES).read_to_end(&mut raw).map_err(|e| fail(e.to_string()))?;
    let text = String::from_utf8_lossy(&raw);
    if !text.starts_with("HTTP/1.1 200") {
        return Err(fail(text.lines().next().unwrap_or("no answer").to_string()));
    }
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    serde_json::from_str(body).map_err(|_| fail("its /health is not JSON".into()))
}

/// A remote-supplied string made safe for a terminal (no escape sequences).
fn printable(s: &str) -> String {
    s.chars().map(|c| if c.is_control() { '?' } else { c }).collect()
}

fn six_digits(code: &str) -> bool {
    code.len() == 6 && code.bytes().all(|b| b.is_ascii_digit())
}

fn approve(request_id: &str, socket: Option<PathBuf>, edge: &dyn ConnectorAdmin) -> anyhow::Result<()> {
    let health = check_runtime(socket)?;
    let herdr = health.pointer("/herdr/status").and_then(Value::as_str).unwrap_or("unknown");
    let info = edge.inspect(request_id)?;
    let mut out = std::fs::OpenOptions::new().write(true).open("/dev/tty").map_err(|e| {
        anyhow::anyhow!("approve needs an interactive terminal to read the code (it is never taken from arguments or pipes): {e}")
    })?;
    writeln!(out, "Local runtime: ok (Herdr: {herdr})")?;
    writeln!(out, "Connection request {} on {}", info.request_id, edge.describe())?;
    writeln!(out, "  client:       {} ({})", info.client_name.as_deref().unwrap_or("(unnamed)"), info.client_id)?;
    writeln!(out, "  redirect_uri: {}", info.redirect_uri)?;
    writeln!(out, "  resource:     {}", info.resource.as_deref().unwrap_or("(not reported by this edge)"))?;
    writeln!(out, "  scope:        {}", info.scope)?;
    writeln!(out, "  requested:    {}", super::connectors_table::format_ms(info.created_at_ms))?;
    writeln!(
        out,
        "  from:         {} — {}",
        info.requester_addr.as_deref().unwrap_or("(unknown address)"),
        info.requester_ua.as_deref().map(printable).unwrap_or_else(|| "(no user agent)".into())
    )?;
    writeln!(out, "Approve only a request you started yourself: this approves this one request, nothing else.")?;
    writeln!(out, "  connector:    {}", info.connector_id)?;
    loop {
        let code = read_code_no_echo(CODE_PROMPT)?;
        // A typo in the format is not a guess; the edge would refuse it without
        // counting, so say so here and ask again.
        if !six_digits(&code) {
            writeln!(out, "The code is 6 digits; try again.")?;
            continue;
        }
        match edge.approve(request_id, &code) {
            Ok(info) => {
                writeln!(out, "Approved: connector {} may now use MCP.", info.connector_id)?;
                println!("approved {} connector {}", info.request_id, info.connector_id);
                return Ok(());
            }
            Err(e) => match e.downcast_ref::<ApprovalError>() {
                Some(ApprovalError::InvalidCode { remaining }) => {
                    writeln!(out, "That code does not match; {remaining} attempts left.")?;
                }
                _ => return Err(e),
            },
        }
    }
}

fn list(json: bool, edge: &dyn ConnectorAdmin) -> anyhow::Result<()> {
    match edge.list()? {
        Listing::Current(inv) if json => println!("{}", serde_json::to_string_pretty(&inv)?),
        Listing::Current(inv) => print!("{}", render_table(&inv)),
        // The edge's own answer, not one padded out to the current shape, which
        // would claim it has no fenced clients; the note goes to stderr so the
        // output stays JSON.
        Listing::Older(old) if json => {
            println!("{}", serde_json::to_string_pretty(&old.answer)?);
            eprintln!("{}", older_note(&old));
        }
        Listing::Older(old) => print!("{}", render_older(&old)),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_codes_become_approval_errors() {
        let answer = json!({"ok": false, "code": "invalid_code", "attempts_remaining": 3});
        assert_eq!(approval_error("invalid_code", &answer), Some(ApprovalError::InvalidCode { remaining: 3 }));
        for e in [
            ApprovalError::NotFound,
            ApprovalError::Expired,
            ApprovalError::Locked,
            ApprovalError::AlreadyApproved,
            ApprovalError::AlreadyUsed,
            ApprovalError::Rejected,
        ] {
            assert_eq!(approval_error(e.code(), &json!({})), Some(e));
        }
        assert_eq!(approval_error("device_auth_required", &json!({})), None);
        assert!(six_digits("012345") && !six_digits("12345") && !six_digits("12345a") && !six_digits("1234567"));
    }
}
