//! The few parts of a page URL that conversation identity needs.
//!
//! Input is `location.href` from the content script, which the browser has already
//! normalised (lower-case scheme and host, resolved dot segments, percent-encoding), so a
//! small splitter is enough; a full URL parser would add weight to the WASM module for no
//! case that can reach it.

use std::fmt;

/// `https://host[:port]/path?query#fragment`, split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageUrl {
    /// Lower-case host without port.
    pub host: String,
    /// `https://host[:port]` as the page's `location.origin` would show it.
    pub origin: String,
    /// Path with trailing slashes removed (`""` for the site root), as the reference keys do.
    pub path: String,
}

/// Why a string is not a usable page URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UrlError {
    /// Only `https://` pages are chat sites; anything else is refused.
    NotHttps(String),
    /// `https://` with nothing (or only a port) where the host should be.
    MissingHost(String),
}

impl fmt::Display for UrlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UrlError::NotHttps(url) => write!(f, "not an https page URL: {url:?}"),
            UrlError::MissingHost(url) => write!(f, "page URL has no host: {url:?}"),
        }
    }
}

impl std::error::Error for UrlError {}

impl PageUrl {
    pub fn parse(url: &str) -> Result<Self, UrlError> {
        let shown = || url.chars().take(200).collect::<String>();
        let rest = url
            .get(..8)
            .filter(|s| s.eq_ignore_ascii_case("https://"))
            .map(|_| &url[8..])
            .ok_or_else(|| UrlError::NotHttps(shown()))?;
        let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let authority = &rest[..authority_end];
        // Credentials never appear in chat URLs; drop them rather than mistake them for the host.
        let authority = authority.rsplit('@').next().unwrap_or(authority).to_ascii_lowercase();
        let host = match authority.rsplit_once(':') {
            Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h.to_owned(),
            _ => authority.clone(),
        };
        if host.is_empty() {
            return Err(UrlError::MissingHost(shown()));
        }
        let origin = match authority.strip_suffix(":443") {
            Some(h) => format!("https://{h}"),
            None => format!("https://{authority}"),
        };
        let after = &rest[authority_end..];
        let path_end = after.find(['?', '#']).unwrap_or(after.len());
        let path = after[..path_end].trim_end_matches('/').to_owned();
        Ok(PageUrl { host, origin, path })
    }

    /// The reference conversation key: origin + path without trailing slashes.
    pub fn key(&self) -> String {
        format!("{}{}", self.origin, self.path)
    }

    /// Non-empty path segments.
    pub fn segments(&self) -> Vec<&str> {
        self.path.split('/').filter(|s| !s.is_empty()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_and_normalises() {
        let u = PageUrl::parse("https://Chat.Z.ai:443/c/abc-1/?x=1#frag").unwrap();
        assert_eq!((u.host.as_str(), u.origin.as_str(), u.path.as_str()), ("chat.z.ai", "https://chat.z.ai", "/c/abc-1"));
        assert_eq!(u.key(), "https://chat.z.ai/c/abc-1");
        assert_eq!(PageUrl::parse("https://chat.z.ai").unwrap().key(), "https://chat.z.ai");
        assert_eq!(PageUrl::parse("https://chat.z.ai///").unwrap().path, "");
        assert_eq!(PageUrl::parse("https://localhost:8443/a").unwrap().origin, "https://localhost:8443");
        assert_eq!(PageUrl::parse("https://u:p@chatgpt.com/c/1").unwrap().host, "chatgpt.com");
    }

    #[test]
    fn refuses_what_is_not_an_https_page() {
        assert!(matches!(PageUrl::parse("http://chat.z.ai/"), Err(UrlError::NotHttps(_))));
        assert!(matches!(PageUrl::parse("chrome://extensions"), Err(UrlError::NotHttps(_))));
        assert!(matches!(PageUrl::parse(""), Err(UrlError::NotHttps(_))));
        assert!(matches!(PageUrl::parse("https:///c/1"), Err(UrlError::MissingHost(_))));
    }
}
