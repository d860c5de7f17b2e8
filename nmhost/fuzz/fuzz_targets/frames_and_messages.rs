//! Arbitrary bytes as the host's stdin: the frame reader must classify every prefix without
//! panicking or over-allocating, and every accepted payload goes through the message parser and
//! the allow-list checks the session applies.

#![no_main]

use herdr_nmhost::allow::{self, RouteKind};
use herdr_nmhost::framing::{encode_frame, read_frame, ReadOutcome, MAX_INBOUND_FRAME};
use herdr_nmhost::messages::{parse_inbound, InboundKind};
use libfuzzer_sys::fuzz_target;

thread_local! {
    static RUNTIME: tokio::runtime::Runtime =
        tokio::runtime::Builder::new_current_thread().build().expect("a current-thread runtime");
}

fn check_message(payload: &[u8]) {
    match parse_inbound(payload) {
        Ok(message) => match message.kind {
            InboundKind::Request(r) => {
                let _ = allow::check_base_url(r.base_url.as_deref());
                if let Ok((pq, route)) = allow::check_path(&r.path, RouteKind::Request) {
                    assert_eq!(route.path, pq.path());
                    let _ = allow::check_method(&r.method, route);
                }
                if let Ok(headers) = allow::forwarded_headers(&r.headers) {
                    assert!(headers.get("authorization").is_none());
                }
                let t = allow::clamp_timeout(r.timeout_ms);
                assert!(t >= allow::MIN_TIMEOUT && t <= allow::MAX_TIMEOUT);
            }
            InboundKind::Stream(s) => {
                if let Ok((pq, _)) = allow::check_path(&s.path, RouteKind::Stream) {
                    assert_eq!(pq.path(), "/push/events");
                }
            }
            InboundKind::Cancel => assert!(message.id.is_some()),
            InboundKind::Identity => {}
        },
        Err(rejected) => assert!(!rejected.error.message.is_empty()),
    }
}

fuzz_target!(|data: &[u8]| {
    // The bytes as one payload, and as a stream of frames.
    check_message(data);
    RUNTIME.with(|rt| {
        rt.block_on(async {
            let mut input = data;
            loop {
                match read_frame(&mut input).await.expect("reading a slice cannot fail") {
                    ReadOutcome::Frame(payload) => {
                        assert!(payload.len() <= MAX_INBOUND_FRAME);
                        let encoded = encode_frame(&payload).expect("an accepted frame re-encodes");
                        assert_eq!(&encoded[4..], &payload[..]);
                        check_message(&payload);
                    }
                    ReadOutcome::TooLarge { len } => assert!(len > MAX_INBOUND_FRAME),
                    ReadOutcome::Eof | ReadOutcome::Truncated { .. } | ReadOutcome::Desync { .. } => break,
                }
            }
        })
    });
});
