//! The link's retry pace: a link whose every attempt fails waits 0.5 s, 1 s, 2 s,
//! 4 s … between attempts (never hammering the edge or the runtime), and a stop
//! during a wait ends it at once. Each attempt starts by asking the local runtime
//! for its identity, so a Unix socket that hangs up on every connection both makes
//! each attempt fail and timestamps it.

use std::time::{Duration, Instant};

use herdr_mcp::link::{LinkConfig, MAX_BACKOFF, MIN_BACKOFF, run};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(20);
/// Room for one failed attempt plus scheduling on a loaded 2-core machine.
const SLACK: Duration = Duration::from_millis(1500);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_attempts_back_off_exponentially_and_stop_ends_the_wait() {
    assert_eq!((MIN_BACKOFF, MAX_BACKOFF), (Duration::from_millis(500), Duration::from_secs(30)));
    let tmp = tempfile::tempdir().unwrap();
    let socket = tmp.path().join("rt.sock");
    let listener = tokio::net::UnixListener::bind(&socket).unwrap();
    let cfg = LinkConfig {
        // Never reached: every attempt fails at the runtime first.
        edge: "http://127.0.0.1:9".into(),
        workstation_id: "dev_backoff".into(),
        secret: "devsec_backoff".into(),
        socket,
        name: None,
        ca_file: None,
    };
    let stop = CancellationToken::new();
    let link = tokio::spawn(run(cfg, stop.clone()));

    let mut attempts = Vec::new();
    for i in 0..5 {
        let (conn, _) = tokio::time::timeout(WAIT, listener.accept()).await.unwrap_or_else(|_| panic!("attempt {i} never came")).unwrap();
        attempts.push(Instant::now());
        drop(conn);
    }
    let gaps: Vec<Duration> = attempts.windows(2).map(|w| w[1] - w[0]).collect();
    for (i, gap) in gaps.iter().enumerate() {
        let backoff = MIN_BACKOFF * 2u32.pow(i as u32);
        assert!(*gap >= backoff && *gap < backoff + SLACK, "gap {i} was {gap:?}, expected {backoff:?} (+ up to {SLACK:?}); all: {gaps:?}");
    }

    // Now inside an 8 s wait: a stop must not sit it out.
    let stopped_at = Instant::now();
    stop.cancel();
    let ended = tokio::time::timeout(Duration::from_secs(2), link).await.expect("the link kept waiting after stop").unwrap();
    assert_eq!(ended, Ok(()));
    assert!(stopped_at.elapsed() < Duration::from_secs(2));
}
