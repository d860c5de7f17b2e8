//! The secret-like path denylist (spec §2.2). Read/edit/write/patch/image and the
//! `herdr_git` diff path refuse such paths; list and grep skip them silently.
//!
//! The rules are stated on the lowercased path. An ASCII path (nearly every path)
//! is matched without building the lowercased copy; any other path is lowercased
//! in full, because Unicode lowercasing can turn a non-ASCII letter into an ASCII
//! one (the Kelvin sign `K` becomes `k`, so `to\u{212A}en` reads as `token`).

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Name prefixes of SSH private keys.
const KEY_PREFIXES: [&str; 4] = ["id_rsa", "id_dsa", "id_ecdsa", "id_ed25519"];
/// Words that mark a component as secret wherever they appear in it.
const SECRET_WORDS: [&str; 3] = ["secret", "token", "credential"];
/// Suffixes of environment files and key/certificate stores.
const SECRET_SUFFIXES: [&str; 5] = [".env", ".pem", ".key", ".p12", ".pfx"];
/// A repository's own configuration (may hold credentials in remote URLs).
const GIT_CONFIG: &[u8] = b".git/config";

/// True when `path` (any form: absolute, relative, with backslashes) is secret-like.
pub fn is_secret(path: &str) -> bool {
    if path.is_ascii() {
        return is_secret_ascii(path.as_bytes());
    }
    let lowered = path.to_lowercase().replace('\\', "/");
    is_secret_lowered(lowered.as_bytes())
}

/// [`is_secret`] for a `Path` (lossy for non-UTF-8 names, which only makes matching
/// more conservative for the ASCII patterns involved).
pub fn is_secret_path(path: &Path) -> bool {
    let bytes = path.as_os_str().as_bytes();
    if bytes.is_ascii() {
        return is_secret_ascii(bytes);
    }
    is_secret(&path.to_string_lossy())
}

/// Lowercased, with `/` as the only separator.
fn is_secret_lowered(lowered: &[u8]) -> bool {
    is_git_config(lowered, |a, b| a == b) || lowered.split(|b| *b == b'/').any(is_secret_component)
}

/// ASCII in any case, with `/` or `\` as separators.
fn is_secret_ascii(path: &[u8]) -> bool {
    let same = |a: u8, b: u8| if b == b'/' { a == b'/' || a == b'\\' } else { a.eq_ignore_ascii_case(&b) };
    is_git_config(path, same) || path.split(|b| *b == b'/' || *b == b'\\').any(is_secret_component)
}

/// The whole path is `.git/config` or ends with `/.git/config`, comparing bytes
/// with `same(path byte, rule byte)`.
fn is_git_config(path: &[u8], same: impl Fn(u8, u8) -> bool) -> bool {
    let ends_with = |suffix: &[u8]| {
        path.len() >= suffix.len() && path[path.len() - suffix.len()..].iter().zip(suffix).all(|(a, b)| same(*a, *b))
    };
    (path.len() == GIT_CONFIG.len() && ends_with(GIT_CONFIG)) || ends_with(b"/.git/config")
}

/// One component, compared without regard to ASCII case. `.git` itself is exempt
/// so that repository paths stay usable; `.git/config` is caught by the whole-path
/// rule above.
fn is_secret_component(c: &[u8]) -> bool {
    let eq = |a: &[u8], b: &str| a.eq_ignore_ascii_case(b.as_bytes());
    let starts = |p: &str| c.len() >= p.len() && eq(&c[..p.len()], p);
    let ends = |s: &str| c.len() >= s.len() && eq(&c[c.len() - s.len()..], s);
    let contains = |w: &str| c.windows(w.len()).any(|win| eq(win, w));
    if c.is_empty() || eq(c, ".git") {
        return false;
    }
    eq(c, ".env")
        || starts(".env.")
        || KEY_PREFIXES.iter().any(|p| starts(p))
        || SECRET_WORDS.iter().any(|w| contains(w))
        || SECRET_SUFFIXES.iter().any(|s| ends(s))
}

#[cfg(test)]
mod tests {
    use super::is_secret;

    #[test]
    fn denies_every_rule_in_any_position_and_case() {
        for p in [
            ".env",
            "a/.ENV",
            "a/.env.local",
            "/r/id_rsa",
            "/r/ID_ED25519.pub",
            "/r/id_ecdsa_old",
            "/r/id_dsa",
            "/r/my_SECRET_notes.txt",
            "/r/secrets/readme.md",
            "/r/api-token.json",
            "/r/Credentials/x",
            "/r/prod.env",
            "/r/server.PEM",
            "/r/tls.key",
            "/r/a.p12",
            "/r/a.pfx",
            "/r/.git/config",
            "/r/.GIT/CONFIG",
            "C:\\r\\.env",
            "/r/sub\\token.txt",
            "r\\.git\\config",
            ".git\\config",
            "/r/to\u{212A}en.txt",
            "/r/é/.\u{212A}EY",
        ] {
            assert!(is_secret(p), "{p} should be secret");
        }
    }

    #[test]
    fn allows_ordinary_paths() {
        for p in [
            "/r/src/main.rs",
            "/r/.git",
            "/r/.git/HEAD",
            "/r/.gitconfig",
            "/r/environment.md",
            "/r/env",
            "/r/keys.md",
            "/r/key",
            "/r/.envrc",
            "/r/tok-en",
            "/r/x.git/config",
            "/r/é/main.rs",
        ] {
            assert!(!is_secret(p), "{p} should be allowed");
        }
    }

    /// The rules as first written: lowercase the whole path, then match.
    fn reference(path: &str) -> bool {
        let lowered = path.to_lowercase().replace('\\', "/");
        if lowered.ends_with("/.git/config") || lowered == ".git/config" {
            return true;
        }
        lowered.split('/').any(|c| {
            !c.is_empty()
                && c != ".git"
                && (c == ".env"
                    || c.starts_with(".env.")
                    || super::KEY_PREFIXES.iter().any(|p| c.starts_with(p))
                    || super::SECRET_WORDS.iter().any(|w| c.contains(w))
                    || super::SECRET_SUFFIXES.iter().any(|s| c.ends_with(s)))
        })
    }

    /// Every string of up to four pieces that mix the rules' words in both cases,
    /// both separators and non-ASCII letters (one of which lowercases to ASCII).
    #[test]
    fn the_ascii_shortcut_decides_as_the_lowercased_rules() {
        const PIECES: [&str; 16] = [
            "/", "\\", ".", "a", ".Env", "ENV", "Id_RSA", "sEcReT", "tok", "EN", ".git", "CONFIG", ".PeM", "\u{212A}",
            "é", "",
        ];
        let mut last = vec![String::new()];
        let mut checked = 0;
        for _ in 0..4 {
            last = last.iter().flat_map(|p| PIECES.iter().map(move |x| format!("{p}{x}"))).collect();
            for path in &last {
                assert_eq!(is_secret(path), reference(path), "{path:?}");
                assert_eq!(super::is_secret_path(std::path::Path::new(path)), reference(path), "{path:?}");
                checked += 1;
            }
        }
        assert!(checked > 60_000, "{checked}");
    }
}
