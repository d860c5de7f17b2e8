//! JSON-RPC error responses the HTTP layer writes itself (spec §3): every refusal
//! before rmcp, and rmcp's own plain-text refusals, reach clients as JSON-RPC.

use axum::body::Body;
use http::{HeaderValue, Response, StatusCode, header};
use serde_json::{Value, json};

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
/// Server-defined: authentication and session failures.
pub const UNAUTHORIZED: i64 = -32001;
pub const SERVER_ERROR: i64 = -32000;

/// The one wording for a method this server does not serve, whichever layer
/// refuses it (the endpoint for methods rmcp models, rmcp's handler for the rest).
pub fn method_not_found_message(method: &str) -> String {
    format!("Method not found: {method}")
}

pub fn error_body(code: i64, message: &str, id: Option<Value>) -> Value {
    json!({"jsonrpc": "2.0", "error": {"code": code, "message": message}, "id": id.unwrap_or(Value::Null)})
}

pub fn error_response(status: StatusCode, code: i64, message: &str, id: Option<Value>) -> Response<Body> {
    let body = error_body(code, message, id).to_string();
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// A successful JSON-RPC answer, always `application/json`.
pub fn result_response(id: Value, result: &Value) -> Response<Body> {
    let body = json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
    let mut response = Response::new(Body::from(body));
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// 202 with an empty body: a notification was taken (spec §3).
pub fn accepted() -> Response<Body> {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::ACCEPTED;
    response
}

pub fn unauthorized() -> Response<Body> {
    let mut response = error_response(StatusCode::UNAUTHORIZED, UNAUTHORIZED, "Unauthorized", None);
    response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

/// The JSON-RPC code that best describes an HTTP refusal without a JSON body.
pub fn code_for_status(status: StatusCode) -> i64 {
    match status {
        StatusCode::UNAUTHORIZED => UNAUTHORIZED,
        StatusCode::NOT_FOUND => UNAUTHORIZED,
        s if s.is_server_error() => INTERNAL_ERROR,
        StatusCode::METHOD_NOT_ALLOWED | StatusCode::FORBIDDEN => SERVER_ERROR,
        _ => INVALID_REQUEST,
    }
}
