//! The connector inventory (spec §5) that `GET /connectors` answers and
//! `connector list` prints: its fields after a real approval and a real
//! tombstone, live-token counts at the exact expiry instants (manual clock), and
//! the cut to the newest 256 entries of each list, seen through the store, the
//! route and the real `connector list` command.

mod edge_support;
#[path = "edge_support/procs.rs"]
mod procs;

use edge_support::{InProc, T0};
use herdr_mcp::edge::connectors_inventory::{Inventory, MAX_ENTRIES, TokenCounts, inventory};
use herdr_mcp::edge::connectors_revoke_client::revoke_client;
use herdr_mcp::edge::devices::Enrolled;
use herdr_mcp::edge::token::{ACCESS_TTL_MS, REFRESH_TTL_MS};
use reqwest::Method;
use rusqlite::params;
use serde_json::{Value, json};

fn who(d: &Enrolled) -> Option<(&str, &str)> {
    Some((d.device.workstation_id.as_str(), d.device_secret.as_str()))
}

async fn listed(e: &InProc, d: &Enrolled) -> Value {
    let r = e.device_call(Method::GET, "/connectors", who(d), None).await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

fn counts(inv: &Inventory) -> (i64, i64, TokenCounts) {
    let c = &inv.connectors[0];
    (c.active_access_tokens, c.active_refresh_tokens, inv.token_counts)
}

fn live(access: i64, refresh: i64) -> (i64, i64, TokenCounts) {
    (access, refresh, TokenCounts { active_access_tokens: access, active_refresh_tokens: refresh })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approved_connector_and_fenced_client_over_the_route() {
    let e = InProc::start().await;
    let d = e.enroll("laptop");
    let (_c, tokens, connector_id) = e.tokens().await;
    // Used once a minute later: `last_used_at_ms` is that use, not the approval.
    e.clock.advance_ms(60_000);
    assert_eq!(e.http.mcp(&tokens.access, "tools/list", json!({})).await.status, 200);
    let bare = e.client().await;
    let r = e.device_call(Method::POST, "/connectors/revoke-client", who(&d), Some(json!({"client_id": bare.id, "confirm": true}))).await;
    assert_eq!((r.status, r.json()["legacy_tombstone_created"].as_bool()), (200, Some(true)), "{}", r.body);

    let v = listed(&e, &d).await;
    assert_eq!(v["ok"], json!(true), "{v}");
    let row = &v["connectors"][0];
    let expected = json!({
        "connector_id": connector_id, "client_name": "Test client", "status": "active",
        "grant_origin": "explicit_approval", "created_at_ms": T0, "approved_at_ms": T0,
        "last_used_at_ms": T0 + 60_000, "active_access_tokens": 1, "active_refresh_tokens": 1,
    });
    for (k, want) in expected.as_object().unwrap() {
        assert_eq!(&row[k], want, "{k} in {row}");
    }
    assert_eq!((v["total_connectors"].clone(), v["token_counts"].clone()), (json!(1), json!({"active_access_tokens": 1, "active_refresh_tokens": 1})), "{v}");
    let fenced = json!([{
        "client_id": bare.id, "client_name": "Test client", "grant_origin": "pre_v0_4_6_legacy", "status": "revoked",
        "created_at_ms": T0 + 60_000, "last_used_at_ms": null, "revoked_at_ms": T0 + 60_000, "revoked_by": d.device.device_id,
    }]);
    assert_eq!((v["legacy_clients"].clone(), v["total_legacy_clients"].clone()), (fenced.clone(), json!(1)), "{v}");

    // An hour later the never-approved client's registration is purged (by the
    // next registration); the fence still says whose it is.
    e.clock.advance_ms(61 * 60_000);
    e.client().await;
    let purged: i64 = e.store.read(|tx| tx.query_row("SELECT COUNT(*) FROM clients WHERE client_id = ?1", [&bare.id], |r| r.get(0))).unwrap();
    assert_eq!(purged, 0, "the tombstoned client's registration was expected to be purged");
    assert_eq!(listed(&e, &d).await["legacy_clients"], fenced);

    let anonymous = e.device_call(Method::GET, "/connectors", None, None).await;
    assert_eq!((anonymous.status, anonymous.json()["code"].as_str()), (401, Some("device_auth_required")), "{}", anonymous.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_counts_hold_only_live_tokens() {
    let e = InProc::start().await;
    let (c, tokens, connector_id) = e.tokens().await;
    assert_eq!(counts(&inventory(&e.store).unwrap()), live(1, 1));
    // A rotation leaves the spent refresh token behind as a tombstone; it is not live.
    let r = e.refresh(&c, &tokens.refresh).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(counts(&inventory(&e.store).unwrap()), live(1, 1));
    // A token of an older grant generation (as a revocation leaves them) is dead.
    e.store
        .write(|tx| {
            tx.execute(
                "INSERT INTO tokens (token_hash, kind, connector_id, client_id, grant_generation, family_id, expires_at_ms)
                 VALUES ('stale', 'access', ?1, ?2, 0, 'stale', ?3)",
                params![connector_id, c.id, T0 + ACCESS_TTL_MS],
            )
        })
        .unwrap();
    assert_eq!(counts(&inventory(&e.store).unwrap()), live(1, 1));

    // Expiry: live up to the last millisecond before `expires_at_ms`, dead at it.
    for (at, want) in [
        (T0 + ACCESS_TTL_MS - 1, live(1, 1)),
        (T0 + ACCESS_TTL_MS, live(0, 1)),
        (T0 + REFRESH_TTL_MS - 1, live(0, 1)),
        (T0 + REFRESH_TTL_MS, live(0, 0)),
    ] {
        e.clock.set_ms(at);
        assert_eq!(counts(&inventory(&e.store).unwrap()), want, "at T0 + {} ms", at - T0);
    }
    e.clock.set_ms(T0 + ACCESS_TTL_MS - 1);
    assert_eq!(e.http.mcp(&tokens.access, "tools/list", json!({})).await.status, 401, "the rotated-away access token");

    // Revoked: nothing of it is live, whatever the clock says.
    e.clock.set_ms(T0);
    herdr_mcp::edge::connectors::revoke(&e.store, &connector_id, "test").unwrap();
    let inv = inventory(&e.store).unwrap();
    assert_eq!((counts(&inv), inv.connectors[0].status.as_str()), (live(0, 0), "revoked"));
}

/// 257 connectors and 257 fenced clients, made in the store directly (the real
/// flow would take minutes; the route and CLI cases above use it).
fn fill(e: &InProc, n: i64) {
    e.store
        .write(|tx| {
            for i in 0..n {
                tx.execute(
                    "INSERT INTO connectors (connector_id, client_id, status, resource, scope, redirect_uri, auth_source,
                        grant_generation, approved_at_ms, approved_by)
                     VALUES (?1, ?2, 'active', 'r', 'mcp', 'https://x.example/cb', 'dcr', 1, ?3, 'test')",
                    params![format!("conn_{i:012}"), format!("dcr-{i:016x}"), T0 + i],
                )?;
                tx.execute(
                    "INSERT INTO clients (client_id, client_name, redirect_uris, grant_types, auth_method, auth_source, created_at_ms)
                     VALUES (?1, ?2, '[]', '[]', 'none', 'dcr', ?3)",
                    params![format!("bare-{i:04}"), format!("app {i}"), T0 + i],
                )?;
            }
            Ok::<_, rusqlite::Error>(())
        })
        .unwrap();
    for i in 0..n {
        revoke_client(&e.store, &format!("bare-{i:04}"), "test").unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_list_keeps_the_newest_256() {
    let e = InProc::start().await;
    let d = e.enroll("laptop");
    fill(&e, MAX_ENTRIES + 1);
    let inv = inventory(&e.store).unwrap();
    let ids: Vec<&str> = inv.connectors.iter().map(|c| c.connector_id.as_str()).collect();
    assert_eq!((ids.len() as i64, inv.total_connectors), (MAX_ENTRIES, MAX_ENTRIES + 1));
    assert_eq!((ids[0], ids[255]), ("conn_000000000256", "conn_000000000001"), "newest first, the oldest cut");
    let fenced: Vec<&str> = inv.legacy_clients.iter().map(|c| c.client_id.as_str()).collect();
    assert_eq!((fenced.len() as i64, inv.total_legacy_clients), (MAX_ENTRIES, MAX_ENTRIES + 1));
    assert_eq!((fenced[0], fenced[255]), ("bare-0256", "bare-0001"));

    let v = listed(&e, &d).await;
    assert_eq!((v["connectors"].as_array().unwrap().len(), v["legacy_clients"].as_array().unwrap().len()), (256, 256));
    assert_eq!((v["total_connectors"].clone(), v["total_legacy_clients"].clone()), (json!(257), json!(257)));

    // The real command on the edge host says the list is cut.
    let dir = e.store.dir().to_path_buf();
    let home = tempfile::tempdir().unwrap();
    let out = procs::command(home.path()).args(["connector", "list", "--edge-dir"]).arg(&dir).output().unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(table.contains("(the newest 256 of 257 connectors") && table.contains("(the newest 256 of 257 fenced clients)"), "{table}");
    assert_eq!(table.lines().filter(|l| l.starts_with("conn_")).count(), 256);
    let out = procs::command(home.path()).args(["connector", "list", "--json", "--edge-dir"]).arg(&dir).output().unwrap();
    let raw: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((raw["connectors"].as_array().unwrap().len(), raw["total_connectors"].clone()), (256, json!(257)));
}
