//! What `herdr-mcp connector list` makes of an edge's `GET /connectors` answer.
//!
//! The current answer is the inventory (spec §5, [`Inventory`]). Edges released
//! before it answer a plain list, `{ok, connectors, observed_at_ms}`, whose rows
//! are [`OlderRow`]: no `client_name` (only a `name` that falls back to the client
//! id), no fenced `legacy_clients`, no totals. An operator upgrading workstations
//! before the edge still needs to see and revoke connectors, so that list is
//! accepted for what it holds and [`OlderList::missing`] names what it lacks.
//! Anything that is neither is refused, quoting both reasons.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::connectors_inventory::{ConnectorView, Inventory, LegacyClient, TokenCounts};

/// A connector as the older edges listed it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct OlderRow {
    pub connector_id: String,
    pub client_id: String,
    /// The client's registered name, or its id when it gave none.
    pub name: String,
    pub status: String,
    pub grant_generation: i64,
    pub approved_at_ms: i64,
    pub last_used_at_ms: Option<i64>,
    pub revoked_at_ms: Option<i64>,
    pub revoked_by: Option<String>,
    pub active_access_tokens: i64,
    pub active_refresh_tokens: i64,
}

#[derive(Debug, Clone, Deserialize)]
struct OlderAnswer {
    connectors: Vec<OlderRow>,
    observed_at_ms: i64,
}

/// The older list, the edge's answer as it came (for `--json`), and the fields
/// of the current inventory it does not carry.
#[derive(Debug, Clone)]
pub struct OlderList {
    pub connectors: Vec<OlderRow>,
    pub observed_at_ms: i64,
    pub answer: Value,
    /// Top-level fields first, then per-connector ones as `connectors[].<field>`.
    pub missing: Vec<String>,
}

#[derive(Debug, Clone)]
pub enum Listing {
    Current(Inventory),
    Older(OlderList),
}

/// Reads an edge's `GET /connectors` answer.
pub fn parse_listing(answer: Value) -> Result<Listing, String> {
    let current = match serde_json::from_value::<Inventory>(answer.clone()) {
        Ok(inv) => return Ok(Listing::Current(inv)),
        Err(e) => e,
    };
    match serde_json::from_value::<OlderAnswer>(answer.clone()) {
        Ok(old) => {
            let missing = missing_fields(&answer);
            Ok(Listing::Older(OlderList { connectors: old.connectors, observed_at_ms: old.observed_at_ms, answer, missing }))
        }
        Err(older) => Err(format!("it is neither the connector inventory ({current}) nor the older connector list ({older})")),
    }
}

/// The field names the current inventory and its connector rows serialize to,
/// read off real values so that a field added there is reported here too.
fn current_fields() -> (Vec<String>, Vec<String>) {
    let row = ConnectorView {
        connector_id: String::new(),
        client_id: String::new(),
        client_name: None,
        status: String::new(),
        grant_origin: String::new(),
        grant_generation: 0,
        created_at_ms: 0,
        approved_at_ms: 0,
        last_used_at_ms: None,
        revoked_at_ms: None,
        revoked_by: None,
        active_access_tokens: 0,
        active_refresh_tokens: 0,
    };
    let inv = Inventory {
        connectors: vec![],
        total_connectors: 0,
        legacy_clients: Vec::<LegacyClient>::new(),
        total_legacy_clients: 0,
        token_counts: TokenCounts::default(),
        observed_at_ms: 0,
    };
    let keys = |v: Value| v.as_object().map(|o| o.keys().cloned().collect()).unwrap_or_default();
    (keys(serde_json::json!(inv)), keys(serde_json::json!(row)))
}

fn missing_fields(answer: &Value) -> Vec<String> {
    let (top, per_row) = current_fields();
    let mut missing: Vec<String> = top.into_iter().filter(|k| answer.get(k).is_none()).collect();
    // Without a row there is nothing to tell the per-connector fields by.
    if let Some(rows) = answer.get("connectors").and_then(Value::as_array).filter(|r| !r.is_empty()) {
        let absent = |k: &String| rows.iter().any(|r| r.get(k).is_none());
        missing.extend(per_row.iter().filter(|k| absent(k)).map(|k| format!("connectors[].{k}")));
    }
    missing
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn older_row() -> Value {
        json!({
            "connector_id": "conn_AAAAAAAAAAAA", "client_id": "dcr-0123456789abcdef", "name": "Old app", "status": "active",
            "grant_generation": 1, "approved_at_ms": 5, "last_used_at_ms": null, "revoked_at_ms": null, "revoked_by": null,
            "active_access_tokens": 1, "active_refresh_tokens": 1
        })
    }

    #[test]
    fn the_older_list_is_read_and_its_gaps_named() {
        let answer = json!({"ok": true, "connectors": [older_row()], "observed_at_ms": 7});
        let Ok(Listing::Older(old)) = parse_listing(answer.clone()) else { panic!("not read as the older list") };
        assert_eq!((old.connectors.len(), old.observed_at_ms, &old.answer), (1, 7, &answer));
        assert_eq!(
            old.missing,
            [
                "legacy_clients",
                "token_counts",
                "total_connectors",
                "total_legacy_clients",
                "connectors[].client_name",
                "connectors[].created_at_ms",
                "connectors[].grant_origin"
            ]
        );
        // An empty older list cannot show which row fields it lacks.
        let Ok(Listing::Older(empty)) = parse_listing(json!({"ok": true, "connectors": [], "observed_at_ms": 7})) else { panic!() };
        assert!(empty.missing.iter().all(|m| !m.starts_with("connectors[]")), "{:?}", empty.missing);
    }

    #[test]
    fn neither_shape_is_refused_with_both_reasons() {
        for bad in [json!({"ok": true}), json!({"connectors": "x", "observed_at_ms": 1}), json!([]), json!({"connectors": [{"name": 1}], "observed_at_ms": 1})] {
            let e = parse_listing(bad.clone()).unwrap_err();
            assert!(e.contains("neither the connector inventory (") && e.contains("nor the older connector list ("), "{bad}: {e}");
        }
    }
}
