//! Device routes over HTTP on an in-process edge: pairing by an enrolled device,
//! consumption by a new one, inventory, rename, revoke (and the revocation
//! announcement the link hub listens to), and who may call what.

mod edge_support;

use edge_support::*;
use reqwest::Method;
use serde_json::{Value, json};

fn code_of(r: &Resp) -> String {
    r.json()["code"].as_str().unwrap_or("").to_string()
}

#[tokio::test]
async fn an_enrolled_device_pairs_a_new_one_over_http() {
    let e = InProc::start().await;
    let first = e.enroll("first");
    let me = (first.device.workstation_id.as_str(), first.device_secret.as_str());

    let r = e.device_call(Method::POST, "/devices/pairings", Some(me), Some(json!({"ttl_seconds": 120, "name": "second"}))).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let p = r.json();
    assert_eq!(p["worker_origin"], e.issuer.as_str());
    assert_eq!(p["expires_at_ms"], T0 + 120_000);
    let pairing_id = p["pairing_id"].as_str().unwrap();
    assert!(pairing_id.starts_with("pair_") && pairing_id.len() == 5 + 64);
    let code = p["code"].as_str().unwrap();
    e.clock.advance_ms(1000);

    let r = e.device_call(Method::POST, "/devices/pairings/consume", None, Some(json!({"pairing_id": pairing_id, "code": code}))).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let d = r.json();
    let new_id = d["device_id"].as_str().unwrap().to_string();
    assert_eq!(d["workstation_id"], new_id.as_str());
    assert_eq!(d["name"], "second");
    assert_eq!(d["recovered_existing"], false);
    let secret = d["device_secret"].as_str().unwrap().to_string();
    assert!(secret.starts_with("devsec_"));
    assert!(e.devices.verify_link(&new_id, &secret).is_ok());

    // The inventory shows both and never a secret.
    let r = e.device_call(Method::GET, "/devices", Some((&new_id, &secret)), None).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(!r.body.contains("devsec_") && !r.body.contains("verifier"), "{}", r.body);
    let v = r.json();
    let names: Vec<&str> = v["devices"].as_array().unwrap().iter().map(|d| d["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["first", "second"]);

    // Rename itself; the old name becomes an alias.
    let r = e.device_call(Method::POST, "/devices/rename-self", Some((&new_id, &secret)), Some(json!({"workstation_id": new_id, "name": "renamed"}))).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["aliases"], json!(["second"]));
    let r = e.device_call(Method::POST, "/devices/rename-self", Some((&new_id, &secret)), Some(json!({"workstation_id": first.device.device_id, "name": "x"}))).await;
    assert_eq!((r.status, code_of(&r)), (403, "workstation_mismatch".into()));

    // The first device revokes the second: announced, tombstoned, its credential dead.
    let mut revoked = e.devices.subscribe_revocations();
    let r = e.device_call(Method::POST, "/devices/revoke", Some(me), Some(json!({"device_id": new_id}))).await;
    assert_eq!((r.status, code_of(&r)), (400, "confirmation_required".into()));
    let r = e.device_call(Method::POST, "/devices/revoke", Some(me), Some(json!({"device_id": new_id, "confirm": true}))).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["revoked_at_ms"], T0 + 1000);
    assert_eq!(revoked.try_recv().unwrap().device_id, new_id);
    assert_eq!(e.devices.verify_link(&new_id, &secret).unwrap_err().code(), "device_revoked");
    let r = e.device_call(Method::GET, "/devices", Some((&new_id, &secret)), None).await;
    assert_eq!((r.status, code_of(&r)), (401, "device_auth_required".into()));
    let r = e.device_call(Method::GET, "/devices", Some(me), None).await;
    let rows = r.json()["devices"].as_array().unwrap().clone();
    assert_eq!(rows[1]["authorization"], "revoked");
}

#[tokio::test]
async fn revoke_self_ends_the_own_credential() {
    let e = InProc::start().await;
    let d = e.enroll("solo");
    let me = (d.device.workstation_id.as_str(), d.device_secret.as_str());
    let r = e.device_call(Method::POST, "/devices/revoke-self", Some(me), None).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let r = e.device_call(Method::POST, "/devices/pairings", Some(me), Some(json!({}))).await;
    assert_eq!((r.status, code_of(&r)), (401, "pairing_admin_required".into()));
}

#[tokio::test]
async fn only_device_credentials_administer_devices() {
    let e = InProc::start().await;
    let d = e.enroll("one");
    let (_, tokens, _) = e.tokens().await;
    // No credential, a connector's access token, a secret for the wrong workstation.
    let other = e.enroll("two");
    let attempts: [(Option<(&str, &str)>, &str); 3] = [
        (None, "none"),
        (Some((d.device.workstation_id.as_str(), tokens.access.as_str())), "connector token"),
        (Some((d.device.workstation_id.as_str(), other.device_secret.as_str())), "other device's secret"),
    ];
    for (who, label) in attempts {
        let r = e.device_call(Method::POST, "/devices/pairings", who, Some(json!({}))).await;
        assert_eq!((r.status, code_of(&r)), (401, "pairing_admin_required".into()), "{label}");
        let r = e.device_call(Method::GET, "/devices", who, None).await;
        assert_eq!((r.status, code_of(&r)), (401, "device_auth_required".into()), "{label}");
        let body = json!({"device_id": other.device.device_id, "confirm": true});
        let r = e.device_call(Method::POST, "/devices/revoke", who, Some(body)).await;
        assert_eq!((r.status, code_of(&r)), (401, "device_auth_required".into()), "{label}");
    }
    assert!(e.devices.verify_link(&other.device.workstation_id, &other.device_secret).is_ok());
}

#[tokio::test]
async fn pairing_request_validation() {
    let e = InProc::start().await;
    let d = e.enroll("one");
    let me = Some((d.device.workstation_id.as_str(), d.device_secret.as_str()));
    let cases: Vec<(Value, u16, &str)> = vec![
        (json!({"ttl_seconds": 59}), 400, "invalid_pairing_ttl"),
        (json!({"ttl_seconds": 601}), 400, "invalid_pairing_ttl"),
        (json!({"ttl_seconds": "300"}), 400, "invalid_pairing_ttl"),
        (json!({"ttl_seconds": 60.5}), 400, "invalid_pairing_ttl"),
        (json!({"name": null}), 400, "invalid_device_name"),
        (json!({"name": "dev_x"}), 400, "invalid_device_name"),
        (json!({"name": "x".repeat(65)}), 400, "invalid_device_name"),
        (json!({"extra": 1}), 400, "invalid_params"),
        (json!([1]), 400, "invalid_params"),
    ];
    for (body, status, code) in cases {
        let r = e.device_call(Method::POST, "/devices/pairings", me, Some(body.clone())).await;
        assert_eq!((r.status, code_of(&r)), (status, code.to_string()), "{body}");
    }
    for ttl in [60, 600] {
        let r = e.device_call(Method::POST, "/devices/pairings", me, Some(json!({"ttl_seconds": ttl}))).await;
        assert_eq!(r.status, 200, "{ttl}: {}", r.body);
    }
    let big = json!({"name": "x".repeat(17 * 1024)});
    let r = e.device_call(Method::POST, "/devices/pairings/consume", None, Some(big)).await;
    assert_eq!((r.status, code_of(&r)), (413, "payload_too_large".into()));
    let r = e.device_call(Method::POST, "/devices/pairings/consume", None, Some(json!({"pairing_id": "pair_x"}))).await;
    assert_eq!((r.status, code_of(&r)), (400, "invalid_params".into()));
}

#[tokio::test]
async fn a_pairing_recovers_an_existing_device_with_a_new_credential() {
    let e = InProc::start().await;
    let old = e.enroll("laptop");
    let id = old.device.device_id.clone();
    let consume = |body: Value| e.device_call(Method::POST, "/devices/pairings/consume", None, Some(body));

    let p = e.devices.create_pairing(None, None, "test").unwrap();
    let r = consume(json!({"pairing_id": p.pairing_id, "code": p.code, "recover_device_id": 7})).await;
    assert_eq!((r.status, code_of(&r)), (400, "invalid_params".into()));
    let r = consume(json!({"pairing_id": p.pairing_id, "code": p.code, "recover_device_id": "dev_00000000000000000000000000"})).await;
    assert_eq!((r.status, code_of(&r)), (404, "device_not_found".into()));
    // That refusal left the pairing usable.
    let r = consume(json!({"pairing_id": p.pairing_id, "code": p.code, "recover_device_id": id})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    assert_eq!((v["device_id"].as_str(), v["recovered_existing"].as_bool(), v["name"].as_str()), (Some(id.as_str()), Some(true), Some("laptop")));
    assert_ne!(v["credential_id"], json!(old.device.credential_id));
    let secret = v["device_secret"].as_str().unwrap().to_string();

    // The old secret is dead, the new one works, and there is still one device.
    let r = e.device_call(Method::GET, "/devices", Some((&id, &old.device_secret)), None).await;
    assert_eq!((r.status, code_of(&r)), (401, "device_auth_required".into()));
    let r = e.device_call(Method::GET, "/devices", Some((&id, &secret)), None).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["devices"].as_array().unwrap().len(), 1);
}
