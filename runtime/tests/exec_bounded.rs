//! A 20 MB output stream stays bounded in memory (the 512 KiB rings) and still
//! reads back by offsets. Alone in its file so that no other test's allocations
//! blur the RSS figures of this process.

mod exec_support;

use exec_support::Rig;

const STREAM_BYTES: u64 = 20 * 1024 * 1024;
const RING: u64 = 512 * 1024;

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_megabytes_of_output_stay_bounded_and_read_back_by_offset() {
    let rig = Rig::new();
    // Warm up the machinery once so the first-use allocations are not counted.
    let warm = rig.start("echo warm").await;
    rig.wait_done(&warm).await;
    let before = rss_kib();

    let id = rig.start(&format!("head -c {STREAM_BYTES} /dev/zero | tr '\\0' 'x'; echo tail-marker >&2")).await;
    let done = rig.wait_done(&id).await;
    assert_eq!(done["exit_code"], 0, "{done}");
    let after = rss_kib();
    let grown = after.saturating_sub(before);
    println!("RSS before {before} KiB, after {after} KiB, grown {grown} KiB for a {} KiB stream", STREAM_BYTES / 1024);
    // The rings hold at most 2 × 512 KiB + 1 MiB; allow generous allocator slack
    // but far below the 20 MiB that keeping the stream would cost.
    assert!(grown < 8 * 1024, "RSS grew by {grown} KiB");

    // Offsets are absolute: the stream's total is 20 MiB, and the oldest held byte
    // is 512 KiB before its end.
    let first = rig.read(&id, "stdout", 0, 1000).await;
    assert_eq!(first["bytes_total"], STREAM_BYTES);
    assert_eq!(first["truncated"], true);
    assert_eq!(first["offset"], STREAM_BYTES - RING);
    assert_eq!(first["next_offset"], STREAM_BYTES - RING + 1000);
    let mid = rig.read(&id, "stdout", STREAM_BYTES - 10, 100).await;
    assert_eq!((mid["truncated"].clone(), mid["text"].clone()), (serde_json::json!(false), serde_json::json!("xxxxxxxxxx")));
    let (all, truncated) = rig.read_all(&id, "stdout").await;
    assert!(truncated);
    assert_eq!(all.len() as u64, RING);
    assert!(all.bytes().all(|b| b == b'x'));
    // The small stderr stream is untouched by stdout's overflow.
    assert_eq!(rig.read_all(&id, "stderr").await, ("tail-marker\n".to_string(), false));
    // herdr_exec's synchronous output window is the last 64 KiB.
    let sync = rig.call("herdr_exec", serde_json::json!({"workspace": "proj", "command": "head -c 200000 /dev/zero | tr '\\0' 'y'"})).await;
    assert_eq!(sync["output"].as_str().unwrap().len(), 65_536);
    assert_eq!(sync["truncated"], true);
    assert_eq!(sync["output_offset"], 200_000 - 65_536);
}
