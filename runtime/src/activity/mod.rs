//! The activity log: one row per `tools/call` the runtime served, in `state.db`
//! (table `activity`, migration v4), so the person at the machine can read
//! afterwards who did what (`herdr-mcp log`, the options page through `GET
//! /activity`).
//!
//! Recording stays off the hot path: a call builds a small [`Entry`] (its
//! argument summary already redacted, see [`redact`]) and hands it to a bounded
//! channel with `try_send`; one writer thread inserts what has queued up in a
//! single transaction and prunes the table to [`MAX_AGE_MS`] and [`MAX_ROWS`].
//! When the queue is full (the disk is stuck) the entry is dropped and counted,
//! never waited for.

pub mod caller;
pub mod cli;
pub mod http;
pub mod query;
pub mod redact;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use rusqlite::{Connection, params};
use serde::Serialize;

use crate::state::StateDb;

pub use caller::Caller;

/// Rows older than this are pruned (30 days).
pub const MAX_AGE_MS: i64 = 30 * 24 * 3600 * 1000;
/// At most this many rows are kept; the oldest go first.
pub const MAX_ROWS: i64 = 50_000;
/// Entries queued for the writer at most; beyond it new ones are dropped.
const QUEUE: usize = 4096;
/// Entries written in one transaction at most.
const BATCH: usize = 512;

/// `HERDR_MCP_ACTIVITY_LOG=off` (or 0, false, no) turns the log off; on by default.
pub const ENABLE_ENV: &str = "HERDR_MCP_ACTIVITY_LOG";

pub fn enabled_by_env() -> bool {
    !matches!(
        std::env::var(ENABLE_ENV).as_deref().map(str::to_ascii_lowercase).as_deref(),
        Ok("off" | "0" | "false" | "no")
    )
}

/// One served call, as stored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Entry {
    /// Start of the call, milliseconds since the epoch.
    pub at_ms: i64,
    /// `extension`, `unix`, `tcp`, `edge` or `stdio`.
    pub caller: String,
    /// More about the caller when known (the client name it sent, the edge request).
    pub caller_detail: Option<String>,
    pub tool: String,
    /// The managed root the call worked in, when it can be told.
    pub root: Option<String>,
    /// The redacted arguments, compact JSON.
    pub args: String,
    /// `ok` or `error`.
    pub outcome: String,
    /// The error code of a failed call.
    pub code: Option<String>,
    pub duration_ms: i64,
}

/// The sending side, shared by every request; dropping the last one lets the
/// writer finish what is queued and stop.
pub struct ActivityLog {
    tx: Mutex<Option<SyncSender<Entry>>>,
    writer: Mutex<Option<JoinHandle<()>>>,
    dropped: Arc<AtomicU64>,
}

impl ActivityLog {
    /// Starts the writer thread over `db`.
    pub fn start(db: Arc<StateDb>) -> Arc<ActivityLog> {
        let (tx, rx) = std::sync::mpsc::sync_channel(QUEUE);
        let writer = std::thread::Builder::new()
            .name("activity-log".into())
            .spawn(move || write_loop(&db, rx))
            .map_err(|e| tracing::warn!("activity log off: cannot start its writer: {e}"))
            .ok();
        Arc::new(ActivityLog { tx: Mutex::new(Some(tx)), writer: Mutex::new(writer), dropped: Arc::default() })
    }

    /// Queues `entry` without waiting.
    pub fn record(&self, entry: Entry) {
        let tx = self.tx.lock().unwrap_or_else(|p| p.into_inner());
        let Some(tx) = tx.as_ref() else { return };
        match tx.try_send(entry) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                let n = self.dropped.fetch_add(1, Ordering::Relaxed);
                if n.is_power_of_two() {
                    tracing::warn!("activity log queue full: {} entries not recorded so far", n + 1);
                }
            }
            Err(TrySendError::Disconnected(_)) => {}
        }
    }

    /// Entries dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Writes everything queued so far and stops the writer (shutdown, tests).
    pub fn flush_and_stop(&self) {
        self.tx.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(writer) = self.writer.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = writer.join();
        }
    }
}

impl Drop for ActivityLog {
    fn drop(&mut self) {
        self.flush_and_stop();
    }
}

fn write_loop(db: &StateDb, rx: Receiver<Entry>) {
    let mut batch = Vec::with_capacity(BATCH);
    while let Ok(first) = rx.recv() {
        batch.push(first);
        while batch.len() < BATCH {
            match rx.try_recv() {
                Ok(e) => batch.push(e),
                Err(_) => break,
            }
        }
        let now = crate::state::now_ms();
        if let Err(e) = db.with(|c| insert_batch(c, &batch, now)) {
            tracing::warn!("activity log: cannot record {} calls: {e}", batch.len());
        }
        batch.clear();
    }
}

/// Inserts `entries` and prunes, in one transaction.
pub fn insert_batch(conn: &mut Connection, entries: &[Entry], now_ms: i64) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    {
        let mut stmt = tx.prepare_cached(
            "INSERT INTO activity (at_ms, caller, caller_detail, tool, root, args, outcome, code, duration_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )?;
        for e in entries {
            stmt.execute(params![
                e.at_ms,
                e.caller,
                e.caller_detail,
                e.tool,
                e.root,
                e.args,
                e.outcome,
                e.code,
                e.duration_ms
            ])?;
        }
    }
    prune(&tx, now_ms)?;
    tx.commit()
}

/// Drops rows older than [`MAX_AGE_MS`] and all but the newest [`MAX_ROWS`].
pub fn prune(conn: &Connection, now_ms: i64) -> rusqlite::Result<()> {
    conn.execute("DELETE FROM activity WHERE at_ms < ?1", [now_ms - MAX_AGE_MS])?;
    // The seq span bounds the row count from above (rows only leave from the
    // old end), so the exact count is only walked when the span exceeds the cap.
    let span: Option<i64> = conn.query_row("SELECT MAX(seq) - MIN(seq) + 1 FROM activity", [], |r| r.get(0))?;
    if span.unwrap_or(0) > MAX_ROWS {
        conn.execute(
            "DELETE FROM activity WHERE seq < (SELECT seq FROM activity ORDER BY seq DESC LIMIT 1 OFFSET ?1)",
            [MAX_ROWS - 1],
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
