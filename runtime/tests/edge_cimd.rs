//! Client ID Metadata Documents at the edge: an https-style `client_id` names a
//! document the edge fetches. A document served by a loopback server in this test
//! (the edge's test-only loopback switch on) completes the same pending-approval
//! flow as a registered client; every fetch and validation rule refuses its case
//! with `invalid_client` and a description naming the rule.

mod edge_support;

use std::time::{Duration, Instant};

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use edge_support::*;
use serde_json::{Value, json};

/// A loopback server holding one document per path; `origin` is its base URL.
struct DocServer {
    origin: String,
}

fn json_doc(v: Value) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], v.to_string()).into_response()
}

impl DocServer {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let origin = format!("http://{}", listener.local_addr().unwrap());
        let o = origin.clone();
        let doc = move |path: &str, extra: Value| {
            let mut v = json!({"client_id": format!("{o}{path}"), "client_name": "CIMD test client", "redirect_uris": [REDIRECT]});
            v.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            v
        };
        let good = doc("/client.json", json!({}));
        let ctype = doc("/text.json", json!({}));
        let big = doc("/big.json", json!({"padding": "x".repeat(64 * 1024)}));
        let near = doc("/near.json", json!({}));
        let mismatch = doc("/mismatch.json", json!({"client_id": format!("{origin}/someone-else.json")}));
        let bad_uris = doc("/bad-uris.json", json!({"redirect_uris": ["http://evil.example/cb"]}));
        let no_uris = doc("/no-uris.json", json!({"redirect_uris": []}));
        let secret = doc("/secret.json", json!({"token_endpoint_auth_method": "client_secret_post"}));
        // Padded to exactly 64 KiB: the largest document accepted.
        let mut near_body = near.to_string();
        near_body.insert_str(near_body.len() - 1, &format!(",\"pad\":\"{}\"", "y".repeat(64 * 1024 - near_body.len() - 9)));
        assert_eq!(near_body.len(), 64 * 1024);
        let app = Router::new()
            .route("/client.json", get(move || async move { json_doc(good) }))
            .route("/text.json", get(move || async move { ([(header::CONTENT_TYPE, "text/plain")], ctype.to_string()).into_response() }))
            .route("/big.json", get(move || async move { json_doc(big) }))
            .route("/near.json", get(move || async move { ([(header::CONTENT_TYPE, "application/json; charset=utf-8")], near_body).into_response() }))
            .route("/mismatch.json", get(move || async move { json_doc(mismatch) }))
            .route("/bad-uris.json", get(move || async move { json_doc(bad_uris) }))
            .route("/no-uris.json", get(move || async move { json_doc(no_uris) }))
            .route("/secret.json", get(move || async move { json_doc(secret) }))
            .route("/moved.json", get(|| async { (StatusCode::FOUND, [(header::LOCATION, "/client.json")]).into_response() }))
            .route("/missing.json", get(|| async { StatusCode::NOT_FOUND.into_response() }))
            // Never answers: the edge must give up on its own deadline.
            .route("/stall.json", get(std::future::pending::<Response>));
        tokio::spawn(async move { axum::serve(listener, app).await.ok() });
        Self { origin }
    }

    fn client(&self, path: &str) -> TestClient {
        TestClient { id: format!("{}{path}", self.origin), secret: String::new() }
    }
}

async fn refused(edge: &InProc, c: &TestClient) -> String {
    let (_, challenge) = pkce();
    let r = edge.authorize(c, &challenge, "st").await;
    assert_eq!(r.status, 400, "{}: {}", c.id, r.body);
    assert!(r.header("location").is_empty(), "a refused client is never redirected");
    assert_eq!(r.oauth_error(), "invalid_client", "{}", r.body);
    r.json()["error_description"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn cimd_client_completes_the_flow() {
    let docs = DocServer::start().await;
    let edge = InProc::start_loopback_cimd().await;
    let c = docs.client("/client.json");
    let (code, p) = edge.code(&c).await;
    let r = edge.redeem(&c, &code, &p.verifier).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let refresh = r.json()["refresh_token"].as_str().unwrap().to_string();
    let r = edge.refresh(&c, &refresh).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let listed = herdr_mcp::edge::connectors::list(&edge.store).unwrap();
    assert_eq!(listed.len(), 1);
    // A redirect_uri the document does not list is refused without a redirect.
    let (_, challenge) = pkce();
    let path = authorize_path(&[
        ("response_type", "code"),
        ("client_id", &c.id),
        ("redirect_uri", "https://client.example/other"),
        ("code_challenge", &challenge),
        ("code_challenge_method", "S256"),
    ]);
    let r = edge.http.get(&path).await;
    assert_eq!((r.status, r.oauth_error().as_str()), (400, "invalid_request"), "{}", r.body);
}

#[tokio::test]
async fn metadata_advertises_cimd() {
    let edge = InProc::start().await;
    let r = edge.http.get("/.well-known/oauth-authorization-server").await;
    assert_eq!(r.json()["client_id_metadata_document_supported"], json!(true));
}

#[tokio::test]
async fn loopback_documents_need_the_test_switch() {
    let docs = DocServer::start().await;
    let edge = InProc::start().await;
    // https to an IP literal is a metadata URL, refused before any connection.
    let port = docs.origin.rsplit(':').next().unwrap();
    let ip = TestClient { id: format!("https://127.0.0.1:{port}/client.json"), secret: String::new() };
    assert!(refused(&edge, &ip).await.contains("not an IP address"));
    let local = TestClient { id: format!("https://localhost:{port}/client.json"), secret: String::new() };
    assert!(refused(&edge, &local).await.contains("local or internal"));
    // Plain http is not a metadata URL at all without the switch: an unknown client.
    let (_, challenge) = pkce();
    let r = edge.authorize(&docs.client("/client.json"), &challenge, "st").await;
    assert_eq!((r.status, r.oauth_error().as_str()), (400, "invalid_request"), "{}", r.body);
}

#[tokio::test]
async fn each_fetch_and_document_rule_refuses() {
    let docs = DocServer::start().await;
    let edge = InProc::start_loopback_cimd().await;
    let cases = [
        ("/moved.json", "redirects are not followed"),
        ("/missing.json", "HTTP 404"),
        ("/text.json", "not application/json"),
        ("/big.json", "exceeds 65536 bytes"),
        ("/mismatch.json", "client_id does not equal its URL"),
        ("/bad-uris.json", "non-loopback host"),
        ("/no-uris.json", "redirect_uris is required"),
        ("/secret.json", "token_endpoint_auth_method must be \"none\""),
    ];
    for (path, why) in cases {
        let desc = refused(&edge, &docs.client(path)).await;
        assert!(desc.contains(why), "{path}: {desc}");
    }
    // Exactly 64 KiB is still accepted.
    let (_, challenge) = pkce();
    let r = edge.authorize(&docs.client("/near.json"), &challenge, "st").await;
    assert_eq!(r.status, 200, "{}", r.body);
    // The token endpoint refuses a bad document as client authentication failure.
    let r = edge.redeem(&docs.client("/mismatch.json"), "code", "v").await;
    assert_eq!((r.status, r.oauth_error().as_str()), (401, "invalid_client"), "{}", r.body);
}

#[tokio::test]
async fn a_stalled_document_times_out() {
    let docs = DocServer::start().await;
    let edge = InProc::start_loopback_cimd().await;
    let started = Instant::now();
    let desc = refused(&edge, &docs.client("/stall.json")).await;
    assert!(desc.contains("longer than 5 s"), "{desc}");
    let took = started.elapsed();
    assert!(took >= Duration::from_secs(5) && took < Duration::from_secs(15), "{took:?}");
}
