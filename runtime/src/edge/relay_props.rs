//! Property tests of Relay v1 decoding against what a peer (or anything in
//! between) can put in a text frame: any text is decoded or refused with a
//! `FrameError`, never a panic, and a frame that is accepted re-encodes to text
//! that decodes to the same frame.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::tests::every_kind;
use super::{Frame, FrameError, MAX_EDGE_INBOUND, MAX_LINK_INBOUND, Sender};

fn sender() -> impl Strategy<Value = Sender> {
    prop_oneof![Just(Sender::Link), Just(Sender::Edge)]
}

/// Values that break types, lengths and shapes.
fn odd_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        Just(json!(1.5)),
        Just(json!(-1)),
        Just(json!(65_001)),
        any::<String>().prop_map(Value::String),
        "[A-Za-z0-9._:-]{0,140}".prop_map(Value::String),
        (4090usize..4100).prop_map(|n| Value::String("é".repeat(n))),
        Just(json!("request")),
        Just(json!("tool_result")),
    ];
    leaf.prop_recursive(6, 40, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec(("[a-z_]{1,16}", inner), 0..4)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// A member name: mostly the frames' own, sometimes unknown.
fn member() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => prop::sample::select(vec![
            "protocol_version", "kind", "workstation_id", "boot_id", "link_version", "capabilities",
            "runtime", "ok", "code", "message", "resume", "completed", "request_id", "operation",
            "arguments", "timeout_ms", "result", "details", "health_details", "reason", "query",
        ]).prop_map(str::to_string),
        1 => "[a-z_]{1,12}",
    ]
}

#[derive(Debug, Clone)]
enum Edit {
    Set(String, Value),
    Remove(String),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        3 => (member(), odd_value()).prop_map(|(k, v)| Edit::Set(k, v)),
        1 => member().prop_map(Edit::Remove),
    ]
}

fn valid_frame() -> impl Strategy<Value = (Value, Sender)> {
    let frames = every_kind();
    (0..frames.len()).prop_map(move |i| {
        let (frame, from) = &frames[i];
        (serde_json::from_str(&frame.encode()).expect("our own frames are JSON"), *from)
    })
}

/// An accepted frame must survive its own encoding unchanged.
fn check_answer(text: &str, from: Sender, limit: usize, answer: Result<Frame, FrameError>) {
    match answer {
        Ok(frame) => {
            assert!(text.len() <= limit);
            let again = Frame::decode(&frame.encode(), from, usize::MAX);
            assert_eq!(again.as_ref(), Ok(&frame), "re-encoding changed {text}");
        }
        Err(e) => {
            assert!(!e.to_string().is_empty());
            assert!(matches!(e.close_code(), 1003 | 1008 | 1009));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn any_text_is_decoded_or_refused(text in any::<String>(), from in sender()) {
        check_answer(&text, from, MAX_LINK_INBOUND, Frame::decode(&text, from, MAX_LINK_INBOUND));
    }

    #[test]
    fn edited_frames_are_decoded_or_refused(
        (mut value, from) in valid_frame(),
        edits in prop::collection::vec(edit(), 1..4),
    ) {
        for e in edits {
            match e {
                Edit::Set(k, v) => { value[k.as_str()] = v; }
                Edit::Remove(k) => { value.as_object_mut().expect("a frame is an object").remove(&k); }
            }
        }
        let text = value.to_string();
        check_answer(&text, from, MAX_EDGE_INBOUND, Frame::decode(&text, from, MAX_EDGE_INBOUND));
    }

    #[test]
    fn byte_edited_frames_are_decoded_or_refused(
        (value, from) in valid_frame(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<char>()), 1..4),
    ) {
        let mut text = value.to_string();
        for (at, c) in edits {
            let mut i = at.index(text.len() + 1);
            while !text.is_char_boundary(i) { i -= 1; }
            text.insert(i, c);
        }
        check_answer(&text, from, MAX_EDGE_INBOUND, Frame::decode(&text, from, MAX_EDGE_INBOUND));
    }

    /// The size check comes first and is exact: a frame padded to the limit is
    /// read, one byte more is refused as too large whatever it holds.
    #[test]
    fn the_size_limit_is_exact((value, from) in valid_frame(), slack in 0usize..64) {
        let text = value.to_string();
        let limit = text.len() + slack;
        let padded = format!("{text}{}", " ".repeat(slack));
        prop_assert!(Frame::decode(&padded, from, limit).is_ok());
        let over = format!("{padded} ");
        prop_assert_eq!(Frame::decode(&over, from, limit), Err(FrameError::TooLarge { size: limit + 1, limit }));
    }
}

#[test]
fn deep_nesting_is_refused_without_exhausting_the_stack() {
    let text = format!(r#"{{"protocol_version":1,"kind":"tool_result","result":{}}}"#, "[".repeat(200_000));
    assert!(matches!(Frame::decode(&text, Sender::Link, MAX_EDGE_INBOUND), Err(FrameError::NotJson(_))));
}
