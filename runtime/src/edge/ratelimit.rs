//! Per-source token buckets for the edge's unauthenticated entry points
//! (dynamic client registration and the creation of pending authorizations), so
//! one address cannot use up the shared caps (256 unapproved clients, 128 pending
//! requests) and lock everyone else out.
//!
//! The source is the TCP peer address. `X-Forwarded-For` is **not** trusted by
//! default: anyone can send it, and trusting it would let an attacker pick a fresh
//! bucket per request. Behind a reverse proxy, name the proxy with
//! `edge serve --trusted-proxy <IP>`; only for requests whose peer is such a proxy
//! is the right-most `X-Forwarded-For` entry that is not itself a trusted proxy
//! taken as the source (the proxy appends the address it saw; anything to the
//! left of it is client-supplied). IPv6 sources share one bucket per /64, the
//! block one subscriber usually holds.
//!
//! The buckets are pure bookkeeping over a time the caller passes in (the
//! store's clock), so tests drive them without waiting.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::Mutex;

use axum::extract::connect_info::Connected;
use axum::http::HeaderMap;
use axum::serve::IncomingStream;

/// The TCP peer of a request, as `ConnectInfo<PeerAddr>`: `edge serve` sets it on
/// every connection, plain or TLS (`server::connections::serve`); an in-process
/// `axum::serve` gets it with `into_make_service_with_connect_info::<PeerAddr>()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerAddr(pub SocketAddr);

/// One impl per listener the edge serves (axum's own generic impls rule out a
/// blanket one); a new listener type needs its line here.
macro_rules! peer_from {
    ($($listener:ty),*) => {$(
        impl Connected<IncomingStream<'_, $listener>> for PeerAddr {
            fn connect_info(stream: IncomingStream<'_, $listener>) -> Self {
                PeerAddr(*stream.remote_addr())
            }
        }
    )*};
}
peer_from!(tokio::net::TcpListener);

/// Most sources tracked at once; past it, full (idle) buckets are forgotten, and
/// if none is idle the oldest-touched entry goes.
pub const MAX_SOURCES: usize = 8192;

/// A token bucket per source: `capacity` tokens, one more every `refill_ms`.
pub struct Buckets {
    capacity: f64,
    refill_ms: f64,
    state: Mutex<HashMap<IpAddr, (f64, i64)>>,
}

/// Refused: try again after this many seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryAfter(pub u64);

impl Buckets {
    pub fn new(capacity: u32, refill_ms: u64) -> Self {
        Self { capacity: f64::from(capacity), refill_ms: refill_ms.max(1) as f64, state: Mutex::new(HashMap::new()) }
    }

    /// Takes one token from `source`'s bucket at `now_ms`.
    pub fn take(&self, source: IpAddr, now_ms: i64) -> Result<(), RetryAfter> {
        let key = bucket_key(source);
        let mut map = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= MAX_SOURCES && !map.contains_key(&key) {
            self.evict(&mut map, now_ms);
        }
        let (tokens, last) = map.entry(key).or_insert((self.capacity, now_ms));
        let elapsed = (now_ms - *last).max(0) as f64;
        *tokens = (*tokens + elapsed / self.refill_ms).min(self.capacity);
        *last = now_ms;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            Ok(())
        } else {
            let wait_ms = (1.0 - *tokens) * self.refill_ms;
            Err(RetryAfter(((wait_ms / 1000.0).ceil() as u64).max(1)))
        }
    }

    fn evict(&self, map: &mut HashMap<IpAddr, (f64, i64)>, now_ms: i64) {
        let (capacity, refill_ms) = (self.capacity, self.refill_ms);
        map.retain(|_, (tokens, last)| *tokens + (now_ms - *last).max(0) as f64 / refill_ms < capacity);
        if map.len() >= MAX_SOURCES
            && let Some(oldest) = map.iter().min_by_key(|(_, (_, last))| *last).map(|(k, _)| *k)
        {
            map.remove(&oldest);
        }
    }
}

/// IPv4 addresses as they are; IPv6 cut to its /64 (IPv4-mapped ones as IPv4).
pub fn bucket_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

/// The limits one edge applies, and which peers may speak for others.
pub struct SourceLimits {
    /// `POST /oauth/register`: 10 at once, then one a minute.
    pub registration: Buckets,
    /// New pending authorizations: 10 at once, then one every 30 s.
    pub authorization: Buckets,
    /// Peers whose `X-Forwarded-For` is believed (`--trusted-proxy`).
    pub trusted_proxies: Vec<IpAddr>,
}

pub const REGISTRATION_BURST: u32 = 10;
pub const REGISTRATION_REFILL_MS: u64 = 60_000;
pub const AUTHORIZATION_BURST: u32 = 10;
pub const AUTHORIZATION_REFILL_MS: u64 = 30_000;

impl Default for SourceLimits {
    fn default() -> Self {
        Self::with_trusted_proxies(Vec::new())
    }
}

impl SourceLimits {
    pub fn with_trusted_proxies(trusted_proxies: Vec<IpAddr>) -> Self {
        Self {
            registration: Buckets::new(REGISTRATION_BURST, REGISTRATION_REFILL_MS),
            authorization: Buckets::new(AUTHORIZATION_BURST, AUTHORIZATION_REFILL_MS),
            trusted_proxies,
        }
    }

    /// The address a request counts against: the peer, or, when the peer is a
    /// trusted proxy, the right-most `X-Forwarded-For` hop that is not one.
    /// `None` when the server was not given peer addresses.
    pub fn source(&self, peer: Option<IpAddr>, headers: &HeaderMap) -> Option<IpAddr> {
        let peer = peer?;
        if !self.trusted_proxies.contains(&peer) {
            return Some(peer);
        }
        let hops: Vec<IpAddr> = headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .filter_map(|h| h.trim().parse().ok())
            .collect();
        Some(hops.into_iter().rev().find(|h| !self.trusted_proxies.contains(h)).unwrap_or(peer))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_bucket_empties_refills_and_is_per_source() {
        let b = Buckets::new(3, 1000);
        for _ in 0..3 {
            assert_eq!(b.take(ip("10.0.0.1"), 0), Ok(()));
        }
        assert_eq!(b.take(ip("10.0.0.1"), 0), Err(RetryAfter(1)));
        assert_eq!(b.take(ip("10.0.0.2"), 0), Ok(()), "another source has its own bucket");
        assert_eq!(b.take(ip("10.0.0.1"), 999), Err(RetryAfter(1)));
        assert_eq!(b.take(ip("10.0.0.1"), 1000), Ok(()));
        assert_eq!(b.take(ip("10.0.0.1"), 1000), Err(RetryAfter(1)));
        // Never more than the capacity, however long the source was away.
        for _ in 0..3 {
            assert_eq!(b.take(ip("10.0.0.1"), 1_000_000), Ok(()));
        }
        assert!(b.take(ip("10.0.0.1"), 1_000_000).is_err());
    }

    #[test]
    fn ipv6_shares_a_bucket_per_64() {
        let b = Buckets::new(1, 60_000);
        assert_eq!(b.take(ip("2001:db8:1:2::1"), 0), Ok(()));
        assert_eq!(b.take(ip("2001:db8:1:2:ffff::9"), 0), Err(RetryAfter(60)));
        assert_eq!(b.take(ip("2001:db8:1:3::1"), 0), Ok(()));
        assert_eq!(bucket_key(ip("::ffff:192.0.2.7")), ip("192.0.2.7"));
    }

    #[test]
    fn the_table_stays_bounded() {
        let b = Buckets::new(1, 1000);
        for i in 0..(MAX_SOURCES as u32 + 10) {
            let _ = b.take(IpAddr::V4(i.into()), 0);
        }
        assert!(b.state.lock().unwrap().len() <= MAX_SOURCES);
    }

    #[test]
    fn forwarded_for_is_believed_only_from_a_trusted_proxy() {
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-for", "6.6.6.6, 203.0.113.9".parse().unwrap());
        let plain = SourceLimits::default();
        assert_eq!(plain.source(Some(ip("198.51.100.1")), &h), Some(ip("198.51.100.1")));
        let proxied = SourceLimits::with_trusted_proxies(vec![ip("127.0.0.1")]);
        // The proxy appended what it saw (203.0.113.9); 6.6.6.6 is the client's own claim.
        assert_eq!(proxied.source(Some(ip("127.0.0.1")), &h), Some(ip("203.0.113.9")));
        assert_eq!(proxied.source(Some(ip("198.51.100.1")), &h), Some(ip("198.51.100.1")));
        assert_eq!(proxied.source(Some(ip("127.0.0.1")), &HeaderMap::new()), Some(ip("127.0.0.1")));
        assert_eq!(plain.source(None, &h), None);
    }
}
