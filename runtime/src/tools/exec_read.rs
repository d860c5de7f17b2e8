//! `herdr_exec_read`: a window of a session's output by byte offset, plus its state.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::common::{MAX_SAFE_INTEGER, object_schema, req_str, str_arg, u64_arg};
use super::{Access, BoxFuture, Handler, ToolContext, ToolOutput, ToolSpec, exec_common};
use crate::exec::{Stream, compact};

pub const DEFAULT_LIMIT: u64 = 65_536;
pub const MAX_LIMIT: u64 = 262_144;

pub fn spec() -> ToolSpec {
    ToolSpec {
        name: "herdr_exec_read",
        description: concat!(
            "Read the output and state of an exec session started by herdr_exec_start or herdr_exec. Output is ",
            "addressed by byte offset into the chosen stream (stdout, stderr, or both interleaved in the order it ",
            "was written): pass the returned next_offset as offset to continue where the last read stopped. The ",
            "runtime keeps the most recent 512 KiB of each stream; when older bytes were dropped, truncated is ",
            "true and the read starts at the oldest byte still held. running, exit_code and signal tell whether ",
            "and how the command ended. A complete read from offset 0 of a command that succeeded with more than ",
            "8192 bytes or 80 lines of output comes back compacted (compacted:true, counts): its first 20 and last ",
            "40 lines, or a uniform JSON array of objects as a $herdr_table of columns and rows; read from a ",
            "later offset (counts names the omitted byte range) to see the rest verbatim. A session from before a runtime restart answers ",
            "session_recovered_after_restart with what is known about it."
        ),
        input_schema: schema,
        access: Access::Read,
        read_only_hint: false,
        handler: Handler::Async(run),
    }
}

fn schema() -> Value {
    object_schema(
        json!({
            "session_id": {"type": "string", "minLength": 1, "maxLength": 128, "description": "Session to read."},
            "stream": {"type": "string", "enum": ["stdout", "stderr", "both"], "default": "both", "description": "Which output to read."},
            "offset": {"type": "integer", "minimum": 0, "maximum": MAX_SAFE_INTEGER, "default": 0, "description": "Byte offset in the stream to start at."},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT, "description": "Most bytes to return."},
        }),
        &["session_id"],
    )
}

fn run(ctx: Arc<ToolContext>, args: Map<String, Value>) -> BoxFuture<ToolOutput> {
    Box::pin(async move {
        match read(&ctx, &args).await {
            Ok(out) | Err(out) => out,
        }
    })
}

async fn read(ctx: &ToolContext, args: &Map<String, Value>) -> Result<ToolOutput, ToolOutput> {
    let registry = exec_common::registry(ctx)?;
    let stream_name = str_arg(args, "stream").unwrap_or("both");
    let Some(stream) = Stream::parse(stream_name) else {
        return Err(super::common::invalid_params("stream must be one of stdout, stderr, both"));
    };
    let offset = u64_arg(args, "offset", 0);
    let limit = u64_arg(args, "limit", DEFAULT_LIMIT).clamp(1, MAX_LIMIT) as usize;
    let session = exec_common::live_session(&registry, req_str(args, "session_id")).await?;
    // Exit first, then output: a session seen as ended has all its output captured.
    let exit = session.exit();
    let r = session.read(stream, offset, limit);
    let mut payload = json!({
        "ok": true,
        "session_id": session.id,
        "running": exit.is_none(),
        "phase": if exit.is_some() { "completed" } else { "running" },
        "exit_code": exit.as_ref().and_then(|e| e.exit_code),
        "signal": exit.as_ref().and_then(|e| e.signal.clone()),
        "truncated": r.read.truncated,
        "stream": stream.as_str(),
        "offset": r.read.offset,
        "next_offset": r.read.next_offset,
        "bytes_total": r.stream_total,
        "progress": exec_common::progress(&session, r.read.next_offset),
        "text": String::from_utf8_lossy(&r.read.bytes),
    });
    // Only a read of everything a successful command wrote may be shortened; any
    // other read (a later offset, a partial window, lost bytes) is returned verbatim.
    let whole = offset == 0 && r.read.offset == 0 && !r.read.truncated && r.read.next_offset == r.stream_total;
    if whole && exit.as_ref().is_some_and(|e| e.exit_code == Some(0)) {
        compact::apply(&mut payload, "text", &r.read.bytes);
    }
    Ok(ToolOutput::payload(payload))
}
