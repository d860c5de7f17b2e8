//! The edge reading damaged rows from its own SQLite store (a corrupted file, or
//! state carried over from an older schema): every route still answers with an
//! OAuth-shaped error, issues nothing, redirects nowhere unverified, and the next
//! request is served as usual. A damaged approval is rejected the first time a
//! poll finds it, so every later poll gets the terminal `rejected` answer and the
//! edge logs the damage once. The connector and grant its approval created go
//! with it (unless an identical request approved with it can still use them), so
//! the client's next authorize asks for a new approval instead of getting a code.
//! A database file that is no database at all stops the commands with one line
//! naming it (the last tests run the real binary).

mod edge_support;
#[path = "edge_support/procs.rs"]
mod procs;

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

use edge_support::*;
use herdr_mcp::edge::connectors::{self, ApprovalError};
use rusqlite::params;
use serde_json::json;

/// Everything the edge logged in this test process (all its tests share it).
fn edge_log() -> &'static Arc<Mutex<Vec<u8>>> {
    static LOG: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOG.get_or_init(|| {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&buf);
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || LogSink(Arc::clone(&sink)))
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("the first and only subscriber of this test binary");
        buf
    })
}

struct LogSink(Arc<Mutex<Vec<u8>>>);

impl Write for LogSink {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Log lines about `request_id` that report a damaged request.
fn damage_reports(request_id: &str) -> usize {
    let log = String::from_utf8_lossy(&edge_log().lock().unwrap()).to_string();
    log.lines().filter(|l| l.contains(request_id) && l.contains("no code issued")).count()
}

fn approval_status(e: &InProc, request_id: &str) -> String {
    e.store.read(|tx| tx.query_row("SELECT status FROM approvals WHERE request_id = ?1", [request_id], |r| r.get(0))).unwrap()
}

fn set_approval_redirect(e: &InProc, request_id: &str, value: &str) {
    let n = e
        .store
        .write(|tx| tx.execute("UPDATE approvals SET redirect_uri = ?1 WHERE request_id = ?2", params![value, request_id]))
        .unwrap();
    assert_eq!(n, 1, "no approval {request_id} to damage");
}

fn set_client_redirects(e: &InProc, client_id: &str, raw: &str) {
    let n = e
        .store
        .write(|tx| tx.execute("UPDATE clients SET redirect_uris = ?1 WHERE client_id = ?2", params![raw, client_id]))
        .unwrap();
    assert_eq!(n, 1, "no client {client_id} to damage");
}

fn auth_codes(e: &InProc) -> i64 {
    e.store.read(|tx| tx.query_row("SELECT COUNT(*) FROM auth_codes", [], |r| r.get(0))).unwrap()
}

/// (connector rows, grant rows) that point at `connector_id`.
fn connector_and_grant_rows(e: &InProc, connector_id: &str) -> (i64, i64) {
    e.store
        .read(|tx| {
            let count = |table: &str| {
                tx.query_row(&format!("SELECT COUNT(*) FROM {table} WHERE connector_id = ?1"), [connector_id], |r| r.get::<_, i64>(0))
            };
            Ok::<_, rusqlite::Error>((count("connectors")?, count("grants")?))
        })
        .unwrap()
}

fn listed(e: &InProc, connector_id: &str) -> bool {
    connectors::list(&e.store).unwrap().iter().any(|c| c.connector_id == connector_id)
}

/// An approved request whose stored row was then damaged by `damage`: its first
/// poll is a server_error that rejects it, every later poll the terminal 410
/// `rejected`; none redirects or mints a code, and the damage is logged once.
/// The connector and grant the approval created are gone afterwards.
async fn poll_of_damaged(e: &InProc, damage: impl FnOnce(&InProc, &TestClient, &Pending)) -> (TestClient, Pending) {
    edge_log();
    let c = e.client().await;
    let p = e.pending(&c).await;
    let connector_id = e.approve(&p).expect("approve").connector_id;
    assert_eq!(connector_and_grant_rows(e, &connector_id), (1, 1), "approve made a connector and a grant");
    damage(e, &c, &p);
    let codes_before = auth_codes(e);
    let expected = [(500, "server_error"), (410, "rejected"), (410, "rejected")];
    for (attempt, (status, code)) in expected.into_iter().enumerate() {
        let r = e.poll(&p).await;
        assert_eq!(r.status, status, "attempt {attempt}: {}", r.body);
        let v = r.json();
        assert_eq!(v["status"], "error", "{v}");
        assert_eq!(v["code"], code, "attempt {attempt}: {v}");
        assert!(v.get("redirect").is_none(), "a damaged row must not send the browser anywhere: {v}");
        assert!(r.header("location").is_empty());
        assert_eq!(approval_status(e, &p.request_id), "rejected", "attempt {attempt}: rejected by the first poll that saw it");
    }
    assert_eq!(auth_codes(e), codes_before, "no code is minted for a damaged request");
    assert_eq!(damage_reports(&p.request_id), 1, "the damage is logged once, not on every poll");
    // The operator sees the same terminal state.
    assert_eq!(connectors::inspect(&e.store, &p.request_id).unwrap_err(), ApprovalError::Rejected);
    assert_eq!(connector_and_grant_rows(e, &connector_id), (0, 0), "the rejection took back what approve created");
    assert!(!listed(e, &connector_id), "`connector list` no longer shows it");
    (c, p)
}

/// The edge keeps serving: a fresh client completes the whole flow.
async fn still_serves(e: &InProc) {
    let (_, tokens, _) = e.tokens().await;
    let r = e.http.mcp(&tokens.access, "tools/list", json!({})).await;
    assert_eq!(r.status, 200, "{}", r.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_redirect_uri_that_is_not_a_url() {
    let e = InProc::start().await;
    // Registered and stored alike, so only the parse can catch it (it used to panic).
    poll_of_damaged(&e, |e, c, p| {
        set_client_redirects(e, &c.id, r#"["::not a url::"]"#);
        set_approval_redirect(e, &p.request_id, "::not a url::");
    })
    .await;
    still_serves(&e).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_redirect_uri_no_longer_registered() {
    let e = InProc::start().await;
    let (c, rejected) = poll_of_damaged(&e, |e, _, p| set_approval_redirect(e, &p.request_id, "https://elsewhere.example/cb")).await;
    // The client itself is sound: its next authorize is a new request for the
    // operator (the approval page, not a code), and approving that one works.
    let again = e.pending(&c).await;
    assert_ne!(again.request_id, rejected.request_id);
    let connector_id = e.approve(&again).expect("approve the new request").connector_id;
    let r = e.poll(&again).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(query_of(r.json()["redirect"].as_str().unwrap()).contains_key("code"), "{}", r.body);
    assert!(listed(&e, &connector_id));
    still_serves(&e).await;
}

/// Two pending requests of one client (a retried tab): each is its own
/// connector, and approving one never approves the other (issue 22 item 2; the
/// two used to share a connector and one approval). Rejecting the damaged one
/// withdraws only its own connector; the other is still pending, and approving
/// it on its own completes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_request_leaves_the_other_pending_request_alone() {
    edge_log();
    let e = InProc::start().await;
    let c = e.client().await;
    let (damaged, other) = (e.pending(&c).await, e.pending(&c).await);
    let connector_id = e.approve(&damaged).expect("approve").connector_id;
    set_approval_redirect(&e, &damaged.request_id, "https://elsewhere.example/cb");
    assert_eq!(e.poll(&damaged).await.status, 500);
    assert_eq!(approval_status(&e, &damaged.request_id), "rejected");
    assert_eq!(connector_and_grant_rows(&e, &connector_id), (0, 0), "the damaged request's unused connector is withdrawn");
    assert_eq!(approval_status(&e, &other.request_id), "pending");
    assert_eq!(e.poll(&other).await.status, 202, "the other request was not approved with the damaged one");
    let other_connector = e.approve(&other).expect("approve the other request").connector_id;
    assert_ne!(other_connector, connector_id);
    let r = e.poll(&other).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let code = query_of(r.json()["redirect"].as_str().unwrap())["code"].clone();
    let tokens = e.redeem(&c, &code, &other.verifier).await;
    assert_eq!(tokens.status, 200, "{}", tokens.body);
    assert!(listed(&e, &other_connector));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_redirect_list_that_is_not_json() {
    let e = InProc::start().await;
    poll_of_damaged(&e, |e, c, _| set_client_redirects(e, &c.id, "{not json")).await;
    // A new authorization of that client is refused in the JSON form, not redirected.
    let c = e.client().await;
    set_client_redirects(&e, &c.id, "{not json");
    let (_, challenge) = pkce();
    let r = e.authorize(&c, &challenge, "st").await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.json()["error"], "invalid_request", "{}", r.body);
    assert!(r.header("location").is_empty());
    still_serves(&e).await;
}

/// A database file that is no SQLite database at all: every command that opens the
/// store says which file, says the cause once, and what to do, in one line.
#[test]
fn a_damaged_database_file_is_named_with_what_to_do() {
    let tmp = tempfile::tempdir().unwrap();
    let init = procs::command(tmp.path()).args(["edge", "init"]).output().unwrap();
    assert!(init.status.success(), "{}", String::from_utf8_lossy(&init.stderr));
    let db = tmp.path().join("state/herdr-mcp/edge").join(herdr_mcp::edge::store::DB_FILE);
    std::fs::write(&db, b"these bytes are no SQLite database header, whatever follows").unwrap();
    for args in [&["connector", "list"][..], &["edge", "pair", "--issuer", "https://edge.example"]] {
        let out = procs::command(tmp.path()).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{args:?}: one line: {err}");
        assert!(err.contains(&db.display().to_string()) && err.contains("edge init"), "{args:?}: {err}");
        assert_eq!(err.matches("not a database").count(), 1, "{args:?}: the cause once: {err}");
    }
}

/// `edge init --issuer` with a wrong URL stops before it creates any state.
#[test]
fn init_with_a_wrong_issuer_creates_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let out = procs::command(tmp.path()).args(["edge", "init", "--issuer", "not a url"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--issuer"), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!tmp.path().join("state/herdr-mcp/edge").exists(), "init created state before refusing");
}
