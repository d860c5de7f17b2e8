//! A bounded byte ring addressed by absolute stream offsets.
//!
//! Offset `n` always means "the n-th byte this stream ever produced", whether or not
//! that byte is still held; so a reader can page with `next_offset` while the writer
//! keeps going, and learns (`truncated`) when it fell behind the ring.

use std::collections::VecDeque;

/// The bytes of one read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RingRead {
    pub bytes: Vec<u8>,
    /// Offset of the first returned byte (the requested one, or the oldest held byte
    /// when the requested one was already dropped).
    pub offset: u64,
    /// Offset to ask for next.
    pub next_offset: u64,
    /// Bytes between the requested offset and `offset` were dropped by the ring.
    pub truncated: bool,
}

#[derive(Debug)]
pub struct Ring {
    buf: VecDeque<u8>,
    capacity: usize,
    total: u64,
}

impl Ring {
    pub fn new(capacity: usize) -> Self {
        Ring { buf: VecDeque::new(), capacity: capacity.max(1), total: 0 }
    }

    /// Appends `data`, dropping the oldest bytes beyond the capacity.
    pub fn push(&mut self, data: &[u8]) {
        self.total += data.len() as u64;
        let data = if data.len() > self.capacity { &data[data.len() - self.capacity..] } else { data };
        let overflow = (self.buf.len() + data.len()).saturating_sub(self.capacity);
        self.buf.drain(..overflow);
        self.buf.extend(data);
    }

    /// Every byte ever pushed.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Offset of the oldest byte still held.
    pub fn start(&self) -> u64 {
        self.total - self.buf.len() as u64
    }

    /// Whether any byte was ever dropped.
    pub fn overflowed(&self) -> bool {
        self.start() > 0
    }

    /// Up to `limit` bytes from `offset`. A read past the end returns nothing and
    /// points `next_offset` at the end. The cut never splits a UTF-8 sequence unless
    /// a single character is larger than `limit`.
    pub fn read(&self, offset: u64, limit: usize) -> RingRead {
        let start = self.start();
        let truncated = offset < start;
        let from = offset.clamp(start, self.total);
        let skip = (from - start) as usize;
        let available = self.buf.len() - skip;
        let mut take = available.min(limit);
        let mut bytes: Vec<u8> = self.buf.range(skip..skip + take).copied().collect();
        if take < available || from + (take as u64) == self.total {
            let safe = utf8_safe_len(&bytes);
            if safe > 0 {
                take = safe;
                bytes.truncate(take);
            }
        }
        RingRead { bytes, offset: from, next_offset: from + take as u64, truncated }
    }
}

/// Length of `bytes` without a trailing, incomplete UTF-8 sequence (so the next read
/// starts on a character boundary).
pub fn utf8_safe_len(bytes: &[u8]) -> usize {
    let len = bytes.len();
    // Look at most 3 bytes back for the lead byte of the last sequence.
    for back in 1..=len.min(4) {
        let b = bytes[len - back];
        if b & 0xC0 == 0x80 {
            continue; // continuation byte
        }
        let needed = match b {
            0x00..=0x7F => 1,
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => return len, // not UTF-8 at all; cut where asked
        };
        return if back < needed { len - back } else { len };
    }
    len
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_stay_absolute_after_overflow() {
        let mut r = Ring::new(4);
        r.push(b"abc");
        r.push(b"def");
        assert_eq!((r.start(), r.total()), (2, 6));
        assert!(r.overflowed());
        let read = r.read(0, 10);
        assert_eq!(read, RingRead { bytes: b"cdef".to_vec(), offset: 2, next_offset: 6, truncated: true });
        let read = r.read(3, 2);
        assert_eq!(read, RingRead { bytes: b"de".to_vec(), offset: 3, next_offset: 5, truncated: false });
        let read = r.read(99, 2);
        assert_eq!(read, RingRead { bytes: vec![], offset: 6, next_offset: 6, truncated: false });
    }

    #[test]
    fn a_chunk_larger_than_the_ring_keeps_its_tail() {
        let mut r = Ring::new(3);
        r.push(b"0123456");
        assert_eq!(r.read(0, 10).bytes, b"456");
        assert_eq!(r.total(), 7);
    }

    #[test]
    fn exactly_full_ring_has_not_overflowed() {
        let mut r = Ring::new(4);
        r.push(b"abcd");
        assert!(!r.overflowed());
        r.push(b"e");
        assert!(r.overflowed());
    }

    #[test]
    fn cuts_land_on_character_boundaries() {
        let mut r = Ring::new(64);
        r.push("aé€".as_bytes()); // 1 + 2 + 3 bytes
        let first = r.read(0, 2); // would split é
        assert_eq!(first.bytes, b"a");
        let second = r.read(first.next_offset, 4); // é plus the first byte of €
        assert_eq!(second.bytes, "é".as_bytes());
        assert_eq!(r.read(second.next_offset, 3).bytes, "€".as_bytes());
        // An incomplete trailing character at the end of what was written waits too.
        let mut r = Ring::new(64);
        r.push(&"€".as_bytes()[..2]);
        r.push(b"");
        assert_eq!(r.read(0, 10).bytes.len(), 2, "a lone partial sequence is returned rather than nothing");
    }
}
