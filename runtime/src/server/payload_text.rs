//! The compact JSON text of a tool payload, byte-identical to `serde_json::to_string`.
//!
//! Every tool result carries its payload twice (spec: a text block plus the same
//! object as `structuredContent`), so a file read puts the file's content through
//! JSON string escaping once here and twice more in rmcp's reply serialisation.
//! serde_json looks at one byte at a time; this writer checks sixty-four bytes per
//! step (AVX2 or SSE2; eight with plain integer arithmetic on other CPUs) for anything
//! that needs escaping and copies clean runs whole, which makes the text block of a 4 KiB read
//! about ten times cheaper to write.

use serde_json::Value;

/// The payload as compact JSON, exactly as `serde_json::to_string` would write it.
pub fn to_json_text(value: &Value) -> String {
    let mut out = Vec::with_capacity(estimate_len(value));
    write_value(&mut out, value);
    debug_assert!(std::str::from_utf8(&out).is_ok(), "JSON text is UTF-8");
    // SAFETY: `out` holds only ASCII (punctuation, escapes, numbers) and runs of
    // `&str` bytes cut at ASCII bytes (see `write_str`), so it is valid UTF-8.
    // Checking it again would cost a pass over the whole text per call.
    unsafe { String::from_utf8_unchecked(out) }
}

/// A cheap lower bound of the text's length, so the buffer rarely grows more than once.
fn estimate_len(value: &Value) -> usize {
    match value {
        Value::String(s) => s.len() + 2,
        Value::Array(items) => 2 + items.iter().map(|v| estimate_len(v) + 1).sum::<usize>(),
        Value::Object(map) => 2 + map.iter().map(|(k, v)| k.len() + 4 + estimate_len(v)).sum::<usize>(),
        _ => 8,
    }
}

fn write_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        // Numbers are short; serde_json's own formatting keeps them identical
        // (integers, shortest round-trip floats). Writing to a Vec cannot fail.
        Value::Number(n) => serde_json::to_writer(&mut *out, n).expect("writing a number to memory"),
        Value::String(s) => write_str(out, s),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, item);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            out.push(b'{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_str(out, key);
                out.push(b':');
                write_value(out, item);
            }
            out.push(b'}');
        }
    }
}

/// How serde_json writes `byte`, or `None` when it is copied as is.
fn escape_of(byte: u8) -> Option<&'static [u8]> {
    Some(match byte {
        b'"' => b"\\\"",
        b'\\' => b"\\\\",
        b'\n' => b"\\n",
        b'\r' => b"\\r",
        b'\t' => b"\\t",
        0x08 => b"\\b",
        0x0c => b"\\f",
        0x00..=0x1f => return Some(&CONTROL_ESCAPES[usize::from(byte)]),
        _ => return None,
    })
}

/// `\u00XX` (lower-case hex, as serde_json writes it) for every control byte.
static CONTROL_ESCAPES: [[u8; 6]; 32] = {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut table = [[0u8; 6]; 32];
    let mut i = 0;
    while i < 32 {
        table[i] = [b'\\', b'u', b'0', b'0', HEX[i >> 4], HEX[i & 0xf]];
        i += 1;
    }
    table
};

/// Copies `s` as a JSON string. Clean runs are cut only at escaped bytes, which are
/// ASCII, so every run copied is whole UTF-8 (what `to_json_text` relies on).
fn write_str(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    // `start..i` is the run of bytes found clean but not yet copied.
    let mut start = 0;
    let mut i = skip_clean(bytes, 0);
    while i < bytes.len() {
        if let Some(escape) = escape_of(bytes[i]) {
            out.extend_from_slice(&bytes[start..i]);
            out.extend_from_slice(escape);
            start = i + 1;
        }
        i = skip_clean(bytes, i + 1);
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// The index of the first byte at or after `from` that needs escaping, or the length.
fn skip_clean(bytes: &[u8], from: usize) -> usize {
    #[cfg(target_arch = "x86_64")]
    let i = if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU was just seen to support AVX2 (the answer is cached).
        unsafe { skip_clean_avx2(bytes, from) }
    } else {
        skip_clean_blocks_sse2(bytes, from)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let i = skip_clean_words(bytes, from);
    skip_clean_bytes(bytes, i)
}

/// One byte at a time; for the tail that no block or word covers.
fn skip_clean_bytes(bytes: &[u8], mut i: usize) -> usize {
    while i < bytes.len() && escape_of(bytes[i]).is_none() {
        i += 1;
    }
    i
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// Eight bytes per step: stops at the first word holding a control character, `"`
/// or `\`, at that byte, or where fewer than eight bytes remain.
#[cfg_attr(target_arch = "x86_64", allow(dead_code, reason = "the SSE2 scan is used there; tests still cover this one"))]
fn skip_clean_words(bytes: &[u8], mut i: usize) -> usize {
    while let Some(chunk) = bytes.get(i..i + 8) {
        let word = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
        let found = escape_mask(word);
        if found != 0 {
            // The lowest flagged byte is exact (borrows only run upwards).
            return i + (found.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    i
}

/// The high bit of every byte of `word` that is below 0x20, `"` or `\` (bytes above a
/// match may be flagged falsely; the lowest flag is always right).
fn escape_mask(word: u64) -> u64 {
    let zero_bytes = |v: u64| v.wrapping_sub(ONES) & !v;
    let control = word.wrapping_sub(ONES * 0x20) & !word;
    let quote = zero_bytes(word ^ (ONES * u64::from(b'"')));
    let backslash = zero_bytes(word ^ (ONES * u64::from(b'\\')));
    (control | quote | backslash) & HIGHS
}

/// Sixteen bytes per step with SSE2 (part of every x86_64 CPU), four blocks at a time
/// while that many remain: the index of the first byte at or after `i` that needs
/// escaping, or the length. A file's content is mostly long clean runs, so the
/// common step is four loads folded into one test.
#[cfg(target_arch = "x86_64")]
fn skip_clean_blocks_sse2(bytes: &[u8], mut i: usize) -> usize {
    use std::arch::x86_64::{_mm_movemask_epi8, _mm_or_si128};
    while let Some(run) = bytes.get(i..i + 64) {
        let p = run.as_ptr();
        // SAFETY: SSE2 is always available on x86_64, and the four loads read exactly
        // the sixty-four bytes of `run`.
        let (a, b, c, d) = unsafe {
            (escape_bytes_16(p), escape_bytes_16(p.add(16)), escape_bytes_16(p.add(32)), escape_bytes_16(p.add(48)))
        };
        // SAFETY: plain SSE2 register operations.
        let any = unsafe { _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(a, b), _mm_or_si128(c, d))) };
        if any != 0 {
            // SAFETY: as above.
            let masks = unsafe { [a, b, c, d].map(|v| _mm_movemask_epi8(v) as u32 as u64) };
            let mask = masks[0] | masks[1] << 16 | masks[2] << 32 | masks[3] << 48;
            return i + mask.trailing_zeros() as usize;
        }
        i += 64;
    }
    while let Some(block) = bytes.get(i..i + 16) {
        // SAFETY: SSE2 is always available on x86_64, and the load reads exactly the
        // sixteen bytes of `block`.
        let mask = unsafe { _mm_movemask_epi8(escape_bytes_16(block.as_ptr())) as u32 };
        if mask != 0 {
            return i + mask.trailing_zeros() as usize;
        }
        i += 16;
    }
    // The last few bytes (most object keys are shorter than a block) go through one
    // more block, padded with a clean byte, instead of byte by byte.
    let rest = &bytes[i.min(bytes.len())..];
    if rest.is_empty() {
        return i;
    }
    let mut block = [b'a'; 16];
    block[..rest.len()].copy_from_slice(rest);
    // SAFETY: as above; `block` is sixteen bytes on the stack.
    let mask = unsafe { _mm_movemask_epi8(escape_bytes_16(block.as_ptr())) as u32 };
    if mask != 0 { i + mask.trailing_zeros() as usize } else { bytes.len() }
}

/// Sixty-four bytes per step in two AVX2 registers, where the CPU has them (nearly
/// every x86_64 CPU since 2013): half the instructions of the SSE2 step. The rest,
/// under sixty-four bytes, goes to the SSE2 scan.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn skip_clean_avx2(bytes: &[u8], mut i: usize) -> usize {
    use std::arch::x86_64::{_mm256_movemask_epi8, _mm256_or_si256};
    while let Some(run) = bytes.get(i..i + 64) {
        let p = run.as_ptr();
        // SAFETY: the two loads read exactly the sixty-four bytes of `run`.
        let (a, b) = unsafe { (escape_bytes_32(p), escape_bytes_32(p.add(32))) };
        let any = _mm256_movemask_epi8(_mm256_or_si256(a, b));
        if any != 0 {
            let mask = _mm256_movemask_epi8(a) as u32 as u64 | (_mm256_movemask_epi8(b) as u32 as u64) << 32;
            return i + mask.trailing_zeros() as usize;
        }
        i += 64;
    }
    skip_clean_blocks_sse2(bytes, i)
}

/// `escape_bytes_16` on thirty-two lanes.
///
/// # Safety
/// `p` must point to thirty-two readable bytes (no alignment needed).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn escape_bytes_32(p: *const u8) -> std::arch::x86_64::__m256i {
    use std::arch::x86_64::{
        _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_min_epu8, _mm256_or_si256, _mm256_set1_epi8, _mm256_xor_si256,
    };
    // SAFETY: the caller guarantees thirty-two readable bytes.
    let x = unsafe { _mm256_loadu_si256(p.cast()) };
    let y = _mm256_xor_si256(x, _mm256_set1_epi8(0x02));
    let control_or_quote = _mm256_cmpeq_epi8(_mm256_min_epu8(y, _mm256_set1_epi8(0x20)), y);
    _mm256_or_si256(control_or_quote, _mm256_cmpeq_epi8(x, _mm256_set1_epi8(b'\\' as i8)))
}

/// 0xff in every lane of the sixteen bytes at `p` that is a control character, `"`
/// or `\`, 0 elsewhere.
///
/// # Safety
/// `p` must point to sixteen readable bytes (no alignment needed).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn escape_bytes_16(p: *const u8) -> std::arch::x86_64::__m128i {
    use std::arch::x86_64::{_mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_or_si128, _mm_set1_epi8, _mm_xor_si128};
    // SAFETY: the caller guarantees sixteen readable bytes; SSE2 is part of x86_64.
    unsafe {
        let x = _mm_loadu_si128(p.cast());
        // XOR with 0x02 turns `"` (0x22) into 0x20 and keeps 0x00..=0x1f below 0x20,
        // while nothing else lands at or below 0x20: one unsigned `<= 0x20` test
        // (min(y, 0x20) == y) finds control characters and quotes together.
        let y = _mm_xor_si128(x, _mm_set1_epi8(0x02));
        let control_or_quote = _mm_cmpeq_epi8(_mm_min_epu8(y, _mm_set1_epi8(0x20)), y);
        let backslash = _mm_cmpeq_epi8(x, _mm_set1_epi8(b'\\' as i8));
        _mm_or_si128(control_or_quote, backslash)
    }
}

#[cfg(test)]
#[path = "payload_text_props.rs"]
mod props;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn same_as_serde(value: &Value) {
        assert_eq!(to_json_text(value), serde_json::to_string(value).unwrap(), "for {value:?}");
    }

    #[test]
    fn every_ascii_and_some_unicode_at_every_offset_of_a_word() {
        // '¢' (0xc2 0xa2) and 'Ü' (0xc3 0x9c) carry `"`- and `\\`-like low bits in a
        // continuation byte.
        let specials: Vec<char> =
            (0u8..=0x7f).map(char::from).chain(['é', '€', '😀', '\u{2028}', '\u{feff}', '¢', 'Ü']).collect();
        for c in specials {
            // Offsets 0..=70 put the character in every lane of a word, of each of
            // the four blocks of a 64-byte step, of a lone block, and in the
            // byte-by-byte tail.
            for offset in 0..=70 {
                for tail in [0, 1, 7, 8, 9] {
                    let s = format!("{}{c}{}", "a".repeat(offset), "b".repeat(tail));
                    same_as_serde(&Value::String(s));
                }
            }
        }
    }

    #[test]
    fn runs_of_escapes_and_clean_words_mix() {
        for s in ["", "\"", "\\\\\\\\\\\\\\\\\\", "\n\n\n\n\n\n\n\n\n\n", "abcdefgh\"abcdefgh\\abcdefgh\u{1f}", "€€€€\t€€€€"] {
            same_as_serde(&Value::String(s.to_string()));
        }
        let long: String = (0..5000).map(|i| if i % 97 == 0 { '"' } else { char::from(b'a' + (i % 26) as u8) }).collect();
        same_as_serde(&Value::String(long));
    }

    /// Every scanner stops exactly where the byte-by-byte one does, from every start.
    #[test]
    fn word_and_block_scans_agree_with_the_byte_scan() {
        let mut text: Vec<u8> = Vec::new();
        // Specials every 37 characters, then every 151, so that both short and long
        // (several 64-byte steps) clean runs come up.
        for (period, count) in [(37u32, 600u32), (151, 1200)] {
            for i in 0..count {
                // A mix of long clean runs, escapes, multi-byte characters and DEL.
                let c = match i % period {
                    0 => "\"",
                    5 => "\\",
                    11 => "\u{1}",
                    17 => "\u{1f}",
                    23 => "é",
                    29 => "\u{7f}",
                    31 => " ",
                    32 => "!",
                    33 => "#",
                    34 => "¢",
                    35 => "]",
                    _ => "x",
                };
                text.extend_from_slice(c.as_bytes());
            }
        }
        for from in 0..text.len() {
            let expected = skip_clean_bytes(&text, from);
            // The word scan stops exactly on the byte, or short of it where its steps
            // no longer fit; the block scan always stops exactly on it.
            let words = skip_clean_words(&text, from);
            assert!(words == expected || (words < expected && words + 8 > text.len()), "words from {from}: {words}");
            #[cfg(target_arch = "x86_64")]
            {
                assert_eq!(skip_clean_blocks_sse2(&text, from), expected, "blocks from {from}");
                if std::is_x86_feature_detected!("avx2") {
                    // SAFETY: the CPU supports AVX2.
                    assert_eq!(unsafe { skip_clean_avx2(&text, from) }, expected, "AVX2 from {from}");
                }
                // Every short tail, which the padded last block covers.
                let tail = &text[from..text.len().min(from + 20)];
                assert_eq!(skip_clean_blocks_sse2(tail, 0), skip_clean_bytes(tail, 0), "tail from {from}");
            }
            assert_eq!(skip_clean(&text, from), expected, "from {from}");
        }
        assert_eq!(skip_clean(&text, text.len()), text.len());
    }

    #[test]
    fn every_value_kind_and_nesting() {
        same_as_serde(&json!({
            "ok": true, "no": false, "none": null,
            "u": u64::MAX, "i": i64::MIN, "zero": 0, "f": 0.1, "big": 1e300, "neg": -0.0, "small": 5e-324,
            "list": [1, "two", [], {}, [null, [true]]],
            "nested": {"k\"ey": {"\n": "v\u{0}"}},
            "empty": "",
        }));
        same_as_serde(&json!([]));
        same_as_serde(&json!("plain"));
        same_as_serde(&json!(42));
    }
}
