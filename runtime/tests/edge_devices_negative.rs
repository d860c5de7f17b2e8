//! Negative corpus for devices and pairing, in the style of `edge_negative.rs`:
//! each case drives a fresh in-process edge (manual clock) into one failure and
//! checks the exact HTTP status and code. All cases run; failures are reported together.

mod edge_support;
#[path = "edge_support/corpus.rs"]
mod corpus;

use corpus::{Case, Outcome, case};
use edge_support::*;
use reqwest::Method;
use serde_json::json;

fn outcome(r: Resp) -> Outcome {
    (r.status, r.json()["code"].as_str().unwrap_or("").to_string())
}

fn wrong(code: &str) -> String {
    format!("{:06}", (code.parse::<u32>().unwrap() + 1) % 1_000_000)
}

/// A pairing created over HTTP by a freshly enrolled device: (pairing_id, code).
async fn pairing(e: &InProc, ttl: i64) -> (String, String) {
    let d = e.enroll("admin");
    let r = e
        .device_call(Method::POST, "/devices/pairings", Some((&d.device.workstation_id, &d.device_secret)), Some(json!({"ttl_seconds": ttl})))
        .await;
    let v = r.json();
    (v["pairing_id"].as_str().unwrap().into(), v["code"].as_str().unwrap().into())
}

async fn consume(e: &InProc, pairing_id: &str, code: &str) -> Resp {
    e.device_call(Method::POST, "/devices/pairings/consume", None, Some(json!({"pairing_id": pairing_id, "code": code}))).await
}

fn cases() -> Vec<Case> {
    vec![
        case!("expired pairing", 401, "pairing_rejected", |e| {
            let (id, code) = pairing(&e, 60).await;
            e.clock.advance_ms(60_000);
            outcome(consume(&e, &id, &code).await)
        }),
        case!("pairing one millisecond before expiry works", 200, "", |e| {
            let (id, code) = pairing(&e, 60).await;
            e.clock.advance_ms(59_999);
            outcome(consume(&e, &id, &code).await)
        }),
        case!("locked pairing (5 wrong codes, then the right one)", 401, "pairing_rejected", |e| {
            let (id, code) = pairing(&e, 600).await;
            for _ in 0..5 {
                let r = consume(&e, &id, &wrong(&code)).await;
                assert_eq!(outcome(r), (401, "pairing_rejected".into()));
            }
            outcome(consume(&e, &id, &code).await)
        }),
        case!("four wrong codes leave the pairing usable", 200, "", |e| {
            let (id, code) = pairing(&e, 600).await;
            for _ in 0..4 {
                consume(&e, &id, &wrong(&code)).await;
            }
            outcome(consume(&e, &id, &code).await)
        }),
        case!("reused pairing code", 401, "pairing_rejected", |e| {
            let (id, code) = pairing(&e, 600).await;
            assert_eq!(consume(&e, &id, &code).await.status, 200);
            outcome(consume(&e, &id, &code).await)
        }),
        case!("replaced pairing", 401, "pairing_rejected", |e| {
            let (old_id, old_code) = pairing(&e, 600).await;
            pairing(&e, 600).await;
            outcome(consume(&e, &old_id, &old_code).await)
        }),
        case!("unknown pairing id", 401, "pairing_rejected", |e| {
            let (_, code) = pairing(&e, 600).await;
            outcome(consume(&e, &format!("pair_{}", "0".repeat(64)), &code).await)
        }),
        case!("malformed pairing id", 401, "pairing_rejected", |e| { outcome(consume(&e, "pair_../../x", "123456").await) }),
        case!("non-digit code", 401, "pairing_rejected", |e| {
            let (id, _) = pairing(&e, 600).await;
            outcome(consume(&e, &id, "12345a").await)
        }),
        case!("pairing TTL below 60 s", 400, "invalid_pairing_ttl", |e| {
            let d = e.enroll("admin");
            let who = Some((d.device.workstation_id.as_str(), d.device_secret.as_str()));
            outcome(e.device_call(Method::POST, "/devices/pairings", who, Some(json!({"ttl_seconds": 59}))).await)
        }),
        case!("pairing TTL above 600 s", 400, "invalid_pairing_ttl", |e| {
            let d = e.enroll("admin");
            let who = Some((d.device.workstation_id.as_str(), d.device_secret.as_str()));
            outcome(e.device_call(Method::POST, "/devices/pairings", who, Some(json!({"ttl_seconds": 601}))).await)
        }),
        case!("pairing without a credential", 401, "pairing_admin_required", |e| {
            outcome(e.device_call(Method::POST, "/devices/pairings", None, Some(json!({}))).await)
        }),
        case!("connector token trying to pair", 401, "pairing_admin_required", |e| {
            let d = e.enroll("admin");
            let (_, t, _) = e.tokens().await;
            let who = Some((d.device.workstation_id.as_str(), t.access.as_str()));
            outcome(e.device_call(Method::POST, "/devices/pairings", who, Some(json!({}))).await)
        }),
        case!("connector token trying to revoke a device", 401, "device_auth_required", |e| {
            let d = e.enroll("victim");
            let (_, t, _) = e.tokens().await;
            let who = Some((d.device.workstation_id.as_str(), t.access.as_str()));
            outcome(e.device_call(Method::POST, "/devices/revoke", who, Some(json!({"device_id": d.device.device_id, "confirm": true}))).await)
        }),
        case!("revoked device pairing", 401, "pairing_admin_required", |e| {
            let d = e.enroll("gone");
            e.devices.revoke(&d.device.device_id, "test").unwrap();
            let who = Some((d.device.workstation_id.as_str(), d.device_secret.as_str()));
            outcome(e.device_call(Method::POST, "/devices/pairings", who, Some(json!({}))).await)
        }),
        case!("revoked device reconnecting its link", 401, "device_revoked", |e| {
            let d = e.enroll("gone");
            e.devices.revoke(&d.device.device_id, "test").unwrap();
            let err = e.devices.verify_link(&d.device.workstation_id, &d.device_secret).unwrap_err();
            (401, err.code().to_string())
        }),
        case!("wrong link credential", 401, "link_auth_failed", |e| {
            let d = e.enroll("one");
            let err = e.devices.verify_link(&d.device.workstation_id, "devsec_wrong").unwrap_err();
            (401, err.code().to_string())
        }),
        case!("revoking twice", 409, "device_revoked", |e| {
            let admin = e.enroll("admin");
            let d = e.enroll("gone");
            let who = Some((admin.device.workstation_id.as_str(), admin.device_secret.as_str()));
            let body = json!({"device_id": d.device.device_id, "confirm": true});
            assert_eq!(e.device_call(Method::POST, "/devices/revoke", who, Some(body.clone())).await.status, 200);
            outcome(e.device_call(Method::POST, "/devices/revoke", who, Some(body)).await)
        }),
        case!("revoking an unknown device", 404, "device_not_found", |e| {
            let admin = e.enroll("admin");
            let who = Some((admin.device.workstation_id.as_str(), admin.device_secret.as_str()));
            outcome(e.device_call(Method::POST, "/devices/revoke", who, Some(json!({"device_id": "dev_nope", "confirm": true}))).await)
        }),
        case!("rename to a device-id lookalike", 400, "invalid_device_name", |e| {
            let d = e.enroll("one");
            let who = Some((d.device.workstation_id.as_str(), d.device_secret.as_str()));
            outcome(e.device_call(Method::POST, "/devices/rename-self", who, Some(json!({"name": "dev_1"}))).await)
        }),
    ]
}

#[tokio::test]
async fn device_negative_corpus() {
    corpus::run_all("device", cases()).await;
}
