//! Regression tests for the edge's attack findings (issue 22, items 1–5), each
//! against the real `herdr-mcp edge serve` process on loopback, with a real
//! `herdr-mcp serve` for `connector approve` to check and the code typed on a
//! pty, and for item 5 a real `herdr-mcp link`.
//! The "attacker" is another loopback source address (127.0.0.2, …) with its own
//! user agent: it knows the edge URL and a public `client_id`, nothing else.

mod edge_support;
#[path = "edge_support/procs.rs"]
mod procs;
#[path = "edge_support/pty.rs"]
mod pty;

use std::path::PathBuf;
use std::sync::Arc;

use edge_support::*;
use procs::{DEADLINE, EdgeProcess, Proc, command, spawn_logged, wait_until};
use pty::PtySession;
use serde_json::json;

const LEGIT_UA: &str = "LegitBrowser/1.0 (operator)";
const ATTACKER_UA: &str = "EvilBot/6.6";

struct Setup {
    edge_dir: PathBuf,
    socket: PathBuf,
    base: String,
    _runtime: Proc,
    _edge: EdgeProcess,
    tmp: tempfile::TempDir,
}

impl Setup {
    fn start() -> Setup {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().to_path_buf();
        let root = home.join("root");
        std::fs::create_dir_all(&root).unwrap();
        let socket = home.join("rt.sock");
        let runtime = spawn_logged(
            command(&home)
                .args(["serve", "--socket"])
                .arg(&socket)
                .arg("--root")
                .arg(&root)
                .arg("--state-dir")
                .arg(home.join("rtstate")),
            &home.join("serve.log"),
        );
        let edge = EdgeProcess::start(&home);
        wait_until("the runtime socket", || std::os::unix::net::UnixStream::connect(&socket).ok());
        Setup { edge_dir: edge.edge_dir.clone(), socket, base: edge.base.clone(), _runtime: runtime, _edge: edge, tmp }
    }

    /// `connector approve <request_id>` on a pty with `code` typed once: (ok, transcript).
    fn approve_on_pty(&self, request_id: &str, code: &str) -> (bool, String) {
        let mut cmd = command(self.tmp.path());
        cmd.args(["connector", "approve", request_id, "--socket"])
            .arg(&self.socket)
            .arg("--edge-dir")
            .arg(&self.edge_dir);
        let mut pty = PtySession::spawn(cmd, DEADLINE);
        pty.wait_for_prompt("Enter the 6-digit code", 1);
        pty.type_line(code);
        let (ok, transcript, _) = pty.finish("connector approve");
        (ok, transcript)
    }
}

async fn start() -> Arc<Setup> {
    Arc::new(tokio::task::spawn_blocking(Setup::start).await.unwrap())
}

async fn approve(setup: &Arc<Setup>, request_id: &str, code: &str) -> String {
    let (s, rid, c) = (Arc::clone(setup), request_id.to_string(), code.to_string());
    let (ok, transcript) = tokio::task::spawn_blocking(move || s.approve_on_pty(&rid, &c)).await.unwrap();
    assert!(ok, "approve failed:\n{transcript}");
    transcript
}

fn legit(setup: &Setup) -> Http {
    Http::from_source(&setup.base, "127.0.0.1", LEGIT_UA)
}

fn attacker(setup: &Setup) -> Http {
    Http::from_source(&setup.base, "127.0.0.2", ATTACKER_UA)
}

/// Item 1: once a public client (DCR `none`) was approved, a stranger using its
/// `client_id` with their own PKCE must get a pending approval of their own,
/// never a code; the legitimate connector keeps working and refreshing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approved_public_client_does_not_mint_for_strangers() {
    let setup = start().await;
    let http = legit(&setup);
    let resource = format!("{}/mcp", setup.base);
    let r = http.register(json!({"redirect_uris": [REDIRECT], "client_name": "Shared public app"})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let c = TestClient { id: r.json()["client_id"].as_str().unwrap().into(), secret: String::new() };

    // The pending page says what is asking: client, redirect, resource, when, from where.
    let (verifier, challenge) = pkce();
    let page = http.authorize(&c, &challenge, "legit-state").await;
    assert_eq!(page.status, 200, "{}", page.body);
    for shown in ["Shared public app", REDIRECT, resource.as_str(), "127.0.0.1", LEGIT_UA] {
        assert!(
            page.body.contains(&approval_page_escape(shown)),
            "the pending page does not show {shown:?}:\n{}",
            page.body
        );
    }
    let (request_id, code, resume) = scrape_page(&page.body);
    let transcript = approve(&setup, &request_id, &code).await;
    for shown in ["Shared public app", REDIRECT, resource.as_str(), "127.0.0.1", LEGIT_UA, "requested"] {
        assert!(transcript.contains(shown), "connector approve does not show {shown:?}:\n{transcript}");
    }
    let p = Pending { request_id, code, resume, verifier, challenge, state: "legit-state".into() };
    let polled = http.poll(&p).await;
    assert_eq!(polled.status, 200, "{}", polled.body);
    let got = query_of(polled.json()["redirect"].as_str().unwrap())["code"].clone();
    let tok = http.redeem(&c, &got, &p.verifier).await;
    assert_eq!(tok.status, 200, "{}", tok.body);
    let legit_tokens = Tokens {
        access: tok.json()["access_token"].as_str().unwrap().into(),
        refresh: tok.json()["refresh_token"].as_str().unwrap().into(),
    };
    assert_eq!(http.mcp(&legit_tokens.access, "tools/list", json!({})).await.status, 200);

    // The stranger: same client_id, own PKCE, from another address.
    let evil = attacker(&setup);
    let (evil_verifier, evil_challenge) = pkce();
    let r = evil.authorize(&c, &evil_challenge, "evil").await;
    let location = r.header("location");
    let leaked = query_of(&location).get("code").cloned();
    let stolen = match &leaked {
        Some(code) => {
            let t = evil.redeem(&c, code, &evil_verifier).await;
            t.json()["access_token"].as_str().map(str::to_string)
        }
        None => None,
    };
    let stolen_works = match &stolen {
        Some(t) => evil.mcp(t, "tools/list", json!({})).await.status == 200,
        None => false,
    };
    let legit_after = http.mcp(&legit_tokens.access, "tools/list", json!({})).await.status;
    assert!(
        leaked.is_none() && r.status == 200,
        "a stranger's authorize for an approved public client must wait for its own approval; got {} location={location:?}, \
         bearer minted: {}, bearer works: {stolen_works}, legitimate token afterwards: {legit_after}",
        r.status,
        stolen.is_some()
    );
    // It is a pending request of its own, showing the stranger's address.
    assert!(r.body.contains("127.0.0.2") && r.body.contains(ATTACKER_UA), "{}", r.body);
    let (evil_rid, _, evil_resume) = scrape_page(&r.body);
    assert_ne!(evil_rid, p.request_id);
    let q = serde_urlencoded::to_string([("request_id", &evil_rid), ("resume_token", &evil_resume)]).unwrap();
    assert_eq!(evil.get(&format!("/oauth/authorize/poll?{q}")).await.status, 202);
    assert_eq!(legit_after, 200, "the legitimate connector's token must survive");

    // Refresh needs no new approval.
    let rot = http.refresh(&c, &legit_tokens.refresh).await;
    assert_eq!(rot.status, 200, "{}", rot.body);
    let access2 = rot.json()["access_token"].as_str().unwrap().to_string();
    assert_eq!(http.mcp(&access2, "tools/list", json!({})).await.status, 200);

    // Even the legitimate user's second authorization is its own request.
    let (_, ch2) = pkce();
    let again = http.authorize(&c, &ch2, "second").await;
    assert!(
        again.header("location").is_empty() && again.status == 200,
        "{} {}",
        again.status,
        again.header("location")
    );
}

/// The page escapes HTML; the strings checked here only need `&` → `&amp;`.
fn approval_page_escape(s: &str) -> String {
    s.replace('&', "&amp;")
}

/// Item 2: approving request A approves A only. A stranger's pending request of
/// the same client, redirect, resource and scope stays pending, and its poll
/// never receives a code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approving_one_request_approves_only_that_request() {
    let setup = start().await;
    let http = legit(&setup);
    let c = http.dcr_client().await;
    let evil = attacker(&setup);
    // The stranger starts first, the legitimate user right after: same client,
    // redirect, resource and scope, different PKCE and state.
    let b = evil.pending(&c).await;
    let a = http.pending(&c).await;
    assert_ne!(a.request_id, b.request_id);
    approve(&setup, &a.request_id, &a.code).await;

    let evil_poll = evil.poll(&b).await;
    let leaked = evil_poll.json()["redirect"].as_str().and_then(|r| query_of(r).get("code").cloned());
    let stolen = match &leaked {
        Some(code) => evil.redeem(&c, code, &b.verifier).await.status,
        None => 0,
    };
    assert!(
        evil_poll.status == 202 && leaked.is_none(),
        "the stranger's request B must stay pending after A was approved; its poll got {} {} (code redeemed: {stolen})",
        evil_poll.status,
        evil_poll.body
    );
    // A itself completes.
    let polled = http.poll(&a).await;
    assert_eq!(polled.status, 200, "{}", polled.body);
    let code = query_of(polled.json()["redirect"].as_str().unwrap())["code"].clone();
    let tok = http.redeem(&c, &code, &a.verifier).await;
    assert_eq!(tok.status, 200, "{}", tok.body);
    // B can still only be approved on its own (it is not already approved).
    let out = command(setup.tmp.path())
        .args(["connector", "cancel", &b.request_id, "--edge-dir"])
        .arg(&setup.edge_dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "B should be a separate, cancellable request: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let after = evil.poll(&b).await;
    assert_ne!(after.status, 200, "{}", after.body);
}

/// Item 4: before a client is trusted (approved by the operator), a bad
/// authorization request is answered on the edge's own page, never by a 302 to
/// whatever `redirect_uri` the unapproved registration named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authorize_errors_before_trust_are_not_redirected() {
    let setup = start().await;
    let evil = attacker(&setup);
    let phish = "https://phish.example/landing";
    let r = evil.register(json!({"redirect_uris": [phish], "client_name": "Not a phish"})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.json()["client_id"].as_str().unwrap().to_string();
    let (_, ch) = pkce();
    let (v, _) = pkce();
    // (what, the bad parameters, the error the edge must show itself)
    type Bad<'a> = (&'a str, Vec<(&'a str, &'a str)>, &'a str);
    let bad: Vec<Bad> = vec![
        (
            "response_type=token",
            vec![("response_type", "token"), ("code_challenge", &ch), ("code_challenge_method", "S256")],
            "unsupported_response_type",
        ),
        ("no PKCE", vec![("response_type", "code")], "invalid_request"),
        (
            "PKCE plain",
            vec![("response_type", "code"), ("code_challenge", &v), ("code_challenge_method", "plain")],
            "invalid_request",
        ),
        (
            "another scope",
            vec![
                ("response_type", "code"),
                ("code_challenge", &ch),
                ("code_challenge_method", "S256"),
                ("scope", "admin"),
            ],
            "invalid_scope",
        ),
        (
            "foreign resource",
            vec![
                ("response_type", "code"),
                ("code_challenge", &ch),
                ("code_challenge_method", "S256"),
                ("resource", "https://x.example/"),
            ],
            "invalid_target",
        ),
    ];
    let mut failures = Vec::new();
    for (what, extra, error) in bad {
        let mut pairs = vec![("client_id", id.as_str()), ("redirect_uri", phish), ("state", "s")];
        pairs.extend(extra);
        let r = evil.get(&authorize_path(&pairs)).await;
        let location = r.header("location");
        if r.status != 400 || !location.is_empty() || r.oauth_error() != error {
            failures.push(format!(
                "{what}: expected 400 {error} on the edge's page, got {} {:?} location={location:?}",
                r.status,
                r.oauth_error()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Item 3: a flood of registrations and pending authorizations from one source
/// address (127.0.0.2) does not lock out a legitimate client on another
/// (127.0.0.3): it registers and reaches its approval page right after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_source_cannot_exhaust_registration_or_pending_caps() {
    let setup = start().await;
    let flood = attacker(&setup);
    let good = Http::from_source(&setup.base, "127.0.0.3", LEGIT_UA);
    // The legitimate (public) app registered before the flood; its client_id is
    // no secret.
    let shared = good.dcr_client().await;

    let mut registered = Vec::new();
    let mut refused = 0;
    for _ in 0..300 {
        let r = flood.register(json!({"redirect_uris": [REDIRECT]})).await;
        match r.status {
            201 => registered
                .push(TestClient { id: r.json()["client_id"].as_str().unwrap().into(), secret: String::new() }),
            429 => refused += 1,
            s => panic!("registration answered {s}: {}", r.body),
        }
    }
    let mut pending = 0;
    let mut clients = vec![shared.clone()];
    clients.extend(registered.iter().cloned());
    for c in &clients {
        for i in 0..4 {
            let (_, ch) = pkce();
            if flood.authorize(c, &ch, &format!("flood-{i}")).await.status == 200 {
                pending += 1;
            }
        }
    }
    let observed =
        format!("the flood got {} registrations ({refused} refused) and {pending} pending requests", registered.len());
    let reg = good.register(json!({"redirect_uris": [REDIRECT], "client_name": "after the flood"})).await;
    assert_eq!(reg.status, 201, "{observed}; a registration from another address then got {} {}", reg.status, reg.body);
    let (_, ch) = pkce();
    let page = good.authorize(&shared, &ch, "after-flood").await;
    assert_eq!(
        page.status, 200,
        "{observed}; the shared client's authorize from another address then got {} {}",
        page.status, page.body
    );
    let fresh = TestClient { id: reg.json()["client_id"].as_str().unwrap().into(), secret: String::new() };
    let (_, ch) = pkce();
    let page = good.authorize(&fresh, &ch, "after-flood-2").await;
    assert_eq!(
        page.status, 200,
        "{observed}; a new client's authorize from another address then got {} {}",
        page.status, page.body
    );
    // And the flooding source was told to slow down, with a time to come back.
    let r = flood.register(json!({"redirect_uris": [REDIRECT]})).await;
    assert_eq!((r.status, r.oauth_error().as_str()), (429, "temporarily_unavailable"), "{observed}: {}", r.body);
    assert!(r.header("retry-after").parse::<u64>().is_ok_and(|s| s > 0), "{:?}", r.headers);
}

mod depth {
    //! A stand-in runtime for item 5 whose calls with `arguments.gate` wait until
    //! the test opens the gate, so one call is provably in flight meanwhile.
    use std::path::Path;
    use std::sync::{Arc, Mutex};

    use serde_json::{Value, json};
    use tokio::sync::Notify;

    pub type Calls = Arc<Mutex<Vec<Value>>>;

    pub async fn gated_runtime(socket: &Path) -> (Calls, Arc<Notify>) {
        use axum::routing::{get, post};
        let calls: Calls = Arc::default();
        let gate = Arc::new(Notify::new());
        let (seen, opened) = (Arc::clone(&calls), Arc::clone(&gate));
        let (_, (epoch, hash)) = herdr_mcp::edge::forward::local_runtime_contract();
        let app = axum::Router::new()
            .route(
                "/health",
                get(move || async move {
                    axum::Json(json!({"ok": true, "version": "0.0.0-test", "build": {"commit": "t", "boot_id": "gated-1"}, "contract": {"epoch": epoch, "hash": hash}}))
                }),
            )
            .route(
                "/mcp",
                post(move |axum::Json(body): axum::Json<Value>| {
                    let (seen, opened) = (Arc::clone(&seen), Arc::clone(&opened));
                    async move {
                        let gated = body["params"]["arguments"]["gate"] == true;
                        let n = {
                            let mut calls = seen.lock().unwrap();
                            calls.push(body);
                            calls.len()
                        };
                        if gated {
                            opened.notified().await;
                        }
                        let text = json!({"ok": true, "call": n}).to_string();
                        axum::Json(json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": text}]}}))
                    }
                }),
            );
        let listener = tokio::net::UnixListener::bind(socket).unwrap();
        tokio::spawn(async move {
            axum::serve(listener, app).await.ok();
        });
        (calls, gate)
    }

    /// An arguments object nesting exactly `levels` levels (itself the first).
    pub fn nested(levels: usize) -> Value {
        let mut v = json!({});
        for _ in 1..levels {
            v = json!({ "n": v });
        }
        v
    }
}

/// Item 5: `tools/call` arguments deeper than a link accepts are refused at the
/// edge with -32602; the link stays up and a call in flight on it completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edge_refuses_arguments_deeper_than_the_link_accepts() {
    use herdr_mcp::edge::clock::SystemClock;
    use herdr_mcp::edge::devices::DeviceRegistry;
    // The frame is level 1, its `arguments` level 2: they may nest one level less.
    const MAX_ARGUMENTS_DEPTH: usize = herdr_mcp::edge::relay::MAX_DEPTH - 1;
    use herdr_mcp::edge::store::EdgeStore;

    let setup = start().await;
    let home = setup.tmp.path();
    let store = Arc::new(EdgeStore::open(&setup.edge_dir, Arc::new(SystemClock)).unwrap());
    let devices = DeviceRegistry::new(Arc::clone(&store));
    let pairing = devices.create_pairing(Some(120), None, "test").unwrap();
    let enrolled = devices.consume_pairing(&pairing.pairing_id, &pairing.code, Some("deep")).unwrap();
    let ws = enrolled.device.workstation_id.clone();
    let socket = home.join("gated.sock");
    let (calls, gate) = depth::gated_runtime(&socket).await;
    let secret_file = home.join("deep.secret");
    std::fs::write(&secret_file, &enrolled.device_secret).unwrap();
    std::fs::set_permissions(&secret_file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let link_log = home.join("deep.link.log");
    let _link = spawn_logged(
        command(home)
            .args(["link", "--edge", &setup.base, "--workstation-id", &ws, "--credential-file"])
            .arg(&secret_file)
            .arg("--socket")
            .arg(&socket),
        &link_log,
    );
    let http = legit(&setup);
    let access = http.approved_bearer(&store).await;
    let start = std::time::Instant::now();
    loop {
        let listed = http.mcp(&access, "tools/call", json!({"name": "herdr_devices", "arguments": {}})).await.json();
        if listed["result"]["structuredContent"]["devices"][0]["connection"] == "online" {
            break;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "the link never came online: {listed}\n{}",
            std::fs::read_to_string(&link_log).unwrap_or_default()
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }

    // A call held in flight by the runtime.
    let in_flight = {
        let http = http.clone();
        let access = access.clone();
        tokio::spawn(async move {
            http.mcp(
                &access,
                "tools/call",
                json!({"name": "herdr_fs_write", "arguments": {"path": "a.txt", "content": "x", "gate": true}}),
            )
            .await
            .json()
        })
    };
    let start = std::time::Instant::now();
    while calls.lock().unwrap().is_empty() {
        assert!(start.elapsed() < DEADLINE, "the gated call never reached the runtime");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }

    // One level deeper than a link accepts, and far deeper: refused here.
    let mut failures = Vec::new();
    for levels in [MAX_ARGUMENTS_DEPTH + 1, 40, 100] {
        let r = http
            .mcp(&access, "tools/call", json!({"name": "herdr_fs_read", "arguments": depth::nested(levels)}))
            .await
            .json();
        let (code, message) = (
            r.pointer("/error/code").and_then(|c| c.as_i64()),
            r.pointer("/error/message").and_then(|m| m.as_str()).unwrap_or(""),
        );
        if code != Some(-32602) || !message.contains(&MAX_ARGUMENTS_DEPTH.to_string()) {
            failures.push(format!("{levels} levels: expected -32602 naming the limit {MAX_ARGUMENTS_DEPTH}, got {r}"));
        }
    }
    gate.notify_one();
    let held = in_flight.await.unwrap();
    let held_ok = held["result"]["structuredContent"]["ok"] == true;
    assert!(failures.is_empty() && held_ok, "{}\nthe call in flight meanwhile ended: {held}", failures.join("\n"));
    // The deepest accepted arguments still travel, on the same link.
    let r = http
        .mcp(&access, "tools/call", json!({"name": "herdr_fs_read", "arguments": depth::nested(MAX_ARGUMENTS_DEPTH)}))
        .await
        .json();
    assert_eq!(r["result"]["structuredContent"]["ok"], true, "{r}");
}
