//! The readable form of the connector inventory that `herdr-mcp connector list`
//! prints (`--json` prints the inventory itself).

use std::fmt::Write;

use super::connectors::INACTIVE_REASON;
use super::connectors_inventory::Inventory;

fn format_ms(ms: Option<i64>) -> String {
    let Some(ms) = ms else { return "-".into() };
    time::OffsetDateTime::from_unix_timestamp_nanos(ms as i128 * 1_000_000)
        .ok()
        .and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok())
        .unwrap_or_else(|| ms.to_string())
}

fn name(n: &Option<String>) -> &str {
    n.as_deref().unwrap_or("(unnamed)")
}

/// The connectors and a line of their live-token totals, then the fenced
/// clients if any. The client id comes last on each row, unpadded: a CIMD one is a whole
/// URL, and it is what `revoke-client` takes.
pub fn render_table(inv: &Inventory) -> String {
    let mut out = String::new();
    if inv.connectors.is_empty() {
        out.push_str("no connectors\n");
    } else {
        let _ = writeln!(
            out,
            "{:<28} {:<24} {:<8} {:<30} {:<30} {:<12} CLIENT",
            "CONNECTOR", "NAME", "STATUS", "AUTHORIZED", "LAST USED", "TOKENS A/R"
        );
        for r in &inv.connectors {
            let status = match (&r.status[..], &r.revoked_by) {
                ("revoked", Some(by)) if by == INACTIVE_REASON => format!("revoked ({by})"),
                _ => r.status.clone(),
            };
            let _ = writeln!(
                out,
                "{:<28} {:<24} {:<8} {:<30} {:<30} {:<12} {}",
                r.connector_id,
                name(&r.client_name),
                status,
                format_ms(Some(r.created_at_ms)),
                format_ms(r.last_used_at_ms),
                format!("{}/{}", r.active_access_tokens, r.active_refresh_tokens),
                r.client_id
            );
        }
    }
    let shown = inv.connectors.len() as i64;
    if shown < inv.total_connectors {
        let _ = writeln!(out, "(the newest {shown} of {} connectors; older ones are not listed)", inv.total_connectors);
    }
    // Only connectors hold tokens: with none, the totals line would say nothing.
    if shown > 0 {
        let t = inv.token_counts;
        let _ = writeln!(out, "live tokens: {} access, {} refresh", t.active_access_tokens, t.active_refresh_tokens);
    }
    if inv.legacy_clients.is_empty() {
        return out;
    }
    let _ = writeln!(out, "\nclients fenced by revoke-client without ever being approved (no connector, no tokens):");
    let _ = writeln!(out, "{:<24} {:<8} {:<30} {:<30} CLIENT", "NAME", "STATUS", "REGISTERED", "REVOKED");
    for c in &inv.legacy_clients {
        let _ = writeln!(
            out,
            "{:<24} {:<8} {:<30} {:<30} {}",
            name(&c.client_name),
            c.status,
            format_ms(c.created_at_ms),
            format_ms(c.revoked_at_ms),
            c.client_id
        );
    }
    let shown = inv.legacy_clients.len() as i64;
    if shown < inv.total_legacy_clients {
        let _ = writeln!(out, "(the newest {shown} of {} fenced clients)", inv.total_legacy_clients);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edge::connectors_inventory::{ConnectorView, EXPLICIT_APPROVAL, LEGACY_ORIGIN, LegacyClient, TokenCounts};

    fn connector(id: &str, status: &str, revoked_by: Option<&str>) -> ConnectorView {
        ConnectorView {
            connector_id: id.into(),
            client_id: "https://app.example/client.json".into(),
            client_name: None,
            status: status.into(),
            grant_origin: EXPLICIT_APPROVAL.into(),
            grant_generation: 1,
            created_at_ms: 0,
            approved_at_ms: 0,
            last_used_at_ms: None,
            revoked_at_ms: None,
            revoked_by: revoked_by.map(str::to_string),
            active_access_tokens: 2,
            active_refresh_tokens: 1,
        }
    }

    fn inventory(connectors: Vec<ConnectorView>, total_connectors: i64, legacy: Vec<LegacyClient>) -> Inventory {
        let total_legacy_clients = legacy.len() as i64;
        Inventory {
            connectors,
            total_connectors,
            legacy_clients: legacy,
            total_legacy_clients,
            token_counts: TokenCounts { active_access_tokens: 2, active_refresh_tokens: 1 },
            observed_at_ms: 0,
        }
    }

    #[test]
    fn rows_end_with_the_client_id_and_show_live_tokens() {
        let inv = inventory(vec![connector("conn_AAAAAAAA", "active", None), connector("conn_BBBBBBBB", "revoked", Some(INACTIVE_REASON))], 2, vec![]);
        let table = render_table(&inv);
        let row = table.lines().find(|l| l.starts_with("conn_AAAAAAAA")).unwrap();
        assert_eq!(row.split_whitespace().collect::<Vec<_>>()[1..], ["(unnamed)", "active", "1970-01-01T00:00:00Z", "-", "2/1", "https://app.example/client.json"]);
        assert!(table.lines().any(|l| l.starts_with("conn_BBBBBBBB") && l.contains("revoked (inactive_30d)")), "{table}");
        assert!(table.contains("live tokens: 2 access, 1 refresh") && !table.contains("newest") && !table.contains("fenced"), "{table}");
    }

    #[test]
    fn a_cut_list_and_fenced_clients_are_shown_as_such() {
        let fenced = LegacyClient {
            client_id: "dcr-0123456789abcdef".into(),
            client_name: Some("Old app".into()),
            grant_origin: LEGACY_ORIGIN.into(),
            status: "revoked".into(),
            created_at_ms: None,
            last_used_at_ms: None,
            revoked_at_ms: Some(86_400_000),
            revoked_by: Some("cli:root".into()),
        };
        let table = render_table(&inventory(vec![], 0, vec![fenced]));
        assert!(table.starts_with("no connectors\n\nclients fenced"), "{table}");
        let row = table.lines().last().unwrap();
        assert_eq!(row.split_whitespace().collect::<Vec<_>>(), ["Old", "app", "revoked", "-", "1970-01-02T00:00:00Z", "dcr-0123456789abcdef"]);
        let cut = render_table(&inventory(vec![connector("conn_AAAAAAAA", "active", None)], 257, vec![]));
        assert!(cut.contains("(the newest 1 of 257 connectors"), "{cut}");
    }
}
