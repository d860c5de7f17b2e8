//! The exact refusals of the two revocation routes, `POST /connectors/revoke`
//! and `POST /connectors/revoke-client`: status and body byte for byte, for an
//! unknown target, one already revoked, and a store that fails underneath. The
//! CLI quotes these messages, and both routes share one error type, so a wording
//! meant for one must not leak into the other.

mod edge_support;

use edge_support::*;
use herdr_mcp::edge::devices::Enrolled;
use reqwest::Method;
use serde_json::json;

const UNKNOWN_CONNECTOR: &str = "conn_AAAAAAAAAAAAAAAAAAAAAA";
const UNKNOWN_CLIENT: &str = "dcr-ffffffffffffffff";

async fn revoke(e: &InProc, d: &Enrolled, connector_id: &str) -> (u16, String) {
    let who = Some((d.device.workstation_id.as_str(), d.device_secret.as_str()));
    let r = e.device_call(Method::POST, "/connectors/revoke", who, Some(json!({"connector_id": connector_id, "confirm": true}))).await;
    (r.status, r.body)
}

async fn revoke_client(e: &InProc, d: &Enrolled, client_id: &str) -> (u16, String) {
    let who = Some((d.device.workstation_id.as_str(), d.device_secret.as_str()));
    let r = e.device_call(Method::POST, "/connectors/revoke-client", who, Some(json!({"client_id": client_id, "confirm": true}))).await;
    (r.status, r.body)
}

fn body(code: &str, message: &str) -> String {
    format!(r#"{{"code":"{code}","message":"{message}","ok":false}}"#)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_and_already_revoked_targets() {
    let e = InProc::start().await;
    let d = e.enroll("laptop");
    assert_eq!(revoke(&e, &d, UNKNOWN_CONNECTOR).await, (404, body("not_found", "not_found: no connector with that id")));
    assert_eq!(
        revoke_client(&e, &d, UNKNOWN_CLIENT).await,
        (404, body("not_found", "not_found: no OAuth client with that id is registered or has ever been approved"))
    );

    let (c, _, connector_id) = e.tokens().await;
    assert_eq!(revoke(&e, &d, &connector_id).await.0, 200);
    assert_eq!(revoke(&e, &d, &connector_id).await, (409, body("already_revoked", "already_revoked: the connector is already revoked")));
    // Its only connector revoked one by one, the client is fenced already.
    assert_eq!(
        revoke_client(&e, &d, &c.id).await,
        (409, body("already_revoked", "already_revoked: the client has no active connector and its grant is already revoked"))
    );
}

/// A store missing a table answers 500 `internal_error` with the database's
/// reason behind one `edge database:` prefix, on both routes, also when the
/// failure comes from revoking a connector inside `revoke-client`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_store() {
    let e = InProc::start().await;
    let d = e.enroll("laptop");
    let (c, _, connector_id) = e.tokens().await;
    e.store.write(|tx| tx.execute_batch("DROP TABLE tokens")).unwrap();
    let broken = (500, body("internal_error", "edge database: no such table: tokens"));
    assert_eq!(revoke(&e, &d, &connector_id).await, broken);
    assert_eq!(revoke_client(&e, &d, &c.id).await, broken);
    // Nothing was half done: the failed transactions rolled back.
    let status: String = e
        .store
        .read(|tx| tx.query_row("SELECT status FROM connectors WHERE connector_id = ?1", [&connector_id], |r| r.get(0)))
        .unwrap();
    assert_eq!(status, "active");
}
