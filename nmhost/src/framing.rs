//! Chrome Native Messaging framing: a u32 little-endian byte length, then that many bytes of
//! UTF-8 JSON. Stdout carries frames only, so everything else goes to stderr.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Largest browser→host frame we accept (Chrome's own limit for host→browser frames, and the
/// spec's limit for requests).
pub const MAX_INBOUND_FRAME: usize = 1 << 20;
/// Frames above `MAX_INBOUND_FRAME` but up to this size are read and thrown away, so that one
/// oversized message costs only an error frame and the port stays usable.
pub const MAX_DISCARDABLE_FRAME: usize = 16 << 20;
/// Largest host→browser frame: Chrome drops the port on a bigger one.
pub const MAX_OUTBOUND_FRAME: usize = 1 << 20;

/// Payload buffer reserved up front; larger frames grow it as their bytes arrive.
const INITIAL_PAYLOAD_CAPACITY: usize = 64 * 1024;

/// One step of reading the inbound side.
#[derive(Debug, PartialEq, Eq)]
pub enum ReadOutcome {
    /// A complete frame payload of at most `MAX_INBOUND_FRAME` bytes.
    Frame(Vec<u8>),
    /// A frame of `len` bytes was too large; its payload has been skipped.
    TooLarge { len: usize },
    /// Clean end of input on a frame boundary.
    Eof,
    /// The input ended inside a frame (header or payload).
    Truncated { expected: usize, got: usize },
    /// The announced length is so large that this is more likely a broken stream than a message;
    /// skipping it could mean reading gigabytes, so the reader stops here.
    Desync { len: usize },
}

/// What the length prefix alone tells us to do with a frame.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum LengthClass {
    Accept,
    Discard,
    Desync,
}

pub fn classify_length(len: usize) -> LengthClass {
    if len <= MAX_INBOUND_FRAME {
        LengthClass::Accept
    } else if len <= MAX_DISCARDABLE_FRAME {
        LengthClass::Discard
    } else {
        LengthClass::Desync
    }
}

/// Reads exactly `buf.len()` bytes unless the input ends first; returns how many were read.
async fn read_full<R: AsyncRead + Unpin>(input: &mut R, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        let n = input.read(&mut buf[filled..]).await?;
        if n == 0 {
            break;
        }
        filled += n;
    }
    Ok(filled)
}

/// Reads the next frame. I/O errors other than end-of-input are returned as `Err`.
pub async fn read_frame<R: AsyncRead + Unpin>(input: &mut R) -> std::io::Result<ReadOutcome> {
    let mut header = [0u8; 4];
    let got = read_full(input, &mut header).await?;
    if got == 0 {
        return Ok(ReadOutcome::Eof);
    }
    if got < header.len() {
        return Ok(ReadOutcome::Truncated { expected: header.len(), got });
    }
    let len = u32::from_le_bytes(header) as usize;
    match classify_length(len) {
        LengthClass::Accept => {
            // Grow with the bytes that actually arrive: a lying length prefix on a short input
            // must not cost a 1 MiB allocation.
            let mut payload = Vec::with_capacity(len.min(INITIAL_PAYLOAD_CAPACITY));
            let got = (&mut *input).take(len as u64).read_to_end(&mut payload).await?;
            if got < len {
                return Ok(ReadOutcome::Truncated { expected: len, got });
            }
            Ok(ReadOutcome::Frame(payload))
        }
        LengthClass::Discard => {
            let skipped = tokio::io::copy(&mut (&mut *input).take(len as u64), &mut tokio::io::sink()).await?;
            if (skipped as usize) < len {
                return Ok(ReadOutcome::Truncated { expected: len, got: skipped as usize });
            }
            Ok(ReadOutcome::TooLarge { len })
        }
        LengthClass::Desync => Ok(ReadOutcome::Desync { len }),
    }
}

/// Prefixes `payload` with its length. Callers keep outbound payloads ≤ `MAX_OUTBOUND_FRAME`
/// (see `chunking`); this function refuses larger ones rather than break the port.
pub fn encode_frame(payload: &[u8]) -> Result<Vec<u8>, FrameTooLarge> {
    if payload.len() > MAX_OUTBOUND_FRAME {
        return Err(FrameTooLarge { len: payload.len() });
    }
    let mut out = Vec::with_capacity(4 + payload.len());
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(payload);
    Ok(out)
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("outbound frame of {len} bytes exceeds the {MAX_OUTBOUND_FRAME}-byte native messaging limit")]
pub struct FrameTooLarge {
    pub len: usize,
}

/// Writes one already-encoded frame and flushes, so the browser sees it without delay.
pub async fn write_encoded<W: AsyncWrite + Unpin>(output: &mut W, encoded: &[u8]) -> std::io::Result<()> {
    output.write_all(encoded).await?;
    output.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(payload: &[u8]) -> Vec<u8> {
        let mut v = (payload.len() as u32).to_le_bytes().to_vec();
        v.extend_from_slice(payload);
        v
    }

    async fn read_all(mut input: &[u8]) -> Vec<ReadOutcome> {
        let mut out = Vec::new();
        loop {
            let o = read_frame(&mut input).await.unwrap();
            let stop = !matches!(o, ReadOutcome::Frame(_) | ReadOutcome::TooLarge { .. });
            out.push(o);
            if stop {
                return out;
            }
        }
    }

    #[tokio::test]
    async fn reads_consecutive_frames_then_eof() {
        let mut input = frame(b"{\"a\":1}");
        input.extend(frame(b"[]"));
        let got = read_all(&input).await;
        assert_eq!(
            got,
            vec![ReadOutcome::Frame(b"{\"a\":1}".to_vec()), ReadOutcome::Frame(b"[]".to_vec()), ReadOutcome::Eof]
        );
    }

    #[tokio::test]
    async fn exactly_one_mebibyte_is_accepted_and_one_more_byte_is_skipped() {
        let at_limit = vec![b' '; MAX_INBOUND_FRAME];
        let over = vec![b' '; MAX_INBOUND_FRAME + 1];
        let mut input = frame(&at_limit);
        input.extend(frame(&over));
        input.extend(frame(b"1"));
        let got = read_all(&input).await;
        assert_eq!(got.len(), 4);
        assert!(matches!(&got[0], ReadOutcome::Frame(p) if p.len() == MAX_INBOUND_FRAME));
        assert_eq!(got[1], ReadOutcome::TooLarge { len: MAX_INBOUND_FRAME + 1 });
        assert_eq!(got[2], ReadOutcome::Frame(b"1".to_vec()));
        assert_eq!(got[3], ReadOutcome::Eof);
    }

    #[tokio::test]
    async fn lengths_beyond_the_discard_limit_stop_reading() {
        let input = ((MAX_DISCARDABLE_FRAME + 1) as u32).to_le_bytes();
        assert_eq!(read_all(&input).await, vec![ReadOutcome::Desync { len: MAX_DISCARDABLE_FRAME + 1 }]);
        assert_eq!(classify_length(MAX_DISCARDABLE_FRAME), LengthClass::Discard);
    }

    #[tokio::test]
    async fn short_header_and_short_payload_are_truncations() {
        assert_eq!(read_all(&[1, 0]).await, vec![ReadOutcome::Truncated { expected: 4, got: 2 }]);
        let mut input = 10u32.to_le_bytes().to_vec();
        input.extend_from_slice(b"abc");
        assert_eq!(read_all(&input).await, vec![ReadOutcome::Truncated { expected: 10, got: 3 }]);
    }

    #[test]
    fn encode_refuses_frames_over_the_outbound_limit() {
        assert_eq!(encode_frame(&vec![0; MAX_OUTBOUND_FRAME]).unwrap().len(), MAX_OUTBOUND_FRAME + 4);
        assert_eq!(encode_frame(&vec![0; MAX_OUTBOUND_FRAME + 1]), Err(FrameTooLarge { len: MAX_OUTBOUND_FRAME + 1 }));
        assert_eq!(&encode_frame(b"{}").unwrap()[..4], &2u32.to_le_bytes());
    }
}
