//! Who may hold a workstation link, and which devices exist: the seam between
//! the link hub and the device registry. The hub asks on every connect and every
//! heartbeat, so a revocation made by another process (the operator CLI writes
//! the same database) closes a live link within one heartbeat.

use axum::http::HeaderMap;
use axum::http::header;

use super::relay::{AUTH_SUBPROTOCOL_PREFIX, SUBPROTOCOL};

/// One enrolled device as routing and `herdr_devices` see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    pub device_id: String,
    /// The route key of `/ws/<workstation_id>` (equal to `device_id` for paired devices).
    pub workstation_id: String,
    pub name: String,
    /// `active`, `suspended` or `revoked`.
    pub authorization: String,
    /// `enabled`, or anything else, which means paused.
    pub scheduling: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkAuthError {
    #[error("the link credential is not valid for this workstation")]
    Rejected,
    #[error("the device was revoked")]
    Revoked,
    #[error("the device is suspended")]
    Suspended,
    #[error("no device has this workstation id")]
    NotFound,
    #[error("the device registry cannot be read: {0}")]
    Unavailable(String),
}

impl LinkAuthError {
    /// Wire code of the 401 answer (spec §8).
    pub fn code(&self) -> &'static str {
        match self {
            LinkAuthError::Rejected => "link_auth_failed",
            LinkAuthError::Revoked => "device_revoked",
            LinkAuthError::Suspended => "device_suspended",
            LinkAuthError::NotFound => "device_not_found",
            LinkAuthError::Unavailable(_) => "device_registry_unavailable",
        }
    }
}

pub trait LinkAuthenticator: Send + Sync {
    /// Checks a link credential for `workstation_id`; the device it belongs to.
    fn verify_link(&self, workstation_id: &str, secret: &str) -> Result<DeviceInfo, LinkAuthError>;
    /// Every enrolled device (revoked ones included: routing reports them by name).
    fn list_devices(&self) -> Result<Vec<DeviceInfo>, String>;
}

/// An edge without a device registry: nothing may link.
pub struct NoDevices;

impl LinkAuthenticator for NoDevices {
    fn verify_link(&self, _: &str, _: &str) -> Result<DeviceInfo, LinkAuthError> {
        Err(LinkAuthError::NotFound)
    }
    fn list_devices(&self) -> Result<Vec<DeviceInfo>, String> {
        Ok(Vec::new())
    }
}

/// What the upgrade request offers, before any credential is checked.
#[derive(Debug, PartialEq, Eq)]
pub enum Offer {
    /// `herdr-link.v1` was offered; the credential, if any.
    Link { secret: Option<String> },
    /// A refusal for a malformed offer (answered 400 `bad_request`).
    Bad(&'static str),
}

/// Reads `Sec-WebSocket-Protocol` (every header line, comma-separated) and the
/// optional `Authorization: Bearer`. Browsers cannot set headers, hence the
/// credential as hex in a `herdr-auth.<hex>` entry; exactly one such entry.
pub fn read_offer(headers: &HeaderMap) -> Offer {
    let entries: Vec<&str> = headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .collect();
    if !entries.contains(&SUBPROTOCOL) {
        return Offer::Bad("the herdr-link.v1 subprotocol is required");
    }
    let auth: Vec<&str> = entries.iter().filter_map(|e| e.strip_prefix(AUTH_SUBPROTOCOL_PREFIX)).collect();
    let from_protocol = match auth.as_slice() {
        [] => None,
        [hex_secret] => match hex::decode(hex_secret).ok().and_then(|b| String::from_utf8(b).ok()) {
            Some(s) if !s.is_empty() => Some(s),
            _ => return Offer::Bad("the herdr-auth entry is not hex of a UTF-8 secret"),
        },
        _ => return Offer::Bad("only one herdr-auth entry is allowed"),
    };
    let from_header = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, t)| scheme.eq_ignore_ascii_case("bearer") && !t.trim().is_empty())
        .map(|(_, t)| t.trim().to_string());
    Offer::Link { secret: from_protocol.or(from_header) }
}

/// The subprotocol entry a link sends for `secret`.
pub fn auth_subprotocol(secret: &str) -> String {
    format!("{AUTH_SUBPROTOCOL_PREFIX}{}", hex::encode(secret.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(protocols: &[&str], bearer: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        for p in protocols {
            h.append(header::SEC_WEBSOCKET_PROTOCOL, HeaderValue::from_str(p).unwrap());
        }
        if let Some(b) = bearer {
            h.insert(header::AUTHORIZATION, HeaderValue::from_str(&format!("Bearer {b}")).unwrap());
        }
        h
    }

    #[test]
    fn offers() {
        let auth = auth_subprotocol("devsec_abc");
        assert_eq!(read_offer(&headers(&[&format!("herdr-link.v1, {auth}")], None)), Offer::Link { secret: Some("devsec_abc".into()) });
        assert_eq!(read_offer(&headers(&["herdr-link.v1", &auth], None)), Offer::Link { secret: Some("devsec_abc".into()) });
        assert_eq!(read_offer(&headers(&["herdr-link.v1"], Some("tok"))), Offer::Link { secret: Some("tok".into()) });
        assert_eq!(read_offer(&headers(&["herdr-link.v1"], None)), Offer::Link { secret: None });
        assert!(matches!(read_offer(&headers(&[&auth], None)), Offer::Bad(_)));
        assert!(matches!(read_offer(&headers(&[], None)), Offer::Bad(_)));
        assert!(matches!(read_offer(&headers(&[&format!("herdr-link.v1, {auth}, {auth}")], None)), Offer::Bad(_)));
        assert!(matches!(read_offer(&headers(&["herdr-link.v1, herdr-auth.zz"], None)), Offer::Bad(_)));
    }
}
