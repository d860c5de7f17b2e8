//! Guards of the loopback TCP listener: a bearer compared in constant time, and
//! Host/Origin restricted to loopback names so that a web page cannot reach the
//! server through DNS rebinding. The Unix socket skips all of this (trusted).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use http::{HeaderMap, StatusCode, header};
use subtle::ConstantTimeEq;

use super::jsonrpc;

#[derive(Clone)]
pub struct TcpGuard {
    token: Arc<[u8]>,
    strikes: Arc<Strikes>,
}

/// Wrong bearers a source may present before its refusals slow down.
pub const FREE_FAILURES: u32 = 5;
/// The first delay after the free failures; each further failure doubles it.
const FIRST_DELAY: Duration = Duration::from_millis(250);
/// The longest delay of one refusal.
pub const MAX_DELAY: Duration = Duration::from_secs(1);
/// A source that presented no wrong bearer for this long starts afresh.
const FORGET_AFTER: Duration = Duration::from_secs(60);
/// Sources remembered at most; beyond it the oldest are forgotten.
const MAX_SOURCES: usize = 4096;

/// Wrong bearers per source address. A source past [`FREE_FAILURES`] waits
/// before each refusal, one refusal at a time (its gate), so parallel guesses from
/// one address queue instead of multiplying the rate. Right bearers never wait.
#[derive(Default)]
struct Strikes {
    by_source: Mutex<HashMap<IpAddr, Strike>>,
}

struct Strike {
    count: u32,
    last: Instant,
    gate: Arc<tokio::sync::Mutex<()>>,
}

impl Strikes {
    /// Records a failure of `source`; the delay its refusal waits, and its gate.
    fn record(&self, source: IpAddr) -> (Duration, Arc<tokio::sync::Mutex<()>>) {
        let now = Instant::now();
        let mut map = self.by_source.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= MAX_SOURCES && !map.contains_key(&source) {
            map.retain(|_, s| now.duration_since(s.last) < FORGET_AFTER);
            if map.len() >= MAX_SOURCES
                && let Some(oldest) = map.iter().min_by_key(|(_, s)| s.last).map(|(ip, _)| *ip)
            {
                map.remove(&oldest);
            }
        }
        let strike =
            map.entry(source).or_insert_with(|| Strike { count: 0, last: now, gate: Arc::new(tokio::sync::Mutex::new(())) });
        if now.duration_since(strike.last) >= FORGET_AFTER {
            strike.count = 0;
        }
        strike.count = strike.count.saturating_add(1);
        strike.last = now;
        (delay_after(strike.count), Arc::clone(&strike.gate))
    }
}

/// How long the refusal of a source's `count`-th wrong bearer waits.
fn delay_after(count: u32) -> Duration {
    if count <= FREE_FAILURES {
        return Duration::ZERO;
    }
    let doublings = (count - FREE_FAILURES - 1).min(16);
    FIRST_DELAY.saturating_mul(1 << doublings).min(MAX_DELAY)
}

impl TcpGuard {
    pub fn new(token: &str) -> Self {
        TcpGuard { token: Arc::from(token.as_bytes()), strikes: Arc::default() }
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
        let source = request
            .extensions()
            .get::<ConnectInfo<SocketAddr>>()
            .map_or(IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED), |info| info.0.ip());
        let (delay, gate) = guard.strikes.record(source);
        if !delay.is_zero() {
            let _turn = gate.lock().await;
            tokio::time::sleep(delay).await;
        }
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
    fn refusals_slow_down_after_the_free_failures() {
        let delays: Vec<u128> = (1..=10).map(|n| delay_after(n).as_millis()).collect();
        assert_eq!(delays, [0, 0, 0, 0, 0, 250, 500, 1000, 1000, 1000]);
        let strikes = Strikes::default();
        let a: IpAddr = "127.0.0.1".parse().unwrap();
        let b: IpAddr = "127.0.0.2".parse().unwrap();
        for _ in 0..FREE_FAILURES {
            assert_eq!(strikes.record(a).0, Duration::ZERO);
        }
        assert_eq!(strikes.record(a).0, FIRST_DELAY);
        assert_eq!(strikes.record(b).0, Duration::ZERO, "another source starts afresh");
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
