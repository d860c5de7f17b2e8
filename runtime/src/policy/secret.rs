//! The secret-like path denylist (spec §2.2). Read/edit/write/patch/image and the
//! `herdr_git` diff path refuse such paths; list and grep skip them silently.

use std::path::Path;

/// Name prefixes of SSH private keys.
const KEY_PREFIXES: [&str; 4] = ["id_rsa", "id_dsa", "id_ecdsa", "id_ed25519"];
/// Words that mark a component as secret wherever they appear in it.
const SECRET_WORDS: [&str; 3] = ["secret", "token", "credential"];
/// Suffixes of environment files and key/certificate stores.
const SECRET_SUFFIXES: [&str; 5] = [".env", ".pem", ".key", ".p12", ".pfx"];

/// True when `path` (any form: absolute, relative, with backslashes) is secret-like.
pub fn is_secret(path: &str) -> bool {
    let lowered = path.to_lowercase().replace('\\', "/");
    if lowered.ends_with("/.git/config") || lowered == ".git/config" {
        return true;
    }
    lowered.split('/').any(is_secret_component)
}

/// [`is_secret`] for a `Path` (lossy for non-UTF-8 names, which only makes matching
/// more conservative for the ASCII patterns involved).
pub fn is_secret_path(path: &Path) -> bool {
    is_secret(&path.to_string_lossy())
}

/// One lowercased component. `.git` itself is exempt so that repository paths stay
/// usable; `.git/config` is caught by the whole-path rule above.
fn is_secret_component(c: &str) -> bool {
    if c.is_empty() || c == ".git" {
        return false;
    }
    c == ".env"
        || c.starts_with(".env.")
        || KEY_PREFIXES.iter().any(|p| c.starts_with(p))
        || SECRET_WORDS.iter().any(|w| c.contains(w))
        || SECRET_SUFFIXES.iter().any(|s| c.ends_with(s))
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
        ] {
            assert!(!is_secret(p), "{p} should be allowed");
        }
    }
}
