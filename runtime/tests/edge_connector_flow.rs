//! The connector flow as ChatGPT and an operator meet it, every piece a real
//! process on loopback: `edge init` + `edge serve`; two workstations, each its
//! own home with its own root, enrolled by the printed pairing and `worker
//! connect` typed on a terminal (the second paired by the first with `worker
//! pair`); one linked by `herdr-mcp link`, the other by `serve --link`.
//!
//! The OAuth client is the `oauth2` crate: DCR (which oauth2 lacks, so a plain
//! POST), an authorize URL with PKCE S256, `resource` and `state`, the pending
//! page, `connector approve` run on workstation alpha (over HTTP with alpha's
//! device credential, not the edge's files) with the code typed on a pty, the redirect's
//! `state`/`iss`, `exchange_code`, then an rmcp client with the bearer calling
//! `herdr_devices` and, by explicit `device`, `herdr_inspect` and
//! `herdr_fs_read` on each workstation; `exchange_refresh_token` rotation and
//! reuse detection; finally `connector list|cancel|revoke` from workstation
//! beta, and beta refused once revoked.

mod edge_support;
#[path = "edge_support/procs.rs"]
mod procs;
#[path = "edge_support/pty.rs"]
mod pty;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use edge_support::{Http, REDIRECT, query_of, scrape_page};
use oauth2::basic::{BasicClient, BasicErrorResponseType};
use oauth2::{
    AuthUrl, AuthorizationCode, ClientId, CsrfToken, HttpRequest, HttpResponse, PkceCodeChallenge, RedirectUrl, RequestTokenError,
    Scope, TokenResponse, TokenUrl,
};
use procs::{DEADLINE, EdgeProcess, Proc, command, line_after, spawn_logged, wait_until};
use pty::PtySession;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

/// oauth2's HTTP client, over the project's reqwest (oauth2 5 only ships one
/// for reqwest 0.12). The future owns its client clone, so it outlives nothing.
async fn oauth_http(client: reqwest::Client, request: HttpRequest) -> Result<HttpResponse, reqwest::Error> {
    let response = client.execute(request.try_into()?).await?;
    let mut builder = http::Response::builder().status(response.status());
    for (name, value) in response.headers() {
        builder = builder.header(name, value);
    }
    Ok(builder.body(response.bytes().await?.to_vec()).expect("status and headers came from a valid response"))
}

/// One computer: its own home (state, config, default socket), root and file.
struct Workstation {
    home: PathBuf,
    name: &'static str,
    root: PathBuf,
    file: PathBuf,
    device_id: String,
    log: PathBuf,
    _procs: Vec<Proc>,
}

impl Workstation {
    fn device_file(home: &Path) -> PathBuf {
        home.join("state").join("herdr-mcp").join("device.json")
    }

    /// `worker connect <address>` on a pty, typing `code` at the no-echo prompt.
    fn enroll(home: &Path, name: &str, address: &str, code: &str) -> String {
        let mut cmd = command(home);
        cmd.args(["worker", "connect", address, "--name", name]);
        let mut pty = PtySession::spawn(cmd, DEADLINE);
        pty.wait_for_prompt("Pairing code", 1);
        pty.type_line(code);
        let (ok, transcript, out) = pty.finish("worker connect");
        assert!(ok, "worker connect {name}: {transcript}");
        let cred: Value = serde_json::from_str(&std::fs::read_to_string(Self::device_file(home)).unwrap()).unwrap();
        let device_id = cred["device_id"].as_str().unwrap().to_string();
        assert!(out.contains(&device_id), "worker connect names the new device: {out}");
        device_id
    }

    /// Starts the runtime on the default socket of `home`, serving only this
    /// computer's root, and its link: `herdr-mcp link` or `serve --link`.
    fn start(home: PathBuf, name: &'static str, device_id: String, serve_holds_link: bool) -> Workstation {
        let root = home.join(format!("project-{name}"));
        std::fs::create_dir_all(&root).unwrap();
        let root = root.canonicalize().unwrap();
        let file = root.join(format!("{name}.txt"));
        std::fs::write(&file, format!("the {name} workstation\n")).unwrap();
        let log = home.join("link.log");
        let mut serve = command(&home);
        serve.arg("serve").arg("--root").arg(&root);
        let procs = if serve_holds_link {
            vec![spawn_logged(serve.arg("--link"), &log)]
        } else {
            let runtime = spawn_logged(&mut serve, &home.join("serve.log"));
            vec![runtime, spawn_logged(command(&home).arg("link"), &log)]
        };
        let socket = home.join("config").join("herdr-mcp").join("extension.sock");
        wait_until(&format!("{name}'s runtime socket"), || std::os::unix::net::UnixStream::connect(&socket).ok());
        Workstation { home, name, root, file, device_id, log, _procs: procs }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// Enrolls `alpha` with the pairing `edge init` printed, has alpha pair `beta`,
/// enrolls beta, then starts both: alpha linked by `herdr-mcp link`, beta by
/// `serve --link`.
fn two_workstations(tmp: &Path, edge: &EdgeProcess) -> (Workstation, Workstation) {
    let (alpha_home, beta_home) = (tmp.join("alpha"), tmp.join("beta"));
    let (address, code) = &edge.first_pairing;
    let alpha_id = Workstation::enroll(&alpha_home, "alpha", address, code);
    let pair = command(&alpha_home).args(["worker", "pair", "--name", "beta", "--ttl", "120"]).output().unwrap();
    let pair_out = String::from_utf8_lossy(&pair.stdout).to_string();
    assert!(pair.status.success(), "worker pair: {}", String::from_utf8_lossy(&pair.stderr));
    let beta_id = Workstation::enroll(&beta_home, "beta", line_after(&pair_out, "pairing address:"), line_after(&pair_out, "code:"));
    assert_ne!(alpha_id, beta_id);
    (Workstation::start(alpha_home, "alpha", alpha_id, false), Workstation::start(beta_home, "beta", beta_id, true))
}

/// `connector approve <request_id>` run by the operator on workstation `home`,
/// with no access to the edge's state: the command finds this computer's
/// enrollment and approves over HTTP with its device credential. Each of
/// `codes` is typed at one prompt.
fn approve_on_pty(home: &Path, request_id: &str, codes: &[&str]) -> (bool, String, String) {
    let mut cmd = command(home);
    cmd.args(["connector", "approve", request_id]);
    let mut pty = PtySession::spawn(cmd, DEADLINE);
    for (i, code) in codes.iter().enumerate() {
        pty.wait_for_prompt("Enter the 6-digit code", i + 1);
        pty.type_line(code);
    }
    pty.finish("connector approve")
}

async fn mcp_client(resource: &str, access: &str) -> RunningService<RoleClient, ()> {
    let config = StreamableHttpClientTransportConfig::with_uri(resource.to_string()).auth_header(access.to_string());
    ().serve(StreamableHttpClientTransport::from_config(config)).await.expect("MCP initialize with the bearer")
}

async fn call(client: &RunningService<RoleClient, ()>, name: &str, args: Value) -> Value {
    let mut p = CallToolRequestParams::new(name.to_string());
    p.arguments = args.as_object().cloned();
    serde_json::to_value(client.call_tool(p).await.unwrap_or_else(|e| panic!("{name} failed: {e}"))).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oauth2_client_approved_on_a_terminal_reaches_two_linked_workstations() {
    let tmp = tempfile::tempdir().unwrap();
    let tmp_path = tmp.path().to_path_buf();
    let edge_home = tmp_path.join("edge-host");
    let edge = Arc::new(tokio::task::spawn_blocking(move || EdgeProcess::start(&edge_home)).await.unwrap());
    let (alpha, beta) = {
        let edge = Arc::clone(&edge);
        tokio::task::spawn_blocking(move || two_workstations(&tmp_path, &edge)).await.unwrap()
    };
    let issuer = edge.base.clone();
    let resource = format!("{issuer}/mcp");
    let http = Http::new(&issuer);
    let reqwest_client = http.client.clone();
    let transport = move |request: HttpRequest| oauth_http(reqwest_client.clone(), request);

    // Discovery, then DCR as a public client (oauth2 has no DCR of its own).
    let meta = http.get("/.well-known/oauth-authorization-server").await.json();
    let endpoint = |k: &str| meta[k].as_str().unwrap_or_else(|| panic!("no {k} in {meta}")).to_string();
    let reg = http
        .post_json(endpoint("registration_endpoint").trim_start_matches(&issuer), &json!({"redirect_uris": [REDIRECT], "client_name": "oauth2 proof"}), None)
        .await;
    assert_eq!(reg.status, 201, "{}", reg.body);
    assert_eq!(reg.json()["token_endpoint_auth_method"], "none");
    let client_id = reg.json()["client_id"].as_str().unwrap().to_string();
    let oauth = BasicClient::new(ClientId::new(client_id.clone()))
        .set_auth_uri(AuthUrl::new(endpoint("authorization_endpoint")).unwrap())
        .set_token_uri(TokenUrl::new(endpoint("token_endpoint")).unwrap())
        .set_redirect_uri(RedirectUrl::new(REDIRECT.to_string()).unwrap());

    // Authorize: an unknown grant lands on the pending-approval page.
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let (authorize_url, state) = oauth
        .authorize_url(CsrfToken::new_random)
        .add_scope(Scope::new("mcp".into()))
        .add_extra_param("resource", &resource)
        .set_pkce_challenge(challenge)
        .url();
    let sent = query_of(authorize_url.as_str());
    assert_eq!((sent["code_challenge_method"].as_str(), sent["state"].as_str()), ("S256", state.secret().as_str()));
    let page = http.client.get(authorize_url).send().await.unwrap();
    assert_eq!(page.status().as_u16(), 200, "authorize should show the approval page");
    let page = page.text().await.unwrap();
    let (request_id, code, resume) = scrape_page(&page);
    assert!(page.contains(&format!("herdr-mcp connector approve {request_id}")), "{page}");
    let poll_path = format!("/oauth/authorize/poll?{}", serde_urlencoded::to_string([("request_id", &request_id), ("resume_token", &resume)]).unwrap());
    assert_eq!(http.get(&poll_path).await.status, 202, "pending until approved");

    // The operator, on workstation alpha (not the edge host), types into
    // `connector approve` a typo, then the page's code.
    let typo = format!("{:06}", (code.parse::<u32>().unwrap() + 1) % 1_000_000);
    let (ok, transcript, out) = {
        let (home, rid, codes) = (alpha.home.clone(), request_id.clone(), [typo, code.clone()]);
        tokio::task::spawn_blocking(move || approve_on_pty(&home, &rid, &[&codes[0], &codes[1]])).await.unwrap()
    };
    assert!(ok, "approve failed:\n{transcript}\nedge log:\n{}", edge.log_text());
    assert!(transcript.contains("oauth2 proof") && transcript.contains(&client_id), "{transcript}");
    assert!(transcript.contains(&format!("as device {}", alpha.device_id)), "approved over HTTP as alpha: {transcript}");
    assert!(transcript.contains("4 attempts left"), "the typo costs one attempt: {transcript}");
    assert!(!transcript.contains(&code), "the code was echoed: {transcript}");
    assert!(out.starts_with(&format!("approved {request_id} connector conn_")), "{out}");

    // The page's poll now redirects back with the code, our state and the issuer.
    let polled = http.get(&poll_path).await;
    assert_eq!(polled.status, 200, "{}", polled.body);
    let redirect = polled.json()["redirect"].as_str().unwrap().to_string();
    assert!(redirect.starts_with(&format!("{REDIRECT}?")), "{redirect}");
    let back = query_of(&redirect);
    assert_eq!(back.get("state"), Some(state.secret()), "state must round-trip: {redirect}");
    assert_eq!(back.get("iss"), Some(&issuer), "RFC 9207 iss: {redirect}");

    let tokens = oauth
        .exchange_code(AuthorizationCode::new(back["code"].clone()))
        .set_pkce_verifier(verifier)
        .add_extra_param("resource", &resource)
        .request_async(&transport)
        .await
        .unwrap_or_else(|e| panic!("code exchange: {e:?}"));
    assert_eq!(tokens.token_type(), &oauth2::basic::BasicTokenType::Bearer);
    assert_eq!(tokens.scopes().map(|s| s.iter().map(|s| s.as_str()).collect::<Vec<_>>()), Some(vec!["mcp"]));
    assert_eq!(tokens.expires_in(), Some(Duration::from_secs(86400)));
    let access = tokens.access_token().secret().clone();
    let refresh = tokens.refresh_token().expect("a refresh token").clone();

    // MCP with the bearer: both workstations online in herdr_devices.
    let client = mcp_client(&resource, &access).await;
    assert_eq!(client.list_all_tools().await.unwrap().len(), 19);
    let start = Instant::now();
    let rows = loop {
        let listed = call(&client, "herdr_devices", json!({})).await;
        let rows = listed["structuredContent"]["devices"].as_array().cloned().unwrap_or_default();
        if rows.len() == 2 && rows.iter().all(|r| r["connection"] == "online") {
            break rows;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "links never came online: {listed}\nalpha link: {}\nbeta link: {}",
            alpha.log_text(),
            beta.log_text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let mut listed: Vec<(String, String)> =
        rows.iter().map(|r| (r["device_id"].as_str().unwrap().to_string(), r["name"].as_str().unwrap().to_string())).collect();
    listed.sort();
    let mut expected = vec![(alpha.device_id.clone(), "alpha".to_string()), (beta.device_id.clone(), "beta".to_string())];
    expected.sort();
    assert_eq!(listed, expected);

    // Each explicit device answers with its own root and file, and only those.
    for (w, other) in [(&alpha, &beta), (&beta, &alpha)] {
        let inspect = call(&client, "herdr_inspect", json!({"device": w.device_id})).await;
        let text = inspect["content"][0]["text"].as_str().unwrap_or_default();
        assert!(text.contains(w.root.to_str().unwrap()), "{} inspect lacks its root: {inspect}", w.name);
        assert!(!text.contains(other.root.to_str().unwrap()), "{} inspect shows {}'s root: {inspect}", w.name, other.name);
        let read = call(&client, "herdr_fs_read", json!({"device": w.device_id, "path": w.file})).await;
        assert_eq!(read["structuredContent"]["ok"], true, "{read}");
        assert!(read["structuredContent"]["content"].as_str().unwrap().contains(&format!("the {} workstation", w.name)), "{read}");
        let foreign = call(&client, "herdr_fs_read", json!({"device": w.device_id, "path": other.file})).await;
        let refused = &foreign["structuredContent"];
        assert_eq!((refused["ok"].as_bool(), refused["reason"].as_str()), (Some(false), Some("outside_managed_roots")), "{} must not serve {}'s file: {foreign}", w.name, other.name);
    }
    client.cancel().await.ok();

    // Rotation: a new pair; the old access token is refused on the next request.
    let rotated = oauth
        .exchange_refresh_token(&refresh)
        .add_extra_param("resource", &resource)
        .request_async(&transport)
        .await
        .unwrap_or_else(|e| panic!("refresh: {e:?}"));
    let access2 = rotated.access_token().secret().clone();
    let refresh2 = rotated.refresh_token().expect("a rotated refresh token").clone();
    assert_ne!(access2, access);
    assert_ne!(refresh2.secret(), refresh.secret());
    let list = json!({});
    let old = http.mcp(&access, "tools/list", list.clone()).await;
    assert_eq!(old.status, 401, "the rotated-out access token still works: {}", old.body);
    assert!(old.header("www-authenticate").starts_with("Bearer resource_metadata="), "{:?}", old.headers);
    let client2 = mcp_client(&resource, &access2).await;
    let read = call(&client2, "herdr_fs_read", json!({"device": "beta", "path": beta.file})).await;
    assert_eq!(read["structuredContent"]["ok"], true, "the new token routes by device name too: {read}");
    client2.cancel().await.ok();

    // Replaying the spent refresh token is theft: invalid_grant, and the family dies.
    let replay = oauth.exchange_refresh_token(&refresh).add_extra_param("resource", &resource).request_async(&transport).await;
    match replay {
        Err(RequestTokenError::ServerResponse(e)) => assert_eq!(e.error(), &BasicErrorResponseType::InvalidGrant, "{e:?}"),
        other => panic!("a reused refresh token must be refused with invalid_grant: {other:?}"),
    }
    assert_eq!(http.mcp(&access2, "tools/list", list).await.status, 401, "reuse must revoke the whole token family");

    lifecycle_from_beta(&http, &alpha, &beta, &client_id).await;
}

/// `herdr-mcp connector <args>` on the workstation at `home`, which reaches the
/// edge over HTTP with its own device credential.
async fn connector_cli(home: &Path, args: &[&str]) -> std::process::Output {
    let mut cmd = command(home);
    cmd.arg("connector").args(args);
    tokio::task::spawn_blocking(move || cmd.output().unwrap()).await.unwrap()
}

/// The rest of the connector commands from workstation beta: list, cancel of
/// another client's pending request, revoke; then, once alpha has revoked beta,
/// beta's credential no longer opens these routes.
async fn lifecycle_from_beta(http: &Http, alpha: &Workstation, beta: &Workstation, client_id: &str) {
    let err = |o: &std::process::Output| String::from_utf8_lossy(&o.stderr).to_string();
    let listed = connector_cli(&beta.home, &["list", "--json"]).await;
    assert!(listed.status.success(), "connector list on beta: {}", err(&listed));
    let inv: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let row = inv["connectors"].as_array().unwrap().iter().find(|r| r["client_id"] == client_id).unwrap_or_else(|| panic!("{inv}")).clone();
    assert_eq!((row["client_name"].as_str(), row["status"].as_str()), (Some("oauth2 proof"), Some("active")), "{row}");
    assert_eq!((row["grant_origin"].as_str(), row["created_at_ms"].clone()), (Some("explicit_approval"), row["approved_at_ms"].clone()), "{row}");
    let connector_id = row["connector_id"].as_str().unwrap().to_string();

    let other = http.dcr_client().await;
    let pending = http.pending(&other).await;
    let cancelled = connector_cli(&beta.home, &["cancel", &pending.request_id]).await;
    assert!(cancelled.status.success(), "connector cancel on beta: {}", err(&cancelled));
    let polled = http.poll(&pending).await;
    assert_eq!((polled.status, polled.json()["code"].as_str()), (410, Some("not_found")), "{}", polled.body);

    let revoked = connector_cli(&beta.home, &["revoke", &connector_id, "--confirm"]).await;
    assert!(revoked.status.success(), "connector revoke on beta: {}", err(&revoked));
    let receipt: Value = serde_json::from_slice(&revoked.stdout).unwrap();
    assert_eq!((receipt["ok"].as_bool(), receipt["connector_id"].as_str()), (Some(true), Some(connector_id.as_str())), "{receipt}");
    let table = connector_cli(&beta.home, &["list"]).await;
    let table = String::from_utf8_lossy(&table.stdout).to_string();
    assert!(table.lines().any(|l| l.starts_with(&connector_id) && l.contains("revoked")), "{table}");

    let mut revoke_beta = command(&alpha.home);
    revoke_beta.args(["worker", "revoke", &beta.device_id, "--confirm"]);
    let out = tokio::task::spawn_blocking(move || revoke_beta.output().unwrap()).await.unwrap();
    assert!(out.status.success(), "worker revoke beta: {}", err(&out));
    let refused = connector_cli(&beta.home, &["list"]).await;
    assert!(!refused.status.success(), "a revoked device still lists connectors");
    assert!(err(&refused).contains("401 device_auth_required"), "{}", err(&refused));
}
