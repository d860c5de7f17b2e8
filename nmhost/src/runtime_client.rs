//! HTTP/1.1 to the runtime over its Unix socket (hyper). One connection per call: connecting to
//! a local socket costs microseconds and keeps calls fully independent (no head-of-line
//! blocking between multiplexed requests, no pool state to go stale).

use crate::allow::{MAX_RESPONSE_BODY, RETURNED_RESPONSE_HEADERS};
use crate::messages::{ErrorCode, HostError};
use bytes::Bytes;
use http::header::{HeaderMap, HeaderValue, HOST};
use http::uri::PathAndQuery;
use http::{Method, Request};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::net::UnixStream;
use tokio::task::JoinHandle;

#[derive(Debug, Clone)]
pub struct RuntimeClient {
    socket: PathBuf,
}

#[derive(Debug)]
pub struct ForwardRequest {
    pub method: Method,
    pub path_and_query: PathAndQuery,
    pub headers: HeaderMap,
    pub body: Bytes,
}

#[derive(Debug)]
pub struct RuntimeResponse {
    pub status: u16,
    pub headers: BTreeMap<String, String>,
    pub body: Bytes,
}

/// Owns the task driving one HTTP connection; dropping it closes the connection, so a cancelled
/// call releases its socket at once instead of whenever hyper notices.
pub struct Connection(JoinHandle<()>);

impl Drop for Connection {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// An open push stream: the response head has arrived, the body is still flowing.
pub struct OpenStream {
    pub status: u16,
    pub body: Incoming,
    pub connection: Connection,
}

impl RuntimeClient {
    pub fn new(socket: impl Into<PathBuf>) -> Self {
        Self { socket: socket.into() }
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    async fn connect(&self) -> Result<(hyper::client::conn::http1::SendRequest<Full<Bytes>>, Connection), HostError> {
        let stream = UnixStream::connect(&self.socket).await.map_err(|e| {
            HostError::new(
                ErrorCode::ExtensionIpcUnavailable,
                format!("cannot reach the herdr-mcp runtime at {}: {e}", self.socket.display()),
            )
        })?;
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| {
            HostError::new(ErrorCode::ExtensionIpcUnavailable, format!("HTTP handshake with the runtime failed: {e}"))
        })?;
        let driver = tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "runtime connection ended with an error");
            }
        });
        Ok((sender, Connection(driver)))
    }

    fn build(method: Method, pq: &PathAndQuery, headers: HeaderMap, body: Bytes) -> Result<Request<Full<Bytes>>, HostError> {
        let mut req = Request::builder()
            .method(method)
            .uri(pq.as_str())
            .body(Full::new(body))
            .map_err(|e| HostError::new(ErrorCode::InvalidNativeMessage, format!("cannot build the request: {e}")))?;
        *req.headers_mut() = headers;
        // The socket is local; the runtime still expects a Host header on HTTP/1.1.
        req.headers_mut().insert(HOST, HeaderValue::from_static("localhost"));
        Ok(req)
    }

    /// One request/response round trip; `timeout` covers connecting, sending and the whole body.
    pub async fn send(&self, request: ForwardRequest, timeout: Duration) -> Result<RuntimeResponse, HostError> {
        match tokio::time::timeout(timeout, self.send_unbounded(request)).await {
            Ok(result) => result,
            Err(_) => Err(HostError::new(
                ErrorCode::NativeRequestTimeout,
                format!("the runtime did not answer within {} ms", timeout.as_millis()),
            )),
        }
    }

    async fn send_unbounded(&self, request: ForwardRequest) -> Result<RuntimeResponse, HostError> {
        let (mut sender, _connection) = self.connect().await?;
        let req = Self::build(request.method, &request.path_and_query, request.headers, request.body)?;
        let response = sender.send_request(req).await.map_err(|e| {
            HostError::new(ErrorCode::NativeResponseFailed, format!("the runtime did not return a response: {e}"))
        })?;
        let (parts, body) = response.into_parts();
        let body = Limited::new(body, MAX_RESPONSE_BODY).collect().await.map_err(|e| {
            if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() {
                HostError::new(
                    ErrorCode::NativeResponseTooLarge,
                    format!("the runtime's response exceeds {MAX_RESPONSE_BODY} bytes"),
                )
            } else {
                HostError::new(ErrorCode::NativeResponseFailed, format!("reading the runtime's response failed: {e}"))
            }
        })?;
        Ok(RuntimeResponse { status: parts.status.as_u16(), headers: returned_headers(&parts.headers), body: body.to_bytes() })
    }

    /// Opens a push stream with `GET` and `Accept: text/event-stream`; `timeout` bounds only the
    /// time until the response head arrives.
    pub async fn open_stream(&self, pq: &PathAndQuery, timeout: Duration) -> Result<OpenStream, HostError> {
        let open = async {
            let (mut sender, connection) = self.connect().await?;
            let mut headers = HeaderMap::new();
            headers.insert(http::header::ACCEPT, HeaderValue::from_static("text/event-stream"));
            let req = Self::build(Method::GET, pq, headers, Bytes::new())?;
            let response = sender.send_request(req).await.map_err(|e| {
                HostError::new(ErrorCode::NativeStreamFailed, format!("the runtime did not open the stream: {e}"))
            })?;
            Ok(OpenStream { status: response.status().as_u16(), body: response.into_body(), connection })
        };
        match tokio::time::timeout(timeout, open).await {
            Ok(result) => result,
            Err(_) => Err(HostError::new(
                ErrorCode::NativeStreamConnectTimeout,
                format!("the runtime did not open the stream within {} ms", timeout.as_millis()),
            )),
        }
    }

    /// Whether `GET /health` answers 2xx within `timeout`.
    pub async fn is_healthy(&self, timeout: Duration) -> bool {
        let request = ForwardRequest {
            method: Method::GET,
            path_and_query: PathAndQuery::from_static("/health"),
            headers: HeaderMap::new(),
            body: Bytes::new(),
        };
        matches!(self.send(request, timeout).await, Ok(r) if (200..300).contains(&r.status))
    }
}

fn returned_headers(headers: &HeaderMap) -> BTreeMap<String, String> {
    RETURNED_RESPONSE_HEADERS
        .iter()
        .filter_map(|name| {
            let value = headers.get(*name)?.to_str().ok()?;
            Some(((*name).to_owned(), value.to_owned()))
        })
        .collect()
}
