//! A cheap recogniser for the request the endpoint sees most: a plain, well-formed
//! `tools/call`.
//!
//! The endpoint must know a request's method before rmcp sees it, and rmcp's own
//! message model is costly to parse (untagged enums buffer the whole message and
//! try variant after variant); rmcp then parses the body once more itself. This
//! recogniser accepts only a strict subset of what rmcp accepts as a `tools/call`:
//! exactly the members `jsonrpc` ("2.0"), `id` (integer or string), `method`
//! ("tools/call") and `params` holding `name` (string) and optionally `arguments`
//! (object or null). Anything else, including `_meta` or an extra member, is left
//! to the full check, so the answer never differs from the slow path's.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, IgnoredAny, MapAccess, Visitor};

/// True when `body` is certainly a well-formed `tools/call` request.
pub fn is_plain_tools_call(body: &[u8]) -> bool {
    // serde_json checks UTF-8 only in the strings it builds, not in those it skips
    // (the arguments), while rmcp builds every string and refuses the body.
    let Ok(body) = std::str::from_utf8(body) else { return false };
    match serde_json::from_str::<Message>(body) {
        Ok(message) => message.jsonrpc == "2.0" && message.method == "tools/call",
        Err(_) => false,
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Message<'a> {
    #[serde(borrow)]
    jsonrpc: Cow<'a, str>,
    #[allow(dead_code, reason = "parsed only to check its shape")]
    id: Id,
    #[serde(borrow)]
    method: Cow<'a, str>,
    #[serde(borrow)]
    #[allow(dead_code, reason = "parsed only to check its shape")]
    params: Params<'a>,
}

/// rmcp's request id: a string or a number that fits an `i64`. Checked by a visitor
/// rather than an untagged enum, which would buffer the value and try each variant.
struct Id;

impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct IdVisitor;
        impl<'de> Visitor<'de> for IdVisitor {
            type Value = Id;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string or an integer that fits an i64")
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Id, E> {
                Ok(Id)
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Id, E> {
                if i64::try_from(n).is_ok() { Ok(Id) } else { Err(E::invalid_value(de::Unexpected::Unsigned(n), &self)) }
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Id, E> {
                Ok(Id)
            }
        }
        // `deserialize_any`: serde_json hands an integer to visit_i64/visit_u64, a
        // float to visit_f64 (refused by default), a string to visit_str.
        deserializer.deserialize_any(IdVisitor)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code, reason = "parsed only to check its shape")]
struct Params<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(default)]
    arguments: Option<AnyObject>,
}

/// Any JSON object, skipped without building it.
struct AnyObject;

impl<'de> Deserialize<'de> for AnyObject {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ObjectVisitor;
        impl<'de> Visitor<'de> for ObjectVisitor {
            type Value = AnyObject;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<AnyObject, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(AnyObject)
            }
        }
        deserializer.deserialize_map(ObjectVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{ClientJsonRpcMessage, ClientRequest};

    fn rmcp_sees_tools_call(body: &str) -> bool {
        matches!(
            serde_json::from_str::<ClientJsonRpcMessage>(body),
            Ok(ClientJsonRpcMessage::Request(r)) if matches!(r.request, ClientRequest::CallToolRequest(_))
        )
    }

    #[test]
    fn plain_tools_calls_are_recognised_and_rmcp_agrees() {
        for body in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"herdr_fs_read","arguments":{"path":"a"}}}"#,
            r#"{"method":"tools/call","params":{"arguments":{"n":[1,{"x":null}]},"name":"t"},"id":"abc","jsonrpc":"2.0"}"#,
            r#"{"jsonrpc":"2.0","id":-7,"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":null}}"#,
            r#"{"jsonrpc":"2.0","id":"\u0041","method":"tools\/call","params":{"name":"t\n"}}"#,
            r#"{"jsonrpc":"2.0","id":9223372036854775807,"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":-9223372036854775808,"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":"","method":"tools/call","params":{"name":"t"}}"#,
        ] {
            assert!(is_plain_tools_call(body.as_bytes()), "{body}");
            assert!(rmcp_sees_tools_call(body), "rmcp disagrees on {body}");
        }
    }

    #[test]
    fn anything_else_goes_to_the_full_check() {
        for body in [
            "",
            "{nope",
            "[]",
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"tools/call","params":{"name":"t"}}"#,
            // Just past i64; and an integral float, which rmcp takes but this subset leaves
            // to the full check.
            r#"{"jsonrpc":"2.0","id":9223372036854775808,"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":1.0,"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":true,"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":[1],"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":{},"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":3}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":[1]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"progressToken":1}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"},"extra":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}} x"#,
        ] {
            assert!(!is_plain_tools_call(body.as_bytes()), "{body}");
        }
    }

    #[test]
    fn invalid_utf8_anywhere_goes_to_the_full_check() {
        // Found by envelope_props: a stray 0x80 inside the skipped arguments.
        let bodies: [&[u8]; 3] = [
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"t\",\"arguments\":{\"path\":\"\x80\"}}}",
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"t\",\"arguments\":{\"\xff\":1}}}",
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"t\xc3\"}}",
        ];
        for body in bodies {
            assert!(!is_plain_tools_call(body), "{:?}", String::from_utf8_lossy(body));
            assert!(serde_json::from_slice::<rmcp::model::ClientJsonRpcMessage>(body).is_err());
        }
    }
}
