//! Presentation-only sanitizer for tool results shown to a web model.
//!
//! The result a tool returned is never altered: this builds a *new*, bounded value that is
//! safe to paste into a chat message. Compared with the reference (spec §2), which cut the
//! serialized batch at 60 000 characters and so produced invalid JSON, every output here is
//! valid JSON, and every cut leaves an explicit marker:
//!
//! | what is cut | marker |
//! |---|---|
//! | a container nested too deep | the string `"[depth-limit]"` |
//! | a long array | its last slot becomes `"…[truncated: N more items]"` |
//! | an object with too many keys | a key `"$truncated"` holding `"[N more keys]"` |
//! | a long string | `<kept prefix>…[truncated: N more chars]` |
//! | base64 / binary / `data:` URL | `"[binary omitted: …]"` with length and sniffed MIME |
//!
//! Every marker is a string, so a marker never adds nesting and the depth bound holds.
//!
//! Algorithm: one structural pass (depth, widths, strings, binary) that visits only the part
//! of the input it keeps; if the serialized size is still over `max_total_chars`, the pass is
//! re-run from the original input with halved string caps, then halved widths (a bounded
//! number of rounds, so the work stays linear in the kept input); if even the tightest round
//! is too big, a final budgeted pass keeps a prefix of the document in order and marks the
//! rest. The last step cannot fail, so the total bound holds for every input.

use serde_json::{Map, Number, Value};

/// Smallest total budget honoured; below it not even a marker fits, so smaller values are raised.
pub const MIN_TOTAL_CHARS: usize = 64;
/// Smallest per-string cap honoured; a binary summary or truncation marker must fit in it.
pub const MIN_STRING_CHARS: usize = 128;
/// Smallest key cap honoured; keys are cut with the same marker as strings, which needs room.
pub const MIN_KEY_CHARS: usize = 48;
/// Largest depth honoured: the passes recurse once per level, and a service worker's stack
/// is small. No tool result a model can use is nested deeper.
pub const MAX_DEPTH_CAP: usize = 64;

const DEPTH_MARKER: &str = "[depth-limit]";
const TRUNCATED_KEY: &str = "$truncated";
/// Strings under the key names the reference treated as binary are summarised above this
/// length even when the content test says otherwise (spec §2 floor).
const BINARY_KEY_FLOOR_CHARS: usize = 4096;
/// How many leading characters the content tests look at: enough for a stable entropy
/// estimate, small enough that a 5 MB string costs one charset scan and nothing more.
const SAMPLE_CHARS: usize = 4096;
/// Random base64 carries ~6 bits per character; hex digests at most 4, English without spaces
/// about 4.2. 4.8 separates them with margin on 256+ character samples.
const BASE64_MIN_ENTROPY_BITS: f64 = 4.8;

/// Bounds applied by [`sanitize`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SanitizeLimits {
    /// Containers nested deeper than this become `"[depth-limit]"`. 8 keeps a whole MCP
    /// `CallToolResult` (result → content → block → structured payload → a few levels of the
    /// tool's own data), matching the reference's `depth > 7` cut.
    pub max_depth: usize,
    /// Array length including the marker slot. 200 as in the reference: directory listings
    /// and grep hits rarely need more for the model to reason, and more rarely fits anyway.
    pub max_array_len: usize,
    /// Object key count including the marker key. Tool payloads have a handful of keys; 200
    /// only stops maps keyed by user data (e.g. env dumps) from crowding out everything else.
    pub max_object_keys: usize,
    /// Characters per string *including* its truncation marker. 20 000 lets one file excerpt
    /// use a third of the batch budget, so a batch of calls still shows every result.
    pub max_string_chars: usize,
    /// Characters per object key including its marker; keys are names, not content.
    pub max_key_chars: usize,
    /// Serialized size of the whole output in UTF-8 bytes (a stricter measure than chars).
    /// 60 000 is the reference's whole-batch cap (§1.9) and fits comfortably in a chat message.
    pub max_total_chars: usize,
    /// Shortest string the content tests may call binary. Below 256 characters an opaque token
    /// (hash, id, short signature) is more likely to be meaningful text than a payload.
    pub binary_min_chars: usize,
}

impl Default for SanitizeLimits {
    fn default() -> Self {
        Self {
            max_depth: 8,
            max_array_len: 200,
            max_object_keys: 200,
            max_string_chars: 20_000,
            max_key_chars: 256,
            max_total_chars: 60_000,
            binary_min_chars: 256,
        }
    }
}

impl SanitizeLimits {
    /// The limits actually applied: values too small to hold a marker are raised, and the
    /// depth is capped at [`MAX_DEPTH_CAP`].
    pub fn effective(&self) -> Self {
        Self {
            max_depth: self.max_depth.min(MAX_DEPTH_CAP),
            max_array_len: self.max_array_len.max(1),
            max_object_keys: self.max_object_keys.max(1),
            max_string_chars: self.max_string_chars.max(MIN_STRING_CHARS),
            max_key_chars: self.max_key_chars.max(MIN_KEY_CHARS),
            max_total_chars: self.max_total_chars.max(MIN_TOTAL_CHARS),
            binary_min_chars: self.binary_min_chars.max(1),
        }
    }
}

/// Bounded, valid-JSON presentation copy of `value`. Deterministic; never panics.
pub fn sanitize(value: &Value, limits: &SanitizeLimits) -> Value {
    let limits = limits.effective();
    let mut round = limits.clone();
    // Strings shrink first (one long file dump is the usual culprit), then widths.
    loop {
        let out = Structural { limits: &round }.value(value, 0, None);
        if json_len(&out) <= limits.max_total_chars {
            return out;
        }
        let next = tighter(&round);
        if next == round {
            return fit_budget(&out, limits.max_total_chars);
        }
        round = next;
    }
}

fn tighter(l: &SanitizeLimits) -> SanitizeLimits {
    let mut next = l.clone();
    if l.max_string_chars > MIN_STRING_CHARS {
        next.max_string_chars = (l.max_string_chars / 2).max(MIN_STRING_CHARS);
    } else if l.max_array_len > 8 || l.max_object_keys > 8 {
        next.max_array_len = (l.max_array_len / 2).max(8.min(l.max_array_len));
        next.max_object_keys = (l.max_object_keys / 2).max(8.min(l.max_object_keys));
    }
    next
}

struct Structural<'a> {
    limits: &'a SanitizeLimits,
}

impl Structural<'_> {
    /// `level` = number of enclosing containers; `key` = the key this value sits under.
    fn value(&self, v: &Value, level: usize, key: Option<&str>) -> Value {
        match v {
            Value::Null | Value::Bool(_) | Value::Number(_) => v.clone(),
            Value::String(s) => self.string(s, key),
            Value::Array(_) | Value::Object(_) if level >= self.limits.max_depth => {
                Value::String(DEPTH_MARKER.to_owned())
            }
            Value::Array(items) => self.array(items, level),
            Value::Object(map) => self.object(map, level),
        }
    }

    fn array(&self, items: &[Value], level: usize) -> Value {
        let max = self.limits.max_array_len;
        if items.len() <= max {
            return Value::Array(items.iter().map(|x| self.value(x, level + 1, None)).collect());
        }
        let keep = max - 1;
        let mut out: Vec<Value> =
            items[..keep].iter().map(|x| self.value(x, level + 1, None)).collect();
        out.push(Value::String(format!("…[truncated: {} more items]", items.len() - keep)));
        Value::Array(out)
    }

    fn object(&self, map: &Map<String, Value>, level: usize) -> Value {
        let image_mime = media_block_mime(map);
        let max = self.limits.max_object_keys;
        let keep = if map.len() <= max { map.len() } else { max - 1 };
        let mut out = Map::new();
        let mut dropped = map.len() - keep;
        for (k, v) in map.iter().take(keep) {
            let key = cap_chars(k, self.limits.max_key_chars, "chars");
            if out.contains_key(&key) {
                // Two long keys with the same prefix: keeping both would need invented names.
                dropped += 1;
                continue;
            }
            let value = match (&image_mime, k.as_str(), v) {
                (Some(mime), "data", Value::String(s)) => {
                    Value::String(cap_chars(&media_summary(s, mime), self.limits.max_string_chars, "chars"))
                }
                _ => self.value(v, level + 1, Some(k)),
            };
            out.insert(key, value);
        }
        if dropped > 0 {
            insert_marker(&mut out, dropped);
        }
        Value::Object(out)
    }

    fn string(&self, s: &str, key: Option<&str>) -> Value {
        let summary = binary_summary(s, key, self.limits.binary_min_chars);
        let text = summary.as_deref().unwrap_or(s);
        Value::String(cap_chars(text, self.limits.max_string_chars, "chars"))
    }
}

/// Adds the "N more keys" marker and returns the bytes it adds to the serialization
/// (including its separating comma when the object was not empty).
fn insert_marker(out: &mut Map<String, Value>, dropped: usize) -> usize {
    let mut name = TRUNCATED_KEY.to_owned();
    // The input may itself use the marker name; never overwrite a real key. The suffix is
    // bounded by the key count, so the marker stays short.
    let mut n = 1;
    while out.contains_key(&name) {
        n += 1;
        name = format!("{TRUNCATED_KEY}#{n}");
    }
    let value = Value::String(format!("[{dropped} more keys]"));
    let added = usize::from(!out.is_empty()) + json_str_len(&name) + 1 + json_len(&value);
    out.insert(name, value);
    added
}

/// `s` unchanged if it has at most `cap` chars, else a prefix plus marker, `cap` chars in all.
fn cap_chars(s: &str, cap: usize, unit: &str) -> String {
    // Fast path without counting: byte length bounds char count from above.
    if s.len() <= cap {
        return s.to_owned();
    }
    let Some((cut, _)) = s.char_indices().nth(cap) else {
        return s.to_owned();
    };
    let total = cap + s[cut..].chars().count();
    let marker_fixed = "…[truncated:  more ]".chars().count() + unit.len();
    // The marker's count shrinks as more is kept; take the fewest digits that still fit so
    // the result uses the whole cap.
    let keep = (1..=digits(total))
        .map(|d| cap.saturating_sub(marker_fixed + d))
        .find(|keep| marker_fixed + digits(total - keep) + keep <= cap)
        .unwrap_or(0);
    let keep_byte = s.char_indices().nth(keep).map_or(s.len(), |(i, _)| i);
    format!("{}…[truncated: {} more {unit}]", &s[..keep_byte], total - keep)
}

fn digits(mut n: usize) -> usize {
    let mut d = 1;
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d
}

// ---------------------------------------------------------------------------------------
// Binary detection
// ---------------------------------------------------------------------------------------

/// MIME type of an MCP media block (`{"type":"image"|"audio", "data", "mimeType"}`), whose
/// `data` is base64 by definition and is summarised whatever its length.
fn media_block_mime(map: &Map<String, Value>) -> Option<String> {
    let kind = map.get("type")?.as_str()?;
    if kind != "image" && kind != "audio" {
        return None;
    }
    map.get("data")?.as_str()?;
    Some(map.get("mimeType").and_then(Value::as_str).unwrap_or("unknown").to_owned())
}

fn media_summary(data: &str, declared_mime: &str) -> String {
    let chars = data.chars().count();
    let mime = sniff_base64(data).unwrap_or(declared_mime);
    let mime = cap_chars(mime, 64, "chars");
    format!("[binary omitted: {mime}, {chars} base64 chars ≈ {} bytes]", chars / 4 * 3)
}

/// A summary for `s` if it looks like binary content, else `None`.
/// Byte length is used as a cheap pre-filter (it bounds the char count from above); the
/// thresholds themselves are in chars.
fn binary_summary(s: &str, key: Option<&str>, min_chars: usize) -> Option<String> {
    let binary_key = matches!(key, Some("data" | "blob" | "base64"));
    let floor_applies = binary_key && s.len() > BINARY_KEY_FLOOR_CHARS;
    if s.len() < min_chars && !floor_applies {
        return None;
    }
    let long_enough = s.len() >= min_chars && s.chars().nth(min_chars - 1).is_some();
    if long_enough && let Some(summary) = data_url_summary(s) {
        return Some(summary);
    }
    if long_enough && looks_like_base64(s, binary_key) {
        let chars = s.chars().count();
        let mime = sniff_base64(s).unwrap_or("application/octet-stream");
        return Some(format!("[binary omitted: {mime}, {chars} base64 chars ≈ {} bytes]", chars / 4 * 3));
    }
    if long_enough && looks_like_control_bytes(s) {
        return Some(format!("[binary omitted: {} chars of non-text data]", s.chars().count()));
    }
    if floor_applies && s.chars().nth(BINARY_KEY_FLOOR_CHARS).is_some() {
        return Some(format!("[binary omitted: {} chars]", s.chars().count()));
    }
    None
}

/// `data:<mime>[;params],<payload>`; the header must end within its first 256 bytes.
fn data_url_summary(s: &str) -> Option<String> {
    if !s.get(..5)?.eq_ignore_ascii_case("data:") {
        return None;
    }
    let header_end = s.as_bytes()[..s.len().min(256)].iter().position(|b| *b == b',')?;
    let header = &s[5..header_end];
    let mut parts = header.split(';');
    let mime = parts.next().filter(|m| !m.is_empty()).unwrap_or("text/plain");
    if !mime.bytes().all(|b| b.is_ascii_graphic()) {
        return None;
    }
    let base64 = parts.any(|p| p.eq_ignore_ascii_case("base64"));
    let encoding = if base64 { "base64" } else { "url-encoded" };
    Some(format!(
        "[data URL omitted: {}, {encoding}, {} chars]",
        cap_chars(mime, 64, "chars"),
        s.chars().count()
    ))
}

/// Standard or URL-safe base64 (line breaks allowed, `=` only as trailing padding) whose
/// sample is either high-entropy or decodes to a known file signature. A key that names
/// binary (`data`, `blob`, `base64`) is enough on its own, without the entropy test.
fn looks_like_base64(s: &str, binary_key: bool) -> bool {
    let unbroken = s.trim_end_matches(['\n', '\r']);
    let body = unbroken.trim_end_matches('=');
    if unbroken.len() - body.len() > 2 {
        return false;
    }
    let (mut std_only, mut url_only) = (false, false);
    for b in body.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'\n' | b'\r' => {}
            b'+' | b'/' => std_only = true,
            b'-' | b'_' => url_only = true,
            _ => return false,
        }
    }
    if std_only && url_only {
        return false;
    }
    if binary_key || sniff_base64(s).is_some() {
        return true;
    }
    entropy_bits(sample(body)) >= BASE64_MIN_ENTROPY_BITS
}

fn sample(s: &str) -> &str {
    match s.char_indices().nth(SAMPLE_CHARS) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// Shannon entropy per byte of an ASCII sample, ignoring line breaks.
fn entropy_bits(sample: &str) -> f64 {
    let mut counts = [0u32; 256];
    let mut n = 0u32;
    for b in sample.bytes().filter(|b| *b != b'\n' && *b != b'\r') {
        counts[b as usize] += 1;
        n += 1;
    }
    if n == 0 {
        return 0.0;
    }
    let n = f64::from(n);
    counts
        .iter()
        .filter(|c| **c > 0)
        .map(|c| {
            let p = f64::from(*c) / n;
            -p * p.log2()
        })
        .sum()
}

/// Many C0 control characters (other than tab, line breaks and the ESC of terminal colours)
/// or replacement characters from lossy decoding: bytes that were never text.
fn looks_like_control_bytes(s: &str) -> bool {
    let (mut odd, mut total) = (0usize, 0usize);
    for c in sample(s).chars() {
        total += 1;
        let control = (c < ' ' && !matches!(c, '\t' | '\n' | '\r' | '\u{1b}')) || c == '\u{7f}';
        if control || c == '\u{fffd}' {
            odd += 1;
        }
    }
    odd >= 8 && odd * 10 >= total
}

/// MIME type from the magic bytes at the start of a base64 payload.
pub fn sniff_base64(s: &str) -> Option<&'static str> {
    let mut head = [0u8; 24];
    let n = decode_base64_prefix(s, &mut head);
    sniff_bytes(&head[..n])
}

/// Decodes up to `out.len()` bytes from the start of standard or URL-safe base64, skipping
/// line breaks; stops at the first other non-alphabet character.
fn decode_base64_prefix(s: &str, out: &mut [u8]) -> usize {
    let (mut acc, mut bits, mut n) = (0u32, 0u32, 0usize);
    for b in s.bytes() {
        let v = match b {
            b'A'..=b'Z' => b - b'A',
            b'a'..=b'z' => b - b'a' + 26,
            b'0'..=b'9' => b - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            b'\n' | b'\r' => continue,
            _ => break,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out[n] = (acc >> bits) as u8;
            acc &= (1 << bits) - 1;
            n += 1;
            if n == out.len() {
                break;
            }
        }
    }
    n
}

fn sniff_bytes(b: &[u8]) -> Option<&'static str> {
    let starts = |sig: &[u8]| b.starts_with(sig);
    Some(if starts(b"\x89PNG\r\n\x1a\n") {
        "image/png"
    } else if starts(b"\xff\xd8\xff") {
        "image/jpeg"
    } else if starts(b"GIF87a") || starts(b"GIF89a") {
        "image/gif"
    } else if starts(b"RIFF") && b.get(8..12) == Some(b"WEBP") {
        "image/webp"
    } else if starts(b"RIFF") && b.get(8..12) == Some(b"WAVE") {
        "audio/wav"
    } else if b.get(4..8) == Some(b"ftyp") {
        "video/mp4"
    } else if starts(b"%PDF-") {
        "application/pdf"
    } else if starts(b"\x1f\x8b") {
        "application/gzip"
    } else if starts(b"PK\x03\x04") || starts(b"PK\x05\x06") {
        "application/zip"
    } else if starts(b"7z\xbc\xaf\x27\x1c") {
        "application/x-7z-compressed"
    } else if starts(b"\x00asm") {
        "application/wasm"
    } else if starts(b"\x7fELF") {
        "application/x-elf"
    } else if starts(b"OggS") {
        "audio/ogg"
    } else if starts(b"ID3") {
        "audio/mpeg"
    } else if starts(b"BM") && b.len() >= 14 && b[6..10] == [0, 0, 0, 0] {
        "image/bmp"
    } else if starts(b"\x00\x00\x01\x00") {
        "image/x-icon"
    } else if starts(b"<svg") || starts(b"<?xml") {
        "image/svg+xml"
    } else {
        return None;
    })
}

// ---------------------------------------------------------------------------------------
// Serialized size and the last-resort budgeted pass
// ---------------------------------------------------------------------------------------

/// Length of `serde_json::to_string(v)` in bytes, computed without allocating it.
pub fn json_len(v: &Value) -> usize {
    match v {
        Value::Null => 4,
        Value::Bool(true) => 4,
        Value::Bool(false) => 5,
        Value::Number(n) => number_len(n),
        Value::String(s) => json_str_len(s),
        Value::Array(items) => 2 + items.len().saturating_sub(1) + items.iter().map(json_len).sum::<usize>(),
        Value::Object(map) => {
            2 + map.len().saturating_sub(1)
                + map.iter().map(|(k, v)| json_str_len(k) + 1 + json_len(v)).sum::<usize>()
        }
    }
}

fn number_len(n: &Number) -> usize {
    n.to_string().len()
}

/// Serialized length of a JSON string with serde_json's escaping (quotes, backslash, C0).
fn json_str_len(s: &str) -> usize {
    2 + s.len()
        + s.bytes()
            .map(|b| match b {
                b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 1,
                0x00..=0x1f => 5,
                _ => 0,
            })
            .sum::<usize>()
}

/// Keeps a document-order prefix of `v` whose serialization fits `budget` bytes.
fn fit_budget(v: &Value, budget: usize) -> Value {
    fit(v, budget).map_or_else(|| Value::String("[result omitted: too large]".to_owned()), |(v, _)| v)
}

/// Reserve for a container's truncation marker: the longest marker plus its comma.
const MARKER_RESERVE: usize = 64;

fn fit(v: &Value, budget: usize) -> Option<(Value, usize)> {
    match v {
        Value::String(s) => fit_string(s, budget),
        Value::Array(items) => {
            let whole = json_len(v);
            if whole <= budget {
                return Some((v.clone(), whole));
            }
            if budget < 2 + MARKER_RESERVE {
                return None;
            }
            let mut out = Vec::new();
            let mut used = 2;
            for item in items {
                let sep = usize::from(!out.is_empty());
                let room = budget.saturating_sub(used + sep + MARKER_RESERVE);
                match fit(item, room) {
                    Some((x, len)) => {
                        used += sep + len;
                        out.push(x);
                    }
                    None => break,
                }
            }
            let dropped = items.len() - out.len();
            if dropped > 0 {
                let marker = Value::String(format!("…[truncated: {dropped} more items]"));
                used += usize::from(!out.is_empty()) + json_len(&marker);
                out.push(marker);
            }
            Some((Value::Array(out), used))
        }
        Value::Object(map) => {
            let whole = json_len(v);
            if whole <= budget {
                return Some((v.clone(), whole));
            }
            if budget < 2 + MARKER_RESERVE {
                return None;
            }
            let mut out = Map::new();
            let mut used = 2;
            for (k, x) in map {
                let sep = usize::from(!out.is_empty());
                let key_len = json_str_len(k) + 1;
                let Some(room) = budget.checked_sub(used + sep + key_len + MARKER_RESERVE) else {
                    break;
                };
                match fit(x, room) {
                    Some((x, len)) => {
                        used += sep + key_len + len;
                        out.insert(k.clone(), x);
                    }
                    None => break,
                }
            }
            let dropped = map.len() - out.len();
            if dropped > 0 {
                used += insert_marker(&mut out, dropped);
            }
            Some((Value::Object(out), used))
        }
        _ => {
            let len = json_len(v);
            (len <= budget).then(|| (v.clone(), len))
        }
    }
}

/// The longest prefix of `s` that, with a marker, serializes within `budget` bytes.
fn fit_string(s: &str, budget: usize) -> Option<(Value, usize)> {
    let whole = json_str_len(s);
    if whole <= budget {
        return Some((Value::String(s.to_owned()), whole));
    }
    let total_chars = s.chars().count();
    // Quotes + "…" (3 bytes) + "[truncated: " + digits + " more chars]".
    let marker_len = 2 + 3 + 12 + digits(total_chars) + 12;
    if budget < marker_len {
        return (budget >= 5).then(|| (Value::String("…".to_owned()), 5));
    }
    let mut room = budget - marker_len;
    let mut end = 0;
    let mut kept = 0;
    for (i, c) in s.char_indices() {
        let mut buf = [0u8; 4];
        let len = json_str_len(c.encode_utf8(&mut buf)) - 2;
        if len > room {
            break;
        }
        room -= len;
        end = i + c.len_utf8();
        kept += 1;
    }
    let out = format!("{}…[truncated: {} more chars]", &s[..end], total_chars - kept);
    let len = json_str_len(&out);
    Some((Value::String(out), len))
}

#[cfg(test)]
mod tests;
