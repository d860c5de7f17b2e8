//! Whether `HERDR_MCP_TOKEN` is strong enough to guard loopback TCP: anything on
//! the machine (any user, any web page that finds a way to reach loopback) can try
//! bearers, so a short or patterned token is refused at startup.
//!
//! Length alone does not make a secret (`aaaa…`, `abab…`, `abcdefgh…` are long and
//! guessable), so the token must also have many distinct characters, a high
//! character-frequency (Shannon) estimate, no repeating period and no long
//! alphabetical or numerical run. A token made as the refusal says (`openssl rand
//! -hex 32`, `head -c 32 /dev/urandom | base64`) passes all of them.

/// Fewest characters accepted.
pub const MIN_TOKEN_CHARS: usize = 32;
/// Fewest distinct characters accepted.
const MIN_DISTINCT: usize = 10;
/// Smallest character-frequency estimate accepted, in bits for the whole token.
/// 32 random hex digits (128 bits) estimate about 110; 64 about 240.
const MIN_ESTIMATED_BITS: f64 = 96.0;

/// How to make a good token, for every refusal.
pub const HOW_TO_MAKE: &str = "make one with `openssl rand -hex 32` or `head -c 32 /dev/urandom | base64`";

/// `Err(why)` when `token` is too weak to serve TCP with.
pub fn check(token: &str) -> Result<(), String> {
    let chars: Vec<char> = token.chars().collect();
    let n = chars.len();
    if n < MIN_TOKEN_CHARS {
        return Err(format!("it has {n} characters; at least {MIN_TOKEN_CHARS} random ones are needed"));
    }
    let mut counts = std::collections::BTreeMap::<char, usize>::new();
    for c in &chars {
        *counts.entry(*c).or_default() += 1;
    }
    if counts.len() < MIN_DISTINCT {
        return Err(format!("it uses only {} different characters; a random token uses many", counts.len()));
    }
    let bits: f64 = counts.values().map(|&k| k as f64 * (n as f64 / k as f64).log2()).sum();
    if bits < MIN_ESTIMATED_BITS {
        return Err(format!("its characters repeat too much (about {bits:.0} bits; at least {MIN_ESTIMATED_BITS:.0} needed)"));
    }
    if let Some(period) = (1..=n / 2).find(|&p| (p..n).all(|i| chars[i] == chars[i - p])) {
        return Err(format!("it repeats the same {period} characters over and over"));
    }
    let steps = chars.windows(2).filter(|w| (w[1] as i64 - w[0] as i64).abs() == 1).count();
    if steps * 2 > n - 1 {
        return Err("it is mostly a run of consecutive letters or digits".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check;

    #[test]
    fn weak_tokens_are_refused_with_a_reason() {
        for weak in [
            "a",
            "s3cret",
            "test-token-0123456789abcdef",
            &"a".repeat(64),
            &"ab".repeat(32),
            &"abcdefghij".repeat(4),
            "abcdefghijklmnopqrstuvwxyz0123456789",
            "0123456789012345678901234567890123456789",
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaabcdefghij",
        ] {
            assert!(check(weak).is_err(), "{weak:?} was accepted");
        }
    }

    #[test]
    fn random_tokens_pass() {
        for good in [
            "3f9a1c7e5b2d8046a1e9c3b7d5f20864e7a9c1b3d5f70e2a4c6b8d0f1e3a5c79",
            "9d41c0e7b25af83196e0d4b7a25c8f13",
            "q6Yb0yHcX3m1vV0o8E4tZ2rK9sNfLwPa5uGjDiTeMxA=",
            "kT7#pQ2!vX9$mN4&wR8*zL3^yH6@bF1%",
        ] {
            assert_eq!(check(good), Ok(()), "{good:?}");
        }
        // Freshly random hex of the shortest length, many times: none is refused.
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..2000 {
            let token: String = (0..32)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    char::from_digit((state % 16) as u32, 16).unwrap()
                })
                .collect();
            assert_eq!(check(&token), Ok(()), "{token}");
        }
    }
}
