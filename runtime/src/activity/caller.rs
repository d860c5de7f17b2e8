//! Who made a call, told from the HTTP request rmcp hands the handler.
//!
//! Each listener marks its requests with a [`Listener`] extension (see
//! `server::serve`). On the trusted Unix socket the extension's bridge names
//! itself with `x-herdr-client: browser-json-bridge/…` (forwarded by the native
//! host), and `herdr-mcp link` with `x-herdr-caller: edge` plus the edge's
//! request id ([`EDGE_REQUEST_HEADER`]). Those headers are believed only on the
//! Unix socket: a TCP client is `tcp` whatever it says. A call without HTTP
//! parts came over stdio.

use http::request::Parts;

/// Which listener a request arrived on; put into the request's extensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listener {
    Unix,
    Tcp,
}

/// Set by `herdr-mcp link` on the calls it forwards from the edge.
pub const CALLER_HEADER: &str = "x-herdr-caller";
/// The edge's request id of a forwarded call (the link sets it; the edge's
/// records of that request name the connector).
pub const EDGE_REQUEST_HEADER: &str = "x-herdr-edge-request";
const CLIENT_HEADER: &str = "x-herdr-client";
/// The name the extension's bridge sends in `x-herdr-client`.
const EXTENSION_CLIENT_PREFIX: &str = "browser-json-bridge";
const MAX_DETAIL_CHARS: usize = 80;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// `extension`, `unix`, `tcp`, `edge` or `stdio`.
    pub kind: &'static str,
    pub detail: Option<String>,
}

impl Caller {
    pub fn of(parts: Option<&Parts>) -> Caller {
        let Some(parts) = parts else {
            return Caller { kind: "stdio", detail: None };
        };
        let header = |name: &str| {
            parts
                .headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(|v| v.chars().take(MAX_DETAIL_CHARS).collect::<String>())
        };
        let client = header(CLIENT_HEADER);
        if parts.extensions.get::<Listener>() == Some(&Listener::Tcp) {
            return Caller { kind: "tcp", detail: client };
        }
        if header(CALLER_HEADER).as_deref() == Some("edge") {
            return Caller { kind: "edge", detail: header(EDGE_REQUEST_HEADER).map(|id| format!("request {id}")) };
        }
        match client {
            Some(c) if c.starts_with(EXTENSION_CLIENT_PREFIX) => Caller { kind: "extension", detail: Some(c) },
            other => Caller { kind: "unix", detail: other },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(listener: Option<Listener>, headers: &[(&str, &str)]) -> Parts {
        let mut b = http::Request::builder();
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        let (mut parts, ()) = b.body(()).unwrap().into_parts();
        if let Some(l) = listener {
            parts.extensions.insert(l);
        }
        parts
    }

    #[test]
    fn callers_are_told_apart_and_tcp_cannot_pose_as_another() {
        let ext = parts(Some(Listener::Unix), &[("x-herdr-client", "browser-json-bridge/1")]);
        assert_eq!(Caller::of(Some(&ext)).kind, "extension");
        let edge = parts(Some(Listener::Unix), &[("x-herdr-caller", "edge"), ("x-herdr-edge-request", "ab12")]);
        assert_eq!(Caller::of(Some(&edge)), Caller { kind: "edge", detail: Some("request ab12".into()) });
        assert_eq!(Caller::of(Some(&parts(Some(Listener::Unix), &[]))).kind, "unix");
        let tcp =
            parts(Some(Listener::Tcp), &[("x-herdr-caller", "edge"), ("x-herdr-client", "browser-json-bridge/1")]);
        assert_eq!(Caller::of(Some(&tcp)).kind, "tcp");
        assert_eq!(Caller::of(None).kind, "stdio");
    }
}
