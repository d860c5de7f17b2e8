//! Cost of one atomic replace of a 4 KiB file (`policy::atomic::commit`, the step
//! behind herdr_fs_write / herdr_fs_edit / herdr_fs_patch): wall, system and user
//! time per commit. Its system calls, the figure that does not depend on the load,
//! are counted by running it under `strace -c -f` at two call counts and dividing
//! the difference (see README.md).
//!
//! `cargo bench -p herdr-mcp --bench commit_cost [-- --calls N]` (default 2,000 per
//! round, three rounds).

#[path = "support/mod.rs"]
mod support;
use support::{calls_arg, cpu_times, load_average};
use std::time::Instant;

use herdr_mcp::policy::atomic::{Change, commit};

fn main() {
    let calls = calls_arg(2_000);
    let dir = tempfile::tempdir().expect("temp dir");
    // The policy hands commits canonical paths; so does this bench.
    let repo = dir.path().canonicalize().expect("canonical temp dir").join("repo");
    std::fs::create_dir(&repo).expect("create repo dir");
    let target = repo.join("four_k.txt");
    std::fs::write(&target, "a".repeat(4096)).expect("write file");
    let change = Change::Write { path: target.clone(), bytes: "b".repeat(4096).into_bytes() };
    println!("replace four_k.txt, {calls} commits per round; load average at start: {}", load_average());
    for round in 1..=3 {
        let before = cpu_times();
        let started = Instant::now();
        for _ in 0..calls {
            commit(std::slice::from_ref(&change)).expect("commit");
        }
        let wall = started.elapsed().as_secs_f64() * 1e6;
        let after = cpu_times();
        let per = |v: f64| v / f64::from(calls.max(1));
        println!(
            "round {round} commit  wall {:7.2} µs  system {:7.2} µs  user {:7.2} µs per commit",
            per(wall),
            per(after.0 - before.0),
            per(after.1 - before.1)
        );
    }
    assert_eq!(std::fs::read(&target).expect("read back").len(), 4096);
    println!("load average at end: {}", load_average());
}

