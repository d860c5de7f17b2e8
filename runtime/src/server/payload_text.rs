//! The compact JSON text of a tool payload, byte-identical to `serde_json::to_string`.
//!
//! Every tool result carries its payload twice (spec: a text block plus the same
//! object as `structuredContent`), so a file read puts the file's content through
//! JSON string escaping once here and twice more in rmcp's reply serialisation.
//! serde_json looks at one byte at a time; this writer checks sixteen bytes per step
//! (SSE2; eight with plain integer arithmetic elsewhere) for anything that needs
//! escaping and copies clean runs whole, which makes the text block of a 4 KiB read
//! about five times cheaper to write.

use serde_json::Value;

/// The payload as compact JSON, exactly as `serde_json::to_string` would write it.
pub fn to_json_text(value: &Value) -> String {
    let mut out = Vec::with_capacity(estimate_len(value));
    write_value(&mut out, value);
    // Only whole UTF-8 strings and ASCII punctuation were written.
    String::from_utf8(out).expect("JSON text is UTF-8")
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
    let i = skip_clean_blocks_sse2(bytes, from);
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

/// Sixteen bytes per step with SSE2 (part of every x86_64 CPU): stops at the first
/// byte that needs escaping or where fewer than sixteen bytes remain.
#[cfg(target_arch = "x86_64")]
fn skip_clean_blocks_sse2(bytes: &[u8], mut i: usize) -> usize {
    use std::arch::x86_64::{
        _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
    };
    while let Some(block) = bytes.get(i..i + 16) {
        // SAFETY: SSE2 is always available on x86_64, and the unaligned load reads
        // exactly the sixteen bytes of `block`.
        let mask = unsafe {
            let x = _mm_loadu_si128(block.as_ptr().cast());
            // min(x, 0x1f) == x exactly for bytes up to 0x1f (unsigned compare).
            let control = _mm_cmpeq_epi8(_mm_min_epu8(x, _mm_set1_epi8(0x1f)), x);
            let quote = _mm_cmpeq_epi8(x, _mm_set1_epi8(b'"' as i8));
            let backslash = _mm_cmpeq_epi8(x, _mm_set1_epi8(b'\\' as i8));
            _mm_movemask_epi8(_mm_or_si128(control, _mm_or_si128(quote, backslash))) as u32
        };
        if mask != 0 {
            return i + mask.trailing_zeros() as usize;
        }
        i += 16;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn same_as_serde(value: &Value) {
        assert_eq!(to_json_text(value), serde_json::to_string(value).unwrap(), "for {value:?}");
    }

    #[test]
    fn every_ascii_and_some_unicode_at_every_offset_of_a_word() {
        let specials: Vec<char> = (0u8..=0x7f).map(char::from).chain(['é', '€', '😀', '\u{2028}', '\u{feff}']).collect();
        for c in specials {
            // Offsets 0..=16 put the character in every lane of one or two words,
            // and in the byte-by-byte tail.
            for offset in 0..=16 {
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
        for i in 0..300u32 {
            // A mix of long clean runs, escapes, multi-byte characters and DEL.
            let c = match i % 37 {
                0 => "\"",
                5 => "\\",
                11 => "\u{1}",
                17 => "\u{1f}",
                23 => "é",
                29 => "\u{7f}",
                31 => " ",
                _ => "x",
            };
            text.extend_from_slice(c.as_bytes());
        }
        for from in 0..text.len() {
            let expected = skip_clean_bytes(&text, from);
            // Each stops exactly on the byte, or short of it where its steps no longer fit.
            let words = skip_clean_words(&text, from);
            assert!(words == expected || (words < expected && words + 8 > text.len()), "words from {from}: {words}");
            #[cfg(target_arch = "x86_64")]
            {
                let blocks = skip_clean_blocks_sse2(&text, from);
                assert!(blocks == expected || (blocks < expected && blocks + 16 > text.len()), "blocks from {from}: {blocks}");
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
