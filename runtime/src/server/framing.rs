//! How answers leave the endpoint (spec §3): `initialize` and `tools/list` as one
//! SSE frame (`event: message`, `data: <json>`) when the client accepts SSE, every
//! other answer as `application/json`.
//!
//! rmcp's services answer otherwise: the stateless one always as JSON, the session
//! one always as an SSE stream (a priming event, then the answer). So the endpoint
//! takes the one JSON-RPC answer out of whichever it got and frames it itself.

use axum::body::Body;
use bytes::BytesMut;
use http::{HeaderValue, Response, header};
use http_body_util::BodyExt;
use serde_json::Value;

/// The JSON-RPC answer in `response`, as JSON text: its body when that is JSON,
/// else the `data` of the first SSE event that holds a result or an error. `None`
/// when an SSE stream ends without one.
pub async fn answer_text(response: Response<Body>) -> Result<(http::response::Parts, Option<String>), axum::Error> {
    let is_sse = is_event_stream(&response);
    let (parts, mut body) = response.into_parts();
    if !is_sse {
        let bytes = body.collect().await?.to_bytes();
        return Ok((parts, Some(String::from_utf8_lossy(&bytes).into_owned())));
    }
    let mut buffer = BytesMut::new();
    loop {
        while let Some(end) = find_event_end(&buffer) {
            let event = buffer.split_to(end).freeze();
            if let Some(answer) = answer_in_event(&event) {
                // The answer ends the request's stream; nothing after it is needed.
                return Ok((parts, Some(answer)));
            }
        }
        match body.frame().await {
            None => break,
            Some(frame) => {
                if let Ok(data) = frame?.into_data() {
                    buffer.extend_from_slice(&data);
                }
            }
        }
    }
    // A last event without its blank line.
    Ok((parts, answer_in_event(&buffer)))
}

/// `application/json` with `json` as the body.
pub fn json(mut parts: http::response::Parts, json: String) -> Response<Body> {
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Response::from_parts(parts, Body::from(json))
}

/// One SSE frame: `event: message`, the JSON on one `data:` line (serde writes no
/// raw newlines, and JSON text from elsewhere is rewritten by serde first).
pub fn sse_frame(mut parts: http::response::Parts, json: &str) -> Response<Body> {
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    parts.headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    Response::from_parts(parts, Body::from(format!("event: message\ndata: {json}\n\n")))
}

pub fn is_event_stream(response: &Response<Body>) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
}

/// The event's `data` when it is a JSON-RPC answer (an object with `result` or
/// `error`); priming events, comments and notifications are not.
fn answer_in_event(event: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(event).ok()?;
    let data: Vec<&str> =
        text.lines().filter_map(|line| line.strip_prefix("data:")).map(|d| d.strip_prefix(' ').unwrap_or(d)).collect();
    if data.is_empty() {
        return None;
    }
    let data = data.join("\n");
    let message: Value = serde_json::from_str(&data).ok()?;
    let obj = message.as_object()?;
    if !(obj.contains_key("result") || obj.contains_key("error")) {
        return None;
    }
    // rmcp writes one compact line; JSON spread over several `data:` lines is
    // written again as one, so that it fits one `data:` line of ours.
    Some(if data.contains('\n') { message.to_string() } else { data })
}

fn find_event_end(buf: &[u8]) -> Option<usize> {
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|p| p + 2);
    let crlf = buf.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4);
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;

    use bytes::Bytes;

    use hyper::body::Frame;

    fn streamed(chunks: &[&'static [u8]]) -> Response<Body> {
        let frames: Vec<Result<Frame<Bytes>, Infallible>> =
            chunks.iter().map(|c| Ok(Frame::data(Bytes::from_static(c)))).collect();
        let mut response = Response::new(Body::new(http_body_util::StreamBody::new(futures::stream::iter(frames))));
        response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
        response
    }

    fn answer(response: Response<Body>) -> Option<String> {
        futures::executor::block_on(answer_text(response)).expect("in-memory body").1
    }

    #[test]
    fn the_answer_is_found_past_priming_events_comments_and_split_frames() {
        let response = streamed(&[
            b"id: 0\nretry: 3000\ndata:\n\n: keep-alive\n\n",
            b"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\nid: 1\nda",
            b"ta: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"a\":1}}\r\n\r\n",
        ]);
        assert_eq!(answer(response).as_deref(), Some(r#"{"jsonrpc":"2.0","id":7,"result":{"a":1}}"#));
        let split = streamed(&[b"data: {\"jsonrpc\":\"2.0\",\ndata: \"id\":2,\"result\":{}}\n\n"]);
        let split: Value = serde_json::from_str(&answer(split).expect("an answer")).unwrap();
        assert_eq!(split, serde_json::json!({"jsonrpc": "2.0", "id": 2, "result": {}}));
        let error = streamed(&[b"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32601,\"message\":\"m\"}}"]);
        assert!(answer(error).is_some_and(|a| a.contains("-32601")), "a last event without its blank line");
        assert_eq!(answer(streamed(&[b"id: 0\ndata:\n\n", b": ping\n\n"])), None);
    }

    #[test]
    fn a_json_body_is_the_answer_as_it_is() {
        let mut response = Response::new(Body::from(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#));
        response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        assert_eq!(answer(response).as_deref(), Some(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#));
    }
}
