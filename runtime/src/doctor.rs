//! `herdr-mcp doctor [--json]`: every layer between a chat and this machine, checked
//! in order, one line each — ok, or what is wrong and the one command that fixes it.
//!
//! Layers: the runtime (socket, its mode, `/health`, the roots it serves); the native
//! host of each installed browser (manifest, binary, pinned origin, and a real round
//! trip through the host to the runtime, framed as Chrome frames it); browsers whose
//! sandbox cannot start native hosts (Snap, Flatpak); Herdr (socket, version,
//! protocol); the edge link (enrolled, online, last heard); the edge's runtime
//! contract against this workstation's (`update check`, only when enrolled).
//!
//! A layer is `ok`, `warn` (optional and absent, or not fit for the extension, while
//! nothing else depends on it) or `fail`; the exit code is 1 when any layer fails.

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The native host's name and what `herdr-nmhost install` writes as its description.
pub const HOST_NAME: &str = "dev.herdr.mcp";
/// The extension's pinned id (extension-shell/EXTENSION_ID.md); the host's default.
pub const PINNED_EXTENSION_ID: &str = "ocghgnmfcfoelnpjkmemmjdjjacdjmcl";
/// Overrides the origin the host accepts (development), as for the host itself.
pub const ORIGIN_ENV: &str = "HERDR_EXTENSION_ORIGIN";
const ROUND_TRIP_TIMEOUT: Duration = Duration::from_secs(10);
const RUNTIME_TIMEOUT: Duration = Duration::from_secs(5);

pub const DOCTOR_ABOUT: &str = "\
Check every layer between a chat and this machine, in order, one line each: ok, or what is
wrong and the one command that fixes it (absolute paths). Exit code 1 when a layer is broken.

Layers: the runtime (socket exists, mode 0600, answers /health, the roots it serves); the
native host of each installed Chrome, Chromium, Brave or Edge (manifest present, pointing at
an existing binary, the extension's origin pinned, and a request sent through the host to the
runtime exactly as the browser would send it); Snap or Flatpak browsers, which cannot start
native hosts; Herdr (socket, version, protocol; optional); the edge link (enrolled, online,
last heard; only for ChatGPT); and, when enrolled, the edge's runtime contract against this
workstation's (as `herdr-mcp update check`).

Uses the same environment as `serve` and `herdr-nmhost`: HERDR_EXTENSION_IPC_SOCKET,
XDG_CONFIG_HOME, HERDR_SOCKET_PATH, HERDR_EXTENSION_ORIGIN, HERDR_MCP_DEVICE_FILE,
HERDR_MCP_STATE_DIR.";

#[derive(clap::Args, Debug)]
pub struct DoctorArgs {
    /// Print one JSON object ({"ok":…, "checks":[…]}) instead of lines
    #[arg(long)]
    pub json: bool,

    /// The runtime's Unix socket [default: $HERDR_EXTENSION_IPC_SOCKET, else
    /// $XDG_CONFIG_HOME/herdr-mcp/extension.sock, else ~/.config/herdr-mcp/extension.sock]
    #[arg(long, value_name = "PATH", env = crate::server::config::SOCKET_ENV)]
    pub socket: Option<PathBuf>,

    /// Check the native host of a browser started with --user-data-dir=DIR instead of
    /// the installed browsers' own folders (repeatable)
    #[arg(long = "user-data-dir", value_name = "DIR")]
    pub user_data_dirs: Vec<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Ok,
    Warn,
    Fail,
}

impl Status {
    fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "fail",
        }
    }
}

/// One line of the report.
#[derive(Debug, Clone)]
pub struct Check {
    pub layer: String,
    pub status: Status,
    pub message: String,
    pub fix: Option<String>,
    pub details: Value,
}

impl Check {
    fn new(layer: impl Into<String>, status: Status, message: impl Into<String>) -> Check {
        Check { layer: layer.into(), status, message: message.into(), fix: None, details: json!({}) }
    }

    fn fix(mut self, command: impl Into<String>) -> Check {
        self.fix = Some(command.into());
        self
    }

    fn details(mut self, details: Value) -> Check {
        self.details = details;
        self
    }

    fn json(&self) -> Value {
        let mut v = json!({"layer": self.layer, "status": self.status.as_str(), "message": self.message});
        if let Some(fix) = &self.fix {
            v["fix"] = json!(fix);
        }
        if let Some(map) = self.details.as_object().filter(|m| !m.is_empty()) {
            v["details"] = Value::Object(map.clone());
        }
        v
    }

    fn line(&self) -> String {
        let tag = match self.status {
            Status::Ok => "ok  ",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
        };
        match &self.fix {
            Some(fix) => format!("{tag} {}: {} — fix: {fix}", self.layer, self.message),
            None => format!("{tag} {}: {}", self.layer, self.message),
        }
    }
}

/// Runs the checks and prints them; the process exit code.
pub fn main(args: DoctorArgs) -> std::process::ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("herdr-mcp: error: cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let checks = runtime.block_on(run(&args));
    let ok = !checks.iter().any(|c| c.status == Status::Fail);
    if args.json {
        let report = json!({"ok": ok, "checks": checks.iter().map(Check::json).collect::<Vec<_>>()});
        println!("{}", serde_json::to_string_pretty(&report).unwrap_or_default());
    } else {
        for check in &checks {
            println!("{}", check.line());
        }
    }
    if ok { std::process::ExitCode::SUCCESS } else { std::process::ExitCode::FAILURE }
}

/// Every check, in layer order.
pub async fn run(args: &DoctorArgs) -> Vec<Check> {
    let env = Env::from_process();
    let mut checks = Vec::new();
    let socket = match &args.socket {
        Some(s) => Ok(std::path::absolute(s).unwrap_or_else(|_| s.clone())),
        None => crate::server::config::default_socket_path(env.xdg_config_home.as_deref(), env.home.as_deref())
            .map_err(|e| e.to_string()),
    };
    let socket = match socket {
        Ok(s) => s,
        Err(e) => {
            checks.push(
                Check::new("runtime", Status::Fail, format!("no socket path: {e}")).fix("export HOME=/home/<you>"),
            );
            return checks;
        }
    };
    let runtime = check_runtime(&socket, &env).await;
    let runtime_ok = runtime.status == Status::Ok;
    checks.push(runtime);
    checks.extend(check_browsers(args, &env, &socket, runtime_ok).await);
    checks.push(check_herdr(&env).await);
    checks.push(check_link(&env).await);
    if let Some(check) = check_contract(&env, &socket).await {
        checks.push(check);
    }
    checks
}

/// The environment the checks read, once.
struct Env {
    home: Option<String>,
    xdg_config_home: Option<String>,
    path: std::ffi::OsString,
    /// This program, for the commands a fix names.
    herdr_mcp: String,
    /// `herdr-nmhost` beside this program, else on PATH, else its bare name.
    herdr_nmhost: String,
}

impl Env {
    fn from_process() -> Env {
        let var = |n: &str| std::env::var(n).ok().filter(|v| !v.is_empty());
        let path = std::env::var_os("PATH").unwrap_or_default();
        let exe = std::env::current_exe().ok().and_then(|p| p.canonicalize().ok());
        let herdr_mcp = exe.as_ref().map_or_else(|| "herdr-mcp".to_string(), |p| p.display().to_string());
        let beside = exe.as_ref().and_then(|p| p.parent()).map(|d| d.join("herdr-nmhost")).filter(|p| is_executable(p));
        let herdr_nmhost = beside
            .or_else(|| find_on_path(&path, "herdr-nmhost"))
            .map_or_else(|| "herdr-nmhost".to_string(), |p| p.display().to_string());
        Env {
            home: var("HOME"),
            xdg_config_home: var("XDG_CONFIG_HOME").filter(|v| v.starts_with('/')),
            path,
            herdr_mcp,
            herdr_nmhost,
        }
    }

    fn config_dir(&self) -> Option<PathBuf> {
        self.xdg_config_home
            .as_ref()
            .map(PathBuf::from)
            .or_else(|| self.home.as_ref().map(|h| Path::new(h).join(".config")))
    }
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn find_on_path(path: &std::ffi::OsStr, program: &str) -> Option<PathBuf> {
    std::env::split_paths(path).filter(|d| d.is_absolute()).map(|d| d.join(program)).find(|p| is_executable(p))
}

fn shell_quote(s: &str) -> String {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"/._-+=:,@".contains(&b)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

// ---------------------------------------------------------------- runtime

/// The command that starts the runtime on `socket`: for the git project of the
/// working directory when there is one.
fn serve_command(env: &Env, socket: &Path) -> String {
    let mut cmd = format!("{} serve", shell_quote(&env.herdr_mcp));
    let default = crate::server::config::default_socket_path(env.xdg_config_home.as_deref(), env.home.as_deref()).ok();
    if default.as_deref() != Some(socket) {
        cmd.push_str(&format!(" --socket {}", shell_quote(&socket.display().to_string())));
    }
    let project = std::process::Command::new("git")
        .args(["rev-parse", "--show-toplevel"])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|p| !p.is_empty() && Some(p.as_str()) != env.home.as_deref());
    match project {
        Some(p) => cmd.push_str(&format!(" --root {}", shell_quote(&p))),
        None => cmd.push_str(" --root /path/to/your/project"),
    }
    cmd
}

async fn check_runtime(socket: &Path, env: &Env) -> Check {
    let layer = "runtime";
    let shown = socket.display().to_string();
    let meta = match std::fs::symlink_metadata(socket) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Check::new(layer, Status::Fail, format!("not running: no socket at {shown}"))
                .fix(serve_command(env, socket))
                .details(json!({"socket": shown}));
        }
        Err(e) => {
            return Check::new(layer, Status::Fail, format!("cannot look at {shown}: {e}"))
                .details(json!({"socket": shown}));
        }
    };
    if !meta.file_type().is_socket() {
        return Check::new(layer, Status::Fail, format!("{shown} is not a socket"))
            .fix(format!("rm {} && {}", shell_quote(&shown), serve_command(env, socket)))
            .details(json!({"socket": shown}));
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode != 0o600 || meta.uid() != nix::unistd::getuid().as_raw() {
        return Check::new(
            layer,
            Status::Fail,
            format!("{shown} has mode {mode:04o} and owner uid {} (must be 0600 and yours)", meta.uid()),
        )
        .fix(format!("chmod 600 {}", shell_quote(&shown)))
        .details(json!({"socket": shown, "mode": format!("{mode:04o}")}));
    }
    let health = match tokio::time::timeout(RUNTIME_TIMEOUT, http_get(socket, "/health")).await {
        Ok(Ok((200, body))) => body,
        Ok(Ok((status, _))) => {
            return Check::new(layer, Status::Fail, format!("{shown} answered /health with {status}"))
                .fix(serve_command(env, socket))
                .details(json!({"socket": shown}));
        }
        Ok(Err(e)) => {
            return Check::new(
                layer,
                Status::Fail,
                format!("nothing answers on {shown} ({e}); a runtime that was killed left it"),
            )
            .fix(serve_command(env, socket))
            .details(json!({"socket": shown}));
        }
        Err(_) => {
            return Check::new(layer, Status::Fail, format!("{shown} gave no /health answer within 5 s"))
                .fix(format!("kill the process serving {shown}, then {}", serve_command(env, socket)))
                .details(json!({"socket": shown}));
        }
    };
    let health: Value = serde_json::from_slice(&health).unwrap_or(Value::Null);
    let roots = served_roots(socket).await;
    let version = health["version"].as_str().unwrap_or("?");
    let pid = health.pointer("/build/pid").cloned().unwrap_or(Value::Null);
    let tools = health.pointer("/contract/tool_count").cloned().unwrap_or(Value::Null);
    let hash = health.pointer("/contract/hash").and_then(Value::as_str).unwrap_or("?");
    let roots_text = match &roots {
        Ok(r) if !r.is_empty() => r.join(", "),
        Ok(_) => "no roots".to_string(),
        Err(e) => format!("roots it did not report ({e})"),
    };
    let roots = roots.ok();
    Check::new(layer, Status::Ok, format!("{version} (pid {pid}) on {shown} serves {roots_text}; {tools} tools, contract {hash}"))
        .details(json!({"socket": shown, "mode": "0600", "version": version, "pid": pid, "roots": roots, "contract": health["contract"]}))
}

/// The managed roots as `herdr_inspect` reports them over the trusted socket, or
/// why they could not be read.
async fn served_roots(socket: &Path) -> Result<Vec<String>, String> {
    let local = crate::link::local::LocalRuntime::new(socket.to_path_buf());
    let result = local.call_tool("herdr_inspect", json!({}), RUNTIME_TIMEOUT).await.map_err(|e| e.message)?;
    let payload = result
        .get("structuredContent")
        .cloned()
        .or_else(|| serde_json::from_str(result.pointer("/content/0/text")?.as_str()?).ok())
        .ok_or("herdr_inspect gave no JSON payload")?;
    let roots = payload
        .pointer("/workstation_info/managed_git_roots")
        .or_else(|| payload.get("managed_git_roots"))
        .and_then(Value::as_array)
        .ok_or_else(|| {
            let code = payload.get("code").or_else(|| payload.get("reason")).cloned().unwrap_or(Value::Null);
            format!("herdr_inspect listed no roots (ok {}, code {code})", payload["ok"])
        })?;
    Ok(roots.iter().filter_map(Value::as_str).map(str::to_string).collect())
}

/// One GET over the Unix socket; status and body.
pub(crate) async fn http_get(socket: &Path, path: &str) -> Result<(u16, bytes::Bytes), String> {
    use http_body_util::{BodyExt, Empty, Limited};
    let stream = tokio::net::UnixStream::connect(socket).await.map_err(|e| e.to_string())?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await.map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let req = http::Request::builder()
        .method("GET")
        .uri(path)
        .header(http::header::HOST, "localhost")
        .body(Empty::<bytes::Bytes>::new())
        .map_err(|e| e.to_string())?;
    let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    let body = Limited::new(resp.into_body(), 1 << 20).collect().await.map_err(|e| e.to_string())?.to_bytes();
    Ok((status, body))
}

// ---------------------------------------------------------------- browsers

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Browser {
    Chrome,
    Chromium,
    Brave,
    Edge,
}

impl Browser {
    const ALL: [Browser; 4] = [Browser::Chrome, Browser::Chromium, Browser::Brave, Browser::Edge];

    fn name(self) -> &'static str {
        match self {
            Browser::Chrome => "chrome",
            Browser::Chromium => "chromium",
            Browser::Brave => "brave",
            Browser::Edge => "edge",
        }
    }

    /// As herdr-nmhost's installer: the per-user folder under the config dir.
    fn config_subdir(self) -> &'static str {
        match self {
            Browser::Chrome => "google-chrome",
            Browser::Chromium => "chromium",
            Browser::Brave => "BraveSoftware/Brave-Browser",
            Browser::Edge => "microsoft-edge",
        }
    }

    fn programs(self) -> &'static [&'static str] {
        match self {
            Browser::Chrome => &["google-chrome", "google-chrome-stable"],
            Browser::Chromium => &["chromium", "chromium-browser"],
            Browser::Brave => &["brave-browser", "brave"],
            Browser::Edge => &["microsoft-edge", "microsoft-edge-stable"],
        }
    }

    fn snap_name(self) -> Option<&'static str> {
        match self {
            Browser::Chromium => Some("chromium"),
            Browser::Brave => Some("brave"),
            _ => None,
        }
    }

    fn flatpak_id(self) -> &'static str {
        match self {
            Browser::Chrome => "com.google.Chrome",
            Browser::Chromium => "org.chromium.Chromium",
            Browser::Brave => "com.brave.Browser",
            Browser::Edge => "com.microsoft.Edge",
        }
    }
}

/// Which sandbox keeps a browser from starting native hosts, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Confined {
    Snap(String),
    Flatpak(String),
}

/// A browser is a Snap when the program PATH finds first lives in snapd's `snap/bin`
/// (or resolves into `/snap/`), or when `~/snap/<name>` exists without a regular
/// profile; a Flatpak when `~/.var/app/<id>` exists without a regular profile.
fn confinement(browser: Browser, env: &Env, regular_profile: bool) -> Option<Confined> {
    let first = browser.programs().iter().find_map(|p| find_on_path(&env.path, p));
    if let Some(program) = &first {
        let real = program.canonicalize().unwrap_or_else(|_| program.clone());
        let in_snap_bin = program.parent().is_some_and(|d| d.ends_with("snap/bin"));
        if in_snap_bin || real.starts_with("/snap/") {
            return Some(Confined::Snap(program.display().to_string()));
        }
    }
    if regular_profile || first.is_some() {
        return None;
    }
    let home = Path::new(env.home.as_deref()?);
    if let Some(name) = browser.snap_name() {
        let dir = home.join("snap").join(name);
        if dir.is_dir() {
            return Some(Confined::Snap(dir.display().to_string()));
        }
    }
    let dir = home.join(".var/app").join(browser.flatpak_id());
    dir.is_dir().then(|| Confined::Flatpak(dir.display().to_string()))
}

/// The origin the host accepts, as the host computes it.
fn expected_origin() -> Result<String, String> {
    match std::env::var(ORIGIN_ENV).ok().filter(|v| !v.is_empty()) {
        None => Ok(format!("chrome-extension://{PINNED_EXTENSION_ID}/")),
        Some(v) => {
            let id = v.strip_prefix("chrome-extension://").and_then(|r| r.strip_suffix('/'));
            if id.is_some_and(|id| id.len() == 32 && id.bytes().all(|b| (b'a'..=b'p').contains(&b))) {
                Ok(v)
            } else {
                Err(format!("{ORIGIN_ENV}={v:?} is not chrome-extension://<32 letters a-p>/"))
            }
        }
    }
}

async fn check_browsers(args: &DoctorArgs, env: &Env, socket: &Path, runtime_ok: bool) -> Vec<Check> {
    let origin = match expected_origin() {
        Ok(o) => o,
        Err(e) => return vec![Check::new("native host", Status::Fail, e).fix(format!("unset {ORIGIN_ENV}"))],
    };
    let mut checks = Vec::new();
    if !args.user_data_dirs.is_empty() {
        for dir in &args.user_data_dirs {
            let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.clone());
            let target = format!("--user-data-dir {}", shell_quote(&dir.display().to_string()));
            let layer = format!("native host (user-data-dir {})", dir.display());
            let manifest = dir.join("NativeMessagingHosts").join(format!("{HOST_NAME}.json"));
            checks.push(check_host(&layer, &manifest, &target, &origin, env, socket, runtime_ok).await);
        }
        return checks;
    }
    let Some(config) = env.config_dir() else {
        return vec![Check::new("native host", Status::Fail, "HOME is not set: no browser folder to look in")];
    };
    for browser in Browser::ALL {
        let profile = config.join(browser.config_subdir());
        let regular = profile.is_dir();
        let layer = format!("native host ({})", browser.name());
        if let Some(confined) = confinement(browser, env, regular) {
            let (kind, at) = match &confined {
                Confined::Snap(at) => ("a Snap", at),
                Confined::Flatpak(at) => ("a Flatpak", at),
            };
            checks.push(
                Check::new(
                    layer,
                    Status::Warn,
                    format!(
                        "{} is {kind} ({at}): its sandbox does not let it start native messaging hosts, so the extension cannot reach herdr-nmhost from it",
                        browser.name()
                    ),
                )
                .fix("use Google Chrome, Brave or a Chromium installed from a .deb/.rpm package, then run the install again")
                .details(json!({"confined": kind.trim_start_matches("a ").to_lowercase(), "at": at})),
            );
            continue;
        }
        let on_path = browser.programs().iter().any(|p| find_on_path(&env.path, p).is_some());
        if !regular && !on_path {
            continue;
        }
        let manifest = profile.join("NativeMessagingHosts").join(format!("{HOST_NAME}.json"));
        let target = format!("--browser {}", browser.name());
        checks.push(check_host(&layer, &manifest, &target, &origin, env, socket, runtime_ok).await);
    }
    if checks.is_empty() {
        checks.push(
            Check::new(
                "native host",
                Status::Warn,
                "no Chrome, Chromium, Brave or Edge found (neither a profile folder nor its program on PATH)",
            )
            .fix("install Google Chrome, Chromium or Brave, then run the install again"),
        );
    }
    checks
}

async fn check_host(
    layer: &str,
    manifest_path: &Path,
    target: &str,
    origin: &str,
    env: &Env,
    socket: &Path,
    runtime_ok: bool,
) -> Check {
    let install = format!("{} install {target}", shell_quote(&env.herdr_nmhost));
    let shown = manifest_path.display().to_string();
    let mut details = json!({"manifest": shown});
    let bytes = match std::fs::read(manifest_path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Check::new(layer, Status::Fail, format!("not registered: no manifest {shown}"))
                .fix(install)
                .details(details);
        }
        Err(e) => {
            return Check::new(layer, Status::Fail, format!("cannot read {shown}: {e}")).fix(install).details(details);
        }
    };
    let manifest: Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(e) => {
            return Check::new(layer, Status::Fail, format!("{shown} is not JSON ({e})"))
                .fix(format!("rm {} && {install}", shell_quote(&shown)))
                .details(details);
        }
    };
    let binary = manifest["path"].as_str().unwrap_or("").to_string();
    let origins: Vec<String> = manifest["allowed_origins"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect();
    details["binary"] = json!(binary);
    details["allowed_origins"] = json!(origins);
    if manifest["name"] != HOST_NAME || manifest["type"] != "stdio" {
        return Check::new(layer, Status::Fail, format!("{shown} is not a stdio manifest for {HOST_NAME}"))
            .fix(format!("rm {} && {install}", shell_quote(&shown)))
            .details(details);
    }
    if !Path::new(&binary).is_absolute() || !is_executable(Path::new(&binary)) {
        return Check::new(
            layer,
            Status::Fail,
            format!("{shown} points at {binary:?}, which is not an existing executable"),
        )
        .fix(install)
        .details(details);
    }
    if !origins.iter().any(|o| o == origin) {
        return Check::new(
            layer,
            Status::Fail,
            format!(
                "{shown} allows {} but the extension is {origin}",
                if origins.is_empty() { "no origin".to_string() } else { origins.join(", ") }
            ),
        )
        .fix(install)
        .details(details);
    }
    let started = Instant::now();
    match round_trip(Path::new(&binary), origin, socket).await {
        Ok(answer) => {
            let ms = started.elapsed().as_millis() as u64;
            details["round_trip_ms"] = json!(ms);
            let status = answer["status"].as_u64().unwrap_or(0);
            if answer["type"] == "response" && answer["ok"] == true && status == 200 {
                Check::new(
                    layer,
                    Status::Ok,
                    format!("{binary} answered /health from the runtime in {ms} ms (origin {origin})"),
                )
                .details(details)
            } else if answer["type"] == "response" && answer["ok"] == true {
                Check::new(layer, Status::Fail, format!("the host reached the runtime, which answered {status}"))
                    .details(details)
            } else {
                // A failure frame: {type, id?, ok:false, error:<code>, message}.
                let code = answer["error"].as_str().unwrap_or("?");
                let message = answer["message"].as_str().unwrap_or("");
                details["host_error"] = json!(code);
                let check =
                    Check::new(layer, Status::Fail, format!("the host answered {code}: {message}")).details(details);
                if code == "extension_ipc_unavailable" && !runtime_ok {
                    check.fix(serve_command(env, socket))
                } else if code == "extension_origin_not_allowed" {
                    check.fix(format!("unset {ORIGIN_ENV}; {install}"))
                } else {
                    check
                }
            }
        }
        Err(e) => Check::new(layer, Status::Fail, format!("launching {binary} as the browser would failed: {e}"))
            .fix(install)
            .details(details),
    }
}

/// Starts the host as Chrome does (argv[1] = the caller's origin, pipes on
/// stdin/stdout), sends one `request` for `/health` in a native message frame (u32
/// little-endian length, then JSON) and returns the first frame it answers.
async fn round_trip(binary: &Path, origin: &str, socket: &Path) -> Result<Value, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut child = tokio::process::Command::new(binary)
        .arg(origin)
        .env(crate::server::config::SOCKET_ENV, socket)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start it: {e}"))?;
    let request = json!({"type": "request", "id": "doctor", "oneshot": true, "method": "GET", "path": "/health"});
    let payload = request.to_string().into_bytes();
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    let mut stdout = child.stdout.take().ok_or("no stdout")?;
    let exchange = async {
        stdin.write_all(&(payload.len() as u32).to_le_bytes()).await.map_err(|e| format!("writing to it: {e}"))?;
        stdin.write_all(&payload).await.map_err(|e| format!("writing to it: {e}"))?;
        stdin.flush().await.map_err(|e| format!("writing to it: {e}"))?;
        let mut len = [0u8; 4];
        stdout.read_exact(&mut len).await.map_err(|e| format!("it sent no answer ({e})"))?;
        let len = u32::from_le_bytes(len) as usize;
        if len > 1 << 20 {
            return Err(format!("it announced a frame of {len} bytes (Chrome's limit is 1 MiB)"));
        }
        let mut body = vec![0u8; len];
        stdout.read_exact(&mut body).await.map_err(|e| format!("its frame ended early ({e})"))?;
        serde_json::from_slice::<Value>(&body).map_err(|e| format!("its frame is not JSON ({e})"))
    };
    let answer = tokio::time::timeout(ROUND_TRIP_TIMEOUT, exchange).await;
    let _ = child.start_kill();
    let mut err = String::new();
    if let Some(mut stderr) = child.stderr.take() {
        let _ = tokio::time::timeout(Duration::from_millis(500), stderr.read_to_string(&mut err)).await;
    }
    let _ = child.wait().await;
    match answer {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(with_stderr(e, &err)),
        Err(_) => Err(with_stderr(format!("no answer within {} s", ROUND_TRIP_TIMEOUT.as_secs()), &err)),
    }
}

fn with_stderr(message: String, stderr: &str) -> String {
    let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
    match last {
        Some(line) => format!("{message}; its stderr: {}", line.trim()),
        None => message,
    }
}

// ---------------------------------------------------------------- Herdr

async fn check_herdr(_env: &Env) -> Check {
    let layer = "herdr";
    let socket = match crate::herdr::socket_path::resolve(&crate::herdr::socket_path::SocketEnv::from_process()) {
        Ok(s) => s,
        Err(e) => return Check::new(layer, Status::Warn, format!("no Herdr socket path: {e}")),
    };
    let shown = socket.display().to_string();
    let start = match std::env::var("HERDR_BIN_PATH")
        .ok()
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| find_on_path(&std::env::var_os("PATH").unwrap_or_default(), "herdr"))
    {
        Some(bin) => format!("start Herdr: {}", shell_quote(&bin.display().to_string())),
        None => "install and start Herdr (optional: without it the file, Git and exec tools still work)".to_string(),
    };
    let client = crate::herdr::client::HerdrClient::new(socket.clone(), crate::herdr::config::Timeouts::default());
    match client.ping().await {
        Ok(pong) => {
            let version = pong.version.clone().unwrap_or_else(|| "?".to_string());
            let protocol = pong.protocol.map_or_else(|| "?".to_string(), |p| p.to_string());
            Check::new(layer, Status::Ok, format!("Herdr {version} (protocol {protocol}) on {shown}"))
                .details(json!({"socket": shown, "version": pong.version, "protocol": pong.protocol}))
        }
        Err(e) => Check::new(
            layer,
            Status::Warn,
            format!(
                "not reachable: {} (Herdr is optional; its workspace and agent tools answer herdr_unavailable)",
                e.message
            ),
        )
        .fix(start)
        .details(json!({"socket": shown, "code": e.code})),
    }
}

// ---------------------------------------------------------------- link

async fn check_link(env: &Env) -> Check {
    let layer = "edge link";
    let path = match crate::edge::devices_local::default_path() {
        Ok(p) => p,
        Err(e) => {
            return Check::new(layer, Status::Warn, format!("cannot tell where the device credential lives: {e}"));
        }
    };
    let connect = format!("{} worker connect \"<address>\"", shell_quote(&env.herdr_mcp));
    let device = match crate::edge::devices_local::load(&path) {
        Ok(d) => d,
        Err(crate::edge::devices_local::LocalDeviceError::NotEnrolled(_)) => {
            return Check::new(
                layer,
                Status::Warn,
                format!("not enrolled (no {}); needed only for ChatGPT through an edge", path.display()),
            )
            .fix(connect)
            .details(json!({"enrolled": false, "device_file": path.display().to_string()}));
        }
        Err(e) => return Check::new(layer, Status::Fail, e.to_string()).fix(connect),
    };
    let origin = device.edge_origin.clone();
    let me = device.device_id.clone();
    let ca = std::env::var_os("HERDR_LINK_CA_FILE").map(PathBuf::from);
    let answer = tokio::task::spawn_blocking(move || {
        crate::edge::devices_cli::call_answer(&origin, "/devices", "GET", None, Some(&device), ca.as_ref())
    })
    .await;
    let mut details = json!({"enrolled": true, "edge": device_origin(&path), "device_id": me});
    let serve_link = format!("{} link", shell_quote(&env.herdr_mcp));
    let (status, answer) = match answer {
        Ok(Ok(a)) => a,
        Ok(Err(e)) => return Check::new(layer, Status::Fail, format!("cannot ask the edge: {e:#}")).details(details),
        Err(e) => return Check::new(layer, Status::Fail, format!("cannot ask the edge: {e}")).details(details),
    };
    if !(200..300).contains(&status) {
        let code = answer["code"].as_str().unwrap_or("http_error");
        return Check::new(layer, Status::Fail, format!("the edge refused this device's credential ({status} {code})"))
            .fix(format!("{} worker connect --recover {me} \"<address>\"", shell_quote(&env.herdr_mcp)))
            .details(details);
    }
    let mine = answer["devices"].as_array().into_iter().flatten().find(|d| d["device_id"] == me.as_str()).cloned();
    let Some(mine) = mine else {
        return Check::new(layer, Status::Fail, format!("the edge does not list this device ({me})"))
            .fix(connect)
            .details(details);
    };
    let connection = mine["connection"].as_str().unwrap_or("unknown").to_string();
    let heard = mine["last_seen_ago_ms"].as_u64();
    details["connection"] = json!(connection);
    details["last_seen_ago_ms"] = json!(heard);
    let heard_text = heard.map_or_else(|| "never heard".to_string(), |ms| format!("last heard {} s ago", ms / 1000));
    match connection.as_str() {
        "online" => Check::new(layer, Status::Ok, format!("{me} online at its edge, {heard_text}")).details(details),
        other => Check::new(layer, Status::Fail, format!("{me} is {other} at its edge, {heard_text}"))
            .fix(serve_link)
            .details(details),
    }
}

fn device_origin(path: &Path) -> Value {
    crate::edge::devices_local::load(path).map(|d| json!(d.edge_origin)).unwrap_or(Value::Null)
}

// ---------------------------------------------------------------- edge contract

/// Only for an enrolled computer: the runtime contract the edge forwards to against
/// the one this workstation serves, as `herdr-mcp update check` compares them.
async fn check_contract(env: &Env, socket: &Path) -> Option<Check> {
    let origin = crate::update::enrolled_edge()?;
    let layer = "edge contract";
    let again = format!("{} update check", shell_quote(&env.herdr_mcp));
    let (local, version, source) = crate::update::local_side(socket).await;
    let info = match crate::update::edge_info(&origin).await {
        Ok(v) => v,
        Err(e) => {
            return Some(
                Check::new(layer, Status::Fail, format!("cannot ask the edge {origin} for its contract: {e}"))
                    .fix(again)
                    .details(json!({"edge": {"origin": origin}})),
            );
        }
    };
    let verdict = crate::update::compare(&origin, &info, &local, &version, source);
    let check = match verdict.drift {
        Some(false) => Check::new(layer, Status::Ok, verdict.summary),
        _ => Check::new(layer, Status::Fail, format!("{}. {}", verdict.summary, verdict.meaning)),
    };
    let check = check.details(verdict.report);
    // This workstation's commands by this program's absolute path (the edge host's are its own).
    let me = shell_quote(&env.herdr_mcp);
    Some(match verdict.action {
        Some(action) => check.fix(
            action
                .replace("`herdr-mcp serve`", &format!("`{me} serve`"))
                .replace("`herdr-mcp update check`", &format!("`{me} update check`")),
        ),
        None => check,
    })
}
