//! Guards of the loopback TCP listener: a bearer compared in constant time, and
//! Host/Origin restricted to loopback names so that a web page cannot reach the
//! server through DNS rebinding. The Unix socket skips all of this (trusted).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use http::{HeaderMap, StatusCode, header};
use subtle::ConstantTimeEq;

use super::jsonrpc;

#[derive(Clone)]
pub struct TcpGuard {
    token: Arc<[u8]>,
}

impl TcpGuard {
    pub fn new(token: &str) -> Self {
        TcpGuard { token: Arc::from(token.as_bytes()) }
    }

    fn bearer_ok(&self, headers: &HeaderMap) -> bool {
        let Some(value) = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) else {
            return false;
        };
        let Some((scheme, presented)) = value.split_once(' ') else { return false };
        if !scheme.eq_ignore_ascii_case("bearer") {
            return false;
        }
        // `ct_eq` on slices of different lengths is false without comparing bytes;
        // the length of the token is not the secret.
        bool::from(presented.trim().as_bytes().ct_eq(&self.token))
    }
}

/// Loopback host names, with or without a port: `localhost`, `127.x.y.z`, `[::1]`.
pub fn is_loopback_authority(authority: &str) -> bool {
    let Ok(parsed) = authority.parse::<http::uri::Authority>() else { return false };
    let host = parsed.host();
    let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// An `Origin` is acceptable when absent or an http(s) origin on a loopback host.
fn origin_ok(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else { return true };
    let Ok(origin) = origin.to_str() else { return false };
    let Some(rest) = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://")) else {
        return false;
    };
    !rest.contains('/') && is_loopback_authority(rest)
}

fn host_ok(headers: &HeaderMap) -> bool {
    headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .is_some_and(is_loopback_authority)
}

/// Host/Origin first (a rebinding page must learn nothing, not even that a bearer
/// is wanted), then the bearer. `/health` needs no bearer, only the host check.
pub async fn guard(State(guard): State<TcpGuard>, request: Request, next: Next) -> Response<Body> {
    let headers = request.headers();
    if !host_ok(headers) || !origin_ok(headers) {
        let text = |name| headers.get(name).map_or("(none)", |v: &header::HeaderValue| v.to_str().unwrap_or("(not text)"));
        tracing::warn!(host = %text(header::HOST), origin = %text(header::ORIGIN), "refused non-loopback Host/Origin");
        return jsonrpc::error_response(
            StatusCode::FORBIDDEN,
            jsonrpc::SERVER_ERROR,
            "Forbidden: Host and Origin must name a loopback address",
            None,
        );
    }
    if request.uri().path() != "/health" && !guard.bearer_ok(headers) {
        return jsonrpc::unauthorized();
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(k.clone(), HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn loopback_authorities() {
        for ok in ["localhost", "LOCALHOST:8772", "127.0.0.1", "127.1.2.3:1", "[::1]", "[::1]:8772"] {
            assert!(is_loopback_authority(ok), "{ok}");
        }
        for bad in ["evil.com", "localhost.evil.com", "10.0.0.1:8772", "0.0.0.0", "[::]:1", "127.0.0.1.nip.io", ""] {
            assert!(!is_loopback_authority(bad), "{bad}");
        }
    }

    #[test]
    fn origins() {
        assert!(origin_ok(&headers(&[])));
        assert!(origin_ok(&headers(&[(header::ORIGIN, "http://localhost:3000")])));
        assert!(origin_ok(&headers(&[(header::ORIGIN, "https://127.0.0.1")])));
        assert!(!origin_ok(&headers(&[(header::ORIGIN, "http://evil.com")])));
        assert!(!origin_ok(&headers(&[(header::ORIGIN, "null")])));
        assert!(!origin_ok(&headers(&[(header::ORIGIN, "chrome-extension://abc")])));
    }

    #[test]
    fn bearer_must_match_exactly() {
        let g = TcpGuard::new("s3cret");
        assert!(g.bearer_ok(&headers(&[(header::AUTHORIZATION, "Bearer s3cret")])));
        assert!(g.bearer_ok(&headers(&[(header::AUTHORIZATION, "bearer s3cret")])));
        assert!(!g.bearer_ok(&headers(&[(header::AUTHORIZATION, "Bearer s3cre")])));
        assert!(!g.bearer_ok(&headers(&[(header::AUTHORIZATION, "Bearer s3cret2")])));
        assert!(!g.bearer_ok(&headers(&[(header::AUTHORIZATION, "Basic s3cret")])));
        assert!(!g.bearer_ok(&headers(&[])));
    }
}
