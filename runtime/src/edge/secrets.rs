//! Random identifiers and secrets, and how they are kept at rest: opaque secrets as
//! SHA-256 hex (a database leak yields nothing usable), 6-digit codes as
//! HMAC-SHA256 under the deployment's pepper (a 10^6 space is trivially brute-forced
//! from a plain hash, not from an HMAC whose key lives outside the database).

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Length of the pepper file's key.
pub const PEPPER_BYTES: usize = 32;

pub fn random_bytes<const N: usize>() -> [u8; N] {
    let mut buf = [0u8; N];
    // The OS RNG failing is not something a server can recover from sensibly.
    getrandom::fill(&mut buf).expect("the operating system's random source failed");
    buf
}

/// `n` random bytes as unpadded base64url.
pub fn random_b64<const N: usize>() -> String {
    URL_SAFE_NO_PAD.encode(random_bytes::<N>())
}

pub fn random_hex<const N: usize>() -> String {
    hex::encode(random_bytes::<N>())
}

/// A uniform 6-digit code, zero-padded (rejection sampling avoids modulo bias).
pub fn six_digit_code() -> String {
    const LIMIT: u32 = u32::MAX - (u32::MAX % 1_000_000);
    loop {
        let n = u32::from_le_bytes(random_bytes::<4>());
        if n < LIMIT {
            return format!("{:06}", n % 1_000_000);
        }
    }
}

pub fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// The at-rest form of an opaque token (codes, refresh and access tokens, client
/// secrets); the domain prefix keeps these hashes from colliding with other uses.
pub fn hash_opaque(token: &str) -> String {
    sha256_hex(format!("herdr-mcp-oauth:{token}").as_bytes())
}

pub fn hmac_hex(key: &[u8], message: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC accepts keys of any length");
    mac.update(message.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

/// Constant-time equality of two hex digests (or any strings of public length).
pub fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

/// PKCE S256: base64url(SHA-256(verifier)) == challenge. RFC 7636 §4.1 bounds the
/// verifier to 43..=128 unreserved characters; anything else fails.
pub fn pkce_s256_matches(verifier: &str, challenge: &str) -> bool {
    let ok_len = (43..=128).contains(&verifier.len());
    let ok_chars = verifier.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b));
    if !ok_len || !ok_chars {
        return false;
    }
    let computed = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
    same(&computed, challenge)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc4231_case_2() {
        assert_eq!(
            hmac_hex(b"Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn pkce_matches_a_vector_computed_with_python_hashlib() {
        let verifier = "dBjftJeZ4CVP-mJ92K27uhbUJU1p1r_wW1gFWFOEjXk";
        assert!(pkce_s256_matches(verifier, "ngF5GsXcbwljx6u133FFr3Xht9xooA_DuaX_3QwODtc"));
        assert!(!pkce_s256_matches(verifier, "ngF5GsXcbwljx6u133FFr3Xht9xooA_DuaX_3QwODtd"));
        assert!(!pkce_s256_matches("short", "ngF5GsXcbwljx6u133FFr3Xht9xooA_DuaX_3QwODtc"));
    }

    #[test]
    fn codes_are_six_digits() {
        for _ in 0..200 {
            let c = six_digit_code();
            assert_eq!(c.len(), 6);
            assert!(c.bytes().all(|b| b.is_ascii_digit()));
        }
    }
}
