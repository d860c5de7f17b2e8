//! A cheap reader for the request the endpoint sees most: a plain, well-formed
//! `tools/call`.
//!
//! The endpoint must know a request's method before rmcp sees it, and rmcp's own
//! message model is costly to parse (untagged enums buffer the whole message and
//! try variant after variant). This reader accepts only a strict subset of what
//! rmcp accepts as a `tools/call`: exactly the members `jsonrpc` ("2.0"), `id`
//! (integer or string), `method` ("tools/call") and `params` holding `name`
//! (string) and optionally `arguments` (object or null). Anything else, including
//! `_meta` or an extra member, is left to the full check. What it reads (id, name,
//! arguments) is what rmcp would read from the same body, so the endpoint can
//! answer such a call without handing the body to rmcp to parse again.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use rmcp::model::{JsonObject, RequestId};
use serde::Deserialize;
use serde::de::{self, Visitor};

/// A plain `tools/call`, read from its body.
#[derive(Debug, Clone, PartialEq)]
pub struct PlainToolsCall {
    pub id: RequestId,
    pub name: String,
    /// `None` when the body has no `arguments` or `"arguments": null`, as for rmcp.
    pub arguments: Option<JsonObject>,
}

/// The call `body` holds when it is certainly a well-formed `tools/call` request.
pub fn parse_plain_tools_call(body: &[u8]) -> Option<PlainToolsCall> {
    // serde_json checks UTF-8 only in the strings it builds, not in those it skips,
    // while rmcp builds every string and refuses the body; so check it all first.
    let body = simdutf8::basic::from_utf8(body).ok()?;
    let message = serde_json::from_str::<Message>(body).ok()?;
    if message.jsonrpc != "2.0" || message.method != "tools/call" {
        return None;
    }
    Some(PlainToolsCall { id: message.id.0, name: message.params.name.into_owned(), arguments: message.params.arguments })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Message<'a> {
    #[serde(borrow)]
    jsonrpc: Cow<'a, str>,
    id: Id,
    #[serde(borrow)]
    method: Cow<'a, str>,
    #[serde(borrow)]
    params: Params<'a>,
}

/// rmcp's request id: a string or a number that fits an `i64`. Read by a visitor
/// rather than an untagged enum, which would buffer the value and try each variant.
struct Id(RequestId);

impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct IdVisitor;
        impl<'de> Visitor<'de> for IdVisitor {
            type Value = Id;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string or an integer that fits an i64")
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Id, E> {
                Ok(Id(RequestId::Number(n)))
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Id, E> {
                match i64::try_from(n) {
                    Ok(n) => Ok(Id(RequestId::Number(n))),
                    Err(_) => Err(E::invalid_value(de::Unexpected::Unsigned(n), &self)),
                }
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Id, E> {
                Ok(Id(RequestId::String(Arc::from(s))))
            }
        }
        // `deserialize_any`: serde_json hands an integer to visit_i64/visit_u64, a
        // float to visit_f64 (refused by default), a string to visit_str.
        deserializer.deserialize_any(IdVisitor)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Params<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(default)]
    arguments: Option<JsonObject>,
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use rmcp::model::{ClientJsonRpcMessage, ClientRequest};

    fn is_plain_tools_call(body: &[u8]) -> bool {
        parse_plain_tools_call(body).is_some()
    }

    /// The call as rmcp reads it from `body`, if it reads a `tools/call` there.
    pub(in crate::server) fn rmcp_reading(body: &[u8]) -> Option<PlainToolsCall> {
        match serde_json::from_slice::<ClientJsonRpcMessage>(body) {
            Ok(ClientJsonRpcMessage::Request(r)) => match r.request {
                ClientRequest::CallToolRequest(call) => Some(PlainToolsCall {
                    id: r.id,
                    name: call.params.name.into_owned(),
                    arguments: call.params.arguments,
                }),
                _ => None,
            },
            _ => None,
        }
    }

    fn rmcp_sees_tools_call(body: &str) -> bool {
        rmcp_reading(body.as_bytes()).is_some()
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
            assert_eq!(parse_plain_tools_call(body.as_bytes()), rmcp_reading(body.as_bytes()), "{body}");
        }
    }

    #[test]
    fn the_call_read_is_the_one_rmcp_reads() {
        let call = |body: &str| parse_plain_tools_call(body.as_bytes()).expect("a plain tools/call");
        let read = call(r#"{"jsonrpc":"2.0","id":"r\u00e9q","method":"tools/call","params":{"name":"herdr_fs_read","arguments":{"path":"a\nb","n":[1,2.5,-3],"o":{"k":null},"d":1,"d":2}}}"#);
        assert_eq!(read.id, RequestId::String(Arc::from("réq")));
        assert_eq!(read.name, "herdr_fs_read");
        let arguments = read.arguments.clone().expect("arguments");
        assert_eq!(arguments["path"], "a\nb");
        assert_eq!(arguments["n"], serde_json::json!([1, 2.5, -3]));
        assert_eq!(arguments["d"], 2, "a repeated key keeps its last value, as in rmcp's reading");
        assert_eq!(Some(read), rmcp_reading(br#"{"jsonrpc":"2.0","id":"r\u00e9q","method":"tools/call","params":{"name":"herdr_fs_read","arguments":{"path":"a\nb","n":[1,2.5,-3],"o":{"k":null},"d":1,"d":2}}}"#));
        assert_eq!(call(r#"{"jsonrpc":"2.0","id":-7,"method":"tools/call","params":{"name":"t"}}"#).id, RequestId::Number(-7));
        assert_eq!(call(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":null}}"#).arguments, None);
        assert_eq!(call(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{}}}"#).arguments, Some(JsonObject::new()));
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
