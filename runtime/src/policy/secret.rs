//! The secret-like path denylist (spec §2.2). Read/edit/write/patch/image and the
//! `herdr_git` diff path refuse such paths; list and grep skip them silently.
//!
//! Beyond spec §2.2 (`.env*`, SSH key names, `*secret*`, `*token*`, `*credential*`,
//! key stores, `.git/config`), credential stores of common tools are secret too:
//! `.netrc`, `.npmrc`, `.pgpass`, `.pypirc`, `kubeconfig`, `.kube/config`,
//! `.docker/config.json`, everything under `.ssh/`, `.git/config.worktree` and a
//! submodule's `.git/modules/…/config`. `herdr_git diff` filters its files with
//! this same matcher.
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
/// Whole names of credential stores (`.ssh` covers everything below it).
const SECRET_NAMES: [&str; 7] = [".env", ".netrc", ".npmrc", ".pgpass", ".pypirc", "kubeconfig", ".ssh"];
/// A directory and a file in it that hold credentials together: a repository's
/// own configuration (remote URLs with passwords), the Kubernetes and Docker
/// client configurations.
const SECRET_PAIRS: [(&str, &str); 4] =
    [(".git", "config"), (".git", "config.worktree"), (".kube", "config"), (".docker", "config.json")];
/// Configuration files of a submodule's repository (`.git/modules/<name…>/config`).
const MODULE_CONFIGS: [&str; 2] = ["config", "config.worktree"];

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
    secret_components(lowered.split(|b| *b == b'/'))
}

/// ASCII in any case, with `/` or `\` as separators.
fn is_secret_ascii(path: &[u8]) -> bool {
    secret_components(path.split(|b| *b == b'/' || *b == b'\\'))
}

fn eq(a: &[u8], b: &str) -> bool {
    a.eq_ignore_ascii_case(b.as_bytes())
}

/// The rules over a path's components (empty ones, from `//` or a leading `/`,
/// are skipped), compared without regard to ASCII case, in one pass without
/// allocating: any secret component, or a path ending in one of the
/// [`SECRET_PAIRS`], or in a submodule's configuration.
fn secret_components<'a>(parts: impl Iterator<Item = &'a [u8]>) -> bool {
    let (mut prev, mut last): (Option<&[u8]>, Option<&[u8]>) = (None, None);
    let mut index = 0usize;
    // Index of the first `modules` right after a `.git`.
    let mut modules_at: Option<usize> = None;
    for c in parts.filter(|c| !c.is_empty()) {
        if is_secret_component(c) {
            return true;
        }
        if modules_at.is_none() && eq(c, "modules") && last.is_some_and(|l| eq(l, ".git")) {
            modules_at = Some(index);
        }
        prev = last;
        last = Some(c);
        index += 1;
    }
    let Some(last) = last else { return false };
    if let Some(prev) = prev
        && SECRET_PAIRS.iter().any(|(dir, file)| eq(prev, dir) && eq(last, file))
    {
        return true;
    }
    // `.git/modules/<at least one name>/config`: the last index is past `modules` + 1.
    modules_at.is_some_and(|m| index > m + 2) && MODULE_CONFIGS.iter().any(|f| eq(last, f))
}

/// One component, compared without regard to ASCII case. `.git` itself is exempt
/// so that repository paths stay usable; its configuration files are caught by
/// the whole-path rules above.
fn is_secret_component(c: &[u8]) -> bool {
    let starts = |p: &str| c.len() >= p.len() && eq(&c[..p.len()], p);
    let ends = |s: &str| c.len() >= s.len() && eq(&c[c.len() - s.len()..], s);
    let contains = |w: &str| c.windows(w.len()).any(|win| eq(win, w));
    if c.is_empty() || eq(c, ".git") {
        return false;
    }
    SECRET_NAMES.iter().any(|n| eq(c, n))
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
            "/r/.netrc",
            "/r/.NPMRC",
            "/r/.pgpass",
            "/r/.pypirc",
            "/r/kubeconfig",
            "/r/.kube/config",
            "/r/.Kube/Config",
            "/r/.docker/config.json",
            "/r/.ssh",
            "/r/.ssh/known_hosts",
            "/r/sub/.ssh/authorized_keys",
            "/r/.git/config.worktree",
            "/r/.git/modules/lib/config",
            "/r/.git/modules/a/b/config",
            "/r/.git/modules/lib/modules/inner/config.worktree",
            ".git//config",
            "r\\.kube\\config",
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
            "/r/.kube",
            "/r/.kube/cache/x",
            "/r/config",
            "/r/.docker/daemon.json",
            "/r/docker/config.json",
            "/r/.git/modules/config",
            "/r/.git/modules/lib/HEAD",
            "/r/modules/lib/config",
            "/r/.sshd",
            "/r/netrc.md",
        ] {
            assert!(!is_secret(p), "{p} should be allowed");
        }
    }

    /// The rules written plainly: lowercase the whole path, then match.
    fn reference(path: &str) -> bool {
        let lowered = path.to_lowercase().replace('\\', "/");
        let comps: Vec<&str> = lowered.split('/').filter(|c| !c.is_empty()).collect();
        let n = comps.len();
        if n >= 2 && super::SECRET_PAIRS.iter().any(|(d, f)| comps[n - 2] == *d && comps[n - 1] == *f) {
            return true;
        }
        if let Some(m) = comps.windows(2).position(|w| w == [".git", "modules"]).map(|i| i + 1)
            && n > m + 2
            && super::MODULE_CONFIGS.contains(&comps[n - 1])
        {
            return true;
        }
        comps.iter().any(|c| {
            *c != ".git"
                && (super::SECRET_NAMES.contains(c)
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
        const PIECES: [&str; 19] = [
            "/", "\\", ".", "a", ".Env", "ENV", "Id_RSA", "sEcReT", "tok", "EN", ".git", "CONFIG", ".PeM", "\u{212A}",
            "é", "", "modules", ".ssh", ".kube",
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
