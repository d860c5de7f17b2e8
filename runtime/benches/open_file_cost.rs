//! CPU time per open-and-read of a 4 KiB file inside a managed root: the old way
//! (`resolve_existing`, which canonicalizes with `realpath`, then `metadata` and an
//! open by path) against `Policy::open_existing_file` (one `openat2`, `fstat` on the
//! descriptor). Run in-process on one thread, so scheduler wake-ups and the server
//! around a tool call do not blur the kernel time of the file work itself.
//!
//! `cargo bench -p herdr-mcp --bench open_file_cost [-- --calls N]` (default 200,000
//! per way and round, three alternating rounds).

#[path = "support/mod.rs"]
mod support;
use support::{calls_arg, cpu_times, load_average};
use std::io::Read;
use std::time::Instant;

use herdr_mcp::policy::Policy;

fn main() {
    let calls = calls_arg(200_000);
    let dir = tempfile::tempdir().expect("temp dir");
    let repo = dir.path().join("repo");
    std::fs::create_dir(&repo).expect("create repo dir");
    std::fs::write(repo.join("four_k.txt"), "a".repeat(4096)).expect("write file");
    let policy = Policy::for_tests(vec![repo]);
    println!("open and read four_k.txt, {calls} calls per way and round; load average at start: {}", load_average());
    for round in 1..=3 {
        for (name, way) in [("old: resolve_existing + metadata + open", old_way as fn(&Policy) -> usize), ("new: open_existing_file", new_way)] {
            let before = cpu_times();
            let started = Instant::now();
            for _ in 0..calls {
                assert_eq!(way(&policy), 4096);
            }
            let wall = started.elapsed().as_secs_f64() * 1e6;
            let after = cpu_times();
            let per = |v: f64| v / f64::from(calls);
            println!(
                "round {round} {name:<40} wall {:6.2} µs  system {:6.2} µs  user {:6.2} µs per call",
                per(wall),
                per(after.0 - before.0),
                per(after.1 - before.1)
            );
        }
    }
    println!("load average at end: {}", load_average());
}

fn old_way(policy: &Policy) -> usize {
    let resolved = policy.resolve_existing("four_k.txt").expect("resolve");
    let meta = std::fs::metadata(&resolved.real).expect("stat");
    assert!(meta.is_file());
    let mut buf = Vec::with_capacity(8192);
    std::fs::File::open(&resolved.real).and_then(|mut f| f.read_to_end(&mut buf)).expect("read")
}

fn new_way(policy: &Policy) -> usize {
    let opened = policy.open_existing_file("four_k.txt").expect("open");
    let mut buf = Vec::with_capacity(8192);
    opened.file.take(opened.meta.len()).read_to_end(&mut buf).expect("read")
}

