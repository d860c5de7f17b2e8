//! `herdr-mcp log`: prints the activity log of this machine's runtime, newest
//! last (like a log), from `state.db` opened read-only.

use std::path::PathBuf;

use serde_json::json;

use super::query::{Filter, entry_json, latest, rfc3339};

pub const LOG_ABOUT: &str = "\
Print the tool calls this machine's runtime served: time, caller (extension, unix, tcp,
edge, stdio), tool, managed root, the arguments with contents left out (file contents,
patches, prompt texts and secret-like paths never reach the log), outcome and duration.

The log lives in state.db next to the runtime's other state and keeps 30 days, at most
50,000 calls.";

#[derive(clap::Args, Debug)]
pub struct LogArgs {
    /// Only calls since then: a duration back from now (90s, 15m, 2h, 7d, 1h30m)
    /// or a UTC time (2026-12-01, 2026-12-01T08:30, 2026-12-01T08:30:00Z)
    #[arg(long, value_name = "DURATION|TIME")]
    since: Option<String>,
    /// One JSON document: {"entries":[…]} (oldest first), for scripts
    #[arg(long)]
    json: bool,
    /// At most this many calls, the newest ones (1–1000)
    #[arg(long, default_value_t = 100, value_name = "N")]
    limit: usize,
    /// Only calls from this caller kind (extension, unix, tcp, edge, stdio)
    #[arg(long, value_name = "KIND")]
    caller: Option<String>,
    /// Directory of the state database [default: $HERDR_MCP_STATE_DIR, else
    /// $XDG_STATE_HOME/herdr-mcp, else ~/.local/state/herdr-mcp]
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
}

pub fn run(args: LogArgs) -> anyhow::Result<()> {
    let now = crate::state::now_ms();
    let since_ms = args.since.as_deref().map(|s| parse_since(s, now)).transpose().map_err(anyhow::Error::msg)?;
    let (dir, _) = crate::state::state_dir_from_env(args.state_dir.as_deref());
    let path = dir?.join(crate::state::DB_FILE);
    let filter = Filter { since_ms, caller: args.caller, limit: args.limit };
    let mut entries = if path.exists() {
        let conn = rusqlite::Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .map_err(|e| anyhow::anyhow!("cannot open {}: {e}", path.display()))?;
        conn.busy_timeout(crate::state::BUSY_TIMEOUT)?;
        latest(&conn, &filter)
            .map_err(|e| anyhow::anyhow!("cannot read the activity log in {}: {e}", path.display()))?
    } else {
        Vec::new()
    };
    entries.reverse();
    if args.json {
        println!("{}", json!({"entries": entries.iter().map(entry_json).collect::<Vec<_>>()}));
        return Ok(());
    }
    if entries.is_empty() {
        eprintln!(
            "no tool calls recorded{} ({})",
            if since_ms.is_some() { " in that time" } else { "" },
            path.display()
        );
        return Ok(());
    }
    for e in &entries {
        let outcome = match &e.code {
            Some(code) => format!("error:{code}"),
            None => e.outcome.clone(),
        };
        println!(
            "{}  {:<9} {:<22} {:<12} {:>6}ms  {}  {}",
            rfc3339(e.at_ms),
            e.caller,
            e.tool,
            outcome,
            e.duration_ms,
            e.root.as_deref().unwrap_or("-"),
            e.args
        );
    }
    Ok(())
}

/// `--since`: a duration back from `now_ms`, or a UTC date/time.
pub fn parse_since(s: &str, now_ms: i64) -> Result<i64, String> {
    let s = s.trim();
    if let Some(ms) = parse_duration_ms(s) {
        return Ok(now_ms - ms);
    }
    parse_utc_ms(s).ok_or_else(|| {
        format!(
            "--since {s:?}: give a duration (90s, 15m, 2h, 7d, 1h30m) or a UTC time (2026-12-01, 2026-12-01T08:30:00Z)"
        )
    })
}

fn parse_duration_ms(s: &str) -> Option<i64> {
    let mut total: i64 = 0;
    let mut digits = String::new();
    let mut any = false;
    for ch in s.chars() {
        if ch.is_ascii_digit() {
            digits.push(ch);
            continue;
        }
        let unit: i64 = match ch {
            's' => 1000,
            'm' => 60_000,
            'h' => 3_600_000,
            'd' => 86_400_000,
            'w' => 7 * 86_400_000,
            _ => return None,
        };
        let n: i64 = digits.parse().ok()?;
        total = total.checked_add(n.checked_mul(unit)?)?;
        digits.clear();
        any = true;
    }
    (any && digits.is_empty()).then_some(total)
}

fn parse_utc_ms(s: &str) -> Option<i64> {
    let s = s.strip_suffix('Z').unwrap_or(s);
    let (date, clock) = match s.split_once(['T', ' ']) {
        Some((d, c)) => (d, Some(c)),
        None => (s, None),
    };
    let mut d = date.split('-');
    let (y, mo, da) = (d.next()?.parse::<i32>().ok()?, d.next()?.parse::<u8>().ok()?, d.next()?.parse::<u8>().ok()?);
    if d.next().is_some() {
        return None;
    }
    let date = time::Date::from_calendar_date(y, time::Month::try_from(mo).ok()?, da).ok()?;
    let (h, mi, sec) = match clock {
        None => (0, 0, 0),
        Some(c) => {
            let mut p = c.split(':');
            let h = p.next()?.parse::<u8>().ok()?;
            let mi = p.next()?.parse::<u8>().ok()?;
            let sec = p.next().map(|x| x.split('.').next().unwrap_or("0").parse::<u8>().ok()).unwrap_or(Some(0))?;
            if p.next().is_some() {
                return None;
            }
            (h, mi, sec)
        }
    };
    let t = date.with_hms(h, mi, sec).ok()?.assume_utc();
    Some((t.unix_timestamp_nanos() / 1_000_000) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_takes_durations_and_utc_times() {
        let now = 1_800_000_000_000;
        assert_eq!(parse_since("90s", now), Ok(now - 90_000));
        assert_eq!(parse_since("1h30m", now), Ok(now - 5_400_000));
        assert_eq!(parse_since("7d", now), Ok(now - 7 * 86_400_000));
        assert_eq!(parse_since("1970-01-02", now), Ok(86_400_000));
        assert_eq!(parse_since("1970-01-01T01:00", now), Ok(3_600_000));
        assert_eq!(parse_since("1970-01-01T00:00:05Z", now), Ok(5000));
        for bad in ["", "5", "5x", "h", "2026-13-01", "yesterday", "1970-01-01T25:00"] {
            assert!(parse_since(bad, now).is_err(), "{bad:?}");
        }
    }
}
