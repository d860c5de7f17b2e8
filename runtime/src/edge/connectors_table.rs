//! The readable form of the connector inventory that `herdr-mcp connector list`
//! prints (`--json` prints the inventory itself), and of the plainer list an
//! older edge answers instead ([`render_older`]).

use std::fmt::Write;

use super::connectors::INACTIVE_REASON;
use super::connectors_inventory::{ConnectorView, Inventory};
use super::connectors_listing::{OlderList, OlderRow};

pub(crate) fn format_ms(ms: Option<i64>) -> String {
    let Some(ms) = ms else { return "-".into() };
    time::OffsetDateTime::from_unix_timestamp_nanos(ms as i128 * 1_000_000)
        .ok()
        .and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok())
        .unwrap_or_else(|| ms.to_string())
}

fn name(n: &Option<String>) -> &str {
    n.as_deref().unwrap_or("(unnamed)")
}

/// One connector line, whichever answer it came from.
struct Line<'a> {
    connector_id: &'a str,
    name: &'a str,
    status: &'a str,
    revoked_by: Option<&'a str>,
    authorized_at_ms: i64,
    last_used_at_ms: Option<i64>,
    tokens: (i64, i64),
    client_id: &'a str,
}

impl<'a> From<&'a ConnectorView> for Line<'a> {
    fn from(r: &'a ConnectorView) -> Self {
        Line {
            connector_id: &r.connector_id,
            name: name(&r.client_name),
            status: &r.status,
            revoked_by: r.revoked_by.as_deref(),
            authorized_at_ms: r.created_at_ms,
            last_used_at_ms: r.last_used_at_ms,
            tokens: (r.active_access_tokens, r.active_refresh_tokens),
            client_id: &r.client_id,
        }
    }
}

impl<'a> From<&'a OlderRow> for Line<'a> {
    fn from(r: &'a OlderRow) -> Self {
        Line {
            connector_id: &r.connector_id,
            // An older edge put the client id where a client gave no name.
            name: if r.name == r.client_id { "(unnamed)" } else { &r.name },
            status: &r.status,
            revoked_by: r.revoked_by.as_deref(),
            authorized_at_ms: r.approved_at_ms,
            last_used_at_ms: r.last_used_at_ms,
            tokens: (r.active_access_tokens, r.active_refresh_tokens),
            client_id: &r.client_id,
        }
    }
}

/// The header and one row per connector, or `no connectors`. The client id comes
/// last on each row, unpadded: a CIMD one is a whole URL, and it is what
/// `revoke-client` takes.
fn connector_rows<'a>(out: &mut String, lines: impl ExactSizeIterator<Item = Line<'a>>) {
    if lines.len() == 0 {
        out.push_str("no connectors\n");
        return;
    }
    let _ = writeln!(
        out,
        "{:<28} {:<24} {:<8} {:<30} {:<30} {:<12} CLIENT",
        "CONNECTOR", "NAME", "STATUS", "AUTHORIZED", "LAST USED", "TOKENS A/R"
    );
    for r in lines {
        let status = match (r.status, r.revoked_by) {
            ("revoked", Some(by)) if by == INACTIVE_REASON => format!("revoked ({by})"),
            _ => r.status.to_string(),
        };
        let _ = writeln!(
            out,
            "{:<28} {:<24} {:<8} {:<30} {:<30} {:<12} {}",
            r.connector_id,
            r.name,
            status,
            format_ms(Some(r.authorized_at_ms)),
            format_ms(r.last_used_at_ms),
            format!("{}/{}", r.tokens.0, r.tokens.1),
            r.client_id
        );
    }
}

/// The connectors and a line of their live-token totals, then the fenced
/// clients if any.
pub fn render_table(inv: &Inventory) -> String {
    let mut out = String::new();
    connector_rows(&mut out, inv.connectors.iter().map(Line::from));
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

/// An older edge's list: its connectors as [`render_table`] shows them, then
/// what that edge could not say. Its token counts are the older edge's own
/// (they may include tokens of a superseded grant generation).
pub fn render_older(list: &OlderList) -> String {
    let mut out = String::new();
    connector_rows(&mut out, list.connectors.iter().map(Line::from));
    let _ = writeln!(out, "{}", older_note(list));
    out
}

/// Says the edge predates the inventory and which of its fields are missing.
pub fn older_note(list: &OlderList) -> String {
    format!(
        "(this edge is older than the connector inventory: its answer lacks {}; clients fenced by revoke-client and \
         live-token totals cannot be shown until the edge is upgraded)",
        list.missing.join(", ")
    )
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

    #[test]
    fn an_older_list_shows_its_rows_and_what_it_lacks() {
        let row = |id: &str, name: &str| OlderRow {
            connector_id: id.into(),
            client_id: "dcr-0123456789abcdef".into(),
            name: name.into(),
            status: "revoked".into(),
            grant_generation: 2,
            approved_at_ms: 86_400_000,
            last_used_at_ms: None,
            revoked_at_ms: Some(86_400_001),
            revoked_by: Some(INACTIVE_REASON.into()),
            active_access_tokens: 0,
            active_refresh_tokens: 0,
        };
        let list = OlderList {
            connectors: vec![row("conn_AAAAAAAA", "Old app"), row("conn_BBBBBBBB", "dcr-0123456789abcdef")],
            observed_at_ms: 0,
            answer: serde_json::Value::Null,
            missing: vec!["legacy_clients".into(), "connectors[].client_name".into()],
        };
        let table = render_older(&list);
        let cells = |id: &str| table.lines().find(|l| l.starts_with(id)).unwrap().split_whitespace().skip(1).collect::<Vec<_>>().join(" ");
        assert_eq!(cells("conn_AAAAAAAA"), "Old app revoked (inactive_30d) 1970-01-02T00:00:00Z - 0/0 dcr-0123456789abcdef");
        assert!(cells("conn_BBBBBBBB").starts_with("(unnamed) "), "a name that is the client id is no name: {table}");
        assert!(table.trim_end().ends_with("lacks legacy_clients, connectors[].client_name; clients fenced by revoke-client and live-token totals cannot be shown until the edge is upgraded)"), "{table}");
        assert!(!table.contains("live tokens:"), "{table}");
    }
}
