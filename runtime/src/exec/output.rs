//! The captured output of one session: a ring per stream plus the `both` view.
//!
//! `both` is its own ring fed with every chunk in the order the runtime received it,
//! so interleaving is preserved exactly and `both` offsets are as stable as the
//! per-stream ones. It holds as much as the two stream rings together.

use super::ring::{Ring, RingRead};

/// Bytes kept per stream (spec §1.15).
pub const STREAM_RING_BYTES: usize = 512 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
    Both,
}

impl Stream {
    pub fn parse(s: &str) -> Option<Stream> {
        match s {
            "stdout" => Some(Stream::Stdout),
            "stderr" => Some(Stream::Stderr),
            "both" => Some(Stream::Both),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
            Stream::Both => "both",
        }
    }
}

#[derive(Debug)]
pub struct Output {
    stdout: Ring,
    stderr: Ring,
    both: Ring,
}

impl Output {
    pub fn new(per_stream: usize) -> Self {
        Output { stdout: Ring::new(per_stream), stderr: Ring::new(per_stream), both: Ring::new(per_stream * 2) }
    }

    /// Records one chunk read from the child's stdout or stderr.
    pub fn push(&mut self, stream: Stream, data: &[u8]) {
        match stream {
            Stream::Stdout => self.stdout.push(data),
            Stream::Stderr => self.stderr.push(data),
            Stream::Both => {}
        }
        if stream != Stream::Both {
            self.both.push(data);
        }
    }

    pub fn ring(&self, stream: Stream) -> &Ring {
        match stream {
            Stream::Stdout => &self.stdout,
            Stream::Stderr => &self.stderr,
            Stream::Both => &self.both,
        }
    }

    pub fn read(&self, stream: Stream, offset: u64, limit: usize) -> RingRead {
        self.ring(stream).read(offset, limit)
    }

    /// Bytes produced on stdout and stderr together.
    pub fn bytes_total(&self) -> u64 {
        self.both.total()
    }

    /// The whole stream, if it is still complete and at most `max` bytes.
    pub fn complete_stream(&self, stream: Stream, max: usize) -> Option<Vec<u8>> {
        let ring = self.ring(stream);
        if ring.overflowed() || ring.total() > max as u64 {
            return None;
        }
        Some(ring.read(0, max).bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_keeps_arrival_order_across_streams() {
        let mut o = Output::new(16);
        o.push(Stream::Stdout, b"a1 ");
        o.push(Stream::Stderr, b"E ");
        o.push(Stream::Stdout, b"a2");
        assert_eq!(o.read(Stream::Both, 0, 100).bytes, b"a1 E a2");
        assert_eq!(o.read(Stream::Stdout, 0, 100).bytes, b"a1 a2");
        assert_eq!(o.read(Stream::Stderr, 0, 100).bytes, b"E ");
        assert_eq!(o.bytes_total(), 7);
    }

    #[test]
    fn complete_stream_is_refused_once_bytes_were_dropped_or_too_many() {
        let mut o = Output::new(4);
        o.push(Stream::Stdout, b"abcd");
        assert_eq!(o.complete_stream(Stream::Stdout, 4), Some(b"abcd".to_vec()));
        assert_eq!(o.complete_stream(Stream::Stdout, 3), None);
        o.push(Stream::Stdout, b"e");
        assert_eq!(o.complete_stream(Stream::Stdout, 100), None);
    }
}
