//! Property tests of the host's browser-facing boundary: the length-prefixed framing
//! and the message parser see whatever the browser (or a broken pipe) sends. Every
//! input must end in frames, a refusal with a stable code, or a clean stop — never a
//! panic, a hang or an unbounded read.

use std::collections::BTreeMap;

use herdr_nmhost::allow::{self, FORWARDED_REQUEST_HEADERS, MAX_TIMEOUT, MIN_TIMEOUT, RouteKind};
use herdr_nmhost::framing::{MAX_INBOUND_FRAME, ReadOutcome, encode_frame, read_frame};
use herdr_nmhost::messages::{InboundKind, parse_inbound};
use proptest::prelude::*;
use serde_json::{Value, json};

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().build().expect("a current-thread runtime").block_on(f)
}

/// Every outcome until the reader must stop.
fn read_all(mut input: &[u8]) -> Vec<ReadOutcome> {
    block_on(async {
        let mut out = Vec::new();
        loop {
            let o = read_frame(&mut input).await.expect("reading from memory cannot fail");
            let go_on = matches!(o, ReadOutcome::Frame(_) | ReadOutcome::TooLarge { .. });
            out.push(o);
            if !go_on {
                return out;
            }
        }
    })
}

/// What a stream of `payloads` cut after `cut` bytes must read as.
fn expected_outcomes(payloads: &[Vec<u8>], cut: usize) -> Vec<ReadOutcome> {
    let mut out = Vec::new();
    let mut at = 0;
    for p in payloads {
        let left = cut - at.min(cut);
        if left == 0 {
            break;
        }
        if left < 4 {
            out.push(ReadOutcome::Truncated { expected: 4, got: left });
            return out;
        }
        if left < 4 + p.len() {
            out.push(ReadOutcome::Truncated { expected: p.len(), got: left - 4 });
            return out;
        }
        out.push(ReadOutcome::Frame(p.clone()));
        at += 4 + p.len();
    }
    out.push(ReadOutcome::Eof);
    out
}

/// Members of an inbound message, with the types they should and should not have.
fn odd_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        any::<String>().prop_map(Value::String),
        Just(json!([])),
        Just(json!({"content-type": "application/json", "Accept": 1, "authorization": "Bearer x"})),
        Just(json!({"mcp-session-id": "a\nb"})),
    ]
}

fn inbound_message() -> impl Strategy<Value = Value> {
    let kind = prop_oneof![
        Just(json!("request")), Just(json!("stream")), Just(json!("cancel")), Just(json!("identity")),
        Just(json!("session")), Just(json!("other")), odd_value(),
    ];
    let path = prop_oneof![
        Just(json!("/mcp")), Just(json!("/health?x=1")), Just(json!("/push/events")), Just(json!("/push/state")),
        Just(json!("/mcp/../etc")), Just(json!("/mcp#f")), Just(json!("mcp")), Just(json!("/\u{0}")),
        "/[ -~]{0,20}".prop_map(Value::String), odd_value(),
    ];
    let method = prop_oneof![Just(json!("post")), Just(json!("GET")), Just(json!("DELETE")), Just(json!("PATCH")), odd_value()];
    let base_url = prop_oneof![
        Just(json!("http://127.0.0.1:1")), Just(json!("https://127.0.0.1")), Just(json!("http://evil.example")),
        Just(json!("http://[::1]:8")), Just(json!("::")), odd_value(),
    ];
    let member = |name: &'static str, v: BoxedStrategy<Value>| prop::option::weighted(0.7, v).prop_map(move |v| (name, v));
    (
        member("type", kind.boxed()),
        member("id", odd_value().boxed()),
        member("path", path.boxed()),
        member("method", method.boxed()),
        member("headers", odd_value().boxed()),
        member("body", odd_value().boxed()),
        member("timeout_ms", odd_value().boxed()),
        member("base_url", base_url.boxed()),
        member("oneshot", odd_value().boxed()),
    )
        .prop_map(|members| {
            let (a, b, c, d, e, f, g, h, i) = members;
            let mut o = serde_json::Map::new();
            for (name, v) in [a, b, c, d, e, f, g, h, i] {
                if let Some(v) = v {
                    o.insert(name.to_string(), v);
                }
            }
            Value::Object(o)
        })
}

/// Runs a parsed request or stream through the allow-list the way the session does,
/// and checks what passes it.
fn check_forwarding(kind: &InboundKind) {
    match kind {
        InboundKind::Request(r) => {
            let passed = allow::check_base_url(r.base_url.as_deref())
                .and_then(|_| allow::check_path(&r.path, RouteKind::Request))
                .and_then(|(pq, route)| Ok((pq, allow::check_method(&r.method, route)?)))
                .and_then(|(pq, m)| Ok((pq, m, allow::forwarded_headers(&r.headers)?)));
            if let Ok((pq, _method, headers)) = passed {
                assert!(allow::ROUTES.iter().any(|route| route.path == pq.path() && route.kind == RouteKind::Request));
                assert!(headers.keys().all(|k| FORWARDED_REQUEST_HEADERS.contains(&k.as_str())));
            }
            let t = allow::clamp_timeout(r.timeout_ms);
            assert!((MIN_TIMEOUT..=MAX_TIMEOUT).contains(&t), "{t:?}");
        }
        InboundKind::Stream(s) => {
            if let Ok((pq, _)) = allow::check_path(&s.path, RouteKind::Stream) {
                assert_eq!(pq.path(), "/push/events");
            }
        }
        InboundKind::Cancel | InboundKind::Identity => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn frames_read_back_and_a_cut_stream_ends_in_a_truncation(
        payloads in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 0..6),
        cut in any::<prop::sample::Index>(),
    ) {
        let stream: Vec<u8> = payloads.iter().flat_map(|p| encode_frame(p).expect("small frames encode")).collect();
        let cut = cut.index(stream.len() + 1);
        prop_assert_eq!(read_all(&stream[..cut]), expected_outcomes(&payloads, cut));
    }

    #[test]
    fn arbitrary_bytes_end_in_a_bounded_number_of_outcomes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let out = read_all(&bytes);
        // Every outcome but the last consumed at least a 4-byte header.
        prop_assert!(out.len() <= bytes.len() / 4 + 1);
        for o in &out {
            if let ReadOutcome::Frame(p) = o {
                prop_assert!(p.len() <= MAX_INBOUND_FRAME);
            }
        }
    }

    #[test]
    fn arbitrary_payloads_parse_or_are_refused_with_a_code(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        match parse_inbound(&bytes) {
            Ok(message) => check_forwarding(&message.kind),
            Err(rejected) => prop_assert!(!rejected.error.message.is_empty()),
        }
    }

    #[test]
    fn odd_messages_parse_or_are_refused_and_what_passes_is_allowed(message in inbound_message()) {
        let bytes = serde_json::to_vec(&message).expect("a Value serialises");
        match parse_inbound(&bytes) {
            Ok(inbound) => check_forwarding(&inbound.kind),
            Err(rejected) => prop_assert!(!rejected.error.message.is_empty() && !rejected.error.code.as_str().is_empty()),
        }
    }

    #[test]
    fn any_timeout_is_clamped(ms in prop::option::of(any::<f64>())) {
        let t = allow::clamp_timeout(ms);
        prop_assert!((MIN_TIMEOUT..=MAX_TIMEOUT).contains(&t), "{:?}", t);
    }
}

#[test]
fn only_allow_listed_headers_survive() {
    let headers: BTreeMap<String, String> =
        [("Content-Type", "application/json"), ("Authorization", "Bearer x"), ("cookie", "a=b")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    let kept = allow::forwarded_headers(&headers).expect("valid values");
    assert_eq!(kept.keys().map(|k| k.as_str()).collect::<Vec<_>>(), vec!["content-type"]);
}
