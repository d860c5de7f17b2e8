//! `herdr-mcp worker pair|connect|rename|revoke` and `herdr-mcp device list|rename`:
//! the workstation side of spec §7. Every command but `connect` authenticates as
//! this device with the credential in [`super::devices_local`]; `connect` enrolls
//! this computer with a pairing address and the code, which it reads from the
//! controlling terminal with echo off (never from arguments or pipes).

use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

use super::devices::validate_name;
use super::devices_http::WORKSTATION_HEADER;
use super::devices_local::{self, LocalDevice};

const TIMEOUT: Duration = Duration::from_secs(20);
const MAX_ANSWER_BYTES: usize = 1024 * 1024;

#[derive(clap::Args, Debug, Clone)]
pub struct DeviceFileArgs {
    /// This device's credential file [default: $HERDR_MCP_DEVICE_FILE, else device.json in the state dir]
    #[arg(long = "device-file", value_name = "FILE")]
    pub device_file: Option<PathBuf>,
    /// An extra CA certificate (PEM) to trust for the edge's TLS (a private or self-signed edge)
    #[arg(long = "ca-file", value_name = "FILE", env = "HERDR_MCP_EDGE_CA_FILE")]
    pub ca_file: Option<PathBuf>,
}

impl DeviceFileArgs {
    pub(super) fn path(&self) -> anyhow::Result<PathBuf> {
        match &self.device_file {
            Some(p) => Ok(p.clone()),
            None => devices_local::default_path(),
        }
    }
}

#[derive(clap::Subcommand, Debug)]
pub enum WorkerCommand {
    /// Create a pairing for a new computer: prints the address and the 6-digit code.
    Pair {
        /// Name for the new device
        #[arg(long)]
        name: Option<String>,
        /// How long the pairing stays valid, 60 to 600 seconds
        #[arg(long, default_value_t = super::pairing::DEFAULT_TTL_S)]
        ttl: i64,
        #[command(flatten)]
        device: DeviceFileArgs,
    },
    /// Enroll this computer with an edge, using a pairing address; asks for the code.
    Connect {
        /// The address `worker pair` or `edge init` printed (`https://edge/pair#pair_…`)
        address: String,
        /// This device's name [default: the host name; with --recover, the name it has]
        #[arg(long)]
        name: Option<String>,
        /// Recover this existing device (dev_…) of a computer that lost its
        /// credential: it keeps its id and name, its old secret stops working
        #[arg(long, value_name = "DEVICE_ID")]
        recover: Option<String>,
        #[command(flatten)]
        device: DeviceFileArgs,
    },
    /// Rename this device.
    Rename {
        /// The new name: 1 to 64 characters
        name: String,
        #[command(flatten)]
        device: DeviceFileArgs,
    },
    /// Revoke a device by id for good; its link is closed and it cannot reconnect.
    Revoke {
        /// The device's immutable id (dev_…), as `device list` shows it
        device_id: String,
        /// Required: revocation cannot be undone
        #[arg(long)]
        confirm: bool,
        #[command(flatten)]
        device: DeviceFileArgs,
    },
}

#[derive(clap::Subcommand, Debug)]
pub enum DeviceCommand {
    /// List the devices enrolled with this device's edge: whether each is linked, when it was last
    /// heard, and its requests (ACTIVE: awaited by the edge; RUNNING: as its link last reported)
    List {
        /// Print JSON instead of a table
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        device: DeviceFileArgs,
    },
    /// Rename this device (same as `worker rename`).
    Rename {
        /// The new name: 1 to 64 characters
        name: String,
        #[command(flatten)]
        device: DeviceFileArgs,
    },
    /// On the edge host: revoke a device for good (its link closes, it never reconnects).
    Revoke(super::devices_admin::AdminArgs),
    /// On the edge host: suspend a device (its link closes and is refused until resumed).
    Suspend(super::devices_admin::AdminArgs),
    /// On the edge host: resume a suspended device (its link may connect again).
    Resume(super::devices_admin::AdminArgs),
}

/// One HTTP/1.1 exchange with the edge over TCP (loopback http) or TLS (https).
async fn exchange(
    url: &url::Url,
    method: &str,
    body: Option<&Value>,
    auth: Option<&LocalDevice>,
    tls: Arc<rustls::ClientConfig>,
) -> anyhow::Result<(u16, Value)> {
    let host = url.host_str().ok_or_else(|| anyhow::anyhow!("{url} has no host"))?.to_string();
    let port = url.port_or_known_default().ok_or_else(|| anyhow::anyhow!("{url} has no port"))?;
    let loopback = super::is_loopback_url(url);
    let tcp = tokio::net::TcpStream::connect((host.trim_matches(['[', ']']), port))
        .await
        .map_err(|e| anyhow::anyhow!("cannot reach the edge at {host}:{port}: {e}"))?;
    let io: Box<dyn crate::link::connect::Io> = match url.scheme() {
        "https" => {
            let name = rustls::pki_types::ServerName::try_from(host.trim_matches(['[', ']']).to_string())
                .map_err(|e| anyhow::anyhow!("{host} is not a TLS server name: {e}"))?;
            let stream = tokio_rustls::TlsConnector::from(tls)
                .connect(name, tcp)
                .await
                .map_err(|e| anyhow::anyhow!("TLS with the edge at {host} failed: {e}"))?;
            Box::new(stream)
        }
        "http" if loopback => Box::new(tcp),
        _ => anyhow::bail!("the edge address must be https (http only on loopback): {url}"),
    };
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| anyhow::anyhow!("HTTP with the edge failed: {e}"))?;
    tokio::spawn(conn);
    let mut req = http::Request::builder()
        .method(method)
        .uri(url.path())
        .header(http::header::HOST, url.host_str().unwrap_or_default())
        .header(http::header::ACCEPT, "application/json");
    if let Some(d) = auth {
        req = req.header(http::header::AUTHORIZATION, format!("Bearer {}", d.device_secret)).header(WORKSTATION_HEADER, &d.workstation_id);
    }
    let payload = match body {
        Some(b) => {
            req = req.header(http::header::CONTENT_TYPE, "application/json");
            bytes::Bytes::from(serde_json::to_vec(b)?)
        }
        None => bytes::Bytes::new(),
    };
    let resp = sender.send_request(req.body(Full::new(payload))?).await.map_err(|e| anyhow::anyhow!("the edge did not answer: {e}"))?;
    let status = resp.status().as_u16();
    let bytes = Limited::new(resp.into_body(), MAX_ANSWER_BYTES)
        .collect()
        .await
        .map_err(|e| anyhow::anyhow!("reading the edge's answer failed: {e}"))?
        .to_bytes();
    let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    Ok((status, value))
}

/// Runs one call on a small runtime, with an overall deadline; any HTTP status is
/// returned with the JSON answer (`null` when the answer is not JSON).
pub fn call_answer(
    origin: &str,
    path: &str,
    method: &str,
    body: Option<Value>,
    auth: Option<&LocalDevice>,
    ca: Option<&PathBuf>,
) -> anyhow::Result<(u16, Value)> {
    let url = url::Url::parse(&format!("{}{path}", origin.trim_end_matches('/')))
        .map_err(|e| anyhow::anyhow!("bad edge origin {origin:?}: {e}"))?;
    let tls = crate::link::connect::tls_config(ca.map(PathBuf::as_path)).map_err(anyhow::Error::msg)?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async {
        tokio::time::timeout(TIMEOUT, exchange(&url, method, body.as_ref(), auth, tls))
            .await
            .map_err(|_| anyhow::anyhow!("the edge did not answer within {} s", TIMEOUT.as_secs()))?
    })
}

/// [`call_answer`] where anything but a 2xx is an error naming the edge's code.
fn call(origin: &str, path: &str, method: &str, body: Option<Value>, auth: Option<&LocalDevice>, ca: Option<&PathBuf>) -> anyhow::Result<Value> {
    let (status, v) = call_answer(origin, path, method, body, auth, ca)?;
    if !(200..300).contains(&status) {
        let code = v.get("code").and_then(Value::as_str).unwrap_or("http_error");
        let msg = v.get("message").and_then(Value::as_str).unwrap_or("");
        anyhow::bail!("the edge refused ({status} {code}): {msg}");
    }
    Ok(v)
}

/// Reads one line from the controlling terminal with echo off, restoring the
/// terminal afterwards even on error.
pub(super) fn read_code_no_echo(prompt: &str) -> anyhow::Result<String> {
    use nix::sys::termios::{LocalFlags, SetArg, tcgetattr, tcsetattr};
    let tty = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
        .map_err(|e| anyhow::anyhow!("the code is read from an interactive terminal only (never from arguments or pipes), and none is open: {e}"))?;
    let mut out = tty.try_clone()?;
    let saved = tcgetattr(tty.as_fd()).map_err(|e| anyhow::anyhow!("cannot read the terminal settings: {e}"))?;
    let mut quiet = saved.clone();
    quiet.local_flags.remove(LocalFlags::ECHO);
    tcsetattr(tty.as_fd(), SetArg::TCSANOW, &quiet).map_err(|e| anyhow::anyhow!("cannot turn echo off: {e}"))?;
    write!(out, "{prompt}")?;
    out.flush()?;
    let mut line = String::new();
    let read = BufReader::new(tty.try_clone()?).read_line(&mut line);
    let _ = tcsetattr(tty.as_fd(), SetArg::TCSANOW, &saved);
    writeln!(out)?;
    if read? == 0 {
        anyhow::bail!("no code entered (end of input)");
    }
    Ok(line.trim().to_string())
}

fn host_name() -> Option<String> {
    let raw = std::fs::read_to_string("/proc/sys/kernel/hostname").or_else(|_| std::fs::read_to_string("/etc/hostname")).ok()?;
    validate_name(raw.trim()).ok()
}

/// `<origin>/pair#<pairing_id>` → (origin, pairing_id).
pub fn parse_address(address: &str) -> anyhow::Result<(String, String)> {
    let bad = || anyhow::anyhow!("{address:?} is not a pairing address (expected https://<edge>/pair#pair_…)");
    let url = url::Url::parse(address).map_err(|_| bad())?;
    // The same rule as the edge's --issuer: the code and the device secret never
    // travel in clear beyond this computer. Checked before the code is asked for.
    match url.scheme() {
        "https" => {}
        "http" if super::is_loopback_url(&url) => {}
        _ => anyhow::bail!("{address:?}: an edge is reached over https (http only on this computer's loopback)"),
    }
    let pairing_id = url.fragment().filter(|f| f.starts_with(super::pairing::PAIRING_PREFIX)).ok_or_else(bad)?.to_string();
    let base = url.path().strip_suffix("/pair").ok_or_else(bad)?;
    let origin = format!("{}{}", url.origin().ascii_serialization(), base);
    Ok((origin, pairing_id))
}

fn connect(address: &str, name: Option<String>, recover: Option<String>, args: &DeviceFileArgs) -> anyhow::Result<()> {
    let (origin, pairing_id) = parse_address(address)?;
    let path = args.path()?;
    if let Ok(existing) = devices_local::load(&path) {
        anyhow::bail!("this computer is already enrolled as {} ({}); remove that file to enroll again", existing.device_id, path.display());
    }
    let name = match (name, &recover) {
        (Some(n), _) => Some(validate_name(&n).map_err(|e| anyhow::anyhow!("{e}"))?),
        // A recovered device keeps the name it has unless one is asked for.
        (None, Some(_)) => None,
        (None, None) => host_name(),
    };
    let code = read_code_no_echo("Pairing code (6 digits): ")?;
    let mut body = json!({"pairing_id": pairing_id, "code": code});
    if let Some(n) = &name {
        body["name"] = json!(n);
    }
    if let Some(d) = &recover {
        body["recover_device_id"] = json!(d);
    }
    let v = call(&origin, "/devices/pairings/consume", "POST", Some(body), None, args.ca_file.as_ref())?;
    let recovered = v.get("recovered_existing").and_then(Value::as_bool).unwrap_or(false);
    let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string).ok_or_else(|| anyhow::anyhow!("the edge's answer lacks {k}"));
    let device = LocalDevice {
        edge_origin: origin.clone(),
        device_id: text("device_id")?,
        workstation_id: text("workstation_id")?,
        credential_id: text("credential_id")?,
        device_secret: text("device_secret")?,
        name: text("name")?,
        enrolled_at_ms: crate::edge::clock::Clock::now_ms(&crate::edge::clock::SystemClock),
    };
    if let Err(e) = devices_local::save(&path, &device) {
        if recovered {
            // Revoking would destroy the very device being recovered; another
            // pairing with --recover can re-key it again.
            anyhow::bail!("cannot store the device credential ({e}); run connect --recover {} again with a new pairing", device.device_id);
        }
        // An enrolled device whose secret is lost would stay listed forever: undo it.
        let undo = call(&origin, "/devices/revoke-self", "POST", None, Some(&device), args.ca_file.as_ref());
        anyhow::bail!("cannot store the device credential ({e}); the enrollment was {}", if undo.is_ok() { "revoked" } else { "left behind" });
    }
    let verb = if recovered { "recovered" } else { "enrolled" };
    println!("{verb} {} as {:?} with {origin}", device.device_id, device.name);
    println!("device secret (shown once; stored 0600 in {}): {}", path.display(), device.device_secret);
    Ok(())
}

fn print_pairing(address: &str, code: &str, expires_at_ms: i64) {
    let expires = time::OffsetDateTime::from_unix_timestamp_nanos(expires_at_ms as i128 * 1_000_000)
        .ok()
        .and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok())
        .unwrap_or_else(|| expires_at_ms.to_string());
    println!("pairing address: {address}");
    println!("code: {code}");
    println!("expires: {expires}");
    println!("on the new computer run: herdr-mcp worker connect \"{address}\"");
}

/// Prints a pairing created by the operator on the edge host (`edge init`/`edge pair`).
pub fn print_local_pairing(origin: &str, p: &super::pairing::Pairing) {
    print_pairing(&p.address(origin), &p.code, p.expires_at_ms);
}

fn enrolled(args: &DeviceFileArgs) -> anyhow::Result<LocalDevice> {
    Ok(devices_local::load(&args.path()?)?)
}

fn rename(name: &str, args: &DeviceFileArgs) -> anyhow::Result<()> {
    let path = args.path()?;
    let me = devices_local::load(&path)?;
    let body = json!({"workstation_id": me.workstation_id, "name": name});
    let v = call(&me.edge_origin, "/devices/rename-self", "POST", Some(body), Some(&me), args.ca_file.as_ref())?;
    let name = v.get("name").and_then(Value::as_str).ok_or_else(|| anyhow::anyhow!("the edge's answer lacks the new name"))?;
    // The link offers the stored name; keep it equal to what the edge now uses.
    devices_local::set_name(&path, name)
        .map_err(|e| anyhow::anyhow!("the edge renamed {} to {name:?}, but the local credential kept the old name: {e}", me.device_id))?;
    println!("renamed {} to {name:?}", me.device_id);
    Ok(())
}

pub fn run_worker(cmd: WorkerCommand) -> anyhow::Result<()> {
    match cmd {
        WorkerCommand::Pair { name, ttl, device } => {
            let me = enrolled(&device)?;
            let mut body = json!({"ttl_seconds": ttl});
            if let Some(n) = name {
                body["name"] = json!(n);
            }
            let v = call(&me.edge_origin, "/devices/pairings", "POST", Some(body), Some(&me), device.ca_file.as_ref())?;
            let origin = v.get("worker_origin").and_then(Value::as_str).unwrap_or(&me.edge_origin);
            let id = v.get("pairing_id").and_then(Value::as_str).unwrap_or_default();
            let code = v.get("code").and_then(Value::as_str).unwrap_or_default();
            print_pairing(&format!("{}/pair#{id}", origin.trim_end_matches('/')), code, v.get("expires_at_ms").and_then(Value::as_i64).unwrap_or(0));
            Ok(())
        }
        WorkerCommand::Connect { address, name, recover, device } => connect(&address, name, recover, &device),
        WorkerCommand::Rename { name, device } => rename(&name, &device),
        WorkerCommand::Revoke { device_id, confirm, device } => {
            if !confirm {
                anyhow::bail!("revoking {device_id} cannot be undone; run again with --confirm");
            }
            let me = enrolled(&device)?;
            let body = json!({"device_id": device_id, "confirm": true});
            call(&me.edge_origin, "/devices/revoke", "POST", Some(body), Some(&me), device.ca_file.as_ref())?;
            println!("revoked {device_id}: its link is closed and its credential never works again (enroll that computer anew to use it)");
            Ok(())
        }
    }
}

pub fn run_device(cmd: DeviceCommand) -> anyhow::Result<()> {
    match cmd {
        DeviceCommand::Rename { name, device } => rename(&name, &device),
        DeviceCommand::Revoke(args) => super::devices_admin::run_admin(super::devices_admin::AdminAction::Revoke, args),
        DeviceCommand::Suspend(args) => super::devices_admin::run_admin(super::devices_admin::AdminAction::Suspend, args),
        DeviceCommand::Resume(args) => super::devices_admin::run_admin(super::devices_admin::AdminAction::Resume, args),
        DeviceCommand::List { json, device } => {
            let me = enrolled(&device)?;
            let v = call(&me.edge_origin, "/devices", "GET", None, Some(&me), device.ca_file.as_ref())?;
            if json {
                println!("{}", serde_json::to_string_pretty(&v)?);
                return Ok(());
            }
            print!("{}", device_table(&v, &me.device_id));
            Ok(())
        }
    }
}

/// The `device list` table: each device's authorization, whether its link is
/// up right now (`online`, `stale`, `offline`), the calls the edge awaits from it
/// (ACTIVE) and the requests its link last reported running there (RUNNING).
/// The two differ when a request outlives the edge's wait. `-` where the edge
/// does not know (no report yet) or is too old to say.
fn device_table(answer: &Value, me: &str) -> String {
    let mut out = format!(
        "{:<31} {:<24} {:<10} {:<10} {:<10} {:<7} {:<7} {}\n",
        "DEVICE", "NAME", "STATUS", "CONNECTION", "LAST SEEN", "ACTIVE", "RUNNING", "THIS"
    );
    for d in answer.get("devices").and_then(Value::as_array).into_iter().flatten() {
        let id = d.get("device_id").and_then(Value::as_str).unwrap_or("");
        let text = |k: &str| d.get(k).and_then(Value::as_str).unwrap_or("-").to_string();
        let count = |k: &str| d.get(k).and_then(Value::as_u64).map_or_else(|| "-".to_string(), |n| n.to_string());
        let seen = d.get("last_seen_ago_ms").and_then(Value::as_u64).map_or_else(|| "-".to_string(), ago);
        out.push_str(&format!(
            "{:<31} {:<24} {:<10} {:<10} {:<10} {:<7} {:<7} {}\n",
            id,
            text("name"),
            text("authorization"),
            text("connection"),
            seen,
            count("active_requests"),
            count("link_active_requests"),
            if id == me { "*" } else { "" }
        ));
    }
    out
}

/// `ms` as a short age: `850ms ago`, `12s ago`, `4m ago`, `3h ago`, `2d ago`.
fn ago(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0 => format!("{ms}ms ago"),
        1..=59 => format!("{s}s ago"),
        60..=3599 => format!("{}m ago", s / 60),
        3600..=86_399 => format!("{}h ago", s / 3600),
        _ => format!("{}d ago", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_table_shows_the_connection_and_the_requests() {
        let v = json!({"devices": [
            {"device_id": "dev_A", "name": "laptop", "authorization": "active", "connection": "online", "last_seen_ago_ms": 12_345,
             "active_requests": 1, "link_active_requests": 2},
            {"device_id": "dev_B", "name": "desk", "authorization": "active", "connection": "offline", "last_seen_ago_ms": null,
             "active_requests": 0, "link_active_requests": null},
            {"device_id": "dev_C", "name": "old", "authorization": "revoked"},
        ]});
        let table = device_table(&v, "dev_B");
        let rows: Vec<Vec<&str>> = table.lines().map(|l| l.split_whitespace().collect()).collect();
        assert_eq!(rows[0], ["DEVICE", "NAME", "STATUS", "CONNECTION", "LAST", "SEEN", "ACTIVE", "RUNNING", "THIS"]);
        assert_eq!(rows[1], ["dev_A", "laptop", "active", "online", "12s", "ago", "1", "2"]);
        assert_eq!(rows[2], ["dev_B", "desk", "active", "offline", "-", "0", "-", "*"]);
        assert_eq!(rows[3], ["dev_C", "old", "revoked", "-", "-", "-", "-"]);
        assert_eq!([ago(0), ago(999), ago(59_999), ago(60_000), ago(3_600_000), ago(86_400_000)], ["0ms ago", "999ms ago", "59s ago", "1m ago", "1h ago", "1d ago"]);
    }

    #[test]
    fn pairing_addresses() {
        let id = format!("pair_{}", "a".repeat(64));
        assert_eq!(parse_address(&format!("https://e.example/pair#{id}")).unwrap(), ("https://e.example".into(), id.clone()));
        assert_eq!(parse_address(&format!("http://127.0.0.1:9/base/pair#{id}")).unwrap(), ("http://127.0.0.1:9/base".into(), id.clone()));
        for bad in ["https://e.example/pair", "https://e.example/x#pair_1", "nope", "https://e.example/pair#other"] {
            assert!(parse_address(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_address(&format!("http://localhost:9/pair#{id}")).unwrap().0, "http://localhost:9");
        assert_eq!(parse_address(&format!("http://[::1]:9/pair#{id}")).unwrap().0, "http://[::1]:9");
        for cleartext in [format!("http://e.example/pair#{id}"), format!("ftp://e.example/pair#{id}"), format!("http://10.0.0.1/pair#{id}")] {
            let err = parse_address(&cleartext).unwrap_err().to_string();
            assert!(err.contains("over https"), "{cleartext}: {err}");
        }
    }
}
