//! The `/connectors/*` routes (approval from any enrolled computer), in the style
//! of `edge_negative.rs`: each case drives a fresh in-process edge (manual clock)
//! with a device credential, a connector's bearer or nothing, and checks the exact
//! HTTP status and `code`. All cases run; failures are reported together. The
//! last two tests run the real `connector` command on a computer that is not
//! enrolled: with no edge state (a clear error) and on the edge host (its state).
//! `revoke-client` cases sit here too: it is one more `/connectors/*` route.

mod edge_support;
#[path = "edge_support/corpus.rs"]
mod corpus;
#[path = "edge_support/procs.rs"]
mod procs;

use corpus::{Case, Outcome, case};
use edge_support::*;
use herdr_mcp::edge::connectors;
use herdr_mcp::edge::connectors_http::MAX_REQUEST_ID_CHARS;
use herdr_mcp::edge::connectors_revoke_client::MAX_CLIENT_ID_CHARS;
use herdr_mcp::edge::devices::Enrolled;
use herdr_mcp::edge::devices_http::MAX_BODY_BYTES;
use reqwest::Method;
use serde_json::{Value, json};

fn outcome(r: Resp) -> Outcome {
    (r.status, r.json()["code"].as_str().unwrap_or("").to_string())
}

fn wrong(code: &str) -> String {
    format!("{:06}", (code.parse::<u32>().unwrap() + 1) % 1_000_000)
}

fn who(d: &Enrolled) -> Option<(&str, &str)> {
    Some((d.device.workstation_id.as_str(), d.device_secret.as_str()))
}

/// `POST path` with `body` as the enrolled device `d`.
async fn as_device(e: &InProc, d: &Enrolled, path: &str, body: Value) -> Resp {
    e.device_call(Method::POST, path, who(d), Some(body)).await
}

async fn revoke_client(e: &InProc, d: &Enrolled, client_id: &str) -> Resp {
    as_device(e, d, "/connectors/revoke-client", json!({"client_id": client_id, "confirm": true})).await
}

/// Status and JSON-RPC error code of a refused `/mcp` call.
fn mcp_error(r: Resp) -> Outcome {
    (r.status, r.json().pointer("/error/code").and_then(Value::as_i64).map(|c| c.to_string()).unwrap_or_default())
}

async fn approve(e: &InProc, d: &Enrolled, p: &Pending, code: &str) -> Resp {
    as_device(e, d, "/connectors/approve", json!({"request_id": p.request_id, "code": code})).await
}

/// A raw JSON body (for sizes and shapes `json!` cannot make) as device `d`.
async fn raw(e: &InProc, d: &Enrolled, path: &str, content_type: &str, body: Vec<u8>) -> Resp {
    let r = e
        .http
        .client
        .post(format!("{}{path}", e.http.base))
        .header("authorization", format!("Bearer {}", d.device_secret))
        .header("x-herdr-workstation", &d.device.workstation_id)
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    Resp { status, headers, body: r.text().await.unwrap_or_default() }
}

/// An enrolled device and a fresh pending request.
async fn setup(e: &InProc) -> (Enrolled, Pending) {
    let d = e.enroll("laptop");
    let c = e.client().await;
    let p = e.pending(&c).await;
    (d, p)
}

fn cases() -> Vec<Case> {
    vec![
        // ---- what works, so the refusals below are refusals of something real ----
        case!("inspect shows the request to review", 200, "", |e| {
            let (d, p) = setup(&e).await;
            let r = as_device(&e, &d, "/connectors/inspect", json!({"request_id": p.request_id})).await;
            let v = r.json();
            assert_eq!((v["client_name"].as_str(), v["redirect_uri"].as_str(), v["scope"].as_str()), (Some("Test client"), Some(REDIRECT), Some("mcp")), "{v}");
            assert!(v["client_id"].as_str().is_some_and(|c| c.starts_with("dcr-")), "{v}");
            outcome(r)
        }),
        case!("approve with the right code; the page's poll then redirects", 200, "approved", |e| {
            let (d, p) = setup(&e).await;
            let r = approve(&e, &d, &p, &p.code).await;
            assert_eq!(r.status, 200, "{}", r.body);
            assert!(r.json()["connector_id"].as_str().is_some_and(|c| c.starts_with("conn_")), "{}", r.body);
            let polled = e.poll(&p).await;
            (polled.status, polled.json()["status"].as_str().unwrap_or("").into())
        }),
        case!("four wrong codes, then the right one", 200, "", |e| {
            let (d, p) = setup(&e).await;
            for left in (1..=4).rev() {
                let r = approve(&e, &d, &p, &wrong(&p.code)).await;
                assert_eq!((r.status, r.json()["attempts_remaining"].as_i64()), (403, Some(left)), "{}", r.body);
            }
            outcome(approve(&e, &d, &p, &p.code).await)
        }),
        case!("approve just before the 10 minute TTL", 200, "", |e| {
            let (d, p) = setup(&e).await;
            e.clock.advance_ms(10 * 60 * 1000 - 1);
            outcome(approve(&e, &d, &p, &p.code).await)
        }),
        case!("list with a device credential", 200, "", |e| {
            let d = e.enroll("laptop");
            let (_, _, conn) = e.tokens().await;
            let r = e.device_call(Method::GET, "/connectors", who(&d), None).await;
            assert_eq!(r.json()["connectors"][0]["connector_id"].as_str(), Some(conn.as_str()), "{}", r.body);
            outcome(r)
        }),
        case!("revoke over HTTP; the connector's token dies on the next request", 401, "-32000", |e| {
            let d = e.enroll("laptop");
            let (_, t, conn) = e.tokens().await;
            let r = as_device(&e, &d, "/connectors/revoke", json!({"connector_id": conn, "confirm": true})).await;
            assert_eq!((r.status, r.json()["deleted_tokens"].as_i64()), (200, Some(2)), "{}", r.body);
            mcp_error(e.http.mcp(&t.access, "tools/list", json!({})).await)
        }),
        case!("cancel a pending request, then it is gone", 404, "not_found", |e| {
            let (d, p) = setup(&e).await;
            let r = as_device(&e, &d, "/connectors/cancel", json!({"request_id": p.request_id})).await;
            assert_eq!(r.status, 200, "{}", r.body);
            outcome(as_device(&e, &d, "/connectors/inspect", json!({"request_id": p.request_id})).await)
        }),
        // ---- wrong codes, lockout, expiry ----
        case!("wrong code", 403, "invalid_code", |e| {
            let (d, p) = setup(&e).await;
            let r = approve(&e, &d, &p, &wrong(&p.code)).await;
            assert_eq!(r.json()["attempts_remaining"], 4, "{}", r.body);
            outcome(r)
        }),
        case!("the fifth wrong code locks", 423, "locked", |e| {
            let (d, p) = setup(&e).await;
            for _ in 0..4 {
                assert_eq!(approve(&e, &d, &p, &wrong(&p.code)).await.status, 403);
            }
            outcome(approve(&e, &d, &p, &wrong(&p.code)).await)
        }),
        case!("the right code after the lock", 423, "locked", |e| {
            let (d, p) = setup(&e).await;
            for _ in 0..5 {
                approve(&e, &d, &p, &wrong(&p.code)).await;
            }
            outcome(approve(&e, &d, &p, &p.code).await)
        }),
        case!("a malformed code costs no attempt", 403, "invalid_code", |e| {
            let (d, p) = setup(&e).await;
            for bad in ["12345", "1234567", "12a456", ""] {
                assert_eq!(outcome(approve(&e, &d, &p, bad).await), (400, "invalid_params".into()), "{bad:?}");
            }
            let r = approve(&e, &d, &p, &wrong(&p.code)).await;
            assert_eq!(r.json()["attempts_remaining"], 4, "{}", r.body);
            outcome(r)
        }),
        case!("approve after the 10 minute TTL", 404, "expired", |e| {
            let (d, p) = setup(&e).await;
            e.clock.advance_ms(10 * 60 * 1000);
            outcome(approve(&e, &d, &p, &p.code).await)
        }),
        case!("inspect after the 10 minute TTL", 404, "expired", |e| {
            let (d, p) = setup(&e).await;
            e.clock.advance_ms(10 * 60 * 1000);
            outcome(as_device(&e, &d, "/connectors/inspect", json!({"request_id": p.request_id})).await)
        }),
        case!("unknown request", 404, "not_found", |e| {
            let d = e.enroll("laptop");
            outcome(as_device(&e, &d, "/connectors/approve", json!({"request_id": "req_unknown", "code": "123456"})).await)
        }),
        case!("approving twice", 409, "already_approved", |e| {
            let (d, p) = setup(&e).await;
            assert_eq!(approve(&e, &d, &p, &p.code).await.status, 200);
            outcome(approve(&e, &d, &p, &p.code).await)
        }),
        case!("cancel after tokens were issued", 409, "already_used", |e| {
            let d = e.enroll("laptop");
            let c = e.client().await;
            let (code, p) = e.code(&c).await;
            assert_eq!(e.redeem(&c, &code, &p.verifier).await.status, 200);
            outcome(as_device(&e, &d, "/connectors/cancel", json!({"request_id": p.request_id})).await)
        }),
        // ---- who may call ----
        case!("no credential", 401, "device_auth_required", |e| {
            let (_, p) = setup(&e).await;
            outcome(e.device_call(Method::POST, "/connectors/approve", None, Some(json!({"request_id": p.request_id, "code": p.code}))).await)
        }),
        case!("a connector's OAuth bearer with an enrolled workstation header", 401, "device_auth_required", |e| {
            let d = e.enroll("laptop");
            let (_, t, _) = e.tokens().await;
            let c = e.client().await;
            let p = e.pending(&c).await;
            let as_connector = Some((d.device.workstation_id.as_str(), t.access.as_str()));
            outcome(e.device_call(Method::POST, "/connectors/approve", as_connector, Some(json!({"request_id": p.request_id, "code": p.code}))).await)
        }),
        case!("a connector's OAuth bearer alone", 401, "device_auth_required", |e| {
            let (_, t, _) = e.tokens().await;
            let c = e.client().await;
            let p = e.pending(&c).await;
            outcome(e.http.post_json("/connectors/inspect", &json!({"request_id": p.request_id}), Some(&t.access)).await)
        }),
        case!("a connector's OAuth bearer listing connectors", 401, "device_auth_required", |e| {
            let d = e.enroll("laptop");
            let (_, t, _) = e.tokens().await;
            outcome(e.device_call(Method::GET, "/connectors", Some((d.device.workstation_id.as_str(), t.access.as_str())), None).await)
        }),
        case!("a connector's OAuth bearer revoking itself", 401, "device_auth_required", |e| {
            let d = e.enroll("laptop");
            let (_, t, conn) = e.tokens().await;
            let body = json!({"connector_id": conn, "confirm": true});
            outcome(e.device_call(Method::POST, "/connectors/revoke", Some((d.device.workstation_id.as_str(), t.access.as_str())), Some(body)).await)
        }),
        case!("a revoked device", 401, "device_auth_required", |e| {
            let (d, p) = setup(&e).await;
            e.devices.revoke(&d.device.device_id, "test").unwrap();
            outcome(approve(&e, &d, &p, &p.code).await)
        }),
        case!("a wrong device secret", 401, "device_auth_required", |e| {
            let (d, p) = setup(&e).await;
            let forged = Some((d.device.workstation_id.as_str(), "devsec_forged"));
            outcome(e.device_call(Method::POST, "/connectors/approve", forged, Some(json!({"request_id": p.request_id, "code": p.code}))).await)
        }),
        case!("another device's workstation header", 401, "device_auth_required", |e| {
            let (d, p) = setup(&e).await;
            let other = e.enroll("desk");
            let mixed = Some((other.device.workstation_id.as_str(), d.device_secret.as_str()));
            outcome(e.device_call(Method::POST, "/connectors/approve", mixed, Some(json!({"request_id": p.request_id, "code": p.code}))).await)
        }),
        // ---- strict bodies ----
        case!("an unknown field", 400, "invalid_params", |e| {
            let (d, p) = setup(&e).await;
            outcome(as_device(&e, &d, "/connectors/approve", json!({"request_id": p.request_id, "code": p.code, "approved_by": "me"})).await)
        }),
        case!("a missing request_id", 400, "invalid_params", |e| {
            let d = e.enroll("laptop");
            outcome(as_device(&e, &d, "/connectors/inspect", json!({})).await)
        }),
        case!("a numeric code", 400, "invalid_params", |e| {
            let (d, p) = setup(&e).await;
            outcome(as_device(&e, &d, "/connectors/approve", json!({"request_id": p.request_id, "code": 123456})).await)
        }),
        case!("a request_id one character over the limit", 400, "invalid_params", |e| {
            let d = e.enroll("laptop");
            outcome(as_device(&e, &d, "/connectors/inspect", json!({"request_id": "r".repeat(MAX_REQUEST_ID_CHARS + 1)})).await)
        }),
        case!("a request_id at the limit is looked up", 404, "not_found", |e| {
            let d = e.enroll("laptop");
            outcome(as_device(&e, &d, "/connectors/inspect", json!({"request_id": "r".repeat(MAX_REQUEST_ID_CHARS)})).await)
        }),
        case!("a request_id with a path in it", 400, "invalid_params", |e| {
            let d = e.enroll("laptop");
            outcome(as_device(&e, &d, "/connectors/cancel", json!({"request_id": "req_../../x"})).await)
        }),
        case!("a body one byte over the limit", 413, "payload_too_large", |e| {
            let d = e.enroll("laptop");
            let mut body = br#"{"request_id":"req_x""#.to_vec();
            body.resize(MAX_BODY_BYTES, b' ');
            body.push(b'}');
            outcome(raw(&e, &d, "/connectors/inspect", "application/json", body).await)
        }),
        case!("a body exactly at the limit is read", 404, "not_found", |e| {
            let d = e.enroll("laptop");
            let mut body = br#"{"request_id":"req_x""#.to_vec();
            body.resize(MAX_BODY_BYTES - 1, b' ');
            body.push(b'}');
            outcome(raw(&e, &d, "/connectors/inspect", "application/json", body).await)
        }),
        case!("a JSON array body", 400, "invalid_params", |e| {
            let d = e.enroll("laptop");
            outcome(raw(&e, &d, "/connectors/inspect", "application/json", b"[]".to_vec()).await)
        }),
        case!("a form body", 415, "invalid_params", |e| {
            let d = e.enroll("laptop");
            outcome(raw(&e, &d, "/connectors/inspect", "application/x-www-form-urlencoded", b"request_id=req_x".to_vec()).await)
        }),
        case!("revoke without confirm", 400, "confirmation_required", |e| {
            let d = e.enroll("laptop");
            let (_, _, conn) = e.tokens().await;
            outcome(as_device(&e, &d, "/connectors/revoke", json!({"connector_id": conn, "confirm": "yes"})).await)
        }),
        case!("revoke a malformed connector id", 400, "invalid_params", |e| {
            let d = e.enroll("laptop");
            outcome(as_device(&e, &d, "/connectors/revoke", json!({"connector_id": "conn_short", "confirm": true})).await)
        }),
        case!("revoke an unknown connector", 404, "not_found", |e| {
            let d = e.enroll("laptop");
            outcome(as_device(&e, &d, "/connectors/revoke", json!({"connector_id": "conn_AAAAAAAAAAAAAAAAAAAAAA", "confirm": true})).await)
        }),
        case!("revoke twice", 409, "already_revoked", |e| {
            let d = e.enroll("laptop");
            let (_, _, conn) = e.tokens().await;
            let body = json!({"connector_id": conn, "confirm": true});
            assert_eq!(as_device(&e, &d, "/connectors/revoke", body.clone()).await.status, 200);
            outcome(as_device(&e, &d, "/connectors/revoke", body).await)
        }),
        // ---- revoke-client: every connector of one client, or a tombstone ----
        case!("revoke-client: both connectors of the client die on the next request", 401, "-32000", |e| {
            let d = e.enroll("laptop");
            let (c, [(t1, conn1), (t2, conn2)]) = e.client_with_two_connectors().await;
            for t in [&t1, &t2] {
                assert_eq!(e.http.mcp(&t.access, "tools/list", json!({})).await.status, 200, "live before the revocation");
            }
            let r = revoke_client(&e, &d, &c.id).await;
            let v = r.json();
            assert_eq!(r.status, 200, "{}", r.body);
            assert_eq!(v["revoked_connectors"], json!([conn1, conn2]), "{v}");
            assert_eq!((v["client_id"].as_str(), v["deleted_tokens"].as_i64(), v["legacy_tombstone_created"].as_bool()), (Some(c.id.as_str()), Some(4), Some(false)), "{v}");
            for row in connectors::list(&e.store).unwrap() {
                // Revoked exactly as `connector revoke` does it: generation bumped, by whom.
                assert_eq!((row.status.as_str(), row.grant_generation, row.revoked_by.as_deref()), ("revoked", 2, Some(d.device.device_id.as_str())), "{row:?}");
                assert_eq!((row.active_access_tokens, row.active_refresh_tokens), (0, 0), "{row:?}");
            }
            assert_eq!(e.refresh(&c, &t1.refresh).await.oauth_error(), "invalid_grant");
            assert_eq!(mcp_error(e.http.mcp(&t1.access, "tools/list", json!({})).await), (401, "-32000".into()));
            mcp_error(e.http.mcp(&t2.access, "tools/list", json!({})).await)
        }),
        case!("revoke-client: the client is refused a new authorization", 302, "access_denied", |e| {
            let d = e.enroll("laptop");
            let (c, _, _) = e.tokens().await;
            assert_eq!(revoke_client(&e, &d, &c.id).await.status, 200);
            let (_, ch) = pkce();
            let r = e.authorize(&c, &ch, "after-revoke-client").await;
            assert_eq!(query_of(&r.header("location")).get("error_description").map(String::as_str), Some("client grant is revoked"), "{:?}", r.headers);
            (r.status, r.oauth_error())
        }),
        // Refused on the edge's own page, not by redirect: nobody ever approved this
        // client, so its redirect_uri is unvetted (issue 22 item 4, no open redirect).
        case!("revoke-client of a client never approved: a tombstone refuses its authorize", 400, "access_denied", |e| {
            let d = e.enroll("laptop");
            let c = e.client().await;
            let r = revoke_client(&e, &d, &c.id).await;
            let v = r.json();
            assert_eq!(r.status, 200, "{}", r.body);
            assert_eq!((v["revoked_connectors"].clone(), v["deleted_tokens"].as_i64(), v["legacy_tombstone_created"].as_bool()), (json!([]), Some(0), Some(true)), "{v}");
            let (_, ch) = pkce();
            let r = e.authorize(&c, &ch, "tombstoned").await;
            assert!(r.header("location").is_empty(), "{:?}", r.headers);
            assert_eq!(r.json()["error_description"], "client grant is revoked", "{}", r.body);
            (r.status, r.oauth_error())
        }),
        case!("revoke-client of a client never approved: /oauth/token refuses it", 400, "invalid_grant", |e| {
            let d = e.enroll("laptop");
            let c = e.client().await;
            assert_eq!(revoke_client(&e, &d, &c.id).await.status, 200);
            let (verifier, _) = pkce();
            let r = e.redeem(&c, "any-code", &verifier).await;
            assert_eq!(r.json()["error_description"], "client grant is revoked", "{}", r.body);
            (r.status, r.oauth_error())
        }),
        case!("revoke-client rejects the client's pending request", 410, "rejected", |e| {
            let (d, p) = setup(&e).await;
            let client_id = as_device(&e, &d, "/connectors/inspect", json!({"request_id": p.request_id})).await.json()["client_id"].as_str().unwrap().to_string();
            let r = revoke_client(&e, &d, &client_id).await;
            assert_eq!((r.status, r.json()["rejected_requests"].as_i64()), (200, Some(1)), "{}", r.body);
            assert_eq!(outcome(approve(&e, &d, &p, &p.code).await), (410, "rejected".into()), "a rejected request cannot be approved");
            assert_eq!(outcome(as_device(&e, &d, "/connectors/inspect", json!({"request_id": p.request_id})).await), (410, "rejected".into()));
            let polled = e.poll(&p).await;
            (polled.status, polled.json()["code"].as_str().unwrap_or("").into())
        }),
        case!("a rejected request is forgotten a day after it would have expired", 404, "not_found", |e| {
            let (d, p) = setup(&e).await;
            let client_id = as_device(&e, &d, "/connectors/inspect", json!({"request_id": p.request_id})).await.json()["client_id"].as_str().unwrap().to_string();
            assert_eq!(revoke_client(&e, &d, &client_id).await.status, 200);
            e.clock.advance_ms(10 * 60 * 1000 + 86_400_000 - 1);
            connectors::sweep(&e.store).unwrap();
            assert_eq!(outcome(as_device(&e, &d, "/connectors/inspect", json!({"request_id": p.request_id})).await), (410, "rejected".into()), "kept until then");
            e.clock.advance_ms(1);
            connectors::sweep(&e.store).unwrap();
            outcome(as_device(&e, &d, "/connectors/inspect", json!({"request_id": p.request_id})).await)
        }),
        case!("revoke-client of an unknown client", 404, "not_found", |e| {
            let d = e.enroll("laptop");
            outcome(revoke_client(&e, &d, "dcr-0000000000000000").await)
        }),
        case!("revoke-client twice", 409, "already_revoked", |e| {
            let d = e.enroll("laptop");
            let (c, _, _) = e.tokens().await;
            assert_eq!(revoke_client(&e, &d, &c.id).await.status, 200);
            outcome(revoke_client(&e, &d, &c.id).await)
        }),
        case!("revoke-client after each connector was revoked one by one", 409, "already_revoked", |e| {
            let d = e.enroll("laptop");
            let (c, [(_, conn1), (_, conn2)]) = e.client_with_two_connectors().await;
            for conn in [conn1, conn2] {
                assert_eq!(as_device(&e, &d, "/connectors/revoke", json!({"connector_id": conn, "confirm": true})).await.status, 200);
            }
            outcome(revoke_client(&e, &d, &c.id).await)
        }),
        case!("revoke-client without confirm", 400, "confirmation_required", |e| {
            let d = e.enroll("laptop");
            let (c, t, _) = e.tokens().await;
            let r = outcome(as_device(&e, &d, "/connectors/revoke-client", json!({"client_id": c.id})).await);
            assert_eq!(e.http.mcp(&t.access, "tools/list", json!({})).await.status, 200, "nothing was revoked");
            r
        }),
        case!("revoke-client with confirm false", 400, "confirmation_required", |e| {
            let d = e.enroll("laptop");
            let (c, _, _) = e.tokens().await;
            outcome(as_device(&e, &d, "/connectors/revoke-client", json!({"client_id": c.id, "confirm": false})).await)
        }),
        case!("revoke-client with a connector's OAuth bearer", 401, "device_auth_required", |e| {
            let d = e.enroll("laptop");
            let (c, t, _) = e.tokens().await;
            let body = json!({"client_id": c.id, "confirm": true});
            let r = outcome(e.device_call(Method::POST, "/connectors/revoke-client", Some((d.device.workstation_id.as_str(), t.access.as_str())), Some(body)).await);
            assert_eq!(e.http.mcp(&t.access, "tools/list", json!({})).await.status, 200, "nothing was revoked");
            r
        }),
        case!("revoke-client with no credential", 401, "device_auth_required", |e| {
            let (c, _, _) = e.tokens().await;
            outcome(e.device_call(Method::POST, "/connectors/revoke-client", None, Some(json!({"client_id": c.id, "confirm": true}))).await)
        }),
        case!("revoke-client with an empty client_id", 400, "invalid_params", |e| {
            let d = e.enroll("laptop");
            outcome(revoke_client(&e, &d, "").await)
        }),
        case!("revoke-client with a client_id with a space", 400, "invalid_params", |e| {
            let d = e.enroll("laptop");
            outcome(revoke_client(&e, &d, "dcr-00 00").await)
        }),
        case!("revoke-client with a client_id one character over the limit", 400, "invalid_params", |e| {
            let d = e.enroll("laptop");
            outcome(revoke_client(&e, &d, &"c".repeat(MAX_CLIENT_ID_CHARS + 1)).await)
        }),
        case!("revoke-client with a client_id at the limit is looked up", 404, "not_found", |e| {
            let d = e.enroll("laptop");
            outcome(revoke_client(&e, &d, &"c".repeat(MAX_CLIENT_ID_CHARS)).await)
        }),
        case!("revoke-client with an unknown field", 400, "invalid_params", |e| {
            let d = e.enroll("laptop");
            outcome(as_device(&e, &d, "/connectors/revoke-client", json!({"client_id": "dcr-0000000000000000", "confirm": true, "connector_id": "x"})).await)
        }),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connector_routes_negative_corpus() {
    corpus::run_all("connector route", cases()).await;
}

/// Neither `--edge-dir`, nor an enrollment, nor edge state here: the command
/// says how to get one instead of guessing.
#[test]
fn connector_commands_without_an_edge_say_how_to_reach_one() {
    let tmp = tempfile::tempdir().unwrap();
    for args in [&["list"][..], &["cancel", "req_x"], &["approve", "req_x"], &["revoke", "conn_AAAAAAAAAAAA", "--confirm"]] {
        let out = procs::command(tmp.path()).arg("connector").args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded without an edge");
        assert!(err.contains("not enrolled") && err.contains("worker connect") && err.contains("--edge-dir"), "{args:?}: {err}");
    }
}

/// The edge host without an enrollment: with no `--edge-dir`, the command falls
/// back to the default edge state `edge init` created there.
#[test]
fn connector_commands_on_the_edge_host_use_its_default_state() {
    let tmp = tempfile::tempdir().unwrap();
    let init = procs::command(tmp.path()).args(["edge", "init"]).output().unwrap();
    assert!(init.status.success(), "{}", String::from_utf8_lossy(&init.stderr));
    let out = procs::command(tmp.path()).args(["connector", "list"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "no connectors");
    let out = procs::command(tmp.path()).args(["connector", "cancel", "req_unknown"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("not_found"), "{}", String::from_utf8_lossy(&out.stderr));
}
