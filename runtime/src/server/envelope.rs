//! The endpoint's one reading of a POST body before rmcp sees it: the spec §3
//! refusals rmcp would answer as plain text or not at all (unparseable JSON,
//! batches, messages that are not JSON-RPC 2.0), and what routing needs to know —
//! the method, the answers the endpoint gives itself (`server/discover`, methods
//! nobody serves) and whether an `initialize` names one of OpenAI's clients.
//! Everything is taken from that single parse; no later step reads the body again.

use axum::body::Body;
use bytes::Bytes;
use http::{Response, StatusCode};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, GetMeta, JsonRpcRequest};
use serde_json::Value;

use super::fast_tools_call::{PlainToolsCall, parse_plain_tools_call};
use super::jsonrpc::{self, INVALID_REQUEST, PARSE_ERROR};
use crate::mcp_discover::{self, is_openai_client_name, meta_names_openai_client};

/// Methods with typed params in rmcp that this server answers through rmcp.
const SERVED_METHODS: &[&str] = &["initialize", "ping", "tools/list", "tools/call"];

/// What the layer learned from the body.
pub(super) struct Envelope {
    pub method: Option<String>,
    /// Set when the endpoint answers this message itself.
    pub local: Option<LocalAnswer>,
    /// An `initialize` whose `clientInfo.name` is one of OpenAI's (spec §3: such a
    /// client is stateless).
    pub openai_client: bool,
    /// A plain `tools/call`, already read: the endpoint may answer it itself.
    pub tools_call: Option<PlainToolsCall>,
}

pub(super) enum LocalAnswer {
    /// `server/discover`: `id` is `None` for a notification; `openai` when the
    /// request's `_meta` names one of OpenAI's clients (the User-Agent is the
    /// endpoint's to read).
    Discover { id: Option<Value>, openai: bool },
    /// A request for a method this server does not serve (spec §3: -32601). rmcp
    /// models several of them (`resources/list`, `prompts/list`, …) and would
    /// answer each its own way; the endpoint gives them all the same answer.
    MethodNotFound { id: Value },
}

impl Envelope {
    fn of_method(method: Option<String>) -> Self {
        Envelope { method, local: None, openai_client: false, tools_call: None }
    }
}

/// Reads `bytes` once: the routing facts, or the finished HTTP refusal.
#[allow(clippy::result_large_err, reason = "the error is the HTTP answer itself, built at most once per request")]
pub(super) fn check_envelope(bytes: &Bytes) -> Result<Envelope, Response<Body>> {
    // Most bodies are plain tool calls, which a light parse recognises for sure.
    if let Some(call) = parse_plain_tools_call(bytes) {
        return Ok(Envelope { tools_call: Some(call), ..Envelope::of_method(Some("tools/call".to_string())) });
    }
    // Almost every other body is a well-formed request or notification: one parse
    // into rmcp's model settles it. Anything else gets the step-by-step diagnosis.
    match serde_json::from_slice::<ClientJsonRpcMessage>(bytes) {
        Ok(ClientJsonRpcMessage::Request(request)) => of_request(&request),
        // Notifications and responses are rare (rmcp's model does not expose a
        // notification's method name), and a body can parse as a response while
        // carrying a `method` that is not a string, which the diagnosis refuses.
        Ok(_) | Err(_) => diagnose_envelope(bytes),
    }
}

/// The envelope of a request rmcp's model reads.
#[allow(clippy::result_large_err, reason = "the error is the HTTP answer itself, built at most once per request")]
fn of_request(request: &JsonRpcRequest<ClientRequest>) -> Result<Envelope, Response<Body>> {
    let method = request.request.method();
    let id = || request.id.clone().into_json_value();
    // A method we serve whose params do not fit lands in rmcp's catch-all and
    // would come back as "method not found"; name the real problem.
    if let ClientRequest::CustomRequest(custom) = &request.request
        && SERVED_METHODS.contains(&method)
    {
        // Spec §3 gives a tools/call without any `params.name` the internal-error
        // code (the reference server fails inside its handler there); every other
        // misfit is invalid params.
        // `null` counts as absent, as everywhere in the contract (§0).
        let nameless =
            method == "tools/call" && custom.params.as_ref().and_then(|p| p.get("name")).is_none_or(Value::is_null);
        if nameless {
            return Err(jsonrpc::error_response(
                StatusCode::OK,
                jsonrpc::INTERNAL_ERROR,
                "Internal error: tools/call needs params.name, the tool to call",
                Some(id()),
            ));
        }
        return Err(invalid_params_for(method, Some(id())));
    }
    let local = if method == mcp_discover::METHOD {
        Some(LocalAnswer::Discover { id: Some(id()), openai: discover_names_openai(&request.request) })
    } else if SERVED_METHODS.contains(&method) {
        None
    } else {
        Some(LocalAnswer::MethodNotFound { id: id() })
    };
    let openai_client = matches!(
        &request.request,
        ClientRequest::InitializeRequest(init) if is_openai_client_name(&init.params.client_info.name)
    );
    Ok(Envelope { method: Some(method.to_string()), local, openai_client, tools_call: None })
}

/// Whether a `server/discover` request's `_meta` names one of OpenAI's clients.
/// rmcp keeps `_meta` apart from the params it types; a request whose params it
/// cannot type stays a custom request with its params as sent.
fn discover_names_openai(request: &ClientRequest) -> bool {
    if meta_names_openai_client(&request.get_meta().0.0) {
        return true;
    }
    match request {
        ClientRequest::CustomRequest(custom) => custom
            .params
            .as_ref()
            .and_then(|p| p.get("_meta"))
            .and_then(Value::as_object)
            .is_some_and(meta_names_openai_client),
        _ => false,
    }
}

fn invalid_params_for(method: &str, id: Option<Value>) -> Response<Body> {
    jsonrpc::error_response(
        StatusCode::OK,
        jsonrpc::INVALID_PARAMS,
        &format!("Invalid params for {method}: {}", params_hint(method)),
        id,
    )
}

/// The full check, step by step, naming the first thing wrong with the body.
#[allow(clippy::result_large_err, reason = "the error is the HTTP answer itself, built at most once per request")]
fn diagnose_envelope(bytes: &Bytes) -> Result<Envelope, Response<Body>> {
    let bad = |code: i64, message: String, id: Option<Value>| {
        Err(jsonrpc::error_response(StatusCode::BAD_REQUEST, code, &message, id))
    };
    let value: Value = match serde_json::from_slice(bytes) {
        Ok(value) => value,
        Err(e) => return bad(PARSE_ERROR, format!("Parse error: {e}"), None),
    };
    let obj = match value {
        Value::Object(obj) => obj,
        Value::Array(_) => {
            return bad(INVALID_REQUEST, "Invalid Request: batch requests are not supported".into(), None);
        }
        _ => {
            return bad(INVALID_REQUEST, "Invalid Request: expected a JSON-RPC object".into(), None);
        }
    };
    let id = obj.get("id").cloned();
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return bad(INVALID_REQUEST, "Invalid Request: jsonrpc must be \"2.0\"".into(), id);
    }
    let method = match obj.get("method") {
        Some(Value::String(m)) => Some(m.clone()),
        Some(_) => {
            return bad(INVALID_REQUEST, "Invalid Request: method must be a string".into(), id);
        }
        None if obj.contains_key("result") || obj.contains_key("error") => None,
        None => {
            return bad(INVALID_REQUEST, "Invalid Request: method is missing".into(), id);
        }
    };
    // rmcp would refuse a message its model cannot represent with a bare 415; say
    // what is wrong instead.
    match serde_json::from_value::<ClientJsonRpcMessage>(Value::Object(obj)) {
        Err(e) => bad(INVALID_REQUEST, format!("Invalid Request: {e}"), id),
        Ok(ClientJsonRpcMessage::Request(request)) => of_request(&request),
        // A notification gets no reply (spec §3); `server/discover`'s 202 is the
        // endpoint's to give, every other one rmcp's.
        Ok(_) if method.as_deref() == Some(mcp_discover::METHOD) => Ok(Envelope {
            method,
            local: Some(LocalAnswer::Discover { id: None, openai: false }),
            openai_client: false,
            tools_call: None,
        }),
        Ok(_) => Ok(Envelope::of_method(method)),
    }
}

fn params_hint(method: &str) -> &'static str {
    match method {
        "tools/call" => "params.name must be a string and params.arguments an object",
        "initialize" => "params needs protocolVersion, capabilities and clientInfo",
        _ => "params do not match the method",
    }
}

#[cfg(test)]
#[path = "envelope_props.rs"]
mod envelope_props;

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    fn envelope(body: &str) -> Envelope {
        match check_envelope(&Bytes::from(body.to_string())) {
            Ok(envelope) => envelope,
            Err(r) => panic!("{body} was refused with {}", r.status()),
        }
    }

    #[test]
    fn envelope_errors_use_spec_codes() {
        let code = |body: &str| match check_envelope(&Bytes::from(body.to_string())) {
            Ok(_) => 0,
            Err(r) => {
                assert_eq!(r.status(), StatusCode::BAD_REQUEST);
                let b = futures::executor::block_on(r.into_body().collect()).unwrap().to_bytes();
                serde_json::from_slice::<Value>(&b).unwrap()["error"]["code"].as_i64().unwrap()
            }
        };
        assert_eq!(code("{nope"), PARSE_ERROR);
        assert_eq!(code("[]"), INVALID_REQUEST);
        assert_eq!(code("7"), INVALID_REQUEST);
        assert_eq!(code(r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#), INVALID_REQUEST);
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":1,"method":5}"#), INVALID_REQUEST);
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":1}"#), INVALID_REQUEST);
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#), 0);
        assert_eq!(code(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#), 0);
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":1,"method":5,"result":{}}"#), INVALID_REQUEST);
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#), 0);
    }

    #[test]
    fn well_formed_requests_name_their_method_and_bad_params_of_served_methods_are_named() {
        let method = |body: &str| envelope(body).method;
        assert_eq!(
            method(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{}}}"#).as_deref(),
            Some("tools/call")
        );
        assert_eq!(method(r#"{"jsonrpc":"2.0","id":"a","method":"tools/list"}"#).as_deref(), Some("tools/list"));
        assert_eq!(method(r#"{"jsonrpc":"2.0","id":2,"method":"vendor/thing"}"#).as_deref(), Some("vendor/thing"));
        let response = check_envelope(&Bytes::from_static(
            br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":3}}"#,
        ))
        .err()
        .expect("bad tools/call params are refused");
        assert_eq!(response.status(), StatusCode::OK);
        let b = futures::executor::block_on(response.into_body().collect()).unwrap().to_bytes();
        let v: Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(v["error"]["code"], jsonrpc::INVALID_PARAMS);
        assert_eq!(v["id"], 7);
    }

    #[test]
    fn discover_is_read_in_the_one_parse_whatever_shape_rmcp_gives_it() {
        let discover = |body: &str| match envelope(body).local {
            Some(LocalAnswer::Discover { id, openai }) => (id, openai),
            _ => panic!("{body} is not answered as server/discover"),
        };
        let chatgpt = r#"{"io.modelcontextprotocol/clientInfo":{"name":"ChatGPT","version":"1"}}"#;
        // No params, empty params, `_meta` only (rmcp's typed form), and params rmcp
        // cannot type (a custom request), each with and without an OpenAI name.
        assert_eq!(discover(r#"{"jsonrpc":"2.0","id":1,"method":"server/discover"}"#), (Some(Value::from(1)), false));
        assert_eq!(
            discover(r#"{"jsonrpc":"2.0","id":"d","method":"server/discover","params":{}}"#),
            (Some(Value::from("d")), false)
        );
        let typed = format!(r#"{{"jsonrpc":"2.0","id":2,"method":"server/discover","params":{{"_meta":{chatgpt}}}}}"#);
        assert_eq!(discover(&typed), (Some(Value::from(2)), true));
        let custom =
            format!(r#"{{"jsonrpc":"2.0","id":3,"method":"server/discover","params":{{"x":1,"_meta":{chatgpt}}}}}"#);
        assert_eq!(discover(&custom), (Some(Value::from(3)), true));
        let other = r#"{"jsonrpc":"2.0","id":4,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/clientInfo":{"name":"cli"}}}}"#;
        assert_eq!(discover(other), (Some(Value::from(4)), false));
        assert_eq!(discover(r#"{"jsonrpc":"2.0","method":"server/discover"}"#), (None, false), "a notification");
    }

    #[test]
    fn unserved_requests_are_answered_here_and_openai_initialize_is_flagged() {
        for method in ["resources/list", "prompts/list", "resources/templates/list", "logging/setLevel", "vendor/thing"]
        {
            let body = format!(r#"{{"jsonrpc":"2.0","id":5,"method":"{method}"}}"#);
            assert!(matches!(envelope(&body).local, Some(LocalAnswer::MethodNotFound { .. })), "{method}");
        }
        for method in ["ping", "tools/list"] {
            let body = format!(r#"{{"jsonrpc":"2.0","id":5,"method":"{method}"}}"#);
            assert!(envelope(&body).local.is_none(), "{method}");
        }
        // Notifications of any method are rmcp's to accept with 202.
        assert!(envelope(r#"{"jsonrpc":"2.0","method":"notifications/whatever"}"#).local.is_none());
        let init = |name: &str| {
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{{"name":"{name}","version":"1"}}}}}}"#
            );
            envelope(&body).openai_client
        };
        assert!(init("chatgpt") && init("OpenAI Connector") && init("my-ChatGPT-bridge"));
        assert!(!init("claude-code") && !init("open-ai"));
    }
}
