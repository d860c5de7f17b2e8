//! Where the next byte that a JSON string must escape sits.
//!
//! JSON strings escape the control characters below 0x20, the quote and the
//! backslash; every other byte, UTF-8 included, is copied as it is. serde_json looks
//! at one byte per loop step, about nine instructions per byte, and a tool result
//! carries its payload twice (a text block and `structuredContent`), so replying with
//! a 4 KiB file spent more instructions in that loop than the whole echo reply of a
//! bare rmcp server. The patched serde_json in `vendor/serde_json` asks
//! [`clean_prefix_len`] instead and copies clean runs whole.
//!
//! The answer is exact: the index of the first such byte, or the length. x86_64 has
//! SSE2 in its baseline, so the block scan needs no runtime detection there; other
//! targets (the extension's WASM) test eight bytes at a time with integer arithmetic.

#![no_std]

/// True for the bytes a JSON string escapes: below 0x20, `"` and `\`.
#[inline]
pub const fn needs_escape(byte: u8) -> bool {
    byte < 0x20 || byte == b'"' || byte == b'\\'
}

/// Length of the longest prefix of `bytes` in which no byte needs an escape.
#[inline]
pub fn clean_prefix_len(bytes: &[u8]) -> usize {
    #[cfg(target_arch = "x86_64")]
    let i = sse2::scan(bytes);
    #[cfg(not(target_arch = "x86_64"))]
    let i = scan_words(bytes, 0);
    scan_bytes(bytes, i)
}

/// One byte at a time from `from`: the reference the faster scans must agree with.
fn scan_bytes(bytes: &[u8], mut i: usize) -> usize {
    while i < bytes.len() && !needs_escape(bytes[i]) {
        i += 1;
    }
    i
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// Eight bytes at a time from `from`. Stops on the first byte needing an escape, or
/// where fewer than eight bytes remain (the byte scan finishes those).
#[cfg_attr(target_arch = "x86_64", allow(dead_code, reason = "x86_64 uses the SSE2 scan; the tests still cover this one"))]
fn scan_words(bytes: &[u8], mut i: usize) -> usize {
    while let Some(chunk) = bytes.get(i..i + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let found = escape_mask(u64::from_le_bytes(word));
        if found != 0 {
            return i + (found.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    i
}

/// The high bit of each byte lane of `word` that is below 0x20, a quote or a
/// backslash. The classic "has a zero byte" / "has a byte below n" tests: the lowest
/// marked lane is always right (borrows only ever mark lanes above a real hit), and
/// that is the only lane `scan_words` uses.
fn escape_mask(word: u64) -> u64 {
    let zero_bytes = |v: u64| v.wrapping_sub(ONES) & !v;
    let control = word.wrapping_sub(ONES * 0x20) & !word;
    let quote = zero_bytes(word ^ (ONES * u64::from(b'"')));
    let backslash = zero_bytes(word ^ (ONES * u64::from(b'\\')));
    (control | quote | backslash) & HIGHS
}

#[cfg(target_arch = "x86_64")]
mod sse2 {
    use core::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
        _mm_xor_si128,
    };

    /// Sixty-four bytes per step while they last, then sixteen; stops exactly on the
    /// first byte needing an escape, or where fewer than sixteen bytes remain.
    pub(super) fn scan(bytes: &[u8]) -> usize {
        let mut i = 0;
        while let Some(run) = bytes.get(i..i + 64) {
            let p = run.as_ptr();
            // SAFETY: `run` holds 64 readable bytes; the loads are unaligned.
            let (a, b, c, d) = unsafe { (marks(p), marks(p.add(16)), marks(p.add(32)), marks(p.add(48))) };
            // SAFETY: SSE2 is part of every x86_64 CPU.
            let any = unsafe { _mm_or_si128(_mm_or_si128(a, b), _mm_or_si128(c, d)) };
            if movemask(any) != 0 {
                let mask = movemask(a) | movemask(b) << 16 | movemask(c) << 32 | movemask(d) << 48;
                return i + mask.trailing_zeros() as usize;
            }
            i += 64;
        }
        while let Some(block) = bytes.get(i..i + 16) {
            // SAFETY: `block` holds 16 readable bytes.
            let mask = movemask(unsafe { marks(block.as_ptr()) });
            if mask != 0 {
                return i + mask.trailing_zeros() as usize;
            }
            i += 16;
        }
        i
    }

    fn movemask(v: __m128i) -> u64 {
        // SAFETY: SSE2 is part of every x86_64 CPU.
        u64::from(unsafe { _mm_movemask_epi8(v) } as u16)
    }

    /// 0xFF in each lane of the 16 bytes at `p` that needs an escape.
    ///
    /// SAFETY: 16 bytes from `p` must be readable.
    #[inline(always)]
    unsafe fn marks(p: *const u8) -> __m128i {
        // SAFETY: the caller guarantees 16 readable bytes (loadu has no alignment
        // need), and SSE2 is part of every x86_64 CPU.
        unsafe {
            let x = _mm_loadu_si128(p.cast());
            // Flipping bit 1 maps the quote (0x22) to 0x20 and keeps 0x00..=0x1F below
            // 0x20 (as a set), so one unsigned "at most 0x20" test finds both.
            let y = _mm_xor_si128(x, _mm_set1_epi8(0x02));
            let control_or_quote = _mm_cmpeq_epi8(_mm_min_epu8(y, _mm_set1_epi8(0x20)), y);
            _mm_or_si128(control_or_quote, _mm_cmpeq_epi8(x, _mm_set1_epi8(b'\\' as i8)))
        }
    }
}

#[cfg(test)]
mod tests;
