//! Cost of one atomic commit of a 4 KiB file (`policy::atomic::commit`, the step
//! behind herdr_fs_write / herdr_fs_edit / herdr_fs_patch): wall, system and user
//! time per commit, for a replace of an existing file and for a create of a new
//! one. Their system calls, the figure that does not depend on the load, are
//! counted by running it under `strace -c -f` at two call counts and dividing the
//! difference (see README.md).
//!
//! `cargo bench -p herdr-mcp --bench commit_cost [-- --calls N] [--only replace|create] [--keep-created]`
//! (default 2,000 per round, three rounds, both kinds). `--keep-created` leaves the
//! created files (and says where) instead of removing them, so that a system-call
//! count of the creates does not include their removal.

#[path = "support/mod.rs"]
mod support;
use support::{calls_arg, cpu_times, load_average};
use std::path::Path;
use std::time::Instant;

use herdr_mcp::policy::atomic::{Change, commit};

fn main() {
    let calls = calls_arg(2_000);
    let args: Vec<String> = std::env::args().collect();
    let only = args.iter().position(|a| a == "--only").and_then(|i| args.get(i + 1)).map(String::as_str);
    if !matches!(only, None | Some("replace" | "create")) {
        eprintln!("--only takes replace or create");
        std::process::exit(2);
    }
    let keep_created = args.iter().any(|a| a == "--keep-created");
    let dir = tempfile::tempdir().expect("temp dir");
    // The policy hands commits canonical paths; so does this bench.
    let repo = dir.path().canonicalize().expect("canonical temp dir").join("repo");
    std::fs::create_dir(&repo).expect("create repo dir");
    println!("{calls} commits of 4 KiB per round; load average at start: {}", load_average());
    if only != Some("create") {
        replace(&repo, calls);
    }
    if only != Some("replace") {
        create(&repo, calls);
    }
    println!("load average at end: {}", load_average());
    if keep_created {
        println!("created files kept in {}", dir.keep().display());
    }
}

fn replace(repo: &Path, calls: u32) {
    let target = repo.join("four_k.txt");
    std::fs::write(&target, "a".repeat(4096)).expect("write file");
    let change = Change::Replace { path: target.clone(), bytes: "b".repeat(4096).into_bytes() };
    for round in 1..=3 {
        timed("replace", round, calls, |_| commit(std::slice::from_ref(&change)).expect("replace"));
    }
    assert_eq!(std::fs::read(&target).expect("read back").len(), 4096);
}

/// Every create takes a new name; each round's files go to their own directory.
fn create(repo: &Path, calls: u32) {
    let bytes = "c".repeat(4096).into_bytes();
    for round in 1..=3 {
        let dir = repo.join(format!("created-{round}"));
        std::fs::create_dir(&dir).expect("create round dir");
        timed("create ", round, calls, |i| {
            commit(&[Change::Create { path: dir.join(format!("new-{i}.txt")), bytes: bytes.clone() }]).expect("create")
        });
    }
}

fn timed(what: &str, round: u32, calls: u32, mut one: impl FnMut(u32)) {
    let before = cpu_times();
    let started = Instant::now();
    for i in 0..calls {
        one(i);
    }
    let wall = started.elapsed().as_secs_f64() * 1e6;
    let after = cpu_times();
    let per = |v: f64| v / f64::from(calls.max(1));
    println!(
        "round {round} {what}  wall {:7.2} µs  system {:7.2} µs  user {:7.2} µs per commit",
        per(wall),
        per(after.0 - before.0),
        per(after.1 - before.1)
    );
}
