//! `herdr-mcp connector list` on an enrolled computer, against the two answers
//! an edge may give to `GET /connectors`: the inventory of a current `edge serve`
//! (a real process), and the plainer list edges answered before the inventory
//! existed (a small local HTTP server playing such an edge). The older list is
//! shown for what it holds, with a note naming what it lacks; an answer of
//! neither shape is still refused as malformed.

mod edge_support;
#[path = "edge_support/procs.rs"]
mod procs;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::{Arc, Mutex};

use edge_support::Http;
use herdr_mcp::edge::devices_local::{self, LocalDevice};
use procs::{EdgeProcess, command};
use serde_json::{Value, json};

/// `connector list <extra>` as the device whose credential is `device_file`.
async fn list(home: &Path, device_file: &Path, extra: &[&str]) -> Output {
    let mut cmd = command(home);
    cmd.args(["connector", "list"]).args(extra).arg("--device-file").arg(device_file);
    tokio::task::spawn_blocking(move || cmd.output().unwrap()).await.unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).to_string()
}

fn save_device(path: &Path, edge_origin: &str, answer: &Value) {
    let s = |k: &str| answer[k].as_str().unwrap_or_else(|| panic!("no {k} in {answer}")).to_string();
    let device = LocalDevice {
        edge_origin: edge_origin.to_string(),
        device_id: s("device_id"),
        workstation_id: s("workstation_id"),
        credential_id: s("credential_id"),
        device_secret: s("device_secret"),
        name: "ops".into(),
        enrolled_at_ms: 0,
    };
    devices_local::save(path, &device).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_current_edge_answers_the_inventory() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().to_path_buf();
    let edge = EdgeProcess::start(&home);
    let http = Http::new(&edge.base);
    // Enrolled with the pairing `edge init` printed, as `worker connect` does.
    let (address, code) = &edge.first_pairing;
    let pairing_id = address.split_once('#').unwrap().1;
    let enrolled = http.post_json("/devices/pairings/consume", &json!({"pairing_id": pairing_id, "code": code, "name": "ops"}), None).await;
    assert_eq!(enrolled.status, 200, "{}", enrolled.body);
    let device_file = home.join("ops").join("device.json");
    save_device(&device_file, &edge.base, &enrolled.json());
    // One connector, approved over the edge's own route with that credential.
    let pending = http.pending(&http.dcr_client().await).await;
    let approved = http
        .client
        .post(format!("{}/connectors/approve", edge.base))
        .bearer_auth(enrolled.json()["device_secret"].as_str().unwrap())
        .header("x-herdr-workstation", enrolled.json()["workstation_id"].as_str().unwrap())
        .json(&json!({"request_id": pending.request_id, "code": pending.code}))
        .send()
        .await
        .unwrap();
    assert_eq!(approved.status().as_u16(), 200, "{}", approved.text().await.unwrap_or_default());

    let out = list(&home, &device_file, &["--json"]).await;
    assert!(out.status.success(), "{}\n{}", text(&out.stderr), edge.log_text());
    let inv: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((inv["total_connectors"].as_i64(), inv["connectors"][0]["client_name"].as_str()), (Some(1), Some("Test client")), "{inv}");
    assert!(inv["legacy_clients"].is_array() && inv["token_counts"].is_object(), "{inv}");
    assert!(!text(&out.stderr).contains("older"), "{}", text(&out.stderr));

    let out = list(&home, &device_file, &[]).await;
    let table = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let connector_id = inv["connectors"][0]["connector_id"].as_str().unwrap();
    assert!(table.lines().any(|l| l.starts_with(connector_id) && l.contains("Test client") && l.contains("active")), "{table}");
    assert!(table.contains("live tokens: 0 access, 0 refresh") && !table.contains("older"), "{table}");
}

/// An HTTP server on loopback that answers every request with `body` (200,
/// JSON) and keeps each request's head, as an edge of an older release would.
fn older_edge(body: Value) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    let heads = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&heads);
    let body = body.to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).is_ok_and(|n| n == 1) {
                head.push(byte[0]);
            }
            seen.lock().unwrap().push(String::from_utf8_lossy(&head).to_string());
            let reply = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(reply.as_bytes());
        }
    });
    (origin, heads)
}

/// A credential for the fake edge at `origin` (it checks none).
fn fake_device(home: &Path, origin: &str) -> PathBuf {
    let path = home.join("device.json");
    let answer = json!({
        "device_id": "dev_01J00000000000000000000000",
        "workstation_id": "dev_01J00000000000000000000000",
        "credential_id": "cred_00000000000000000000000000000000",
        "device_secret": "devsec_test",
    });
    save_device(&path, origin, &answer);
    path
}

/// The list as edges answered it before the inventory: rows with `name` (the
/// client id when the client gave none), no legacy clients, no totals.
fn older_answer() -> Value {
    let row = |id: &str, name: &str, status: &str, revoked_by: Value| {
        json!({
            "connector_id": id, "client_id": "dcr-0123456789abcdef", "name": name, "status": status,
            "grant_generation": 1, "approved_at_ms": 1_800_000_000_000_i64, "last_used_at_ms": null,
            "revoked_at_ms": null, "revoked_by": revoked_by, "active_access_tokens": 2, "active_refresh_tokens": 1
        })
    };
    json!({
        "ok": true,
        "connectors": [
            row("conn_NAMEDNAMEDNAMED", "Old app", "active", Value::Null),
            row("conn_IDLEIDLEIDLEIDLE", "dcr-0123456789abcdef", "revoked", json!("inactive_30d")),
        ],
        "observed_at_ms": 1_800_000_000_001_i64,
    })
}

const MISSING: &str = "lacks legacy_clients, token_counts, total_connectors, total_legacy_clients, \
     connectors[].client_name, connectors[].created_at_ms, connectors[].grant_origin;";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_edge_answers_the_plain_list() {
    let tmp = tempfile::tempdir().unwrap();
    let (origin, heads) = older_edge(older_answer());
    let device_file = fake_device(tmp.path(), &origin);

    let out = list(tmp.path(), &device_file, &[]).await;
    let table = text(&out.stdout);
    assert!(out.status.success(), "an older edge's list must be shown: {}", text(&out.stderr));
    let row = |id: &str| table.lines().find(|l| l.starts_with(id)).unwrap_or_else(|| panic!("no {id} in:\n{table}")).to_string();
    let named = row("conn_NAMEDNAMEDNAMED");
    assert_eq!(
        named.split_whitespace().skip(1).collect::<Vec<_>>(),
        ["Old", "app", "active", "2027-01-15T08:00:00Z", "-", "2/1", "dcr-0123456789abcdef"],
        "{table}"
    );
    assert!(row("conn_IDLEIDLEIDLEIDLE").contains("(unnamed)") && row("conn_IDLEIDLEIDLEIDLE").contains("revoked (inactive_30d)"), "{table}");
    assert!(table.contains("this edge is older than the connector inventory") && table.contains(MISSING), "{table}");
    assert!(!table.contains("live tokens:"), "no totals are made up for an older edge: {table}");

    // --json: the edge's own answer on stdout, the note on stderr.
    let out = list(tmp.path(), &device_file, &["--json"]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(serde_json::from_slice::<Value>(&out.stdout).unwrap(), older_answer());
    assert!(text(&out.stderr).contains(MISSING), "{}", text(&out.stderr));

    let heads = heads.lock().unwrap();
    assert_eq!(heads.len(), 2, "{heads:?}");
    for head in heads.iter() {
        let lower = head.to_ascii_lowercase();
        assert!(head.starts_with("GET /connectors HTTP/1.1\r\n"), "{head}");
        assert!(lower.contains("authorization: bearer devsec_test") && lower.contains("x-herdr-workstation: dev_01j"), "{head}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_of_neither_shape_is_refused() {
    for answer in [
        json!({"ok": true, "items": []}),
        json!({"ok": true, "connectors": [{"connector_id": "conn_AAAAAAAAAAAA"}], "observed_at_ms": 1}),
        json!({"ok": true, "connectors": {}, "total_connectors": 0, "observed_at_ms": 1}),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let (origin, _) = older_edge(answer.clone());
        let device_file = fake_device(tmp.path(), &origin);
        let out = list(tmp.path(), &device_file, &["--json"]).await;
        let err = text(&out.stderr);
        assert!(!out.status.success(), "{answer} was accepted: {}", text(&out.stdout));
        assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
        assert!(
            err.contains("the edge's connector inventory is malformed: it is neither the connector inventory (")
                && err.contains("nor the older connector list ("),
            "{answer}: {err}"
        );
    }
}
