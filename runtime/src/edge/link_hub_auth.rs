//! Who may hold a workstation link, and which devices exist: the seam between
//! the link hub and the device registry ([`super::devices`] implements it in
//! [`super::devices_link`]). The hub asks on every connect and heartbeat, and
//! re-checks its live links whenever [`LinkAuthenticator::registry_generation`]
//! moves, so a revocation or suspension made by another process (the operator
//! CLI writes the same database) closes a live link within about a second.

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
    /// Earlier names, kept on rename so a selector using one still routes.
    pub aliases: Vec<String>,
    /// `active`, `suspended` or `revoked`.
    pub authorization: String,
    /// `enabled`, or anything else, which means paused.
    pub scheduling: String,
    /// The credential the device's link must present; a live link that was
    /// admitted with another one is closed (the device was re-keyed).
    pub credential_id: Option<String>,
    /// When the device's link was last heard, as recorded in the registry.
    pub last_seen_ms: Option<i64>,
}

/// Whether calls may be routed to `d`: active and with scheduling enabled.
pub fn is_routable(d: &DeviceInfo) -> bool {
    d.authorization == "active" && d.scheduling == "enabled"
}

/// Why a link credential is refused (the registry's and the hub's one answer).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkAuthError {
    #[error("the link credential is not valid for this workstation")]
    Rejected,
    #[error("this device is revoked; enroll it again to get a new device id")]
    Revoked,
    #[error("this device is suspended until the operator resumes it")]
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
    /// The fleet inventory only: per-call and per-frame paths use the lookups below.
    fn list_devices(&self) -> Result<Vec<DeviceInfo>, String>;
    /// The device whose link key is `workstation_id`, revoked included. A registry
    /// with an index answers it without reading the fleet; the default scans.
    fn device_by_workstation(&self, workstation_id: &str) -> Result<Option<DeviceInfo>, String> {
        Ok(self.list_devices()?.into_iter().find(|d| d.workstation_id == workstation_id))
    }
    /// The device with this id, revoked included.
    fn device_by_id(&self, device_id: &str) -> Result<Option<DeviceInfo>, String> {
        Ok(self.list_devices()?.into_iter().find(|d| d.device_id == device_id))
    }
    /// Devices not revoked that are called `name` now, oldest enrollment first.
    fn devices_named(&self, name: &str) -> Result<Vec<DeviceInfo>, String> {
        Ok(self.list_devices()?.into_iter().filter(|d| d.authorization != "revoked" && d.name == name).collect())
    }
    /// Devices not revoked that were once called `name` (an alias kept on rename).
    fn devices_once_named(&self, name: &str) -> Result<Vec<DeviceInfo>, String> {
        Ok(self.list_devices()?.into_iter().filter(|d| d.authorization != "revoked" && d.aliases.iter().any(|a| a == name)).collect())
    }
    /// Up to `limit` devices a call may be routed to (active and enabled), oldest
    /// enrollment first.
    fn routable_devices(&self, limit: usize) -> Result<Vec<DeviceInfo>, String> {
        Ok(self.list_devices()?.into_iter().filter(is_routable).take(limit).collect())
    }
    /// A counter that moves whenever a device's authorization or credential
    /// changes; `None` when this registry cannot change behind the hub's back.
    fn registry_generation(&self) -> Result<Option<i64>, String> {
        Ok(None)
    }
    /// The name a device's link offers (`x-herdr-device-name-b64`). It is taken
    /// only while the device still has its generated name; the name in effect.
    fn offer_name(&self, device: &DeviceInfo, _name: &str) -> Result<String, String> {
        Ok(device.name.clone())
    }
    /// Records that the link of `workstation_id` was heard at `at_ms` (ms on the
    /// edge's clock). A registry that keeps nothing ignores it.
    fn record_seen(&self, _workstation_id: &str, _at_ms: i64) -> Result<(), String> {
        Ok(())
    }
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

/// The optional header with the device name a link offers, base64url of UTF-8.
pub const NAME_HEADER: &str = "x-herdr-device-name-b64";
/// Longest header value read: the padded base64 of [`super::devices::MAX_NAME_CHARS`]
/// characters of up to 4 UTF-8 bytes each.
pub const MAX_NAME_HEADER: usize = (super::devices::MAX_NAME_CHARS * 4).div_ceil(3) * 4;

/// The offered device name, checked like any name; `Err` explains a bad header.
pub fn read_offered_name(headers: &HeaderMap) -> Result<Option<String>, String> {
    use base64::Engine;
    let mut values = headers.get_all(NAME_HEADER).iter();
    let Some(raw) = values.next() else { return Ok(None) };
    if values.next().is_some() {
        return Err(format!("only one {NAME_HEADER} header is allowed"));
    }
    if raw.len() > MAX_NAME_HEADER {
        return Err(format!("{NAME_HEADER} is longer than {MAX_NAME_HEADER} characters"));
    }
    let text = raw.to_str().map_err(|_| format!("{NAME_HEADER} is not base64url"))?;
    // Padding is optional in base64url; accept the value with or without it.
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text.trim_end_matches('='))
        .map_err(|_| format!("{NAME_HEADER} is not base64url"))?;
    let name = String::from_utf8(bytes).map_err(|_| format!("{NAME_HEADER} does not hold UTF-8 text"))?;
    super::devices::validate_name(&name).map(Some).map_err(|e| format!("{NAME_HEADER}: {e}"))
}

/// The header value a link sends for `name`.
pub fn name_header_value(name: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(name.as_bytes())
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

    fn named(values: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(NAME_HEADER, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn offered_names() {
        assert_eq!(read_offered_name(&HeaderMap::new()), Ok(None));
        assert_eq!(read_offered_name(&named(&[&name_header_value("Büro-Mac")])), Ok(Some("Büro-Mac".into())));
        // With padding too ("ab" encodes to "YWI=").
        assert_eq!(read_offered_name(&named(&["YWI="])), Ok(Some("ab".into())));
        // The longest name fits, in 4-byte characters as well; one more does not.
        let longest = "😀".repeat(super::super::devices::MAX_NAME_CHARS);
        assert_eq!(read_offered_name(&named(&[&name_header_value(&longest)])), Ok(Some(longest.clone())));
        let over = format!("{longest}x");
        let err = read_offered_name(&named(&[&name_header_value(&over)])).unwrap_err();
        assert!(err.contains("1 to 64"), "{err}");
        let bad = [
            ("not base64", "***"),
            ("standard alphabet", "+/+/"),
            ("not UTF-8", "__79"),
            ("control character", "YQdi"),
            ("empty name", ""),
            ("id lookalike", "ZGV2X3g"),
        ];
        for (why, v) in bad {
            assert!(read_offered_name(&named(&[v])).is_err(), "{why}");
        }
        assert!(read_offered_name(&named(&["YWI", "YWI"])).unwrap_err().contains("only one"));
        assert!(read_offered_name(&named(&[&"A".repeat(MAX_NAME_HEADER + 1)])).unwrap_err().contains("longer"));
    }
}
