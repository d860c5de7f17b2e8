use super::*;
use crate::activity::query::{Filter, latest};

fn entry(at_ms: i64, tool: &str) -> Entry {
    Entry {
        at_ms,
        caller: "unix".into(),
        caller_detail: None,
        tool: tool.into(),
        root: Some("/r".into()),
        args: "{}".into(),
        outcome: "ok".into(),
        code: None,
        duration_ms: 1,
    }
}

fn count(db: &StateDb) -> i64 {
    db.with(|c| c.query_row("SELECT COUNT(*) FROM activity", [], |r| r.get(0))).unwrap()
}

#[test]
fn rows_older_than_thirty_days_go_and_the_edge_stays() {
    let tmp = tempfile::tempdir().unwrap();
    let db = StateDb::open(tmp.path(), "b").unwrap();
    let now = 10 * MAX_AGE_MS;
    let edge = now - MAX_AGE_MS;
    db.with(|c| insert_batch(c, &[entry(edge - 1, "too_old"), entry(edge, "edge"), entry(now, "new")], now)).unwrap();
    let tools: Vec<String> = db
        .with(|c| latest(c, &Filter { limit: 10, ..Filter::default() }))
        .unwrap()
        .into_iter()
        .map(|e| e.tool)
        .collect();
    assert_eq!(tools, ["new", "edge"]);
}

#[test]
fn at_most_max_rows_are_kept_newest_first() {
    let tmp = tempfile::tempdir().unwrap();
    let db = StateDb::open(tmp.path(), "b").unwrap();
    let now = crate::state::now_ms();
    let first: Vec<Entry> = (0..MAX_ROWS).map(|i| entry(now, &format!("t{i}"))).collect();
    db.with(|c| insert_batch(c, &first, now)).unwrap();
    assert_eq!(count(&db), MAX_ROWS, "exactly the cap is kept whole");
    db.with(|c| insert_batch(c, &[entry(now, "over1"), entry(now, "over2")], now)).unwrap();
    assert_eq!(count(&db), MAX_ROWS);
    let gone: i64 =
        db.with(|c| c.query_row("SELECT COUNT(*) FROM activity WHERE tool IN ('t0', 't1')", [], |r| r.get(0))).unwrap();
    assert_eq!(gone, 0, "the two oldest made room");
    let kept: i64 =
        db.with(|c| c.query_row("SELECT COUNT(*) FROM activity WHERE tool = 't2'", [], |r| r.get(0))).unwrap();
    assert_eq!(kept, 1);
    let newest = db.with(|c| latest(c, &Filter { limit: 1, ..Filter::default() })).unwrap();
    assert_eq!(newest[0].tool, "over2");
}

#[test]
fn the_writer_records_off_thread_and_flushes_on_stop() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Arc::new(StateDb::open(tmp.path(), "b").unwrap());
    let log = ActivityLog::start(Arc::clone(&db));
    let now = crate::state::now_ms();
    for i in 0..1000 {
        log.record(entry(now, &format!("t{i}")));
    }
    log.flush_and_stop();
    assert_eq!(count(&db), 1000);
    assert_eq!(log.dropped(), 0);
    // After stop, recording is a no-op, not a panic.
    log.record(entry(now, "late"));
    assert_eq!(count(&db), 1000);
}

#[test]
fn filters_by_caller_and_time() {
    let tmp = tempfile::tempdir().unwrap();
    let db = StateDb::open(tmp.path(), "b").unwrap();
    let now = crate::state::now_ms();
    let mut ext = entry(now, "from_ext");
    ext.caller = "extension".into();
    db.with(|c| insert_batch(c, &[entry(now - 60_000, "old_unix"), ext, entry(now, "new_unix")], now)).unwrap();
    let only_ext =
        db.with(|c| latest(c, &Filter { caller: Some("extension".into()), limit: 10, ..Filter::default() })).unwrap();
    assert_eq!(only_ext.iter().map(|e| e.tool.as_str()).collect::<Vec<_>>(), ["from_ext"]);
    let recent =
        db.with(|c| latest(c, &Filter { since_ms: Some(now - 1000), limit: 10, ..Filter::default() })).unwrap();
    assert_eq!(recent.len(), 2);
}

/// Recording never waits for the disk: with the database held by someone else
/// (the writer stuck), a burst larger than the queue returns at once and the
/// overflow is counted, not waited for.
#[test]
fn recording_does_not_wait_for_a_stuck_writer() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Arc::new(StateDb::open(tmp.path(), "b").unwrap());
    let log = ActivityLog::start(Arc::clone(&db));
    let now = crate::state::now_ms();
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let holder = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || {
            db.with(|_| {
                held_tx.send(()).unwrap();
                release_rx.recv().ok();
                Ok(())
            })
            .unwrap()
        })
    };
    held_rx.recv().unwrap();
    let started = std::time::Instant::now();
    // The writer may hold one batch besides the queue.
    for i in 0..(QUEUE + BATCH + 1000) {
        log.record(entry(now, &format!("t{i}")));
    }
    let took = started.elapsed();
    assert!(log.dropped() >= 999, "{} dropped", log.dropped());
    assert!(took < std::time::Duration::from_secs(2), "recording waited: {took:?}");
    release_tx.send(()).unwrap();
    holder.join().unwrap();
    log.flush_and_stop();
    assert_eq!(count(&db) as u64 + log.dropped(), (QUEUE + BATCH + 1000) as u64);
}
