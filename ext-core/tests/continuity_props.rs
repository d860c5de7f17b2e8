//! Properties of the continuity parts that take outside input: the push stream, wake
//! texts, the progress fingerprint and handoff packets. Arbitrary input never panics and
//! every bound holds.

use proptest::prelude::*;

use ext_core::continuity::handoff::{MAX_PACKET_CHARS, extract_packet};
use ext_core::continuity::progress::{FINGERPRINT_CHARS, fingerprint};
use ext_core::continuity::push_event::{DEFAULT_MAX_BLOCK_BYTES, PushEvent, SseParser};
use ext_core::continuity::render::{
    Lang, MAX_OUTPUT_CHARS, MAX_ROSTER_CHARS, WakeFacts, WakeKind, is_wake_text, render, roster,
};
use ext_core::continuity::push_event::AgentInfo;

fn wire_event() -> impl Strategy<Value = String> {
    let text = "[a-zA-Z0-9 日本é\"\\\\{}:\n\t]{0,40}";
    prop_oneof![
        (text, text).prop_map(|(pane, output)| {
            let data = serde_json::json!({"workspace": "w1", "pane": pane, "output": output, "seq": 1});
            format!("event: agent_output\ndata: {data}\n\n")
        }),
        (text, 0u64..5).prop_map(|(pane, seq)| {
            let data = serde_json::json!({"workspace": "w1", "pane": pane, "status": "done", "seq": seq});
            format!("event: agent_settled\r\ndata: {data}\r\n\r\n")
        }),
        Just(": keep-alive\n\n".to_owned()),
        Just("event: pane_upsert\ndata: {}\n\n".to_owned()),
        (0u64..1000).prop_map(|n| format!("event: lagged\ndata: {{\"dropped\":{n}}}\n\n")),
    ]
}

fn parse_in_chunks(bytes: &[u8], cuts: &[usize]) -> Vec<PushEvent> {
    let mut parser = SseParser::default();
    let mut out = Vec::new();
    let mut at = 0;
    for &cut in cuts {
        let end = (at + cut).min(bytes.len());
        out.extend(parser.push(&bytes[at..end]).into_iter().map(|r| r.expect("valid wire")));
        at = end;
    }
    out.extend(parser.push(&bytes[at..]).into_iter().map(|r| r.expect("valid wire")));
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn any_chunking_of_a_valid_stream_gives_the_same_events(
        events in prop::collection::vec(wire_event(), 1..12),
        cuts in prop::collection::vec(1usize..50, 0..40),
    ) {
        let wire = events.concat();
        let whole = parse_in_chunks(wire.as_bytes(), &[]);
        prop_assert_eq!(parse_in_chunks(wire.as_bytes(), &cuts), whole);
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_blocks_stay_bounded(
        bytes in prop::collection::vec(any::<u8>(), 0..2000),
        limit in 1usize..300,
    ) {
        let mut parser = SseParser::new(limit);
        for chunk in bytes.chunks(7) {
            let _ = parser.push(chunk);
        }
        let mut parser = SseParser::new(DEFAULT_MAX_BLOCK_BYTES);
        let _ = parser.push(&bytes);
    }

    #[test]
    fn wake_texts_are_bounded_and_recognisable(
        output in "\\PC{0,5000}",
        agent in "\\PC{0,30}",
        panes in 0usize..80,
        lang in prop_oneof![Just(Lang::En), Just(Lang::Zh), Just(Lang::Ja)],
        custom in prop::option::of("\\PC{0,80}"),
    ) {
        let agents: Vec<AgentInfo> = (0..panes)
            .map(|i| AgentInfo {
                pane: Some(format!("w1:p{i}")),
                status: Some(if i % 2 == 0 { "working".into() } else { "idle".into() }),
                name: Some(agent.clone()),
                terminal_title: Some(output.chars().take(300).collect()),
                cwd: Some(format!("/home/u/{}", output.chars().take(90).collect::<String>())),
                ..Default::default()
            })
            .collect();
        let facts = WakeFacts {
            agent: agent.clone(),
            pane: "w1:p0".into(),
            status: "done".into(),
            workspace_id: "w1".into(),
            output: output.clone(),
            agents,
            ..Default::default()
        };
        prop_assert!(roster(lang, &facts).chars().count() <= MAX_ROSTER_CHARS);
        for kind in [WakeKind::Round, WakeKind::Partial, WakeKind::Progress, WakeKind::Exec] {
            let text = render(kind, lang, custom.as_deref(), &facts);
            prop_assert!(is_wake_text(&text), "{}", text);
            prop_assert!(!text.contains("\n\n\n"));
            let budget = 2_000 + agent.chars().count() * 4 + MAX_OUTPUT_CHARS + MAX_ROSTER_CHARS + custom.as_ref().map_or(0, |c| c.chars().count() * 4);
            prop_assert!(text.chars().count() <= budget, "{} > {}", text.chars().count(), budget);
        }
    }

    #[test]
    fn fingerprints_are_bounded_and_stable(output in "\\PC{0,3000}") {
        let print = fingerprint(&output);
        prop_assert!(print.chars().count() <= FINGERPRINT_CHARS);
        prop_assert_eq!(fingerprint(&output), print);
    }

    #[test]
    fn packet_extraction_never_panics_and_respects_the_limit(
        reply in "(\\PC|<<<HERDR_HANDOFF_V1 id=|>>>|<<<END_HERDR_HANDOFF_V1>>>){0,60}",
        id in "[a-z:0-9]{1,8}",
    ) {
        if let Ok(packet) = extract_packet(&reply, &id) {
            prop_assert!(!packet.is_empty() && packet.chars().count() <= MAX_PACKET_CHARS);
        }
    }
}
