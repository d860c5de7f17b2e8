//! The one table of what the host forwards: paths, methods, headers, and the size/time limits.
//! Anything not listed here is refused with a stable code before the runtime is contacted.

use crate::messages::{ErrorCode, HostError};
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::uri::PathAndQuery;
use http::Method;
use std::collections::BTreeMap;
use std::time::Duration;

/// How a path may be used: plain request/response, or a long-lived push stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteKind {
    Request,
    Stream,
}

pub struct Route {
    pub path: &'static str,
    pub methods: &'static [Method],
    pub kind: RouteKind,
}

/// Later issues add their paths here, and nowhere else.
pub const ROUTES: &[Route] = &[
    Route { path: "/mcp", methods: &[Method::GET, Method::POST, Method::DELETE], kind: RouteKind::Request },
    Route { path: "/health", methods: &[Method::GET], kind: RouteKind::Request },
    Route { path: "/push/state", methods: &[Method::GET], kind: RouteKind::Request },
    Route { path: "/push/events", methods: &[Method::GET], kind: RouteKind::Stream },
    // The runtime's activity log, newest entries, read-only (the options page).
    Route { path: "/activity", methods: &[Method::GET], kind: RouteKind::Request },
];

/// Request headers copied to the runtime; everything else (notably `authorization`) is dropped.
pub const FORWARDED_REQUEST_HEADERS: &[&str] =
    &["content-type", "accept", "mcp-protocol-version", "mcp-session-id", "x-herdr-client"];

/// Response headers handed back to the extension.
pub const RETURNED_RESPONSE_HEADERS: &[&str] =
    &["content-type", "cache-control", "mcp-session-id", "mcp-protocol-version"];

/// Largest request body forwarded to the runtime.
pub const MAX_REQUEST_BODY: usize = 1 << 20;
/// Largest response body read from the runtime (larger bodies are chunked towards the browser).
pub const MAX_RESPONSE_BODY: usize = 8 << 20;
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(10_000);
pub const MIN_TIMEOUT: Duration = Duration::from_millis(1_000);
pub const MAX_TIMEOUT: Duration = Duration::from_millis(120_000);

/// `timeout_ms` as sent (maybe absent, fractional or absurd) → the timeout actually used.
pub fn clamp_timeout(timeout_ms: Option<f64>) -> Duration {
    match timeout_ms {
        Some(ms) if ms.is_finite() => {
            let ms = ms.clamp(MIN_TIMEOUT.as_millis() as f64, MAX_TIMEOUT.as_millis() as f64);
            Duration::from_millis(ms as u64)
        }
        _ => DEFAULT_TIMEOUT,
    }
}

/// Validates a path (with optional query) for the given use and returns it parsed.
pub fn check_path(path: &str, kind: RouteKind) -> Result<(PathAndQuery, &'static Route), HostError> {
    let refuse = |why: &str| {
        let code = match kind {
            RouteKind::Request => ErrorCode::PathNotAllowed,
            RouteKind::Stream => ErrorCode::StreamPathNotAllowed,
        };
        HostError::new(code, format!("path {path:?} is not allowed: {why}"))
    };
    if !path.starts_with('/') || path.contains('#') {
        return Err(refuse("it must be an absolute path without a fragment"));
    }
    let parsed: PathAndQuery = path.parse().map_err(|_| refuse("it is not a valid path"))?;
    // Exact match on the raw path: no normalisation, so `/mcp/../x`, `/mcp/` or `%2F` tricks
    // simply do not match any entry.
    let route = ROUTES
        .iter()
        .find(|r| r.path == parsed.path())
        .ok_or_else(|| refuse("it is not in the allow-list"))?;
    if route.kind != kind {
        return Err(refuse(match route.kind {
            RouteKind::Stream => "it is a push stream; open it with a stream message",
            RouteKind::Request => "it is not a push stream",
        }));
    }
    Ok((parsed, route))
}

pub fn check_method(method: &str, route: &Route) -> Result<Method, HostError> {
    let upper = method.to_ascii_uppercase();
    route
        .methods
        .iter()
        .find(|m| m.as_str() == upper)
        .cloned()
        .ok_or_else(|| {
            HostError::new(
                ErrorCode::ProxyMethodNotAllowed,
                format!("method {method:?} is not allowed on {}", route.path),
            )
        })
}

/// Keeps only the allow-listed headers; a kept header with an unusable value is refused.
pub fn forwarded_headers(headers: &BTreeMap<String, String>) -> Result<HeaderMap, HostError> {
    let mut out = HeaderMap::new();
    for (name, value) in headers {
        let lower = name.to_ascii_lowercase();
        if !FORWARDED_REQUEST_HEADERS.contains(&lower.as_str()) {
            continue;
        }
        let header_name = HeaderName::from_bytes(lower.as_bytes())
            .map_err(|_| HostError::new(ErrorCode::InvalidProxyHeader, format!("bad header name {name:?}")))?;
        let header_value = HeaderValue::from_str(value).map_err(|_| {
            HostError::new(ErrorCode::InvalidProxyHeader, format!("header {lower} has a value that cannot be sent"))
        })?;
        out.append(header_name, header_value);
    }
    Ok(out)
}

/// `base_url` is accepted for compatibility with callers that still send one, but only a
/// loopback http URL: the host never talks to anything but the local Unix socket.
pub fn check_base_url(base_url: Option<&str>) -> Result<(), HostError> {
    let Some(url) = base_url else { return Ok(()) };
    let refuse = || HostError::new(ErrorCode::BaseUrlNotAllowed, format!("base_url {url:?} is not a loopback http URL"));
    let uri: http::Uri = url.parse().map_err(|_| refuse())?;
    if uri.scheme_str() != Some("http") {
        return Err(refuse());
    }
    match uri.host() {
        Some("127.0.0.1" | "localhost" | "[::1]") => Ok(()),
        _ => Err(refuse()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(r: Result<impl Sized, HostError>) -> &'static str {
        r.err().expect("expected a refusal").code.as_str()
    }

    #[test]
    fn listed_paths_pass_with_their_query() {
        let (pq, route) = check_path("/mcp?x=1", RouteKind::Request).unwrap();
        assert_eq!((pq.as_str(), route.path), ("/mcp?x=1", "/mcp"));
        assert!(check_path("/push/events?since=3", RouteKind::Stream).is_ok());
    }

    #[test]
    fn everything_else_is_refused_with_a_code() {
        for p in ["/mcp/", "/mcp/../etc", "//mcp", "mcp", "/%6Dcp", "/admin", "/mcp#x", "/health\n", ""] {
            assert_eq!(code(check_path(p, RouteKind::Request)), "path_not_allowed", "{p:?}");
        }
        assert_eq!(code(check_path("/push/events", RouteKind::Request)), "path_not_allowed");
        assert_eq!(code(check_path("/mcp", RouteKind::Stream)), "stream_path_not_allowed");
        assert_eq!(code(check_path("/push/eventsx", RouteKind::Stream)), "stream_path_not_allowed");
    }

    #[test]
    fn methods_follow_the_table() {
        let (_, mcp) = check_path("/mcp", RouteKind::Request).unwrap();
        let (_, health) = check_path("/health", RouteKind::Request).unwrap();
        assert_eq!(check_method("post", mcp).unwrap(), Method::POST);
        assert_eq!(check_method("DELETE", mcp).unwrap(), Method::DELETE);
        assert_eq!(code(check_method("PUT", mcp)), "proxy_method_not_allowed");
        assert_eq!(code(check_method("POST", health)), "proxy_method_not_allowed");
        let (_, activity) = check_path("/activity?caller=extension&limit=20", RouteKind::Request).unwrap();
        assert_eq!(check_method("get", activity).unwrap(), Method::GET);
        assert_eq!(code(check_method("POST", activity)), "proxy_method_not_allowed");
        assert_eq!(code(check_method("DELETE", activity)), "proxy_method_not_allowed");
    }

    #[test]
    fn authorization_and_unknown_headers_are_dropped() {
        let mut h = BTreeMap::new();
        h.insert("Authorization".to_owned(), "Bearer secret".to_owned());
        h.insert("Cookie".to_owned(), "a=b".to_owned());
        h.insert("Content-Type".to_owned(), "application/json".to_owned());
        h.insert("mcp-session-id".to_owned(), "s1".to_owned());
        let out = forwarded_headers(&h).unwrap();
        assert_eq!(out.len(), 2);
        assert!(out.get("authorization").is_none());
        assert_eq!(out["content-type"], "application/json");
        h.insert("accept".to_owned(), "a\r\nx: y".to_owned());
        assert_eq!(code(forwarded_headers(&h)), "invalid_proxy_header");
    }

    #[test]
    fn timeouts_clamp_at_both_edges() {
        assert_eq!(clamp_timeout(None), DEFAULT_TIMEOUT);
        assert_eq!(clamp_timeout(Some(f64::NAN)), DEFAULT_TIMEOUT);
        assert_eq!(clamp_timeout(Some(999.0)), MIN_TIMEOUT);
        assert_eq!(clamp_timeout(Some(1_000.0)), MIN_TIMEOUT);
        assert_eq!(clamp_timeout(Some(1_001.0)), Duration::from_millis(1_001));
        assert_eq!(clamp_timeout(Some(120_000.0)), MAX_TIMEOUT);
        assert_eq!(clamp_timeout(Some(120_001.0)), MAX_TIMEOUT);
        assert_eq!(clamp_timeout(Some(-5.0)), MIN_TIMEOUT);
    }

    #[test]
    fn base_url_must_be_loopback_http() {
        assert!(check_base_url(None).is_ok());
        assert!(check_base_url(Some("http://127.0.0.1:8772")).is_ok());
        assert!(check_base_url(Some("http://localhost")).is_ok());
        assert!(check_base_url(Some("http://[::1]:9/")).is_ok());
        for bad in ["https://127.0.0.1", "http://example.com", "http://127.0.0.1.evil.com", "nonsense"] {
            assert_eq!(code(check_base_url(Some(bad))), "base_url_not_allowed", "{bad}");
        }
    }
}
