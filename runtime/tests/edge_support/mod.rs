//! Shared harness for the edge tests: an HTTP client that never follows
//! redirects, PKCE helpers, approval-page scraping, and an in-process edge on a
//! loopback port driven by a [`ManualClock`] (so expiries are tested without
//! waiting). The real-process flow lives in `edge_flow.rs`.
#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use herdr_mcp::edge::clock::ManualClock;
use herdr_mcp::edge::devices::DeviceRegistry;
use herdr_mcp::edge::forward::{LinkRouter, local_runtime_contract};
use herdr_mcp::edge::link_hub::LinkHub;
use herdr_mcp::edge::link_hub_auth::{DeviceInfo, LinkAuthError, LinkAuthenticator};
use herdr_mcp::edge::mcp::{NoWorkstations, WorkstationRouter};
use herdr_mcp::edge::store::EdgeStore;
use herdr_mcp::edge::{EdgeConfig, EdgeState, connectors};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

pub const REDIRECT: &str = "https://client.example/callback";

pub struct Resp {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: String,
}

impl Resp {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
    pub fn header(&self, name: &str) -> String {
        self.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_string()
    }
    /// `error` of an OAuth JSON error, else of a redirect's query.
    pub fn oauth_error(&self) -> String {
        if let Some(e) = self.json().get("error").and_then(Value::as_str) {
            return e.to_string();
        }
        query_of(&self.header("location")).get("error").cloned().unwrap_or_default()
    }
}

#[derive(Clone)]
pub struct Http {
    pub client: reqwest::Client,
    pub base: String,
}

impl Http {
    pub fn new(base: &str) -> Self {
        let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
        Self { client, base: base.to_string() }
    }

    /// A client whose connections leave from `source` (any 127.0.0.0/8 address
    /// works on Linux, so each test "host" gets its own) and that introduces
    /// itself as `user_agent`.
    pub fn from_source(base: &str, source: &str, user_agent: &str) -> Self {
        let ip: std::net::IpAddr = source.parse().expect("a source IP address");
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .local_address(ip)
            .user_agent(user_agent)
            .build()
            .unwrap();
        Self { client, base: base.to_string() }
    }

    async fn send(&self, rb: reqwest::RequestBuilder) -> Resp {
        let r = rb.send().await.expect("request to the edge failed");
        let status = r.status().as_u16();
        let headers = r.headers().clone();
        let body = r.text().await.unwrap_or_default();
        Resp { status, headers, body }
    }

    pub async fn get(&self, path: &str) -> Resp {
        self.send(self.client.get(format!("{}{path}", self.base))).await
    }

    pub async fn get_with(&self, path: &str, headers: &[(&str, &str)]) -> Resp {
        let mut rb = self.client.get(format!("{}{path}", self.base));
        for (k, v) in headers {
            rb = rb.header(*k, *v);
        }
        self.send(rb).await
    }

    pub async fn post_json(&self, path: &str, body: &Value, bearer: Option<&str>) -> Resp {
        self.post_raw(path, "application/json", serde_json::to_vec(body).unwrap(), bearer).await
    }

    pub async fn post_raw(&self, path: &str, content_type: &str, body: Vec<u8>, bearer: Option<&str>) -> Resp {
        let mut rb = self.client.post(format!("{}{path}", self.base)).header("content-type", content_type).body(body);
        if let Some(t) = bearer {
            rb = rb.header("authorization", format!("Bearer {t}"));
        }
        self.send(rb).await
    }

    pub async fn post_form(&self, path: &str, pairs: &[(&str, &str)]) -> Resp {
        let body = serde_urlencoded::to_string(pairs).unwrap();
        self.post_raw(path, "application/x-www-form-urlencoded", body.into_bytes(), None).await
    }

    /// One JSON-RPC request to `/mcp`; an `initialize` gets the members MCP requires
    /// (`capabilities`, `clientInfo`) unless `params` has them.
    pub async fn mcp(&self, token: &str, method: &str, params: Value) -> Resp {
        let params = with_initialize_defaults(method, params);
        self.post_json("/mcp", &json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}), Some(token)).await
    }
}

/// The OAuth steps of a client against the edge at `base` (which is its issuer).
impl Http {
    pub async fn register(&self, body: Value) -> Resp {
        self.post_json("/oauth/register", &body, None).await
    }

    /// A new public client registered by DCR.
    pub async fn dcr_client(&self) -> TestClient {
        let r = self.register(json!({"redirect_uris": [REDIRECT], "client_name": "Test client"})).await;
        assert_eq!(r.status, 201, "{}", r.body);
        let v = r.json();
        TestClient { id: v["client_id"].as_str().unwrap().into(), secret: v["client_secret"].as_str().unwrap().into() }
    }

    pub async fn authorize(&self, c: &TestClient, challenge: &str, state: &str) -> Resp {
        let path = authorize_path(&[
            ("response_type", "code"),
            ("client_id", &c.id),
            ("redirect_uri", REDIRECT),
            ("code_challenge", challenge),
            ("code_challenge_method", "S256"),
            ("scope", "mcp"),
            ("resource", &format!("{}/mcp", self.base)),
            ("state", state),
        ]);
        self.get(&path).await
    }

    pub async fn pending(&self, c: &TestClient) -> Pending {
        let (verifier, challenge) = pkce();
        let state = format!("st-{}", &verifier[..8]);
        let r = self.authorize(c, &challenge, &state).await;
        assert_eq!(r.status, 200, "authorize should show the approval page: {}", r.body);
        let (request_id, code, resume) = scrape_page(&r.body);
        Pending { request_id, code, resume, verifier, challenge, state }
    }

    pub async fn poll(&self, p: &Pending) -> Resp {
        let q = serde_urlencoded::to_string([("request_id", &p.request_id), ("resume_token", &p.resume)]).unwrap();
        self.get(&format!("/oauth/authorize/poll?{q}")).await
    }

    /// Pending → `approve` (the store, a CLI, …) → polled: an authorization code for `c`.
    pub async fn code(&self, c: &TestClient, approve: impl FnOnce(&Pending) -> Result<(), String>) -> (String, Pending) {
        let p = self.pending(c).await;
        approve(&p).unwrap_or_else(|e| panic!("approving {}: {e}", p.request_id));
        let r = self.poll(&p).await;
        assert_eq!(r.status, 200, "{}", r.body);
        let redirect = r.json()["redirect"].as_str().unwrap().to_string();
        let q = query_of(&redirect);
        (q["code"].clone(), p)
    }

    /// A bearer for a new DCR client, approved straight through `store` (the
    /// terminal approval itself is covered by `edge_flow` and `edge_connector_flow`).
    pub async fn approved_bearer(&self, store: &EdgeStore) -> String {
        let c = self.dcr_client().await;
        let approve = |p: &Pending| connectors::approve(store, &p.request_id, &p.code, "test").map(|_| ()).map_err(|e| format!("{e:?}"));
        let (code, p) = self.code(&c, approve).await;
        let tok = self.redeem(&c, &code, &p.verifier).await;
        assert_eq!(tok.status, 200, "{}", tok.body);
        tok.json()["access_token"].as_str().unwrap().to_string()
    }

    pub async fn redeem(&self, c: &TestClient, code: &str, verifier: &str) -> Resp {
        let resource = format!("{}/mcp", self.base);
        self.post_form(
            "/oauth/token",
            &[
                ("grant_type", "authorization_code"),
                ("client_id", &c.id),
                ("code", code),
                ("redirect_uri", REDIRECT),
                ("code_verifier", verifier),
                ("resource", &resource),
            ],
        )
        .await
    }

    pub async fn refresh(&self, c: &TestClient, refresh: &str) -> Resp {
        let resource = format!("{}/mcp", self.base);
        let form = [("grant_type", "refresh_token"), ("client_id", &c.id), ("refresh_token", refresh), ("resource", &resource)];
        self.post_form("/oauth/token", &form).await
    }

    /// Pending → `approve` → polled → redeemed: a token pair for `c`.
    pub async fn tokens_for(&self, c: &TestClient, approve: impl FnOnce(&Pending) -> Result<(), String>) -> Tokens {
        let (code, p) = self.code(c, approve).await;
        let r = self.redeem(c, &code, &p.verifier).await;
        assert_eq!(r.status, 200, "{}", r.body);
        let v = r.json();
        Tokens { access: v["access_token"].as_str().unwrap().into(), refresh: v["refresh_token"].as_str().unwrap().into() }
    }
}

/// Drops `client_id`'s grant, so that its next authorization starts a new
/// approval and a second connector while the first stays active. This edge's
/// own flow keeps one connector per client (a granted client gets codes at
/// once), but state carried over from an upstream edge may hold several, and
/// `revoke-client` must cover them all.
pub fn forget_grant(store: &EdgeStore, client_id: &str) {
    let dropped = store.write(|tx| tx.execute("DELETE FROM grants WHERE client_id = ?1", [client_id])).unwrap();
    assert_eq!(dropped, 1, "{client_id} had no grant to drop");
}

/// A verifier of 43+ unreserved characters and its S256 challenge.
pub fn pkce() -> (String, String) {
    let verifier = URL_SAFE_NO_PAD.encode(uuid_like());
    let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
    (verifier, challenge)
}

fn uuid_like() -> [u8; 32] {
    let mut b = [0u8; 32];
    getrandom::fill(&mut b).unwrap();
    b
}

pub fn query_of(url: &str) -> HashMap<String, String> {
    url::Url::parse(url).map(|u| u.query_pairs().into_owned().collect()).unwrap_or_default()
}

pub fn authorize_path(pairs: &[(&str, &str)]) -> String {
    format!("/oauth/authorize?{}", serde_urlencoded::to_string(pairs).unwrap())
}

fn between<'a>(s: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let i = s.find(start)? + start.len();
    let j = s[i..].find(end)? + i;
    Some(&s[i..j])
}

/// (request_id, code, resume_token) scraped from the approval page.
pub fn scrape_page(html: &str) -> (String, String, String) {
    let code = between(html, "id=\"code\">", "<").expect("code on page").to_string();
    let rid = between(html, "request_id: <code>", "</code>").expect("request id on page").to_string();
    let resume = between(html, "resume = \"", "\"").expect("resume token in script").to_string();
    (rid, code, resume)
}

#[derive(Clone, Debug)]
pub struct TestClient {
    pub id: String,
    pub secret: String,
}

#[derive(Clone, Debug)]
pub struct Pending {
    pub request_id: String,
    pub code: String,
    pub resume: String,
    pub verifier: String,
    pub challenge: String,
    pub state: String,
}

#[derive(Clone, Debug)]
pub struct Tokens {
    pub access: String,
    pub refresh: String,
}

/// Who authenticates an in-process edge's workstation links.
enum Links {
    /// No link hub: `/mcp` reaches no workstation.
    None,
    With(Arc<dyn LinkAuthenticator>),
    /// The edge's own [`DeviceRegistry`].
    Registry,
}

/// An edge served in this process on 127.0.0.1, with a clock the test moves.
pub struct InProc {
    pub http: Http,
    pub clock: ManualClock,
    pub store: Arc<EdgeStore>,
    pub devices: Arc<DeviceRegistry>,
    pub issuer: String,
    shutdown: CancellationToken,
    _tmp: tempfile::TempDir,
}

impl Drop for InProc {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

pub const T0: i64 = 1_800_000_000_000;

impl InProc {
    pub async fn start() -> Self {
        Self::start_inner(Links::None, false).await.0
    }

    /// An edge whose test-only switch lets Client ID Metadata Documents live on loopback.
    pub async fn start_loopback_cimd() -> Self {
        Self::start_inner(Links::None, true).await.0
    }

    /// An edge whose `/mcp` forwards over workstation links authenticated by `auth`.
    pub async fn start_linked(auth: Arc<dyn LinkAuthenticator>) -> (Self, Arc<LinkHub>) {
        let (edge, hub) = Self::start_inner(Links::With(auth), false).await;
        (edge, hub.expect("a linked edge has a hub"))
    }

    /// An edge whose links are authenticated by its own device registry, as in
    /// `edge serve`: devices enrolled with [`Self::enroll`] can link.
    pub async fn start_registry_linked() -> (Self, Arc<LinkHub>) {
        let (edge, hub) = Self::start_inner(Links::Registry, false).await;
        (edge, hub.expect("a linked edge has a hub"))
    }

    async fn start_inner(links: Links, allow_loopback_cimd: bool) -> (Self, Option<Arc<LinkHub>>) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("edge");
        EdgeStore::init(&dir).unwrap();
        let clock = ManualClock::new(T0);
        let store = Arc::new(EdgeStore::open(&dir, Arc::new(clock.clone())).unwrap());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let issuer = format!("http://{}", listener.local_addr().unwrap());
        let devices = Arc::new(DeviceRegistry::new(Arc::clone(&store)));
        let auth: Option<Arc<dyn LinkAuthenticator>> = match links {
            Links::None => None,
            Links::With(auth) => Some(auth),
            Links::Registry => Some(Arc::clone(&devices) as Arc<dyn LinkAuthenticator>),
        };
        let (router, hub): (Arc<dyn WorkstationRouter>, Option<Arc<LinkHub>>) = match auth {
            None => (Arc::new(NoWorkstations), None),
            Some(auth) => {
                let (catalog, contract) = local_runtime_contract();
                let hub = LinkHub::new(auth, contract, Arc::clone(&store));
                (Arc::new(LinkRouter::new(Arc::clone(&hub), Arc::clone(&store), catalog)), Some(hub))
            }
        };
        let state = Arc::new(EdgeState {
            config: EdgeConfig::new(&issuer).unwrap(),
            store: Arc::clone(&store),
            router,
            devices: Arc::clone(&devices),
            allow_loopback_cimd,
            limits: Default::default(),
        });
        let shutdown = CancellationToken::new();
        let stop = shutdown.clone();
        let app = herdr_mcp::edge::http::router_with_links(state, hub.clone());
        tokio::spawn(async move {
            // With peer addresses, as `edge serve` runs it (per-source limits).
            let app = app.into_make_service_with_connect_info::<herdr_mcp::edge::ratelimit::PeerAddr>();
            axum::serve(listener, app).with_graceful_shutdown(stop.cancelled_owned()).await.ok();
        });
        (Self { http: Http::new(&issuer), clock, store, devices, issuer, shutdown, _tmp: tmp }, hub)
    }

    pub async fn register(&self, body: Value) -> Resp {
        self.http.register(body).await
    }

    pub async fn client(&self) -> TestClient {
        self.http.dcr_client().await
    }

    pub async fn authorize(&self, c: &TestClient, challenge: &str, state: &str) -> Resp {
        self.http.authorize(c, challenge, state).await
    }

    pub async fn pending(&self, c: &TestClient) -> Pending {
        self.http.pending(c).await
    }

    pub fn approve(&self, p: &Pending) -> Result<connectors::ApprovalInfo, connectors::ApprovalError> {
        connectors::approve(&self.store, &p.request_id, &p.code, "test")
    }

    pub async fn poll(&self, p: &Pending) -> Resp {
        self.http.poll(p).await
    }

    /// Pending → approved → polled: an authorization code for `c`.
    pub async fn code(&self, c: &TestClient) -> (String, Pending) {
        self.http.code(c, |p| self.approve(p).map(|_| ()).map_err(|e| format!("{e:?}"))).await
    }

    pub async fn redeem(&self, c: &TestClient, code: &str, verifier: &str) -> Resp {
        self.http.redeem(c, code, verifier).await
    }

    pub async fn refresh(&self, c: &TestClient, refresh: &str) -> Resp {
        self.http.refresh(c, refresh).await
    }

    /// A client with approved tokens.
    pub async fn tokens(&self) -> (TestClient, Tokens, String) {
        let c = self.client().await;
        let tokens = self.http.tokens_for(&c, |p| self.approve(p).map(|_| ()).map_err(|e| format!("{e:?}"))).await;
        let connector = connectors::list(&self.store).unwrap()[0].connector_id.clone();
        (c, tokens, connector)
    }

    /// A client holding two active connectors (see [`forget_grant`]), each with
    /// its tokens: (client, [(tokens, connector id); 2]), oldest first.
    pub async fn client_with_two_connectors(&self) -> (TestClient, [(Tokens, String); 2]) {
        let (c, first, conn1) = self.tokens().await;
        forget_grant(&self.store, &c.id);
        // `connector list` is newest first by approval time: a later second.
        self.clock.advance_ms(1);
        let second = self.http.tokens_for(&c, |p| self.approve(p).map(|_| ()).map_err(|e| format!("{e:?}"))).await;
        let conn2 = connectors::list(&self.store).unwrap()[0].connector_id.clone();
        assert_ne!(conn1, conn2);
        (c, [(first, conn1), (second, conn2)])
    }
}

/// A device registry held in memory: (device, secret) pairs the test controls.
#[derive(Default)]
pub struct TestDevices(Mutex<Vec<(DeviceInfo, String)>>);

impl TestDevices {
    pub fn add(&self, device_id: &str, name: &str, secret: &str) {
        let d = DeviceInfo {
            device_id: device_id.into(),
            workstation_id: device_id.into(),
            name: name.into(),
            aliases: Vec::new(),
            authorization: "active".into(),
            scheduling: "enabled".into(),
            credential_id: None,
            last_seen_ms: None,
        };
        self.0.lock().unwrap().push((d, secret.into()));
    }

    pub fn set_authorization(&self, device_id: &str, authorization: &str) {
        for (d, _) in self.0.lock().unwrap().iter_mut().filter(|(d, _)| d.device_id == device_id) {
            d.authorization = authorization.into();
        }
    }

    /// As a re-key leaves the registry: the device's credential is another one.
    pub fn set_credential(&self, device_id: &str, credential_id: Option<&str>) {
        for (d, _) in self.0.lock().unwrap().iter_mut().filter(|(d, _)| d.device_id == device_id) {
            d.credential_id = credential_id.map(str::to_string);
        }
    }
}

impl LinkAuthenticator for TestDevices {
    fn verify_link(&self, workstation_id: &str, secret: &str) -> Result<DeviceInfo, LinkAuthError> {
        let devices = self.0.lock().unwrap();
        let (d, s) = devices.iter().find(|(d, _)| d.workstation_id == workstation_id).ok_or(LinkAuthError::NotFound)?;
        match d.authorization.as_str() {
            "revoked" => Err(LinkAuthError::Revoked),
            "suspended" => Err(LinkAuthError::Suspended),
            _ if s != secret => Err(LinkAuthError::Rejected),
            _ => Ok(d.clone()),
        }
    }

    fn list_devices(&self) -> Result<Vec<DeviceInfo>, String> {
        Ok(self.0.lock().unwrap().iter().map(|(d, _)| d.clone()).collect())
    }
}

impl InProc {
    /// Enrolls a device through a pairing, as `worker connect` would.
    pub fn enroll(&self, name: &str) -> herdr_mcp::edge::devices::Enrolled {
        let p = self.devices.create_pairing(None, None, "test").unwrap();
        self.devices.consume_pairing(&p.pairing_id, &p.code, Some(name)).unwrap()
    }

    /// A request carrying a device credential (`Authorization` + `x-herdr-workstation`).
    pub async fn device_call(&self, method: reqwest::Method, path: &str, who: Option<(&str, &str)>, body: Option<Value>) -> Resp {
        let mut rb = self.http.client.request(method, format!("{}{path}", self.http.base));
        if let Some((ws, secret)) = who {
            rb = rb.header("authorization", format!("Bearer {secret}")).header("x-herdr-workstation", ws);
        }
        if let Some(b) = body {
            rb = rb.header("content-type", "application/json").body(serde_json::to_vec(&b).unwrap());
        }
        let r = rb.send().await.expect("request to the edge failed");
        let status = r.status().as_u16();
        let headers = r.headers().clone();
        Resp { status, headers, body: r.text().await.unwrap_or_default() }
    }
}

/// `params` of an `initialize` with `capabilities` and `clientInfo` filled in when
/// absent; other methods' params as they are.
pub fn with_initialize_defaults(method: &str, mut params: Value) -> Value {
    if method == "initialize"
        && let Some(obj) = params.as_object_mut()
    {
        obj.entry("capabilities").or_insert_with(|| json!({}));
        obj.entry("clientInfo").or_insert_with(|| json!({"name": "edge-test", "version": "1"}));
    }
    params
}
