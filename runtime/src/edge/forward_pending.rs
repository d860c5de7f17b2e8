//! Durable rows for forwarded mutations (table `link_requests`). A row is
//! written in state `sent` *before* the frame leaves, so even an edge crash
//! leaves evidence that a change may have reached a workstation; the edge never
//! sends a request twice, so a lost answer becomes `uncertain`, not a retry.
//!
//! States: `sent` → `settled` (an answer came back) | `uncertain` (link lost or
//! timed out after sending) | `not_delivered` (the frame could not be queued, or
//! the link answered that the runtime never got it). A late answer still moves an
//! `uncertain` row to `settled` ([`settle_late`]).
//!
//! Idempotency (spec §8 `idem_hit`): a mutation carrying `idempotency_key` is
//! matched against the workstation's rows of the last [`KEEP_FINISHED_MS`]; a hit
//! is never sent again ([`record_sent`] returns the earlier row instead).

use rusqlite::{OptionalExtension, Transaction, params};

use super::relay::{ResumeEntry, ResumeState};
use super::store::EdgeStore;

/// Most unsettled mutations per workstation (spec §8: 256 pending).
pub const MAX_PENDING: i64 = 256;
/// Finished rows are kept this long for inspection (spec §8: 10-min replay TTL).
pub const KEEP_FINISHED_MS: i64 = 10 * 60 * 1000;
/// Most finished rows kept per workstation (spec §8: 512 completed).
pub const MAX_FINISHED: i64 = 512;

#[derive(Debug, thiserror::Error)]
pub enum PendingError {
    #[error("workstation {0} already has {MAX_PENDING} unsettled mutations")]
    Full(String),
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
}

/// An earlier mutation of the same workstation with the same idempotency key
/// (a row not `not_delivered`, inside the replay TTL).
#[derive(Debug, Clone, PartialEq)]
pub struct Earlier {
    pub request_id: String,
    pub state: String,
    pub outcome: Option<String>,
    /// The answer frame, for settled keyed rows.
    pub answer: Option<String>,
}

/// What the ledger decided about a new mutation.
#[derive(Debug, Clone, PartialEq)]
pub enum Claim {
    /// Recorded as `sent`: deliver it.
    Fresh,
    /// The key was already used for this same request; nothing new was recorded.
    Earlier(Earlier),
    /// The key was already used for a different request; nothing new was recorded.
    Conflict { request_id: String },
}

/// Records a mutation as `sent`, unless its idempotency key names an earlier
/// request (then nothing is recorded and the caller must not send). `keyed`: the
/// idempotency key and the request's fingerprint, together. Refuses past
/// [`MAX_PENDING`] unsettled rows. Check and insert share one transaction, so two
/// racing calls with one key cannot both be sent.
pub fn record_sent(
    store: &EdgeStore,
    request_id: &str,
    workstation_id: &str,
    operation: &str,
    keyed: Option<(&str, &str)>,
) -> Result<Claim, PendingError> {
    let now = store.now_ms();
    let (idempotency_key, request_hash) = (keyed.map(|k| k.0), keyed.map(|k| k.1));
    store.write(|tx| {
        if let Some((key, request_hash)) = keyed
            && let Some(claim) = earlier_claim(tx, workstation_id, key, request_hash, now)?
        {
            return Ok(claim);
        }
        let unsettled: i64 = tx.query_row(
            "SELECT COUNT(*) FROM link_requests WHERE workstation_id = ?1 AND state = 'sent'",
            params![workstation_id],
            |r| r.get(0),
        )?;
        if unsettled >= MAX_PENDING {
            return Err(PendingError::Full(workstation_id.into()));
        }
        tx.execute(
            "INSERT INTO link_requests (request_id, workstation_id, operation, idempotency_key, request_hash, state, created_at_ms, updated_at_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, 'sent', ?6, ?6)",
            params![request_id, workstation_id, operation, idempotency_key, request_hash, now],
        )?;
        Ok(Claim::Fresh)
    })
}

/// The claim an idempotency key already holds, without recording anything: lets
/// a retry be answered from the ledger even while the workstation is offline.
pub fn lookup(store: &EdgeStore, workstation_id: &str, idempotency_key: &str, request_hash: &str) -> Result<Option<Claim>, rusqlite::Error> {
    let now = store.now_ms();
    store.read(|tx| earlier_claim(tx, workstation_id, idempotency_key, request_hash, now))
}

fn earlier_claim(tx: &Transaction<'_>, workstation_id: &str, key: &str, request_hash: &str, now: i64) -> Result<Option<Claim>, rusqlite::Error> {
    // A `not_delivered` row never reached the runtime, so its key is free again.
    let earlier = tx
        .query_row(
            "SELECT request_id, state, outcome, answer, request_hash FROM link_requests
             WHERE workstation_id = ?1 AND idempotency_key = ?2 AND state != 'not_delivered'
               AND (state = 'sent' OR updated_at_ms >= ?3)
             ORDER BY created_at_ms DESC, rowid DESC LIMIT 1",
            params![workstation_id, key, now - KEEP_FINISHED_MS],
            |r| {
                Ok((
                    Earlier { request_id: r.get(0)?, state: r.get(1)?, outcome: r.get(2)?, answer: r.get(3)? },
                    r.get::<_, Option<String>>(4)?,
                ))
            },
        )
        .optional()?;
    Ok(earlier.map(|(earlier, hash)| match hash {
        Some(h) if h != request_hash => Claim::Conflict { request_id: earlier.request_id },
        // Rows written before fingerprints were kept cannot be compared: not sending is the safe side.
        _ => Claim::Earlier(earlier),
    }))
}

/// Moves a `sent` row to its final state and prunes old finished rows. `answer`
/// (the answer frame) is kept only for keyed rows: only they can be replayed.
pub fn finish(store: &EdgeStore, request_id: &str, state: &str, outcome: &str, answer: Option<&str>) -> Result<(), rusqlite::Error> {
    settle_where(store, request_id, None, "state = 'sent'", state, outcome, answer).map(|_| ())
}

/// An answer that arrived with nobody waiting for it: after the caller was told
/// `delivery_uncertain` (link lost, timeout, edge restart) or over a newer link.
/// It settles a `sent` or `uncertain` row of `workstation_id` with the real
/// outcome, so a retry with the same key replays it instead of running the change
/// again; the caller who already got an answer is not told twice. False when no
/// such row exists (unknown, already settled, or pruned).
pub fn settle_late(
    store: &EdgeStore,
    workstation_id: &str,
    request_id: &str,
    state: &str,
    outcome: &str,
    answer: Option<&str>,
) -> Result<bool, rusqlite::Error> {
    settle_where(store, request_id, Some(workstation_id), "state IN ('sent', 'uncertain')", state, outcome, answer)
}

fn settle_where(
    store: &EdgeStore,
    request_id: &str,
    workstation_id: Option<&str>,
    from: &str,
    state: &str,
    outcome: &str,
    answer: Option<&str>,
) -> Result<bool, rusqlite::Error> {
    let now = store.now_ms();
    store.write(|tx| {
        let ws: Option<String> = tx
            .query_row("SELECT workstation_id FROM link_requests WHERE request_id = ?1", params![request_id], |r| r.get(0))
            .optional()?;
        let Some(ws) = ws.filter(|ws| workstation_id.is_none_or(|w| w == ws)) else { return Ok(false) };
        let changed = tx.execute(
            &format!(
                "UPDATE link_requests SET state = ?2, outcome = ?3, updated_at_ms = ?4,
                    answer = CASE WHEN idempotency_key IS NOT NULL THEN ?5 END
                 WHERE request_id = ?1 AND {from}"
            ),
            params![request_id, state, outcome, now, answer],
        )?;
        tx.execute(
            "DELETE FROM link_requests WHERE workstation_id = ?1 AND state != 'sent' AND (updated_at_ms < ?2 OR request_id IN (
                SELECT request_id FROM link_requests WHERE workstation_id = ?1 AND state != 'sent'
                ORDER BY updated_at_ms DESC LIMIT -1 OFFSET ?3))",
            params![ws, now - KEEP_FINISHED_MS, MAX_FINISHED],
        )?;
        Ok(changed > 0)
    })
}

/// At edge start: rows left `sent` by a previous process can no longer be
/// answered; they become `uncertain`. Returns how many.
pub fn settle_orphans(store: &EdgeStore) -> Result<usize, rusqlite::Error> {
    let now = store.now_ms();
    store.write(|tx| {
        tx.execute(
            "UPDATE link_requests SET state = 'uncertain', outcome = 'edge_restarted', updated_at_ms = ?1 WHERE state = 'sent'",
            params![now],
        )
    })
}

/// What a reconnecting link is told in `hello_ack`: `resume` lists the requests
/// whose answer the edge still wants (rows `sent` or `uncertain`, reported as
/// `sent` — from the link's side they were sent and never answered), each with the
/// time after which the edge drops its row; `completed` lists the ids it already
/// settled, so the link can forget those answers. Newest first, at most
/// [`MAX_PENDING`] + [`MAX_FINISHED`] and [`MAX_FINISHED`] entries.
pub fn resume_of(store: &EdgeStore, workstation_id: &str) -> Result<(Vec<ResumeEntry>, Vec<String>), rusqlite::Error> {
    let since = store.now_ms() - KEEP_FINISHED_MS;
    store.read(|tx| {
        let mut stmt = tx.prepare(
            "SELECT request_id, operation, CASE WHEN state = 'sent' THEN created_at_ms ELSE updated_at_ms END FROM link_requests
             WHERE workstation_id = ?1 AND (state = 'sent' OR (state = 'uncertain' AND updated_at_ms >= ?2))
             ORDER BY updated_at_ms DESC, rowid DESC LIMIT ?3",
        )?;
        let resume = stmt
            .query_map(params![workstation_id, since, MAX_PENDING + MAX_FINISHED], |r| {
                let since_ms: i64 = r.get(2)?;
                Ok(ResumeEntry {
                    request_id: r.get(0)?,
                    operation: r.get(1)?,
                    state: ResumeState::Sent,
                    deadline_ms: u64::try_from(since_ms + KEEP_FINISHED_MS).unwrap_or(0),
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        let mut stmt = tx.prepare(
            "SELECT request_id FROM link_requests WHERE workstation_id = ?1 AND state = 'settled' AND updated_at_ms >= ?2
             ORDER BY updated_at_ms DESC, rowid DESC LIMIT ?3",
        )?;
        let completed = stmt.query_map(params![workstation_id, since, MAX_FINISHED], |r| r.get(0))?.collect::<Result<Vec<_>, _>>()?;
        Ok((resume, completed))
    })
}

/// (state, outcome) of one row, for tests and diagnostics.
pub fn state_of(store: &EdgeStore, request_id: &str) -> Result<Option<(String, Option<String>)>, rusqlite::Error> {
    store.read(|tx| {
        tx.query_row("SELECT state, outcome FROM link_requests WHERE request_id = ?1", params![request_id], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()
    })
}

/// Every row of one workstation as (request_id, operation, state), oldest first.
pub fn rows_of(store: &EdgeStore, workstation_id: &str) -> Result<Vec<(String, String, String)>, rusqlite::Error> {
    store.read(|tx| {
        let mut stmt = tx.prepare(
            "SELECT request_id, operation, state FROM link_requests WHERE workstation_id = ?1 ORDER BY created_at_ms, rowid",
        )?;
        let rows = stmt.query_map(params![workstation_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        rows.collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edge::clock::ManualClock;
    use std::sync::Arc;

    fn store() -> (tempfile::TempDir, EdgeStore, ManualClock) {
        let tmp = tempfile::tempdir().unwrap();
        EdgeStore::init(tmp.path()).unwrap();
        let clock = ManualClock::new(1_000_000);
        let store = EdgeStore::open(tmp.path(), Arc::new(clock.clone())).unwrap();
        (tmp, store, clock)
    }

    #[test]
    fn sent_then_finished_and_capacity() {
        let (_t, s, _c) = store();
        for i in 0..MAX_PENDING {
            record_sent(&s, &format!("r{i}"), "ws", "herdr_fs_write", None).unwrap();
        }
        assert!(matches!(record_sent(&s, "over", "ws", "herdr_fs_write", None), Err(PendingError::Full(_))));
        record_sent(&s, "other", "ws2", "herdr_fs_write", Some(("k", "h"))).unwrap();
        finish(&s, "r0", "settled", "tool_result", None).unwrap();
        assert_eq!(state_of(&s, "r0").unwrap(), Some(("settled".into(), Some("tool_result".into()))));
        record_sent(&s, "room", "ws", "herdr_exec", None).unwrap();
        // A finished row is final.
        finish(&s, "r0", "uncertain", "late", None).unwrap();
        assert_eq!(state_of(&s, "r0").unwrap().unwrap().0, "settled");
        assert_eq!(settle_orphans(&s).unwrap(), MAX_PENDING as usize + 1);
        assert_eq!(state_of(&s, "other").unwrap().unwrap().0, "uncertain");
    }

    #[test]
    fn finished_rows_expire() {
        let (_t, s, c) = store();
        record_sent(&s, "old", "ws", "herdr_exec", None).unwrap();
        finish(&s, "old", "settled", "tool_result", None).unwrap();
        c.advance_ms(KEEP_FINISHED_MS + 1);
        record_sent(&s, "new", "ws", "herdr_exec", None).unwrap();
        finish(&s, "new", "uncertain", "link_lost", None).unwrap();
        assert_eq!(state_of(&s, "old").unwrap(), None);
        assert_eq!(rows_of(&s, "ws").unwrap(), vec![("new".into(), "herdr_exec".into(), "uncertain".into())]);
    }

    fn earlier_state(c: Claim) -> String {
        match c {
            Claim::Earlier(e) => e.state,
            other => panic!("expected an earlier row, got {other:?}"),
        }
    }

    #[test]
    fn keys_claim_once_per_workstation_within_the_ttl() {
        let (_t, s, c) = store();
        assert_eq!(record_sent(&s, "a1", "ws", "herdr_fs_write", Some(("k", "h1"))).unwrap(), Claim::Fresh);
        // Still running: the same request is not recorded (nor sent) again.
        assert_eq!(earlier_state(record_sent(&s, "a2", "ws", "herdr_fs_write", Some(("k", "h1"))).unwrap()), "sent");
        assert_eq!(record_sent(&s, "a3", "ws", "herdr_fs_write", Some(("k", "h2"))).unwrap(), Claim::Conflict { request_id: "a1".into() });
        // Keys are per workstation; reads and keyless calls never match.
        assert_eq!(record_sent(&s, "b1", "ws2", "herdr_fs_write", Some(("k", "h2"))).unwrap(), Claim::Fresh);
        assert_eq!(lookup(&s, "ws", "other", "h1").unwrap(), None);
        finish(&s, "a1", "settled", "tool_result", Some("answer-frame")).unwrap();
        match lookup(&s, "ws", "k", "h1").unwrap() {
            Some(Claim::Earlier(e)) => assert_eq!((e.request_id.as_str(), e.answer.as_deref()), ("a1", Some("answer-frame"))),
            other => panic!("{other:?}"),
        }
        assert_eq!(rows_of(&s, "ws").unwrap().len(), 1, "hits record nothing");
        // The edge of the replay TTL: still a hit at exactly 10 min, free 1 ms later.
        c.advance_ms(KEEP_FINISHED_MS);
        assert!(matches!(lookup(&s, "ws", "k", "h1").unwrap(), Some(Claim::Earlier(_))));
        c.advance_ms(1);
        assert_eq!(record_sent(&s, "a4", "ws", "herdr_fs_write", Some(("k", "h2"))).unwrap(), Claim::Fresh);
    }

    #[test]
    fn a_row_without_fingerprint_is_never_resent() {
        let (_t, s, _c) = store();
        record_sent(&s, "old", "ws", "herdr_exec", Some(("k", "h"))).unwrap();
        s.write(|tx| tx.execute("UPDATE link_requests SET request_hash = NULL", [])).unwrap();
        assert_eq!(earlier_state(record_sent(&s, "new", "ws", "herdr_exec", Some(("k", "other"))).unwrap()), "sent");
    }

    #[test]
    fn not_delivered_frees_the_key_and_only_keyed_rows_keep_answers() {
        let (_t, s, _c) = store();
        record_sent(&s, "a1", "ws", "herdr_exec", Some(("k", "h"))).unwrap();
        finish(&s, "a1", "not_delivered", "runtime_unavailable", None).unwrap();
        assert_eq!(record_sent(&s, "a2", "ws", "herdr_exec", Some(("k", "h"))).unwrap(), Claim::Fresh);
        record_sent(&s, "n1", "ws", "herdr_exec", None).unwrap();
        finish(&s, "n1", "settled", "tool_result", Some("big answer")).unwrap();
        let answer: Option<String> =
            s.read(|tx| tx.query_row("SELECT answer FROM link_requests WHERE request_id = 'n1'", [], |r| r.get(0))).unwrap();
        assert_eq!(answer, None);
    }

    #[test]
    fn late_answers_settle_uncertain_rows_of_their_workstation() {
        let (_t, s, _c) = store();
        record_sent(&s, "a1", "ws", "herdr_exec", Some(("k", "h"))).unwrap();
        finish(&s, "a1", "uncertain", "link_lost", None).unwrap();
        assert_eq!(earlier_state(lookup(&s, "ws", "k", "h").unwrap().unwrap()), "uncertain");
        assert!(!settle_late(&s, "ws2", "a1", "settled", "tool_result", Some("x")).unwrap(), "another workstation's answer");
        assert!(!settle_late(&s, "ws", "nope", "settled", "tool_result", Some("x")).unwrap());
        assert!(settle_late(&s, "ws", "a1", "settled", "tool_result", Some("x")).unwrap());
        assert!(!settle_late(&s, "ws", "a1", "settled", "tool_result", Some("y")).unwrap(), "settled once");
        match lookup(&s, "ws", "k", "h").unwrap() {
            Some(Claim::Earlier(e)) => assert_eq!((e.state.as_str(), e.answer.as_deref()), ("settled", Some("x"))),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn resume_lists_unanswered_rows_and_completed_ids() {
        let (_t, s, c) = store();
        for id in ["sent1", "unc1", "done1", "nd1", "old"] {
            record_sent(&s, id, "ws", "herdr_fs_write", None).unwrap();
        }
        finish(&s, "old", "uncertain", "link_lost", None).unwrap();
        c.advance_ms(KEEP_FINISHED_MS + 1);
        finish(&s, "unc1", "uncertain", "link_lost", None).unwrap();
        finish(&s, "done1", "settled", "tool_result", None).unwrap();
        finish(&s, "nd1", "not_delivered", "x", None).unwrap();
        let (resume, completed) = resume_of(&s, "ws").unwrap();
        let ids: Vec<&str> = resume.iter().map(|r| r.request_id.as_str()).collect();
        assert_eq!(ids, ["unc1", "sent1"]);
        assert!(resume.iter().all(|r| r.state == ResumeState::Sent && r.operation == "herdr_fs_write"));
        assert_eq!(resume[0].deadline_ms as i64, 1_000_000 + 2 * KEEP_FINISHED_MS + 1);
        assert_eq!(completed, ["done1"]);
        assert_eq!(resume_of(&s, "ws2").unwrap(), (vec![], vec![]));
    }

    #[test]
    fn the_largest_resume_fits_one_link_frame() {
        use crate::edge::relay::{Frame, HelloAck, MAX_LINK_INBOUND, Sender};
        // resume_of's own caps, every entry at its widest: 32-hex ids as the edge
        // makes them, the longest tool name, a 13-digit deadline.
        let id = |i: i64| format!("{i:032x}");
        let resume = (0..MAX_PENDING + MAX_FINISHED)
            .map(|i| ResumeEntry { request_id: id(i), operation: "herdr_exec_start".into(), state: ResumeState::Sent, deadline_ms: 9_999_999_999_999 })
            .collect();
        let completed = (0..MAX_FINISHED).map(|i| id(i + 10_000)).collect();
        let ack = Frame::HelloAck(HelloAck {
            workstation_id: "w".repeat(64),
            ok: true,
            server_version: Some("0.1.0".into()),
            edge_deployment_id: None,
            capabilities: Some(vec!["cancel".into()]),
            reconnect: None,
            resume: Some(resume),
            completed: Some(completed),
            code: None,
            message: None,
        })
        .encode();
        assert!(ack.len() < MAX_LINK_INBOUND, "{} bytes", ack.len());
        assert!(Frame::decode(&ack, Sender::Edge, MAX_LINK_INBOUND).is_ok());
    }
}
