//! Reading the activity log: newest first, bounded, optionally since a time
//! and for one caller kind.

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::{Value, json};

use super::Entry;

/// Most rows one read returns.
pub const MAX_LIMIT: usize = 1000;

#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub since_ms: Option<i64>,
    pub caller: Option<String>,
    pub limit: usize,
}

/// The newest entries matching `filter`, newest first. A database without the
/// table (older schema, opened read-only) has no entries.
pub fn latest(conn: &Connection, filter: &Filter) -> rusqlite::Result<Vec<Entry>> {
    let exists: Option<i64> = conn
        .query_row("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'activity'", [], |r| r.get(0))
        .optional()?;
    if exists.is_none() {
        return Ok(Vec::new());
    }
    let limit = filter.limit.clamp(1, MAX_LIMIT) as i64;
    let mut stmt = conn.prepare_cached(
        "SELECT at_ms, caller, caller_detail, tool, root, args, outcome, code, duration_ms FROM activity
         WHERE at_ms >= ?1 AND (?2 IS NULL OR caller = ?2)
         ORDER BY seq DESC LIMIT ?3",
    )?;
    let rows = stmt.query_map(params![filter.since_ms.unwrap_or(i64::MIN), filter.caller, limit], |r| {
        Ok(Entry {
            at_ms: r.get(0)?,
            caller: r.get(1)?,
            caller_detail: r.get(2)?,
            tool: r.get(3)?,
            root: r.get(4)?,
            args: r.get(5)?,
            outcome: r.get(6)?,
            code: r.get(7)?,
            duration_ms: r.get(8)?,
        })
    })?;
    rows.collect()
}

/// One entry as JSON: `args` parsed back into an object, `time` in RFC 3339.
pub fn entry_json(e: &Entry) -> Value {
    json!({
        "time": rfc3339(e.at_ms),
        "at_ms": e.at_ms,
        "caller": e.caller,
        "caller_detail": e.caller_detail,
        "tool": e.tool,
        "root": e.root,
        "args": serde_json::from_str::<Value>(&e.args).unwrap_or_else(|_| Value::from(e.args.clone())),
        "outcome": e.outcome,
        "code": e.code,
        "duration_ms": e.duration_ms,
    })
}

/// Milliseconds since the epoch as RFC 3339 UTC with milliseconds.
pub fn rfc3339(ms: i64) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    let f = time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");
    t.format(&f).unwrap_or_default()
}
