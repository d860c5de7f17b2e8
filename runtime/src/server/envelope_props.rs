//! Property tests of the `/mcp` body checks against outside input: the light
//! `tools/call` recogniser must never accept what rmcp would not read as a
//! `tools/call`, and the envelope check must answer every body (never panic) with
//! either a method or a JSON-RPC error of a spec §3 code.

use bytes::Bytes;
use http_body_util::BodyExt;
use proptest::prelude::*;
use rmcp::model::{ClientJsonRpcMessage, ClientRequest};
use serde_json::Value;

use super::super::fast_tools_call::parse_plain_tools_call;
use super::super::fast_tools_call::tests::rmcp_reading;
use super::super::jsonrpc::{INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR};
use super::check_envelope;

fn rmcp_sees_tools_call(body: &[u8]) -> bool {
    matches!(
        serde_json::from_slice::<ClientJsonRpcMessage>(body),
        Ok(ClientJsonRpcMessage::Request(r)) if matches!(r.request, ClientRequest::CallToolRequest(_))
    )
}

/// One member of a generated body: its JSON text and whether the light parse must
/// take it (`Some(true)`), must refuse it (`Some(false)`), or may do either because
/// only rmcp's reading settles it (`None`: the light parse must then agree with rmcp).
type Piece = (String, Option<bool>);

fn known(text: &str, fits: bool) -> Piece {
    (text.to_string(), Some(fits))
}

fn json_string() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>().prop_map(|s| Value::String(s).to_string()),
        // Escapes that spell the same text differently.
        Just(r#""\u0041\/\n\"""#.to_string()),
        Just(r#""""#.to_string()),
    ]
}

fn jsonrpc_member() -> impl Strategy<Value = Piece> {
    prop_oneof![
        4 => Just(known(r#""2.0""#, true)),
        1 => Just(known(r#""\u0032.0""#, true)),
        1 => Just(known(r#""1.0""#, false)),
        1 => Just(known("2.0", false)),
        1 => Just(known("null", false)),
    ]
}

fn id_member() -> impl Strategy<Value = Piece> {
    prop_oneof![
        3 => any::<i64>().prop_map(|n| (n.to_string(), Some(true))),
        2 => json_string().prop_map(|s| (s, Some(true))),
        1 => ((i64::MAX as u64 + 1)..=u64::MAX).prop_map(|n| (n.to_string(), Some(false))),
        1 => Just(known("null", false)),
        1 => Just(known("true", false)),
        1 => Just(known("[1]", false)),
        1 => Just(known("{}", false)),
        1 => Just(known("1.5", false)),
        // Integral floats and exponents: rmcp may take them, the light parse must not
        // claim them unless rmcp does.
        1 => Just(("1.0".to_string(), None)),
        1 => Just(("1e3".to_string(), None)),
        1 => Just(("-0".to_string(), None)),
    ]
}

fn method_member() -> impl Strategy<Value = Piece> {
    prop_oneof![
        4 => Just(known(r#""tools/call""#, true)),
        1 => Just(known(r#""tools\/call""#, true)),
        1 => Just(known(r#""tools/list""#, false)),
        1 => Just(known(r#""tools/call ""#, false)),
        1 => Just(known("7", false)),
    ]
}

fn arguments_member() -> impl Strategy<Value = Option<Piece>> {
    prop_oneof![
        2 => Just(None),
        2 => Just(Some(known(r#"{"path":"a","n":[1,{"x":null}]}"#, true))),
        1 => Just(Some(known("{}", true))),
        1 => Just(Some(known("null", true))),
        1 => Just(Some(known("[1]", false))),
        1 => Just(Some(known(r#""{}""#, false))),
        1 => Just(Some(known("3", false))),
        3 => json_object().prop_map(|text| Some((text, Some(true)))),
    ]
}

/// Any JSON object as text, nested values of every kind, keys possibly repeated.
fn json_object() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("null".to_string()),
        any::<bool>().prop_map(|b| b.to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(|f| Value::from(f).to_string()),
        Just("1e300".to_string()),
        Just("-0.0".to_string()),
        json_string(),
    ];
    let value = leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(|items| format!("[{}]", items.join(","))),
            prop::collection::vec((prop::sample::select(vec!["a", "b", "path", ""]), inner), 0..4).prop_map(
                |members| {
                    let members: Vec<String> = members.iter().map(|(k, v)| format!(r#""{k}":{v}"#)).collect();
                    format!("{{{}}}", members.join(","))
                }
            ),
        ]
    });
    prop::collection::vec((prop::sample::select(vec!["a", "b", "path", "\\u0061"]), value), 0..5).prop_map(|members| {
        let members: Vec<String> = members.iter().map(|(k, v)| format!(r#""{k}":{v}"#)).collect();
        format!("{{{}}}", members.join(","))
    })
}

/// Whether the light parse takes `body`; when it does, it must read the very call
/// rmcp reads there (id, name and arguments), since the endpoint answers with it.
fn is_plain_tools_call(body: &[u8]) -> bool {
    let Some(call) = parse_plain_tools_call(body) else { return false };
    assert_eq!(Some(call), rmcp_reading(body), "{:?}", String::from_utf8_lossy(body));
    true
}

fn params_member() -> impl Strategy<Value = Option<Piece>> {
    let name = prop_oneof![
        4 => json_string().prop_map(|s| (s, Some(true))),
        1 => Just(known("3", false)),
        1 => Just(known("null", false)),
    ];
    let extra = prop_oneof![
        4 => Just(None),
        1 => Just(Some(known(r#""_meta":{"progressToken":1}"#, false))),
        1 => Just(Some(known(r#""other":1"#, false))),
    ];
    prop_oneof![
        8 => (name, arguments_member(), extra, any::<bool>()).prop_map(|(name, args, extra, swap)| {
            let mut members = vec![(format!(r#""name":{}"#, name.0), name.1)];
            if let Some(a) = args {
                members.push((format!(r#""arguments":{}"#, a.0), a.1));
            }
            if let Some(e) = extra {
                members.push(e);
            }
            if swap {
                members.reverse();
            }
            Some(object(members))
        }),
        1 => Just(None),
        1 => Just(Some(known("[]", false))),
        1 => Just(Some(known("{}", false))),
    ]
}

/// Joins members into an object; it fits when every member does.
fn object(members: Vec<Piece>) -> Piece {
    let fits = members.iter().try_fold(true, |all, (_, f)| f.map(|f| all && f));
    let text = members.into_iter().map(|(t, _)| t).collect::<Vec<_>>().join(",");
    (format!("{{{text}}}"), fits)
}

/// A whole body: the four members in any order, each possibly missing, duplicated
/// or joined by an extra member, and possibly trailing text.
fn body() -> impl Strategy<Value = Piece> {
    (
        prop::option::weighted(0.9, jsonrpc_member()),
        prop::option::weighted(0.9, id_member()),
        prop::option::weighted(0.9, method_member()),
        params_member(),
        prop::sample::select(vec!["", "", "", " \n", r#","extra":1"#, r#","id":1,"id":2"#]),
        prop::sample::select(vec!["", "", "", " ", " x", "]"]),
        any::<prop::sample::Index>(),
    )
        .prop_map(|(jsonrpc, id, method, params, extra, trailer, order)| {
            let mut members: Vec<Piece> = Vec::new();
            let mut fits = Some(true);
            for (name, piece) in [("jsonrpc", jsonrpc), ("id", id), ("method", method), ("params", params)] {
                match piece {
                    Some((text, f)) => members.push((format!(r#""{name}":{text}"#), f)),
                    None => fits = Some(false),
                }
            }
            let n = members.len();
            if n > 0 {
                members.rotate_left(order.index(n));
            }
            let (mut text, member_fits) = object(members);
            text.insert_str(text.len() - 1, extra);
            if !extra.trim().is_empty() {
                fits = Some(false);
            }
            text.push_str(trailer);
            if !trailer.trim().is_empty() {
                fits = Some(false);
            }
            let fits = match (fits, member_fits) {
                (Some(false), _) | (_, Some(false)) => Some(false),
                (Some(true), Some(true)) => Some(true),
                _ => None,
            };
            (text, fits)
        })
}

/// Replaces, inserts or deletes a few bytes at random places.
fn mutate(body: &str, edits: &[(prop::sample::Index, u8, u8)]) -> Vec<u8> {
    let mut bytes = body.as_bytes().to_vec();
    for (at, op, byte) in edits {
        let i = at.index(bytes.len() + 1);
        match op % 3 {
            0 if i < bytes.len() => bytes[i] = *byte,
            1 => bytes.insert(i, *byte),
            _ if i < bytes.len() => {
                bytes.remove(i);
            }
            _ => bytes.push(*byte),
        }
    }
    bytes
}

/// What the envelope check answers: the method it found, or the JSON-RPC error code
/// of the refusal (whose body must be a JSON-RPC 2.0 error object).
fn envelope_answer(body: &[u8]) -> Result<Option<String>, i64> {
    match check_envelope(&Bytes::copy_from_slice(body)) {
        Ok(envelope) => Ok(envelope.method),
        Err(response) => {
            let status = response.status().as_u16();
            let bytes = futures::executor::block_on(response.into_body().collect())
                .expect("an in-memory body cannot fail")
                .to_bytes();
            let v: Value = serde_json::from_slice(&bytes).expect("the refusal is JSON");
            assert_eq!(v["jsonrpc"], "2.0");
            let code = v["error"]["code"].as_i64().expect("the refusal has a numeric code");
            assert!(v["error"]["message"].as_str().is_some_and(|m| !m.is_empty()));
            assert!(matches!(status, 200 | 400), "status {status}");
            Err(code)
        }
    }
}

fn assert_spec_code(answer: &Result<Option<String>, i64>) {
    if let Err(code) = answer {
        // INTERNAL_ERROR: spec §3's code for a tools/call without params.name.
        assert!([PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS, INTERNAL_ERROR].contains(code), "code {code}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn light_parse_takes_exactly_the_strict_subset_and_rmcp_agrees((body, fits) in body()) {
        let light = is_plain_tools_call(body.as_bytes());
        if let Some(fits) = fits {
            prop_assert_eq!(light, fits, "{}", body);
        }
        if light {
            prop_assert!(rmcp_sees_tools_call(body.as_bytes()), "rmcp does not read {} as tools/call", body);
            prop_assert_eq!(envelope_answer(body.as_bytes()), Ok(Some("tools/call".to_string())));
        }
    }

    #[test]
    fn mutated_bodies_never_panic_and_the_light_parse_stays_within_rmcp(
        (body, _) in body(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), any::<u8>()), 1..4),
    ) {
        let bytes = mutate(&body, &edits);
        if is_plain_tools_call(&bytes) {
            prop_assert!(rmcp_sees_tools_call(&bytes), "{:?}", String::from_utf8_lossy(&bytes));
        }
        assert_spec_code(&envelope_answer(&bytes));
    }

    #[test]
    fn arbitrary_bytes_get_an_answer(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        prop_assert!(!is_plain_tools_call(&bytes) || rmcp_sees_tools_call(&bytes));
        assert_spec_code(&envelope_answer(&bytes));
    }
}

#[test]
fn deep_nesting_is_refused_without_exhausting_the_stack() {
    // serde_json stops at 128 levels; each form must come back as a parse error.
    for body in [
        "[".repeat(100_000),
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"t","arguments":{{"a":{}}}}}}}"#, "[".repeat(100_000)),
        format!("{}{}", "[".repeat(200), "]".repeat(200)),
    ] {
        assert!(!is_plain_tools_call(body.as_bytes()));
        assert_eq!(envelope_answer(body.as_bytes()), Err(PARSE_ERROR));
    }
}
