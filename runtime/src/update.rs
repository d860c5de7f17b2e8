//! `herdr-mcp update check|status`: whether this workstation's runtime serves the
//! contract its edge forwards to, and what a drift means.
//!
//! The edge's `GET /info` publishes two contracts: the public one (what a ChatGPT app
//! lists and snapshots: the runtime's tools plus `herdr_devices`) and the runtime one
//! (what it forwards to, and what a link's hello must match). A workstation whose
//! runtime serves another runtime contract has its link refused (`contract_mismatch`).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

pub const UPDATE_ABOUT: &str = "\
Whether this workstation's runtime and its edge agree on the tool contract.

  check   asks the edge (GET /info) which runtime contract it forwards to and compares it with
          the one this workstation's runtime serves (the running `herdr-mcp serve`, else this
          program's own): drifted or not, what that means for an already-approved ChatGPT app,
          and what to do. Exit code 1 on drift or when the edge cannot be asked.
  status  what this workstation runs, without asking the edge: this program's version and
          contract and the running runtime's. Exit code 1 when the running runtime serves
          another contract than this program (restart it after an upgrade).

The edge is the one of this computer's device credential (`herdr-mcp worker connect`), or
--edge URL. `herdr-mcp doctor` includes the check when this computer is enrolled.";

#[derive(clap::Subcommand, Debug)]
pub enum UpdateCommand {
    /// Compare the edge's runtime contract with this workstation's: drifted or not, and what to do
    Check(CheckArgs),
    /// This program's version and contract and the running runtime's (no network)
    Status(StatusArgs),
}

#[derive(clap::Args, Debug)]
pub struct CheckArgs {
    /// Print one JSON object instead of lines
    #[arg(long)]
    pub json: bool,
    /// The edge's public URL [default: the edge of this computer's device credential]
    #[arg(long, value_name = "URL")]
    pub edge: Option<String>,
    /// The runtime's Unix socket [default: as for `serve`]
    #[arg(long, value_name = "PATH", env = crate::server::config::SOCKET_ENV)]
    pub socket: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct StatusArgs {
    /// Print one JSON object instead of lines
    #[arg(long)]
    pub json: bool,
    /// The runtime's Unix socket [default: as for `serve`]
    #[arg(long, value_name = "PATH", env = crate::server::config::SOCKET_ENV)]
    pub socket: Option<PathBuf>,
}

/// One side's runtime contract.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contract {
    pub epoch: u64,
    pub hash: String,
    pub tool_count: Option<u64>,
}

impl Contract {
    fn from_json(v: &Value) -> Option<Contract> {
        Some(Contract {
            epoch: v.get("epoch")?.as_u64()?,
            hash: v.get("hash")?.as_str()?.to_string(),
            tool_count: v.get("toolCount").or_else(|| v.get("tool_count")).and_then(Value::as_u64),
        })
    }

    fn json(&self) -> Value {
        json!({"epoch": self.epoch, "hash": self.hash, "toolCount": self.tool_count})
    }

    fn text(&self) -> String {
        match self.tool_count {
            Some(n) => format!("epoch {} {} ({n} tools)", self.epoch, self.hash),
            None => format!("epoch {} {}", self.epoch, self.hash),
        }
    }

    fn same(&self, other: &Contract) -> bool {
        self.epoch == other.epoch && self.hash == other.hash
    }
}

/// The contract this program would serve.
pub fn own_contract() -> Contract {
    let (catalog, (epoch, hash)) = crate::edge::forward::local_runtime_contract();
    Contract { epoch: u64::from(epoch), hash, tool_count: Some(catalog.len() as u64) }
}

/// What the running runtime on `socket` serves (its `/health`): version, pid, contract.
pub struct Running {
    pub version: String,
    pub pid: Value,
    pub contract: Contract,
}

pub async fn running_runtime(socket: &Path) -> Result<Running, String> {
    let (status, body) =
        tokio::time::timeout(std::time::Duration::from_secs(5), crate::doctor::http_get(socket, "/health"))
            .await
            .map_err(|_| format!("{} gave no /health answer within 5 s", socket.display()))??;
    if status != 200 {
        return Err(format!("{} answered /health with {status}", socket.display()));
    }
    let health: Value = serde_json::from_slice(&body).map_err(|e| format!("its /health is not JSON ({e})"))?;
    let contract = health.get("contract").and_then(Contract::from_json).ok_or("its /health names no contract")?;
    Ok(Running {
        version: health["version"].as_str().unwrap_or("?").to_string(),
        pid: health.pointer("/build/pid").cloned().unwrap_or(Value::Null),
        contract,
    })
}

/// `GET <edge>/info` (public, no credential).
pub async fn edge_info(origin: &str) -> Result<Value, String> {
    let origin = origin.to_string();
    let ca = std::env::var_os("HERDR_LINK_CA_FILE").map(PathBuf::from);
    let answer = tokio::task::spawn_blocking(move || {
        crate::edge::devices_cli::call_answer(&origin, "/info", "GET", None, None, ca.as_ref())
    })
    .await
    .map_err(|e| e.to_string())?
    .map_err(|e| format!("{e:#}"))?;
    match answer {
        (200, v) if v.is_object() => Ok(v),
        (status, _) => Err(format!("its /info answered {status} without a JSON object (an edge older than /info?)")),
    }
}

/// The comparison of an edge's `/info` with this workstation's runtime contract.
pub struct Verdict {
    /// `Some(true)` drifted, `Some(false)` the same, `None` the edge names no runtime contract.
    pub drift: Option<bool>,
    pub summary: String,
    pub meaning: String,
    pub action: Option<String>,
    pub report: Value,
}

const SNAPSHOT: &str = "An already-approved ChatGPT app keeps the tool list it took when it was approved (or last refreshed): that snapshot stays frozen until the app's actions are refreshed in ChatGPT (the app's settings, Refresh). Never delete and re-add the connector for that: it needs a new approval and changes nothing the refresh does not.";

/// `local_source` says whose contract `local` is: "runtime" (the running one) or
/// "binary" (this program's, no runtime running).
pub fn compare(origin: &str, info: &Value, local: &Contract, local_version: &str, local_source: &str) -> Verdict {
    let edge_version = info["edgeVersion"].as_str().unwrap_or("?").to_string();
    let public = Contract::from_json(&info["publicContract"]);
    let edge_runtime = Contract::from_json(&info["runtimeContract"]);
    let whose = if local_source == "runtime" {
        "this workstation's running runtime"
    } else {
        "this program (no runtime runs here)"
    };
    let public_text = public.as_ref().map_or_else(|| "unknown".to_string(), Contract::text);
    let (drift, summary, meaning, action) = match &edge_runtime {
        None => (
            None,
            format!(
                "the edge {origin} (herdr-mcp {edge_version}) names no runtime contract: it forwards to no workstation"
            ),
            "No workstation's link can be accepted by this edge, so ChatGPT reaches none.".to_string(),
            Some(format!(
                "start the edge with links (`herdr-mcp edge serve`, herdr-mcp {local_version} or the version here)"
            )),
        ),
        Some(e) if e.same(local) => (
            Some(false),
            format!(
                "no drift: the edge {origin} (herdr-mcp {edge_version}) forwards to runtime contract {}, which {whose} serves (herdr-mcp {local_version})",
                e.text()
            ),
            format!(
                "The edge accepts this workstation's link and forwards every tool. ChatGPT lists the edge's public contract {public_text}. {SNAPSHOT}"
            ),
            None,
        ),
        Some(e) => (
            Some(true),
            format!(
                "drift: the edge {origin} (herdr-mcp {edge_version}) forwards to runtime contract {}, but {whose} serves {} (herdr-mcp {local_version})",
                e.text(),
                local.text()
            ),
            format!(
                "The edge refuses this workstation's link (contract_mismatch) until both serve the same runtime contract, so ChatGPT sees this workstation offline. {SNAPSHOT}"
            ),
            Some(format!(
                "run the same herdr-mcp on both: upgrade the older side (edge {edge_version}, here {local_version}): on the edge host install it and restart `herdr-mcp edge serve`; here install it (scripts/run.sh, or the package's install.sh) and restart `herdr-mcp serve`; then run `herdr-mcp update check` again and refresh the ChatGPT app's actions (never delete and re-add the connector)"
            )),
        ),
    };
    let report = json!({
        "ok": drift == Some(false),
        "drift": drift,
        "summary": summary,
        "meaning": meaning,
        "action": action,
        "edge": {
            "origin": origin,
            "version": edge_version,
            "publicContract": public.as_ref().map(Contract::json),
            "runtimeContract": edge_runtime.as_ref().map(Contract::json),
        },
        "local": {"source": local_source, "version": local_version, "contract": local.json()},
    });
    Verdict { drift, summary, meaning, action, report }
}

fn socket_path(socket: &Option<PathBuf>) -> anyhow::Result<PathBuf> {
    match socket {
        Some(s) => Ok(std::path::absolute(s)?),
        None => {
            let var = |n: &str| std::env::var(n).ok().filter(|v| !v.is_empty());
            Ok(crate::server::config::default_socket_path(var("XDG_CONFIG_HOME").as_deref(), var("HOME").as_deref())?)
        }
    }
}

/// The edge of this computer's device credential, if enrolled.
pub fn enrolled_edge() -> Option<String> {
    let path = crate::edge::devices_local::default_path().ok()?;
    crate::edge::devices_local::load(&path).ok().map(|d| d.edge_origin)
}

/// The runtime contract this workstation serves: the running runtime's, else this
/// program's; with its version and source ("runtime" or "binary").
pub async fn local_side(socket: &Path) -> (Contract, String, &'static str) {
    match running_runtime(socket).await {
        Ok(r) => (r.contract, r.version, "runtime"),
        Err(_) => (own_contract(), env!("CARGO_PKG_VERSION").to_string(), "binary"),
    }
}

pub fn run(command: UpdateCommand) -> anyhow::Result<std::process::ExitCode> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async {
        match command {
            UpdateCommand::Check(args) => check(args).await,
            UpdateCommand::Status(args) => status(args).await,
        }
    })
}

async fn check(args: CheckArgs) -> anyhow::Result<std::process::ExitCode> {
    let origin = match args.edge.clone().or_else(enrolled_edge) {
        Some(o) => o,
        None => anyhow::bail!(
            "this computer is not enrolled with an edge (no device credential): pass --edge https://your.host, or enroll with `herdr-mcp worker connect \"<address>\"`"
        ),
    };
    let socket = socket_path(&args.socket)?;
    let (local, version, source) = local_side(&socket).await;
    let info = match edge_info(&origin).await {
        Ok(v) => v,
        Err(e) => {
            if args.json {
                let report = json!({"ok": false, "drift": null, "summary": format!("cannot ask the edge {origin}: {e}"),
                    "edge": {"origin": origin}, "local": {"source": source, "version": version, "contract": local.json()}});
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                eprintln!("herdr-mcp: cannot ask the edge {origin}: {e}");
            }
            return Ok(std::process::ExitCode::FAILURE);
        }
    };
    let verdict = compare(&origin, &info, &local, &version, source);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&verdict.report)?);
    } else {
        println!("{}", verdict.summary);
        println!("What it means: {}", verdict.meaning);
        if let Some(action) = &verdict.action {
            println!("What to do: {action}");
        }
    }
    Ok(if verdict.drift == Some(false) { std::process::ExitCode::SUCCESS } else { std::process::ExitCode::FAILURE })
}

async fn status(args: StatusArgs) -> anyhow::Result<std::process::ExitCode> {
    let socket = socket_path(&args.socket)?;
    let own = own_contract();
    let exe = std::env::current_exe().ok().map(|p| p.display().to_string());
    let running = running_runtime(&socket).await;
    let edge = enrolled_edge();
    let stale = matches!(&running, Ok(r) if !r.contract.same(&own));
    if args.json {
        let running_json = match &running {
            Ok(r) => {
                json!({"running": true, "version": r.version, "pid": r.pid, "contract": r.contract.json(), "same_as_program": !stale})
            }
            Err(e) => json!({"running": false, "error": e}),
        };
        let report = json!({
            "ok": !stale,
            "program": {"path": exe, "version": env!("CARGO_PKG_VERSION"), "contract": own.json()},
            "runtime": running_json,
            "socket": socket.display().to_string(),
            "edge": edge,
        });
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "this program: herdr-mcp {} ({}), runtime contract {}",
            env!("CARGO_PKG_VERSION"),
            exe.as_deref().unwrap_or("?"),
            own.text()
        );
        match &running {
            Ok(r) if !stale => println!(
                "running runtime: herdr-mcp {} (pid {}) on {}, the same contract",
                r.version,
                r.pid,
                socket.display()
            ),
            Ok(r) => println!(
                "running runtime: herdr-mcp {} (pid {}) on {} serves another contract, {}: restart `herdr-mcp serve` to serve this program's",
                r.version,
                r.pid,
                socket.display(),
                r.contract.text()
            ),
            Err(e) => println!("running runtime: none on {} ({e})", socket.display()),
        }
        match &edge {
            Some(o) => println!("edge: {o} (`herdr-mcp update check` compares its contract with this one)"),
            None => println!("edge: not enrolled (only ChatGPT needs one)"),
        }
    }
    Ok(if stale { std::process::ExitCode::FAILURE } else { std::process::ExitCode::SUCCESS })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(runtime: Value) -> Value {
        json!({"edgeVersion": "0.0.9", "publicContract": {"epoch": 2, "hash": "sha256:p", "toolCount": 19}, "runtimeContract": runtime})
    }

    #[test]
    fn the_same_contract_is_no_drift_and_another_is() {
        let own = own_contract();
        let same = compare("https://e", &info(own.json()), &own, "0.1.0", "binary");
        assert_eq!(same.drift, Some(false));
        assert!(same.action.is_none() && same.meaning.contains("refreshed"), "{}", same.meaning);
        let other = compare(
            "https://e",
            &info(json!({"epoch": 1, "hash": "sha256:old", "toolCount": 17})),
            &own,
            "0.1.0",
            "runtime",
        );
        assert_eq!(other.drift, Some(true));
        assert!(other.meaning.contains("contract_mismatch") && other.meaning.contains("Never delete and re-add"));
        assert!(other.action.unwrap().contains("edge 0.0.9, here 0.1.0"));
        let none = compare("https://e", &info(Value::Null), &own, "0.1.0", "binary");
        assert_eq!((none.drift, none.report["ok"].as_bool()), (None, Some(false)));
    }
}
