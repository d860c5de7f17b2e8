//! Sanitizer throughput on 5 MB tool results (run: `cargo bench -p ext-core --bench sanitize`).
//!
//! Three shapes of a large `CallToolResult`: a text dump (a file read or command output,
//! duplicated into `structuredContent` as real tools do), a base64 image block, and a wide
//! JSON listing. Criterion reports its statistics; a plain MB/s line per shape is printed
//! first so one run gives the figures without reading criterion's output.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ext_core::sanitize::{sanitize, SanitizeLimits};
use serde_json::{json, Value};
use std::hint::black_box;
use std::time::Instant;

const TARGET: usize = 5 * 1024 * 1024;

fn text_dump() -> Value {
    let line = "2026-11-30T03:00:00Z INFO compiling crate foo v0.1.0 (/work/foo) with 12 warnings\n";
    let text = line.repeat(TARGET / 2 / line.len());
    json!({"content": [{"type": "text", "text": text}], "structuredContent": {"ok": true, "stdout": text}})
}

fn image_block() -> Value {
    // PNG signature followed by pseudo-random payload, base64 encoded by hand.
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    while bytes.len() < TARGET / 4 * 3 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        bytes.push((x >> 32) as u8);
    }
    let data: String = bytes
        .chunks(3)
        .flat_map(|c| {
            let n = (u32::from(c[0]) << 16) | (u32::from(*c.get(1).unwrap_or(&0)) << 8) | u32::from(*c.get(2).unwrap_or(&0));
            (0..4).map(move |i| A[((n >> (18 - 6 * i)) & 63) as usize] as char)
        })
        .collect();
    json!({"content": [{"type": "image", "data": data, "mimeType": "image/png"}]})
}

fn listing() -> Value {
    let entry = |i: usize| json!({"path": format!("src/module_{i}/file_{i}.rs"), "size": i * 37, "kind": "file"});
    let one = serde_json::to_string(&entry(1000)).unwrap().len();
    let entries: Vec<Value> = (0..TARGET / one).map(entry).collect();
    json!({"content": [{"type": "text", "text": "listing"}], "structuredContent": {"ok": true, "entries": entries}})
}

fn report(name: &str, input: &Value) {
    let bytes = serde_json::to_string(input).unwrap().len();
    let limits = SanitizeLimits::default();
    let rounds = 20;
    let start = Instant::now();
    let mut out_len = 0;
    for _ in 0..rounds {
        out_len = serde_json::to_string(&sanitize(black_box(input), &limits)).unwrap().len();
    }
    let secs = start.elapsed().as_secs_f64() / f64::from(rounds);
    println!(
        "sanitize {name}: {:.1} MB in, {out_len} bytes out, {:.2} ms/op, {:.0} MB/s",
        bytes as f64 / 1e6,
        secs * 1e3,
        bytes as f64 / 1e6 / secs
    );
}

fn bench(c: &mut Criterion) {
    let shapes = [("text_dump", text_dump()), ("image_block", image_block()), ("listing", listing())];
    for (name, input) in &shapes {
        report(name, input);
    }
    let mut group = c.benchmark_group("sanitize_5mb");
    group.sample_size(20);
    for (name, input) in &shapes {
        group.throughput(Throughput::Bytes(serde_json::to_string(input).unwrap().len() as u64));
        group.bench_function(*name, |b| b.iter(|| sanitize(black_box(input), &SanitizeLimits::default())));
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
