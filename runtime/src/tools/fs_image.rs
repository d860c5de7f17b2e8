//! `herdr_fs_image`: an image file as an MCP image block, so a model can look at it.

use std::io::Read;

use base64::Engine;
use serde_json::{Map, Value, json};

use super::common::{object_schema, path_refusal, path_schema, req_str, u64_arg};
use super::{Access, Handler, ImageBlock, ToolContext, ToolOutput, ToolSpec};
use crate::policy::OpenedFile;

pub const DEFAULT_MAX_BYTES: u64 = 2_097_152;
pub const MAX_BYTES_LIMIT: u64 = 8_000_000;

pub fn spec() -> ToolSpec {
    ToolSpec {
        name: "herdr_fs_image",
        description: concat!(
            "Show an image file from a managed project (a screenshot, diagram, icon…) as an image you can see. ",
            "Only .png, .jpg/.jpeg, .gif and .webp files are accepted, recognised by their extension. Files ",
            "larger than max_bytes (default 2 MiB, at most 8,000,000 bytes) are refused with their size, so you ",
            "can decide whether to raise the limit.",
            crate::path_rules!()
        ),
        input_schema: schema,
        access: Access::Read,
        read_only_hint: false,
        handler: Handler::Blocking(run),
    }
}

fn schema() -> Value {
    object_schema(
        json!({
            "path": path_schema("Image file to show."),
            "max_bytes": {"type": "integer", "minimum": 1, "maximum": MAX_BYTES_LIMIT, "default": DEFAULT_MAX_BYTES},
        }),
        &["path"],
    )
}

/// The MIME type for a supported extension (case-insensitive).
pub fn mime_for(path: &std::path::Path) -> Option<&'static str> {
    let ext = path.extension()?.to_str()?.to_ascii_lowercase();
    match ext.as_str() {
        "png" => Some("image/png"),
        "jpg" | "jpeg" => Some("image/jpeg"),
        "gif" => Some("image/gif"),
        "webp" => Some("image/webp"),
        _ => None,
    }
}

fn run(ctx: &ToolContext, args: &Map<String, Value>) -> ToolOutput {
    let max_bytes = u64_arg(args, "max_bytes", DEFAULT_MAX_BYTES);
    let OpenedFile { mut file, meta, resolved } = match ctx.policy.open_existing_file(req_str(args, "path")) {
        Ok(opened) => opened,
        Err(r) => return r.into(),
    };
    let path = &resolved.real;
    let Some(mime) = mime_for(path) else {
        return ToolOutput::refusal(
            "unsupported_image",
            format!("{} is not a supported image; use png, jpeg, gif or webp", path.display()),
            json!({
                "path": path.display().to_string(),
                "hint": "Only png, jpeg, gif and webp files can be shown as images; read a text file with herdr_fs_read.",
            }),
        );
    };
    if meta.len() > max_bytes {
        return ToolOutput::refusal(
            "image_too_large",
            format!("{} has {} bytes, more than max_bytes ({max_bytes})", path.display(), meta.len()),
            json!({"path": path.display().to_string(), "bytes": meta.len(), "max_bytes": max_bytes}),
        );
    }
    let bytes = match read_within(&mut file, meta.len(), max_bytes) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => {
            // The read stopped one byte past the limit; the descriptor tells the size now.
            let now = file.metadata().map_or(0, |m| m.len()).max(max_bytes + 1);
            return ToolOutput::refusal(
                "image_too_large",
                format!("{} grew to {now} bytes while being read, more than max_bytes ({max_bytes})", path.display()),
                json!({"path": path.display().to_string(), "bytes": now, "max_bytes": max_bytes}),
            );
        }
        Err(e) => return path_refusal("read_failed", path, format!("cannot read {}: {e}", path.display())),
    };
    let mut out = ToolOutput::payload(json!({
        "ok": true,
        "path": path.display().to_string(),
        "root": resolved.root.display().to_string(),
        "mime_type": mime,
        "bytes": bytes.len(),
    }));
    out.image = Some(ImageBlock {
        data_base64: base64::engine::general_purpose::STANDARD.encode(&bytes),
        mime_type: mime.to_string(),
    });
    out
}

/// The whole file if it holds at most `max_bytes`, else `None`. Reading stops one
/// byte past the limit, so a file that grows after its size was checked is never
/// held in memory beyond that.
fn read_within(reader: impl Read, expected: u64, max_bytes: u64) -> std::io::Result<Option<Vec<u8>>> {
    let mut bytes = Vec::with_capacity(expected.min(max_bytes) as usize);
    reader.take(max_bytes.saturating_add(1)).read_to_end(&mut bytes)?;
    Ok((bytes.len() as u64 <= max_bytes).then_some(bytes))
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use super::read_within;

    #[test]
    fn reads_up_to_the_limit_and_stops_one_byte_past_it() {
        assert_eq!(read_within(&b"abcd"[..], 4, 4).unwrap(), Some(b"abcd".to_vec()));
        assert_eq!(read_within(&b""[..], 0, 4).unwrap(), Some(Vec::new()));
        let mut grown = Cursor::new(vec![0u8; 1000]);
        assert_eq!(read_within(&mut grown, 4, 4).unwrap(), None);
        assert_eq!(grown.position(), 5, "read more than one byte past the limit");
    }
}
