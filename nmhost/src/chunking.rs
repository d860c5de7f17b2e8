//! Host → browser frames stay ≤ 1 MiB (Chrome closes the port on a larger one).
//!
//! A response whose single `response` frame would exceed that travels as:
//!   `{type:"chunk", id, seq:0, data_b64}` … `{type:"chunk", id, seq:n-1, data_b64}` then
//!   `{type:"response", id, ok:true, transport, status, headers, chunked:{count:n, bytes, encoding}}`
//! with no `body`. The frames of one response are written back to back in this order (nothing
//! else with that id comes in between). The extension base64-decodes the chunks in `seq` order,
//! concatenates them, checks `count` and `bytes`, and decodes UTF-8 when `encoding` is `utf8`.
//! A response that is not UTF-8 carries `body_b64` instead of `body` (or `encoding:"binary"`).
//! If a `cancelled` frame arrives for the id instead of the final frame, the chunks are discarded.

use crate::framing::{encode_frame, MAX_OUTBOUND_FRAME};
use crate::messages::{ChunkedInfo, ErrorCode, FailureFrame, HostError, MessageId, Outbound};
use crate::runtime_client::RuntimeResponse;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde::Serialize;

/// Raw bytes per `chunk` frame: 512 KiB is ~683 KiB in base64, well below 1 MiB with the envelope.
pub const CHUNK_RAW_BYTES: usize = 512 * 1024;
/// Raw bytes per `stream_chunk` frame (small, so push events reach the extension promptly).
pub const STREAM_CHUNK_RAW_BYTES: usize = 64 * 1024;

/// Serializes and frames one message.
pub fn encode_json(value: &impl Serialize) -> Result<Vec<u8>, HostError> {
    let json = serde_json::to_vec(value)
        .map_err(|e| HostError::new(ErrorCode::NativeResponseFailed, format!("cannot serialize a frame: {e}")))?;
    encode_frame(&json).map_err(|e| HostError::new(ErrorCode::NativeResponseTooLarge, e.to_string()))
}

pub fn failure_frame(kind: &'static str, id: Option<&MessageId>, error: &HostError) -> Vec<u8> {
    // A failure frame is a code plus a short sentence; if even that cannot be framed the message
    // is cut, never the frame dropped.
    encode_json(&FailureFrame::new(kind, id, error)).unwrap_or_else(|_| {
        let short = HostError::new(error.code, "details omitted: too long");
        encode_json(&FailureFrame::new(kind, None, &short)).expect("a fixed-size failure frame fits")
    })
}

/// All frames for one successful runtime response, in the order they must be written.
pub fn response_frames(id: Option<&MessageId>, response: &RuntimeResponse) -> Vec<Vec<u8>> {
    let text = std::str::from_utf8(&response.body).ok();
    let single = || -> Option<Vec<u8>> {
        // The JSON string of a body is never shorter than the body, so a bigger body cannot fit.
        if response.body.len() > MAX_OUTBOUND_FRAME {
            return None;
        }
        let b64;
        let (body, body_b64) = match text {
            Some(t) => (Some(t), None),
            None => {
                b64 = B64.encode(&response.body);
                (None, Some(b64.as_str()))
            }
        };
        encode_json(&Outbound::Response {
            id,
            ok: true,
            transport: "ipc",
            status: response.status,
            headers: &response.headers,
            body,
            body_b64,
            chunked: None,
        })
        .ok()
    };
    if let Some(frame) = single() {
        return vec![frame];
    }
    let mut frames = Vec::with_capacity(response.body.len() / CHUNK_RAW_BYTES + 2);
    for (seq, piece) in response.body.chunks(CHUNK_RAW_BYTES).enumerate() {
        let data = B64.encode(piece);
        match encode_json(&Outbound::Chunk { id, seq, data_b64: &data }) {
            Ok(frame) => frames.push(frame),
            Err(e) => return vec![failure_frame("response", id, &e)],
        }
    }
    let info = ChunkedInfo {
        count: frames.len(),
        bytes: response.body.len(),
        encoding: if text.is_some() { "utf8" } else { "binary" },
    };
    let last = Outbound::Response {
        id,
        ok: true,
        transport: "ipc",
        status: response.status,
        headers: &response.headers,
        body: None,
        body_b64: None,
        chunked: Some(info),
    };
    match encode_json(&last) {
        Ok(frame) => frames.push(frame),
        Err(e) => return vec![failure_frame("response", id, &e)],
    }
    frames
}

/// `stream_chunk` frames for bytes read from a push stream, each ≤ `STREAM_CHUNK_RAW_BYTES` raw.
pub fn stream_chunk_frames(id: Option<&MessageId>, bytes: &[u8]) -> Vec<Vec<u8>> {
    bytes
        .chunks(STREAM_CHUNK_RAW_BYTES)
        .map(|piece| {
            let data = B64.encode(piece);
            encode_json(&Outbound::StreamChunk { id, chunk_b64: &data }).expect("a 64 KiB stream chunk fits in a frame")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use serde_json::Value;
    use std::collections::BTreeMap;

    fn response(body: Vec<u8>) -> RuntimeResponse {
        RuntimeResponse { status: 200, headers: BTreeMap::new(), body: Bytes::from(body) }
    }

    fn decode(frame: &[u8]) -> Value {
        assert!(frame.len() - 4 <= MAX_OUTBOUND_FRAME);
        serde_json::from_slice(&frame[4..]).unwrap()
    }

    /// Reassembles exactly as the extension is told to.
    fn reassemble(frames: &[Vec<u8>]) -> Vec<u8> {
        let values: Vec<Value> = frames.iter().map(|f| decode(f)).collect();
        let last = values.last().unwrap();
        if let Some(body) = last["body"].as_str() {
            return body.as_bytes().to_vec();
        }
        if let Some(b) = last["body_b64"].as_str() {
            return B64.decode(b).unwrap();
        }
        let info = &last["chunked"];
        let mut out = Vec::new();
        for (i, v) in values[..values.len() - 1].iter().enumerate() {
            assert_eq!(v["type"], "chunk");
            assert_eq!(v["seq"], i);
            out.extend(B64.decode(v["data_b64"].as_str().unwrap()).unwrap());
        }
        assert_eq!(info["count"], values.len() - 1);
        assert_eq!(info["bytes"], out.len());
        out
    }

    /// Size of the single frame for a body of `n` ASCII bytes (id "r").
    fn envelope_len() -> usize {
        let id = MessageId::Text("r".into());
        response_frames(Some(&id), &response(Vec::new()))[0].len() - 4
    }

    #[test]
    fn a_frame_of_exactly_one_mebibyte_is_sent_whole_and_one_byte_more_is_chunked() {
        let id = MessageId::Text("r".into());
        let fits = MAX_OUTBOUND_FRAME - envelope_len();
        let whole = response_frames(Some(&id), &response(vec![b'x'; fits]));
        assert_eq!(whole.len(), 1);
        assert_eq!(whole[0].len() - 4, MAX_OUTBOUND_FRAME);
        let split = response_frames(Some(&id), &response(vec![b'x'; fits + 1]));
        assert_eq!(split.len(), 3, "two chunks and the final frame");
        assert_eq!(reassemble(&split), vec![b'x'; fits + 1]);
    }

    #[test]
    fn escaped_bodies_that_grow_past_the_limit_are_chunked() {
        // 300 KiB of quotes become 600 KiB of `\"`; 600 KiB of them would be 1.2 MiB.
        let body = vec![b'"'; 600 * 1024];
        let frames = response_frames(None, &response(body.clone()));
        assert!(frames.len() > 1);
        assert_eq!(reassemble(&frames), body);
    }

    #[test]
    fn eight_mebibytes_reassemble_byte_exact() {
        let body: Vec<u8> = (0..8 << 20).map(|i: usize| b"abcdefghij\n"[i % 11]).collect();
        let frames = response_frames(None, &response(body.clone()));
        assert_eq!(frames.len(), 8 * 2 + 1);
        assert_eq!(decode(frames.last().unwrap())["chunked"]["encoding"], "utf8");
        assert_eq!(reassemble(&frames), body);
    }

    #[test]
    fn non_utf8_bodies_travel_as_base64() {
        let small = response_frames(None, &response(vec![0xff, 0x00, 0x80]));
        assert_eq!(decode(&small[0])["body_b64"], "/wCA");
        let big: Vec<u8> = (0..(2 << 20)).map(|i: usize| (i % 256) as u8).collect();
        let frames = response_frames(None, &response(big.clone()));
        assert_eq!(decode(frames.last().unwrap())["chunked"]["encoding"], "binary");
        assert_eq!(reassemble(&frames), big);
    }

    #[test]
    fn stream_chunks_are_at_most_64_kib_raw() {
        let bytes = vec![7u8; STREAM_CHUNK_RAW_BYTES * 2 + 1];
        let frames = stream_chunk_frames(None, &bytes);
        let sizes: Vec<usize> =
            frames.iter().map(|f| B64.decode(decode(f)["chunk_b64"].as_str().unwrap()).unwrap().len()).collect();
        assert_eq!(sizes, vec![STREAM_CHUNK_RAW_BYTES, STREAM_CHUNK_RAW_BYTES, 1]);
    }
}
