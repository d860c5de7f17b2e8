//! The edge as users meet it: real `herdr-mcp edge serve`, `herdr-mcp serve` and
//! `herdr-mcp connector ...` processes on loopback. An OAuth client registers,
//! is sent to the pending-approval page, the operator approves from a terminal (a
//! pty, the code typed in), the client polls, redeems the code, calls `/mcp`, rotates
//! its refresh token, and loses access on the very next request after
//! `connector revoke`.

mod edge_support;
#[path = "edge_support/procs.rs"]
mod procs;
#[path = "edge_support/pty.rs"]
mod pty;

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Output, Stdio};

use edge_support::*;
use procs::{DEADLINE, EdgeProcess, Proc, command, spawn_logged, wait_until};
use pty::PtySession;
use serde_json::{Value, json};

struct Setup {
    edge_dir: PathBuf,
    socket: PathBuf,
    base: String,
    _runtime: Proc,
    _edge: EdgeProcess,
    // Last, so the processes are gone before their directories are.
    tmp: tempfile::TempDir,
}

impl Setup {
    fn start() -> Setup {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().to_path_buf();
        let root = home.join("root");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("hello.txt"), "hi\n").unwrap();
        let socket = home.join("rt.sock");
        let runtime = spawn_logged(
            command(&home).args(["serve", "--socket"]).arg(&socket).arg("--root").arg(&root).arg("--state-dir").arg(home.join("rtstate")),
            &home.join("serve.log"),
        );
        let edge = EdgeProcess::start(&home);
        wait_until("the runtime socket", || std::os::unix::net::UnixStream::connect(&socket).ok());
        Setup { tmp, edge_dir: edge.edge_dir.clone(), socket, base: edge.base.clone(), _runtime: runtime, _edge: edge }
    }

    fn connector(&self, args: &[&str]) -> Output {
        command(self.tmp.path()).arg("connector").args(args).arg("--edge-dir").arg(&self.edge_dir).output().unwrap()
    }

    /// Runs `connector approve` on a fresh pty (its controlling terminal), typing
    /// each of `codes` at the prompt. Returns (exit ok, terminal transcript, stdout).
    fn approve_on_pty(&self, request_id: &str, codes: &[&str]) -> (bool, String, String) {
        let mut cmd = command(self.tmp.path());
        cmd.args(["connector", "approve", request_id, "--socket"]).arg(&self.socket).arg("--edge-dir").arg(&self.edge_dir);
        let mut pty = PtySession::spawn(cmd, DEADLINE);
        for (i, code) in codes.iter().enumerate() {
            pty.wait_for_prompt("Enter the 6-digit code", i + 1);
            pty.type_line(code);
        }
        pty.finish("connector approve")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dcr_pending_approve_on_a_terminal_token_mcp_rotate_revoke() {
    let setup = tokio::task::spawn_blocking(Setup::start).await.unwrap();
    let http = Http::new(&setup.base);
    let issuer = setup.base.clone();
    let resource = format!("{issuer}/mcp");

    // Discovery, as a client finds the server.
    let unauth = http.post_json("/mcp", &json!({"jsonrpc":"2.0","id":1,"method":"initialize"}), None).await;
    assert_eq!(unauth.status, 401);
    assert_eq!(
        unauth.header("www-authenticate"),
        format!("Bearer resource_metadata=\"{issuer}/.well-known/oauth-protected-resource/mcp\", scope=\"mcp\"")
    );
    let prm = http.get("/.well-known/oauth-protected-resource/mcp").await.json();
    assert_eq!(prm["resource"], resource);
    let as_url = prm["authorization_servers"][0].as_str().unwrap().to_string();
    assert_eq!(as_url, issuer);
    let meta = http.get("/.well-known/oauth-authorization-server").await.json();
    assert_eq!(meta["code_challenge_methods_supported"], json!(["S256"]));
    assert_eq!(meta["authorization_response_iss_parameter_supported"], json!(true));
    assert!(meta.get("revocation_endpoint").is_none());
    assert_eq!(http.get("/.well-known/openid-configuration").await.json(), meta);
    assert_eq!(http.get("/.well-known/oauth-protected-resource").await.json()["resource"], issuer);
    assert_eq!(http.get("/.well-known/mcp.json").await.json()["serverUrl"], resource);

    // DCR.
    let reg = http
        .post_json(meta["registration_endpoint"].as_str().unwrap().trim_start_matches(&issuer), &json!({"redirect_uris": [REDIRECT], "client_name": "Flow test"}), None)
        .await;
    assert_eq!(reg.status, 201, "{}", reg.body);
    let client_id = reg.json()["client_id"].as_str().unwrap().to_string();
    assert!(client_id.starts_with("dcr-") && client_id.len() == 20, "{client_id}");

    // Authorize → the pending page (in Japanese, as asked).
    let (verifier, challenge) = pkce();
    let path = authorize_path(&[
        ("response_type", "code"),
        ("client_id", &client_id),
        ("redirect_uri", REDIRECT),
        ("code_challenge", &challenge),
        ("code_challenge_method", "S256"),
        ("scope", "mcp"),
        ("resource", &resource),
        ("state", "xyz"),
    ]);
    let page = http.get_with(&path, &[("accept-language", "ja,en;q=0.5")]).await;
    assert_eq!(page.status, 200);
    assert!(page.header("content-security-policy").starts_with("default-src 'none'"));
    assert!(page.header("content-security-policy").contains("'nonce-"));
    assert_eq!(page.header("x-frame-options"), "DENY");
    assert_eq!(page.header("cache-control"), "no-store");
    assert!(page.body.contains("lang=\"ja\"") && page.body.contains("承認"));
    let (request_id, code, resume) = scrape_page(&page.body);
    assert!(page.body.contains(&format!("herdr-mcp connector approve {request_id}")));
    assert!(code.len() == 6 && code.bytes().all(|b| b.is_ascii_digit()));
    let poll_path = format!("/oauth/authorize/poll?{}", serde_urlencoded::to_string([("request_id", &request_id), ("resume_token", &resume)]).unwrap());
    assert_eq!(http.get(&poll_path).await.status, 202);

    // The operator approves on a terminal: one typo, then the right code.
    let wrong = format!("{:06}", (code.parse::<u32>().unwrap() + 1) % 1_000_000);
    let s2 = std::sync::Arc::new(setup);
    let (ok, transcript, out) = {
        let s = std::sync::Arc::clone(&s2);
        let (rid, c, w) = (request_id.clone(), code.clone(), wrong.clone());
        tokio::task::spawn_blocking(move || s.approve_on_pty(&rid, &[&w, &c])).await.unwrap()
    };
    assert!(ok, "approve failed:\n{transcript}");
    assert!(transcript.contains("Flow test") && transcript.contains("4 attempts left"), "{transcript}");
    assert!(out.contains("approved"), "{out}");
    let setup = s2;

    // The page's poll now carries the redirect with a fresh code, state and iss.
    let polled = http.get(&poll_path).await;
    assert_eq!(polled.status, 200, "{}", polled.body);
    let q = query_of(polled.json()["redirect"].as_str().unwrap());
    assert_eq!((q["state"].as_str(), q["iss"].as_str()), ("xyz", issuer.as_str()));

    let tok = http
        .post_form(
            "/oauth/token",
            &[("grant_type", "authorization_code"), ("client_id", &client_id), ("code", &q["code"]), ("redirect_uri", REDIRECT), ("code_verifier", &verifier), ("resource", &resource)],
        )
        .await;
    assert_eq!(tok.status, 200, "{}", tok.body);
    assert_eq!(tok.header("cache-control"), "no-store");
    let t = tok.json();
    assert_eq!((t["token_type"].as_str(), t["scope"].as_str(), t["expires_in"].as_i64()), (Some("Bearer"), Some("mcp"), Some(86400)));
    let access = t["access_token"].as_str().unwrap().to_string();

    // MCP with the bearer.
    let init = http.mcp(&access, "initialize", json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}})).await;
    assert_eq!(init.json()["result"]["protocolVersion"], "2025-06-18");
    let list = http.mcp(&access, "tools/list", json!({})).await.json();
    let names: Vec<&str> = list["result"]["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    // The runtime's 18 tools (each with a `device` selector) plus herdr_devices,
    // even before any workstation links.
    assert_eq!((names.len(), names[0]), (19, "herdr_devices"));
    assert_eq!(list["result"]["_meta"]["herdr"]["tool_count"], 19);
    let info = http.get("/info").await.json();
    assert_eq!(info["publicContract"]["hash"], list["result"]["_meta"]["herdr"]["contract_hash"]);
    assert_eq!(info["publicContract"]["toolCount"], 19);
    let (catalog, (epoch, hash)) = herdr_mcp::edge::forward::local_runtime_contract();
    assert_eq!(info["runtimeContract"], json!({"epoch": epoch, "hash": hash, "toolCount": catalog.len()}));
    let devices = http.mcp(&access, "tools/call", json!({"name": "herdr_devices", "arguments": {}})).await.json();
    let listed = &devices["result"]["structuredContent"];
    assert_eq!((listed["ok"].as_bool(), listed["devices"].clone()), (Some(true), json!([])), "{listed}");
    assert!(listed["pairing_hint"].as_str().unwrap().contains("herdr-mcp worker pair"));

    // Rotation: the new pair works, the old access token is gone.
    let rot = http
        .post_form("/oauth/token", &[("grant_type", "refresh_token"), ("client_id", &client_id), ("refresh_token", t["refresh_token"].as_str().unwrap()), ("resource", &resource)])
        .await;
    assert_eq!(rot.status, 200, "{}", rot.body);
    let access2 = rot.json()["access_token"].as_str().unwrap().to_string();
    assert_eq!(http.mcp(&access, "tools/list", json!({})).await.status, 401);
    assert_eq!(http.mcp(&access2, "tools/list", json!({})).await.status, 200);

    // The operator's view, then revocation from the CLI.
    let listed = setup.connector(&["list", "--json"]);
    assert!(listed.status.success(), "{}", String::from_utf8_lossy(&listed.stderr));
    let inv: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let row = &inv["connectors"][0];
    assert_eq!((row["status"].as_str(), row["client_name"].as_str()), (Some("active"), Some("Flow test")), "{inv}");
    // After the rotation: one live pair; the rotated refresh token is no longer counted.
    assert_eq!((row["active_access_tokens"].as_i64(), row["active_refresh_tokens"].as_i64()), (Some(1), Some(1)), "{row}");
    assert!(row["last_used_at_ms"].is_i64());
    let connector_id = row["connector_id"].as_str().unwrap().to_string();
    assert!(connector_id.starts_with("conn_") && connector_id.len() == 27, "{connector_id}");
    let table = setup.connector(&["list"]);
    assert!(String::from_utf8_lossy(&table.stdout).contains(&connector_id));

    let refused = setup.connector(&["revoke", &connector_id]);
    assert!(!refused.status.success() && String::from_utf8_lossy(&refused.stderr).contains("--confirm"));
    assert_eq!(http.mcp(&access2, "tools/list", json!({})).await.status, 200);
    let revoked = setup.connector(&["revoke", &connector_id, "--confirm"]);
    assert!(revoked.status.success(), "{}", String::from_utf8_lossy(&revoked.stderr));
    let r: Value = serde_json::from_slice(&revoked.stdout).unwrap();
    assert_eq!((r["ok"].as_bool(), r["deleted_tokens"].as_i64()), (Some(true), Some(3)));
    // Effective on the very next request, across processes.
    assert_eq!(http.mcp(&access2, "tools/list", json!({})).await.status, 401);
    let again = http.get(&path).await;
    assert_eq!(query_of(&again.header("location")).get("error").map(String::as_str), Some("access_denied"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approve_refuses_without_a_terminal_a_runtime_or_a_valid_request() {
    let setup = tokio::task::spawn_blocking(Setup::start).await.unwrap();
    let http = Http::new(&setup.base);
    let reg = http.post_json("/oauth/register", &json!({"redirect_uris": [REDIRECT]}), None).await;
    let client_id = reg.json()["client_id"].as_str().unwrap().to_string();
    let (_, challenge) = pkce();
    let page = http
        .get(&authorize_path(&[("response_type", "code"), ("client_id", &client_id), ("redirect_uri", REDIRECT), ("code_challenge", &challenge), ("code_challenge_method", "S256")]))
        .await;
    let (request_id, code, _) = scrape_page(&page.body);

    // No controlling terminal (a new session, stdin from a pipe holding the code).
    let mut cmd = command(setup.tmp.path());
    cmd.args(["connector", "approve", &request_id, "--socket"]).arg(&setup.socket).arg("--edge-dir").arg(&setup.edge_dir);
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    // SAFETY: setsid is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| if libc::setsid() < 0 { Err(std::io::Error::last_os_error()) } else { Ok(()) });
    }
    let mut child = cmd.spawn().unwrap();
    // The command refuses before reading stdin and may already be gone: a
    // broken pipe here is that refusal arriving first, not a failure.
    let _ = child.stdin.take().unwrap().write_all(format!("{code}\n").as_bytes());
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("interactive terminal"), "{}", String::from_utf8_lossy(&out.stderr));

    // The local runtime must answer first.
    let out = command(setup.tmp.path())
        .args(["connector", "approve", &request_id, "--socket"])
        .arg(setup.tmp.path().join("nothing.sock"))
        .arg("--edge-dir")
        .arg(&setup.edge_dir)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not answer"), "{}", String::from_utf8_lossy(&out.stderr));

    // Unknown request ids are refused before any code is asked for.
    let setup = std::sync::Arc::new(setup);
    let s = std::sync::Arc::clone(&setup);
    let out = tokio::task::spawn_blocking(move || s.connector(&["approve", "req_doesnotexist", "--socket", s.socket.to_str().unwrap()])).await.unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("not_found"), "{}", String::from_utf8_lossy(&out.stderr));

    // Cancel, then the page's request is gone.
    let cancelled = setup.connector(&["cancel", &request_id]);
    assert!(cancelled.status.success(), "{}", String::from_utf8_lossy(&cancelled.stderr));
    let again = setup.connector(&["cancel", &request_id]);
    assert!(String::from_utf8_lossy(&again.stderr).contains("not_found"));
    assert!(setup.edge_dir.join("edge.pepper").exists());
}
