//! Continuity throughput (run: `cargo bench -p ext-core --bench continuity`).
//!
//! Prints, in one run, plain lines with:
//! - SSE parsing of an 8 MB push stream (agent_output events with 4000-char outputs) fed in
//!   64 KiB chunks, as the native port delivers it;
//! - `Continuity::on_push_event` over a working/settled/output cycle with 100 bindings on
//!   10 workspaces (every settle renders wakes with roster and output).
//!
//! Criterion statistics follow for the same cases.

use std::hint::black_box;
use std::time::Instant;

use criterion::{Criterion, Throughput};
use ext_core::continuity::{Continuity, ConvTarget, PushEvent, SettledStatus, SseParser, WorkspaceRef};

const CHUNK: usize = 64 * 1024;
const OUTPUT_EVENTS: usize = 2_000;

fn sse_stream() -> Vec<u8> {
    let output = "compiling crate ✓ ".repeat(4_000 / 18);
    let mut out = String::new();
    for i in 0..OUTPUT_EVENTS {
        let data = serde_json::json!({"workspace": "w1", "pane": format!("w1:p{}", i % 8), "agent": "claude", "output": output, "seq": i});
        out.push_str(&format!("event: agent_output\ndata: {data}\nid: {i}\n\n"));
        if i % 50 == 0 {
            out.push_str(": keep-alive\n\n");
        }
    }
    out.into_bytes()
}

fn parse_all(bytes: &[u8]) -> usize {
    let mut parser = SseParser::default();
    bytes.chunks(CHUNK).map(|c| parser.push(c).len()).sum()
}

fn bound_state() -> Continuity {
    let mut c = Continuity::default();
    for i in 0..100 {
        let key = format!("https://chatgpt.com/c/{i}");
        let target = ConvTarget::Conversation { site: "chatgpt".into(), conv_key: key.clone() };
        c.bind(&target, WorkspaceRef::Herdr { id: format!("w{}", i % 10) }, None, None, 0).unwrap();
        c.set_auto(&key, true);
    }
    c
}

fn cycle() -> Vec<PushEvent> {
    let mut events = Vec::new();
    for round in 0..10u64 {
        for ws in 0..10 {
            for p in 0..4 {
                let (workspace, pane) = (Some(format!("w{ws}")), format!("w{ws}:p{p}"));
                events.push(PushEvent::AgentWorking { workspace: workspace.clone(), pane: pane.clone(), agent: Some("codex".into()), seq: None });
                events.push(PushEvent::AgentSettled { workspace: workspace.clone(), pane: pane.clone(), agent: None, status: SettledStatus::Done, seq: Some(round * 1_000 + ws * 10 + p), at: Some("t".into()) });
                events.push(PushEvent::AgentOutput { workspace, pane, agent: None, output: "tests passed\n".repeat(40), seq: None });
            }
        }
    }
    events
}

fn run_cycle(events: &[PushEvent]) -> usize {
    let mut c = bound_state();
    events.iter().enumerate().map(|(i, e)| c.on_push_event(e.clone(), i as u64).len()).sum()
}

fn main() {
    let stream = sse_stream();
    let started = Instant::now();
    let parsed = parse_all(&stream);
    let secs = started.elapsed().as_secs_f64();
    println!("sse: {parsed} events, {:.1} MB in {:.1} ms = {:.0} MB/s", stream.len() as f64 / 1e6, secs * 1e3, stream.len() as f64 / 1e6 / secs);

    let events = cycle();
    let started = Instant::now();
    let actions = run_cycle(&events);
    let secs = started.elapsed().as_secs_f64();
    println!("continuity: {} events -> {actions} wakes in {:.1} ms = {:.0} events/s", events.len(), secs * 1e3, events.len() as f64 / secs);

    let mut crit = Criterion::default().configure_from_args();
    let mut group = crit.benchmark_group("continuity");
    group.throughput(Throughput::Bytes(stream.len() as u64));
    group.sample_size(10);
    group.bench_function("sse_8mb_64k_chunks", |b| b.iter(|| parse_all(black_box(&stream))));
    group.throughput(Throughput::Elements(events.len() as u64));
    group.bench_function("on_push_event_cycle", |b| b.iter(|| run_cycle(black_box(&events))));
    group.finish();
    crit.final_summary();
}
