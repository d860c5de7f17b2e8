//! Which extension may talk to this host. Chrome passes the caller's origin as argv[1].

use crate::messages::{ErrorCode, HostError};

/// The pinned id of our extension (manifest `key`, see extension-shell/EXTENSION_ID.md).
pub const PINNED_EXTENSION_ID: &str = "ocghgnmfcfoelnpjkmemmjdjjacdjmcl";
pub const ORIGIN_ENV: &str = "HERDR_EXTENSION_ORIGIN";

pub fn origin_for_id(id: &str) -> String {
    format!("chrome-extension://{id}/")
}

/// An extension id is 32 letters `a`..=`p` (hex nibbles mapped onto letters).
pub fn is_extension_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| (b'a'..=b'p').contains(&b))
}

pub fn is_extension_origin(origin: &str) -> bool {
    origin
        .strip_prefix("chrome-extension://")
        .and_then(|rest| rest.strip_suffix('/'))
        .is_some_and(is_extension_id)
}

/// The origin this host accepts: `HERDR_EXTENSION_ORIGIN` when set, else the pinned id.
/// A set but malformed override is an error rather than a silent fallback, so a typo in a
/// development setup cannot widen or shift what is accepted.
pub fn expected_origin(env_value: Option<&str>) -> Result<String, HostError> {
    match env_value {
        None | Some("") => Ok(origin_for_id(PINNED_EXTENSION_ID)),
        Some(v) if is_extension_origin(v) => Ok(v.to_owned()),
        Some(v) => Err(HostError::new(
            ErrorCode::ExtensionOriginNotAllowed,
            format!("{ORIGIN_ENV}={v:?} is not of the form chrome-extension://<32 letters a-p>/"),
        )),
    }
}

pub fn check_caller(caller: &str, expected: &str) -> Result<(), HostError> {
    if caller == expected {
        Ok(())
    } else {
        Err(HostError::new(
            ErrorCode::ExtensionOriginNotAllowed,
            format!("caller origin {caller:?} is not the configured extension origin {expected:?}"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinned_origin_is_the_default_and_valid() {
        let o = expected_origin(None).unwrap();
        assert_eq!(o, "chrome-extension://ocghgnmfcfoelnpjkmemmjdjjacdjmcl/");
        assert!(is_extension_origin(&o));
        assert_eq!(expected_origin(Some("")).unwrap(), o);
    }

    #[test]
    fn override_is_validated() {
        let good = "chrome-extension://aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/";
        assert_eq!(expected_origin(Some(good)).unwrap(), good);
        for bad in [
            "chrome-extension://aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            "chrome-extension://aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaq/",
            "chrome-extension://aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/",
            "https://aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/",
        ] {
            assert_eq!(expected_origin(Some(bad)).unwrap_err().code, ErrorCode::ExtensionOriginNotAllowed, "{bad}");
        }
    }

    #[test]
    fn caller_must_match_exactly() {
        let o = expected_origin(None).unwrap();
        assert!(check_caller(&o, &o).is_ok());
        assert!(check_caller("chrome-extension://aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/", &o).is_err());
        assert!(check_caller(o.trim_end_matches('/'), &o).is_err());
    }
}
