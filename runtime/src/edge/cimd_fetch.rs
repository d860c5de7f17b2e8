//! Fetching a Client ID Metadata Document without letting the edge be used as an
//! SSRF proxy (spec §3): the URL must name a public DNS host over https, every
//! address the host resolves to must be public, the connection goes to the address
//! that was checked (no second lookup a rebinding DNS could answer differently),
//! redirects are refused, and both time and size are bounded.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::rt::TokioIo;

/// Largest document accepted (spec §3).
pub const MAX_DOCUMENT_BYTES: usize = 64 * 1024;
/// Whole-fetch deadline: lookup, connect, TLS, request and body together.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(5);

/// Whether `client_id` names a metadata document rather than a registered client.
/// Plain http is only a metadata URL when the test-only loopback switch is on.
pub fn is_metadata_url(client_id: &str, allow_loopback: bool) -> bool {
    client_id.starts_with("https://") || (allow_loopback && client_id.starts_with("http://"))
}

fn is_loopback_host(host: &url::Host<&str>) -> bool {
    match host {
        url::Host::Domain(d) => d.eq_ignore_ascii_case("localhost"),
        url::Host::Ipv4(ip) => ip.is_loopback(),
        url::Host::Ipv6(ip) => ip.is_loopback(),
    }
}

/// Checks the shape of a metadata URL before any network activity.
pub fn check_url(client_id: &str, allow_loopback: bool) -> Result<url::Url, String> {
    let url = url::Url::parse(client_id).map_err(|e| format!("client_id is not a URL: {e}"))?;
    // The document's client_id must equal the URL byte for byte, so a URL the parser
    // would rewrite (case, dot segments, default port) could never match anyway.
    if url.as_str() != client_id {
        return Err("client_id URL is not in canonical form".into());
    }
    if url.fragment().is_some() || !url.username().is_empty() || url.password().is_some() {
        return Err("client_id URL must not carry a fragment or credentials".into());
    }
    if url.path() == "/" {
        return Err("client_id URL must have a path".into());
    }
    let host = url.host().ok_or("client_id URL has no host")?;
    if allow_loopback && is_loopback_host(&host) && matches!(url.scheme(), "http" | "https") {
        return Ok(url);
    }
    if url.scheme() != "https" {
        return Err("client_id URL must be https".into());
    }
    let url::Host::Domain(domain) = host else {
        return Err("client_id URL must name a DNS host, not an IP address".into());
    };
    let d = domain.trim_end_matches('.').to_ascii_lowercase();
    let internal = d == "localhost" || [".localhost", ".local", ".internal"].iter().any(|s| d.ends_with(s)) || !d.contains('.');
    if internal {
        return Err(format!("client_id host {domain} is a local or internal name"));
    }
    Ok(url)
}

/// Addresses no metadata fetch may reach: loopback, private, shared (CGNAT),
/// link-local, multicast, unspecified, documentation/benchmark and reserved ranges.
pub fn is_forbidden_ip(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_multicast()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_documentation()
                || o[0] == 0
                || (o[0] == 100 && (64..128).contains(&o[1]))
                || (o[0] == 192 && o[1] == 0 && o[2] == 0)
                || (o[0] == 198 && (18..20).contains(&o[1]))
                || o[0] >= 240
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_forbidden_ip(IpAddr::V4(v4));
            }
            let s = v6.segments();
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00 // unique local
                || (s[0] & 0xffc0) == 0xfe80 // link-local
                || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
                || (s[0] == 0x0064 && s[1] == 0xff9b) // NAT64 can reach private v4
                || (s[0] == 0x2002) // 6to4 embeds arbitrary v4
        }
    }
}

/// Resolves the host and picks the address to connect to; refuses the host if any
/// of its addresses is forbidden (a mixed answer is how rebinding attacks start).
async fn pick_address(url: &url::Url, allow_loopback: bool) -> Result<SocketAddr, String> {
    let port = url.port_or_known_default().ok_or("client_id URL has no port")?;
    let host = url.host_str().ok_or("client_id URL has no host")?.trim_matches(['[', ']']).to_string();
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), port))
        .await
        .map_err(|e| format!("cannot resolve {host}: {e}"))?
        .collect();
    if addrs.is_empty() {
        return Err(format!("{host} resolves to no address"));
    }
    for a in &addrs {
        let allowed_loopback = allow_loopback && a.ip().is_loopback();
        if is_forbidden_ip(a.ip()) && !allowed_loopback {
            return Err(format!("{host} resolves to a non-public address ({})", a.ip()));
        }
    }
    Ok(addrs[0])
}

/// The fetched document's raw bytes, after the status, content-type and size checks.
pub async fn fetch(url: &url::Url, allow_loopback: bool, tls: Arc<rustls::ClientConfig>) -> Result<Vec<u8>, String> {
    tokio::time::timeout(FETCH_TIMEOUT, fetch_inner(url, allow_loopback, tls))
        .await
        .map_err(|_| format!("fetching the client metadata document took longer than {} s", FETCH_TIMEOUT.as_secs()))?
}

async fn fetch_inner(url: &url::Url, allow_loopback: bool, tls: Arc<rustls::ClientConfig>) -> Result<Vec<u8>, String> {
    let addr = pick_address(url, allow_loopback).await?;
    let tcp = tokio::net::TcpStream::connect(addr).await.map_err(|e| format!("cannot connect to {addr}: {e}"))?;
    let host = url.host_str().unwrap_or_default().trim_matches(['[', ']']).to_string();
    let io: Box<dyn crate::link::connect::Io> = if url.scheme() == "https" {
        let name = rustls::pki_types::ServerName::try_from(host.clone()).map_err(|e| format!("{host} is not a TLS server name: {e}"))?;
        let stream = tokio_rustls::TlsConnector::from(tls).connect(name, tcp).await.map_err(|e| format!("TLS with {host} failed: {e}"))?;
        Box::new(stream)
    } else {
        Box::new(tcp)
    };
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(TokioIo::new(io)).await.map_err(|e| format!("HTTP with {host} failed: {e}"))?;
    tokio::spawn(conn);
    let path_and_query = match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_string(),
    };
    let authority = match url.port() {
        Some(p) => format!("{}:{p}", url.host_str().unwrap_or_default()),
        None => url.host_str().unwrap_or_default().to_string(),
    };
    let req = http::Request::builder()
        .method("GET")
        .uri(path_and_query)
        .header(http::header::HOST, authority)
        .header(http::header::ACCEPT, "application/json")
        .body(Empty::<bytes::Bytes>::new())
        .map_err(|e| format!("cannot build the request: {e}"))?;
    let resp = sender.send_request(req).await.map_err(|e| format!("{host} did not answer: {e}"))?;
    let status = resp.status();
    if status.is_redirection() {
        return Err(format!("the client metadata document redirects (HTTP {}); redirects are not followed", status.as_u16()));
    }
    if status != http::StatusCode::OK {
        return Err(format!("the client metadata document answered HTTP {} instead of 200", status.as_u16()));
    }
    let ctype = resp.headers().get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let essence = ctype.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    if essence != "application/json" {
        return Err(format!("the client metadata document has content type {ctype:?}, not application/json"));
    }
    let declared = resp.headers().get(http::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_DOCUMENT_BYTES as u64) {
        return Err(format!("the client metadata document exceeds {MAX_DOCUMENT_BYTES} bytes"));
    }
    let body = Limited::new(resp.into_body(), MAX_DOCUMENT_BYTES)
        .collect()
        .await
        .map_err(|e| {
            if e.is::<http_body_util::LengthLimitError>() {
                format!("the client metadata document exceeds {MAX_DOCUMENT_BYTES} bytes")
            } else {
                format!("reading the client metadata document failed: {e}")
            }
        })?
        .to_bytes();
    Ok(body.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_shape_rules() {
        for ok in ["https://app.example.com/oauth/client.json", "https://app.example.com/c?v=1"] {
            assert!(check_url(ok, false).is_ok(), "{ok}");
        }
        let refused = [
            ("http://app.example.com/c.json", "must be https"),
            ("https://127.0.0.1/c.json", "not an IP address"),
            ("https://[::1]/c.json", "not an IP address"),
            ("https://10.0.0.8/c.json", "not an IP address"),
            ("https://localhost/c.json", "local or internal"),
            ("https://printer.local/c.json", "local or internal"),
            ("https://db.corp.internal/c.json", "local or internal"),
            ("https://intranet/c.json", "local or internal"),
            ("https://app.example.com/", "must have a path"),
            ("https://u:p@app.example.com/c.json", "credentials"),
            ("https://app.example.com/c.json#x", "fragment"),
            ("https://APP.example.com/c.json", "canonical"),
            ("https://app.example.com/a/../c.json", "canonical"),
            ("https://app.example.com:443/c.json", "canonical"),
        ];
        for (url, why) in refused {
            let err = check_url(url, false).expect_err(url);
            assert!(err.contains(why), "{url}: {err}");
        }
        // The test-only switch admits loopback, and nothing else.
        assert!(check_url("http://127.0.0.1:8080/c.json", true).is_ok());
        assert!(check_url("http://10.0.0.8/c.json", true).is_err());
        assert!(check_url("http://127.0.0.1:8080/c.json", false).is_err());
    }

    #[test]
    fn forbidden_addresses() {
        for bad in [
            "127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1", "0.0.0.0", "224.0.0.1",
            "255.255.255.255", "240.0.0.1", "::1", "::", "fc00::1", "fe80::1", "ff02::1", "::ffff:127.0.0.1", "::ffff:169.254.169.254",
            "64:ff9b::a00:1", "2002:a00:1::1",
        ] {
            assert!(is_forbidden_ip(bad.parse().unwrap()), "{bad}");
        }
        for good in ["93.184.216.34", "1.1.1.1", "2606:4700::1111", "::ffff:8.8.8.8"] {
            assert!(!is_forbidden_ip(good.parse().unwrap()), "{good}");
        }
    }

    #[test]
    fn metadata_url_detection() {
        assert!(is_metadata_url("https://a.example/c", false));
        assert!(!is_metadata_url("http://127.0.0.1/c", false));
        assert!(is_metadata_url("http://127.0.0.1/c", true));
        assert!(!is_metadata_url("dcr-0123456789abcdef", true));
    }
}
