//! Connector bookkeeping over time, with the edge's injected clock: `last_used`
//! records real MCP use at most once per 24 h, and any activity (use or a token
//! refresh) defers the 30-day inactivity sweep.

mod edge_support;

use edge_support::*;
use herdr_mcp::edge::connectors;
use serde_json::json;

const HOUR: i64 = 3600 * 1000;

fn last_used(e: &InProc) -> Option<i64> {
    connectors::list(&e.store).unwrap()[0].last_used_at_ms
}

#[tokio::test]
async fn last_used_is_throttled_to_once_a_day_and_activity_defers_the_sweep() {
    let e = InProc::start().await;
    let (c, t, conn) = e.tokens().await;
    assert_eq!(last_used(&e), None, "issuing tokens is not MCP use");

    e.clock.advance_ms(HOUR);
    assert_eq!(e.http.mcp(&t.access, "tools/list", json!({})).await.status, 200);
    let first = T0 + HOUR;
    assert_eq!(last_used(&e), Some(first));

    e.clock.advance_ms(23 * HOUR - 1);
    assert_eq!(e.http.mcp(&t.access, "tools/list", json!({})).await.status, 200);
    assert_eq!(last_used(&e), Some(first), "within 24 h of the last write: not rewritten");

    // The access token ends at T0 + 24 h, so rotate to keep calling.
    let r = e.refresh(&c, &t.refresh).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let access = r.json()["access_token"].as_str().unwrap().to_string();
    let refresh = r.json()["refresh_token"].as_str().unwrap().to_string();
    e.clock.set_ms(first + 24 * HOUR);
    assert_eq!(e.http.mcp(&access, "tools/list", json!({})).await.status, 200);
    let used_at = first + 24 * HOUR;
    assert_eq!(last_used(&e), Some(used_at), "24 h later the MCP call is recorded");

    // Idle for 30 days after the last use, not after approval, is what counts.
    e.clock.set_ms(used_at + 30 * 24 * HOUR);
    assert!(connectors::sweep(&e.store).unwrap().is_empty());
    e.clock.advance_ms(1);
    assert_eq!(connectors::sweep(&e.store).unwrap(), vec![conn.clone()]);
    assert_eq!(e.refresh(&c, &refresh).await.oauth_error(), "invalid_grant");
    let row = &connectors::list(&e.store).unwrap()[0];
    assert_eq!((row.status.as_str(), row.revoked_by.as_deref(), row.last_used_at_ms), ("revoked", Some("inactive_30d"), Some(used_at)));
}

#[tokio::test]
async fn a_refresh_counts_as_activity_for_the_sweep() {
    let e = InProc::start().await;
    let (c, t, _) = e.tokens().await;
    e.clock.advance_ms(20 * 24 * HOUR);
    assert_eq!(e.refresh(&c, &t.refresh).await.status, 200);
    e.clock.advance_ms(29 * 24 * HOUR);
    assert!(connectors::sweep(&e.store).unwrap().is_empty(), "49 days after approval but 29 after the refresh");
}
