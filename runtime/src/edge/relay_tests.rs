use super::*;
use serde_json::json;

const WS: &str = "dev_01HZX";

fn runtime() -> RuntimeIdentity {
    RuntimeIdentity {
        runtime_version: "0.1.0".into(),
        runtime_commit: Some("abc123".into()),
        runtime_generation: Some("boot-1".into()),
        contract_epoch: 1,
        contract_hash: format!("sha256:{}", "0".repeat(64)),
        herdr_version: None,
        herdr_protocol: None,
    }
}

pub(super) fn every_kind() -> Vec<(Frame, Sender)> {
    vec![
        (
            Frame::Hello(Hello {
                workstation_id: WS.into(),
                boot_id: "b1".into(),
                link_version: "0.1.0".into(),
                connected_at_ms: Some(5),
                capabilities: vec!["cancel".into()],
                runtime: Some(runtime()),
            }),
            Sender::Link,
        ),
        (
            Frame::HelloAck(HelloAck {
                workstation_id: WS.into(),
                ok: true,
                server_version: Some("0.1.0".into()),
                edge_deployment_id: None,
                capabilities: Some(vec![]),
                reconnect: Some(ReconnectHint { min_backoff_ms: 500, max_backoff_ms: 30_000 }),
                resume: Some(vec![ResumeEntry { request_id: "r1".into(), operation: "herdr_fs_write".into(), state: ResumeState::Sent, deadline_ms: 9 }]),
                completed: Some(vec!["r0".into()]),
                code: None,
                message: None,
            }),
            Sender::Edge,
        ),
        (
            Frame::Heartbeat(Heartbeat { workstation_id: WS.into(), boot_id: "b1".into(), sent_at_ms: 1, link_uptime_ms: Some(2), active_requests: 0, runtime: None }),
            Sender::Link,
        ),
        (Frame::Status(Status { workstation_id: WS.into(), query: Some(true), ..Default::default() }), Sender::Edge),
        (
            Frame::Status(Status { workstation_id: WS.into(), healthy: Some(true), health_details: Some(json!({"herdr": "ok"})), active_requests: Some(1), ..Default::default() }),
            Sender::Link,
        ),
        (
            Frame::ToolRequest(ToolRequest {
                workstation_id: WS.into(),
                request_id: "0123abcd".into(),
                operation: "herdr_fs_read".into(),
                arguments: Some(json!({"path": "a.txt"})),
                timeout_ms: Some(30_000),
                contract_epoch: Some(1),
                contract_hash: Some("sha256:00".into()),
                idempotency_key: None,
                trace: None,
            }),
            Sender::Edge,
        ),
        (
            Frame::ToolResult(ToolResult {
                workstation_id: WS.into(),
                request_id: "0123abcd".into(),
                result: Some(json!({"content": [{"type": "text", "text": "{}"}]})),
                served_at_ms: 7,
                runtime_generation: None,
                transport_name: Some("unix".into()),
            }),
            Sender::Link,
        ),
        (
            Frame::ToolError(ToolError {
                workstation_id: WS.into(),
                request_id: "0123abcd".into(),
                code: "runtime_unavailable".into(),
                message: Some("socket refused".into()),
                details: Some(json!({"errno": 111})),
                retryable: true,
                delivery_state: Some(DeliveryState::NotDelivered),
                served_at_ms: Some(8),
                runtime_generation: None,
            }),
            Sender::Link,
        ),
        (Frame::Cancel(Cancel { workstation_id: WS.into(), request_id: "0123abcd".into(), reason: Some("timeout".into()) }), Sender::Edge),
        (
            Frame::CancelAck(CancelAck { workstation_id: WS.into(), request_id: "0123abcd".into(), accepted: true, cancelled_at_ms: 9, reason: None }),
            Sender::Link,
        ),
    ]
}

#[test]
fn every_kind_round_trips_and_is_refused_in_the_wrong_direction() {
    for (frame, from) in every_kind() {
        let text = frame.encode();
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["protocol_version"], json!(1), "{text}");
        assert_eq!(v["kind"], json!(frame.kind()));
        assert_eq!(Frame::decode(&text, from, MAX_EDGE_INBOUND).unwrap(), frame, "{text}");
        if !matches!(frame, Frame::Status(_)) {
            let other = if from == Sender::Link { Sender::Edge } else { Sender::Link };
            assert_eq!(Frame::decode(&text, other, MAX_EDGE_INBOUND), Err(FrameError::WrongDirection(frame.kind().into())));
        }
    }
}

fn hello_value() -> Value {
    serde_json::from_str(&every_kind()[0].0.encode()).unwrap()
}

fn decode_link(v: &Value) -> Result<Frame, FrameError> {
    Frame::decode(&v.to_string(), Sender::Link, MAX_EDGE_INBOUND)
}

fn with(mut v: Value, key: &str, val: Value) -> Value {
    v[key] = val;
    v
}

#[test]
fn envelope_errors() {
    assert!(matches!(Frame::decode("not json", Sender::Link, 100), Err(FrameError::NotJson(_))));
    assert_eq!(Frame::decode("[1]", Sender::Link, 100), Err(FrameError::NotObject));
    let mut no_version = hello_value();
    no_version.as_object_mut().unwrap().remove("protocol_version");
    assert_eq!(decode_link(&no_version), Err(FrameError::Missing("protocol_version")));
    for bad in [json!(2), json!("1"), json!(1.5), json!(0)] {
        let e = decode_link(&with(hello_value(), "protocol_version", bad)).unwrap_err();
        assert_eq!(e, FrameError::UnsupportedVersion);
        assert_eq!((e.code(), e.close_code()), ("unsupported_protocol_version", close::POLICY));
    }
    let mut no_kind = hello_value();
    no_kind.as_object_mut().unwrap().remove("kind");
    assert_eq!(decode_link(&no_kind), Err(FrameError::Missing("kind")));
    assert!(matches!(decode_link(&with(hello_value(), "kind", json!(7))), Err(FrameError::Fields { .. })));
    assert_eq!(decode_link(&with(hello_value(), "kind", json!("shout"))), Err(FrameError::UnknownKind("shout".into())));
    for retired in RETIRED_KINDS {
        assert_eq!(decode_link(&with(hello_value(), "kind", json!(retired))), Err(FrameError::RetiredKind(retired.to_string())));
    }
}

#[test]
fn unknown_and_missing_fields_are_refused() {
    let e = decode_link(&with(hello_value(), "extra", json!(1))).unwrap_err();
    assert!(matches!(&e, FrameError::Fields { message, .. } if message.contains("unknown field `extra`")), "{e}");
    assert_eq!((e.code(), e.close_code()), ("bad_request", close::POLICY));
    let mut nested = hello_value();
    nested["runtime"]["surprise"] = json!(true);
    assert!(matches!(decode_link(&nested), Err(FrameError::Fields { .. })));
    let mut missing = hello_value();
    missing.as_object_mut().unwrap().remove("workstation_id");
    assert!(matches!(decode_link(&missing), Err(FrameError::Fields { message, .. }) if message.contains("workstation_id")));
    let mut no_boot = hello_value();
    no_boot.as_object_mut().unwrap().remove("boot_id");
    assert!(decode_link(&no_boot).is_err());
    // Wrong types.
    assert!(decode_link(&with(hello_value(), "connected_at_ms", json!("soon"))).is_err());
    assert!(decode_link(&with(hello_value(), "capabilities", json!("cancel"))).is_err());
}

#[test]
fn ids_follow_the_pattern_and_length_limits() {
    for bad in ["", "-lead", "has space", "sl/ash", "ü"] {
        assert!(decode_link(&with(hello_value(), "workstation_id", json!(bad))).is_err(), "{bad:?}");
    }
    assert!(decode_link(&with(hello_value(), "workstation_id", json!("a".repeat(MAX_WORKSTATION_ID)))).is_ok());
    assert!(decode_link(&with(hello_value(), "workstation_id", json!("a".repeat(MAX_WORKSTATION_ID + 1)))).is_err());
    assert!(decode_link(&with(hello_value(), "boot_id", json!("b".repeat(MAX_REQUEST_ID)))).is_ok());
    assert!(decode_link(&with(hello_value(), "boot_id", json!("b".repeat(MAX_REQUEST_ID + 1)))).is_err());
    assert!(decode_link(&with(hello_value(), "workstation_id", json!("Ok.1_a:b-c"))).is_ok());
}

#[test]
fn size_depth_keys_items_and_string_limits() {
    let text = hello_value().to_string();
    let e = Frame::decode(&text, Sender::Link, text.len() - 1).unwrap_err();
    assert_eq!(e, FrameError::TooLarge { size: text.len(), limit: text.len() - 1 });
    assert_eq!((e.code(), e.close_code()), ("payload_too_large", close::TOO_BIG));
    assert!(Frame::decode(&text, Sender::Link, text.len()).is_ok());

    let result_frame = |result: Value| {
        json!({"protocol_version": 1, "kind": "tool_result", "workstation_id": WS, "request_id": "r1", "served_at_ms": 1, "result": result})
    };
    // Depth: the frame itself is level 1, so a result may nest to MAX_DEPTH - 1.
    let mut deep = json!(1);
    for _ in 0..(MAX_DEPTH - 2) {
        deep = json!([deep]);
    }
    assert!(decode_link(&result_frame(deep.clone())).is_ok());
    assert!(matches!(decode_link(&result_frame(json!([deep]))), Err(FrameError::Limit(m)) if m.contains("deeper")));

    let keys = |n: usize| Value::Object((0..n).map(|i| (format!("k{i}"), json!(0))).collect());
    assert!(decode_link(&result_frame(keys(MAX_KEYS))).is_ok());
    assert!(matches!(decode_link(&result_frame(keys(MAX_KEYS + 1))), Err(FrameError::Limit(m)) if m.contains("keys")));
    assert!(decode_link(&result_frame(json!(vec![0; MAX_ITEMS]))).is_ok());
    assert!(matches!(decode_link(&result_frame(json!(vec![0; MAX_ITEMS + 1]))), Err(FrameError::Limit(m)) if m.contains("items")));

    // Frame strings are capped; payload strings are bounded by bytes only.
    assert!(decode_link(&with(hello_value(), "link_version", json!("v".repeat(MAX_STRING)))).is_ok());
    assert!(matches!(decode_link(&with(hello_value(), "link_version", json!("v".repeat(MAX_STRING + 1)))), Err(FrameError::Limit(_))));
    assert!(decode_link(&result_frame(json!({"text": "x".repeat(100_000)}))).is_ok());
    let too_big = json!({"text": "x".repeat(MAX_RESULT_BYTES)});
    assert!(matches!(Frame::decode(&result_frame(too_big).to_string(), Sender::Link, 4 * MAX_RESULT_BYTES), Err(FrameError::Fields { message, .. }) if message.contains("result is")));

    let caps: Vec<String> = (0..=MAX_CAPABILITIES).map(|i| format!("c{i}")).collect();
    assert!(decode_link(&with(hello_value(), "capabilities", json!(caps))).is_err());
    assert!(decode_link(&with(hello_value(), "capabilities", json!(caps[..MAX_CAPABILITIES]))).is_ok());
}

#[test]
fn request_rules() {
    let req = |extra: Value| {
        let mut v = json!({"protocol_version": 1, "kind": "tool_request", "workstation_id": WS, "request_id": "r1", "operation": "herdr_inspect"});
        for (k, val) in extra.as_object().unwrap() {
            v[k] = val.clone();
        }
        Frame::decode(&v.to_string(), Sender::Edge, MAX_LINK_INBOUND)
    };
    assert!(req(json!({})).is_ok());
    assert!(req(json!({"timeout_ms": MIN_TIMEOUT_MS})).is_ok());
    assert!(req(json!({"timeout_ms": MAX_TIMEOUT_MS})).is_ok());
    assert!(req(json!({"timeout_ms": MIN_TIMEOUT_MS - 1})).is_err());
    assert!(req(json!({"timeout_ms": MAX_TIMEOUT_MS + 1})).is_err());
    assert!(req(json!({"arguments": [1]})).is_err());
    assert!(req(json!({"arguments": {"content": "x".repeat(MAX_ARGUMENTS_BYTES - 1024)}})).is_ok());
    assert!(req(json!({"arguments": {"content": "x".repeat(MAX_ARGUMENTS_BYTES)}})).is_err());
    assert!(req(json!({"operation": "bad name"})).is_err());

    let err = |extra: Value| {
        let mut v = json!({"protocol_version": 1, "kind": "tool_error", "workstation_id": WS, "request_id": "r1", "code": "x", "retryable": false});
        for (k, val) in extra.as_object().unwrap() {
            v[k] = val.clone();
        }
        decode_link(&v)
    };
    assert!(err(json!({"delivery_state": "delivery_unknown"})).is_ok());
    assert!(err(json!({"delivery_state": "maybe"})).is_err());
    assert!(err(json!({"details": {"blob": "d".repeat(MAX_DETAILS_BYTES)}})).is_err());
    assert!(err(json!({"retryable": "no"})).is_err());
}

#[test]
fn hello_ack_codes() {
    let ack = |v: Value| Frame::decode(&v.to_string(), Sender::Edge, MAX_LINK_INBOUND);
    let base = json!({"protocol_version": 1, "kind": "hello_ack", "workstation_id": WS});
    assert!(ack(with(base.clone(), "ok", json!(true))).is_ok());
    let failed = with(base.clone(), "ok", json!(false));
    assert!(ack(failed.clone()).is_err(), "a failure needs a code");
    for code in HELLO_FAILURE_CODES {
        assert!(ack(with(with(failed.clone(), "code", json!(code)), "message", json!("m"))).is_ok(), "{code}");
    }
    assert!(ack(with(failed, "code", json!("nope"))).is_err());
    assert!(ack(with(with(base, "ok", json!(true)), "code", json!("auth_rejected"))).is_err());
}

#[test]
fn binary_frames_have_their_own_close_code() {
    assert_eq!(FrameError::Binary.close_code(), close::UNSUPPORTED_DATA);
}
