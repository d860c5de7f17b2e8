//! `herdr-mcp connector revoke-client` with real processes: `edge init` +
//! `edge serve` on loopback, a computer enrolled by `worker connect` (the code
//! typed on a pty), and OAuth clients driven over HTTP. One client holds two
//! connectors; revoked from the enrolled computer (over `/connectors/revoke-client`
//! with its device credential), both its bearers are refused on the very next
//! request and it cannot authorize again. A client never approved is fenced by a
//! tombstone from the edge host (`--edge-dir`). Refused: no `--confirm`, a second
//! revocation, an unknown client, and a connector's bearer calling the route.

mod edge_support;
#[path = "edge_support/procs.rs"]
mod procs;
#[path = "edge_support/pty.rs"]
mod pty;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;

use edge_support::{Http, Pending, TestClient, forget_grant, pkce, query_of};
use herdr_mcp::edge::clock::SystemClock;
use herdr_mcp::edge::connectors;
use herdr_mcp::edge::store::EdgeStore;
use procs::{DEADLINE, EdgeProcess, command};
use pty::PtySession;
use serde_json::{Value, json};

/// `worker connect` on a pty with the pairing `edge init` printed; returns the
/// device file it wrote.
fn enroll(home: &Path, (address, code): &(String, String)) -> PathBuf {
    let device_file = home.join("laptop").join("device.json");
    let mut cmd = command(home);
    cmd.args(["worker", "connect", address, "--name", "laptop", "--device-file"]).arg(&device_file);
    let mut pty = PtySession::spawn(cmd, DEADLINE);
    pty.wait_for_prompt("Pairing code", 1);
    pty.type_line(code);
    let (ok, transcript, _) = pty.finish("worker connect");
    assert!(ok, "worker connect: {transcript}");
    device_file
}

/// `herdr-mcp connector <args>` with `access` (`--device-file F` or `--edge-dir D`).
async fn connector(home: &Path, args: &[&str], access: [&std::ffi::OsStr; 2]) -> Output {
    let mut cmd = command(home);
    cmd.arg("connector").args(args).args(access);
    tokio::task::spawn_blocking(move || cmd.output().unwrap()).await.unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

fn receipt(o: &Output) -> Value {
    assert!(o.status.success(), "revoke-client failed: {}", stderr(o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("receipt is not JSON ({e}): {}", String::from_utf8_lossy(&o.stdout)))
}

/// The operator's approval on the edge host: its own `edge.db`, as `connector
/// approve --edge-dir` opens it.
fn approve_on(store: &EdgeStore) -> impl Fn(&Pending) -> Result<(), String> + '_ {
    move |p| connectors::approve(store, &p.request_id, &p.code, "operator").map(|_| ()).map_err(|e| e.to_string())
}

/// (status, error, error_description), from the redirect or, when the edge
/// answers on its own page, from the JSON body.
async fn authorize_error(http: &Http, c: &TestClient) -> (u16, String, String) {
    let (_, challenge) = pkce();
    let r = http.authorize(c, &challenge, "again").await;
    let mut q = query_of(&r.header("location"));
    if q.is_empty() {
        for k in ["error", "error_description"] {
            q.insert(k.to_string(), r.json()[k].as_str().unwrap_or_default().to_string());
        }
    }
    (r.status, q.get("error").cloned().unwrap_or_default(), q.get("error_description").cloned().unwrap_or_default())
}

async fn mcp_status(http: &Http, access: &str) -> u16 {
    http.mcp(access, "tools/list", json!({})).await.status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoke_client_with_real_processes() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().to_path_buf();
    let edge = {
        let home = home.clone();
        tokio::task::spawn_blocking(move || EdgeProcess::start(&home)).await.unwrap()
    };
    let device_file = {
        let (home, pairing) = (home.clone(), edge.first_pairing.clone());
        tokio::task::spawn_blocking(move || enroll(&home, &pairing)).await.unwrap()
    };
    let as_device = [std::ffi::OsStr::new("--device-file"), device_file.as_os_str()];
    let on_edge_host = [std::ffi::OsStr::new("--edge-dir"), edge.edge_dir.as_os_str()];
    let store = EdgeStore::open(&edge.edge_dir, Arc::new(SystemClock)).unwrap();
    let http = Http::new(&edge.base);

    // One client, two live connectors, each with its bearer.
    let c = http.dcr_client().await;
    let t1 = http.tokens_for(&c, approve_on(&store)).await;
    forget_grant(&store, &c.id);
    let t2 = http.tokens_for(&c, approve_on(&store)).await;
    let mut ids: Vec<String> = connectors::list(&store).unwrap().into_iter().filter(|r| r.client_id == c.id).map(|r| r.connector_id).collect();
    ids.sort();
    assert_eq!(ids.len(), 2);
    for t in [&t1, &t2] {
        assert_eq!(mcp_status(&http, &t.access).await, 200);
    }
    // The operator finds the client id in `connector list`'s last column.
    let table = connector(&home, &["list"], as_device).await;
    let table = String::from_utf8_lossy(&table.stdout).to_string();
    for id in &ids {
        let row = table.lines().find(|l| l.starts_with(id.as_str())).unwrap_or_else(|| panic!("{id} not listed:\n{table}"));
        assert_eq!(row.split_whitespace().next_back(), Some(c.id.as_str()), "{table}");
    }

    // A connector's bearer cannot use the admin route, even against its own client.
    let r = http.post_json("/connectors/revoke-client", &json!({"client_id": c.id, "confirm": true}), Some(&t1.access)).await;
    assert_eq!((r.status, r.json()["code"].as_str()), (401, Some("device_auth_required")), "{}", r.body);

    let refused = connector(&home, &["revoke-client", &c.id], as_device).await;
    assert!(!refused.status.success() && stderr(&refused).contains("--confirm"), "{}", stderr(&refused));
    assert_eq!(mcp_status(&http, &t1.access).await, 200, "nothing is revoked without --confirm");

    let done = receipt(&connector(&home, &["revoke-client", &c.id, "--confirm"], as_device).await);
    let mut revoked: Vec<String> = serde_json::from_value(done["revoked_connectors"].clone()).unwrap();
    revoked.sort();
    assert_eq!(revoked, ids, "{done}");
    assert_eq!((done["ok"].as_bool(), done["client_id"].as_str()), (Some(true), Some(c.id.as_str())), "{done}");
    assert_eq!((done["deleted_tokens"].as_i64(), done["legacy_tombstone_created"].as_bool()), (Some(4), Some(false)), "{done}");
    for t in [&t1, &t2] {
        assert_eq!(mcp_status(&http, &t.access).await, 401, "a revoked client's bearer still works");
    }
    assert_eq!(http.refresh(&c, &t2.refresh).await.oauth_error(), "invalid_grant");
    assert_eq!(authorize_error(&http, &c).await, (302, "access_denied".into(), "client grant is revoked".into()));

    let again = connector(&home, &["revoke-client", &c.id, "--confirm"], as_device).await;
    assert!(!again.status.success() && stderr(&again).contains("409 already_revoked"), "{}", stderr(&again));

    // A client registered but never approved: fenced by a tombstone, on the edge host.
    let bare = http.dcr_client().await;
    let fenced = receipt(&connector(&home, &["revoke-client", &bare.id, "--confirm"], on_edge_host).await);
    assert_eq!((fenced["revoked_connectors"].clone(), fenced["legacy_tombstone_created"].as_bool()), (json!([]), Some(true)), "{fenced}");
    // On the edge's own page: nobody approved this client, so its redirect_uri is
    // unvetted (issue 22 item 4).
    assert_eq!(authorize_error(&http, &bare).await, (400, "access_denied".into(), "client grant is revoked".into()));

    let unknown = connector(&home, &["revoke-client", "dcr-ffffffffffffffff", "--confirm"], as_device).await;
    let err = stderr(&unknown);
    assert!(!unknown.status.success(), "an unknown client was revoked");
    assert!(err.contains("cannot revoke client dcr-ffffffffffffffff") && err.contains("404 not_found"), "{err}");
}
