//! Automation clients (spec edge.md §3 `client_credentials`, §5): the operator's
//! `herdr-mcp edge automation create|list|rotate|revoke` against a real `edge
//! serve`, two real runtimes behind two real links, and the client's tokens. The
//! one-hour expiry runs on an in-process edge whose clock the test moves.

mod edge_support;
#[path = "edge_support/links.rs"]
mod links;
#[path = "edge_support/procs.rs"]
mod procs;

use std::path::Path;
use std::process::{Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use edge_support::*;
use herdr_mcp::edge::automation;
use herdr_mcp::edge::clock::SystemClock;
use herdr_mcp::edge::devices::DeviceRegistry;
use herdr_mcp::edge::store::EdgeStore;
use procs::{DEADLINE, EdgeProcess, Proc, command, line_after};
use serde_json::{Value, json};

/// `herdr-mcp edge automation <args…> --edge-dir <dir>`.
fn automation_cli(home: &Path, edge_dir: &Path, args: &[&str]) -> Output {
    command(home)
        .args(["edge", "automation"])
        .args(args)
        .arg("--edge-dir")
        .arg(edge_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).to_string(),
        String::from_utf8_lossy(&o.stderr).to_string(),
    )
}

/// (client_id, client_secret) printed by `create` or `rotate`.
fn credentials(o: &Output) -> (String, String) {
    let (out, err) = text(o);
    assert!(o.status.success(), "automation command failed: {out}{err}");
    (
        line_after(&out, "client_id:").to_string(),
        line_after(&out, "client_secret:").to_string(),
    )
}

async fn client_token(http: &Http, id: &str, secret: &str) -> Resp {
    let resource = format!("{}/mcp", http.base);
    http.post_form(
        "/oauth/token",
        &[
            ("grant_type", "client_credentials"),
            ("client_id", id),
            ("client_secret", secret),
            ("resource", &resource),
        ],
    )
    .await
}

fn access_of(r: &Resp) -> String {
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["access_token"].as_str().unwrap().to_string()
}

async fn call(http: &Http, token: &str, name: &str, args: Value) -> Resp {
    http.mcp(
        token,
        "tools/call",
        json!({"name": name, "arguments": args}),
    )
    .await
}

struct Linked {
    device_id: String,
    root: std::path::PathBuf,
    _runtime: links::Runtime,
    _link: Proc,
}

/// A device paired into the edge's registry, with a real runtime and link.
async fn linked(home: &Path, devices: &DeviceRegistry, base: &str, name: &str) -> Linked {
    let p = devices
        .create_pairing(Some(120), Some(name), "test")
        .unwrap();
    let enrolled = devices
        .consume_pairing(&p.pairing_id, &p.code, Some(name))
        .unwrap();
    let runtime = links::runtime(
        home,
        name,
        &format!("{name}.txt"),
        &format!("this is {name}\n"),
    )
    .await;
    let ws = enrolled.device.workstation_id.clone();
    let link = links::link(home, base, &ws, &enrolled.device_secret, &runtime.socket);
    Linked {
        device_id: enrolled.device.device_id,
        root: runtime.root.clone(),
        _runtime: runtime,
        _link: link,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn automation_client_reaches_only_its_device_until_rotated_or_revoked() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let edge = EdgeProcess::start(home);
    let (base, dir) = (edge.base.clone(), edge.edge_dir.clone());
    let store = Arc::new(EdgeStore::open(&dir, Arc::new(SystemClock)).unwrap());
    let devices = DeviceRegistry::new(Arc::clone(&store));
    let left = linked(home, &devices, &base, "left").await;
    let right = linked(home, &devices, &base, "right").await;
    let http = Http::new(&base);

    // Both links are up, as a connector sees them; `right` is reachable to it.
    let connector = http.approved_bearer(&store).await;
    let start = Instant::now();
    loop {
        let listed = call(&http, &connector, "herdr_devices", json!({}))
            .await
            .json();
        let rows = listed["result"]["structuredContent"]["devices"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if rows.len() == 2 && rows.iter().all(|r| r["connection"] == "online") {
            break;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "links never came online: {listed}\n{}",
            edge.log_text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let right_file = right.root.join("right.txt");
    let via_connector = call(
        &http,
        &connector,
        "herdr_fs_read",
        json!({"device": "right", "path": right_file}),
    )
    .await
    .json();
    assert_eq!(
        via_connector["result"]["structuredContent"]["ok"], true,
        "{via_connector}"
    );

    // create: an unknown device is refused; a known name binds its device_id.
    let unknown = automation_cli(
        home,
        &dir,
        &["create", "--name", "ci", "--device", "nowhere"],
    );
    assert!(!unknown.status.success());
    assert!(
        text(&unknown).1.contains("device_not_found"),
        "{:?}",
        text(&unknown)
    );
    let created = automation_cli(
        home,
        &dir,
        &["create", "--name", "nightly ci", "--device", "left"],
    );
    let (id, secret) = credentials(&created);
    assert!(
        id.starts_with("svc_") && id.len() > 4 && id[4..].bytes().all(|b| b.is_ascii_hexdigit()),
        "{id}"
    );
    assert!(
        text(&created).0.contains(&left.device_id),
        "{:?}",
        text(&created)
    );

    // list shows it bound to `left`, never the secret.
    let list = automation_cli(home, &dir, &["list"]);
    let (out, _) = text(&list);
    assert!(
        list.status.success()
            && out.contains(&id)
            && out.contains(&left.device_id)
            && out.contains("active"),
        "{out}"
    );
    assert!(!out.contains(&secret));
    let json_list = text(&automation_cli(home, &dir, &["list", "--json"])).0;
    let rows: Value = serde_json::from_str(&json_list).unwrap();
    assert_eq!(
        rows["automation_clients"][0]["principal_type"], "automation",
        "{rows}"
    );
    assert!(!json_list.contains(&secret));

    // The token answer: 1 hour, Bearer, mcp, no refresh token, not cached.
    let answer = client_token(&http, &id, &secret).await;
    let token = access_of(&answer);
    let body = answer.json();
    assert_eq!(
        (
            body["token_type"].clone(),
            body["expires_in"].clone(),
            body["scope"].clone()
        ),
        (json!("Bearer"), json!(3600), json!("mcp"))
    );
    assert!(body.get("refresh_token").is_none(), "{body}");
    assert_eq!(answer.header("cache-control"), "no-store");
    // HTTP Basic works as the fallback client authentication.
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("{id}:{secret}"));
    let via_basic = http
        .client
        .post(format!("{base}/oauth/token"))
        .header("authorization", format!("Basic {basic}"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(
            serde_urlencoded::to_string([
                ("grant_type", "client_credentials"),
                ("resource", &format!("{base}/mcp")),
            ])
            .unwrap(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(via_basic.status().as_u16(), 200);

    // Refusals: wrong secret, no resource, a client that is not svc_, a svc_
    // client on another grant.
    let wrong = client_token(&http, &id, "svcsec_wrong").await;
    assert_eq!(
        (wrong.status, wrong.oauth_error()),
        (401, "invalid_client".to_string()),
        "{}",
        wrong.body
    );
    let no_resource = http
        .post_form(
            "/oauth/token",
            &[
                ("grant_type", "client_credentials"),
                ("client_id", &id),
                ("client_secret", &secret),
            ],
        )
        .await;
    assert_eq!(
        no_resource.oauth_error(),
        "invalid_target",
        "{}",
        no_resource.body
    );
    let dcr = http.register(json!({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "client_secret_post"})).await.json();
    let (dcr_id, dcr_secret) = (
        dcr["client_id"].as_str().unwrap(),
        dcr["client_secret"].as_str().unwrap(),
    );
    let not_svc = client_token(&http, dcr_id, dcr_secret).await;
    assert_eq!(
        (not_svc.status, not_svc.oauth_error()),
        (400, "unauthorized_client".to_string()),
        "{}",
        not_svc.body
    );
    let other_grant = http
        .post_form(
            "/oauth/token",
            &[
                ("grant_type", "refresh_token"),
                ("client_id", &id),
                ("client_secret", &secret),
                ("refresh_token", "x"),
                ("resource", &format!("{base}/mcp")),
            ],
        )
        .await;
    assert_eq!(
        other_grant.oauth_error(),
        "unauthorized_client",
        "{}",
        other_grant.body
    );

    // The token reaches `left` with no device argument, and by name.
    let left_file = left.root.join("left.txt");
    let read = call(&http, &token, "herdr_fs_read", json!({"path": left_file}))
        .await
        .json();
    assert_eq!(read["result"]["structuredContent"]["ok"], true, "{read}");
    assert!(
        read["result"]["structuredContent"]["content"]
            .as_str()
            .unwrap()
            .contains("this is left"),
        "{read}"
    );
    let named = call(
        &http,
        &token,
        "herdr_fs_read",
        json!({"device": "left", "path": left_file}),
    )
    .await
    .json();
    assert_eq!(named["result"]["structuredContent"]["ok"], true, "{named}");
    // …and never `right`, by name or by id: a clear refusal, not a redirect.
    for other in ["right", right.device_id.as_str()] {
        let refused = call(
            &http,
            &token,
            "herdr_fs_read",
            json!({"device": other, "path": right_file}),
        )
        .await
        .json();
        let sc = &refused["result"]["structuredContent"];
        assert_eq!(
            (sc["code"].clone(), refused["result"]["isError"].clone()),
            (json!("device_not_allowed"), json!(true)),
            "{refused}"
        );
        assert!(
            sc["message"].as_str().unwrap().contains(&left.device_id),
            "{refused}"
        );
    }
    // It sees only its own device in herdr_devices and /status.
    let mine = call(&http, &token, "herdr_devices", json!({})).await.json();
    let ids: Vec<Value> = mine["result"]["structuredContent"]["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["device_id"].clone())
        .collect();
    assert_eq!(ids, vec![json!(left.device_id)], "{mine}");
    let status_right = http
        .get_with(
            &format!("/status/{}", right.device_id),
            &[("authorization", &format!("Bearer {token}"))],
        )
        .await;
    assert_eq!(status_right.status, 404, "{}", status_right.body);

    // rotate: refused without --confirm; then the old secret and old token stop at once.
    let unconfirmed = automation_cli(home, &dir, &["rotate", &id]);
    assert!(
        !unconfirmed.status.success() && text(&unconfirmed).1.contains("--confirm"),
        "{:?}",
        text(&unconfirmed)
    );
    assert_eq!(
        client_token(&http, &id, &secret).await.status,
        200,
        "an unconfirmed rotate changes nothing"
    );
    let (same_id, new_secret) =
        credentials(&automation_cli(home, &dir, &["rotate", &id, "--confirm"]));
    assert_eq!(same_id, id);
    assert_ne!(new_secret, secret);
    let old = client_token(&http, &id, &secret).await;
    assert_eq!(
        (old.status, old.oauth_error()),
        (401, "invalid_client".to_string()),
        "{}",
        old.body
    );
    assert_eq!(
        call(&http, &token, "herdr_fs_read", json!({"path": left_file}))
            .await
            .status,
        401
    );
    let token = access_of(&client_token(&http, &id, &new_secret).await);
    let again = call(&http, &token, "herdr_fs_read", json!({"path": left_file}))
        .await
        .json();
    assert_eq!(again["result"]["structuredContent"]["ok"], true, "{again}");

    // revoke: refused without --confirm; then its live token and its secret stop.
    let unconfirmed = automation_cli(home, &dir, &["revoke", &id]);
    assert!(
        !unconfirmed.status.success() && text(&unconfirmed).1.contains("--confirm"),
        "{:?}",
        text(&unconfirmed)
    );
    let revoked = automation_cli(home, &dir, &["revoke", &id, "--confirm"]);
    assert!(revoked.status.success(), "{:?}", text(&revoked));
    let after = call(&http, &token, "herdr_fs_read", json!({"path": left_file})).await;
    assert_eq!(after.status, 401, "{}", after.body);
    let denied = client_token(&http, &id, &new_secret).await;
    assert_eq!(
        (denied.status, denied.oauth_error()),
        (401, "invalid_client".to_string()),
        "{}",
        denied.body
    );
    assert!(
        text(&automation_cli(home, &dir, &["list"]))
            .0
            .contains("revoked")
    );
    let twice = automation_cli(home, &dir, &["revoke", &id, "--confirm"]);
    assert!(
        !twice.status.success() && text(&twice).1.contains("already_revoked"),
        "{:?}",
        text(&twice)
    );
}

#[tokio::test]
async fn automation_token_expires_after_one_hour() {
    let edge = InProc::start().await;
    let device = edge.enroll("box").device;
    let issued = automation::create(&edge.store, "ci", &device.device_id).unwrap();
    assert_eq!(issued.client.device_id, device.device_id);
    let token =
        access_of(&client_token(&edge.http, &issued.client.client_id, &issued.client_secret).await);
    let list = |t: &str| {
        let http = edge.http.clone();
        let t = t.to_string();
        async move { http.mcp(&t, "tools/list", json!({})).await.status }
    };
    assert_eq!(list(&token).await, 200);
    edge.clock.advance_ms(automation::ACCESS_TTL_MS - 1);
    assert_eq!(
        list(&token).await,
        200,
        "still valid a millisecond before the hour"
    );
    edge.clock.advance_ms(1);
    assert_eq!(list(&token).await, 401, "expired at the hour");
    // The secret still earns a fresh one.
    let fresh =
        access_of(&client_token(&edge.http, &issued.client.client_id, &issued.client_secret).await);
    assert_eq!(list(&fresh).await, 200);
}

#[tokio::test]
async fn create_refuses_bad_names_and_unusable_devices() {
    let edge = InProc::start().await;
    let device = edge.enroll("box").device;
    let long = "x".repeat(automation::MAX_NAME_CHARS + 1);
    for bad in ["", "  ", long.as_str(), "a\nb"] {
        assert_eq!(
            automation::create(&edge.store, bad, &device.device_id).unwrap_err(),
            automation::AutomationError::InvalidName,
            "{bad:?}"
        );
    }
    assert!(
        automation::create(&edge.store, &"x".repeat(automation::MAX_NAME_CHARS), "box").is_ok()
    );
    edge.devices.revoke(&device.device_id, "test").unwrap();
    assert!(matches!(
        automation::create(&edge.store, "ci", &device.device_id),
        Err(automation::AutomationError::DeviceNotActive(..))
    ));
}
