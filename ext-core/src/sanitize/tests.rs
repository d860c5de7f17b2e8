//! Edge tests for every bound of the sanitizer: exactly at a limit vs one over.

use super::*;
use serde_json::json;

fn limits() -> SanitizeLimits {
    SanitizeLimits::default()
}

/// Deterministic pseudo-random bytes (xorshift), so base64 samples look like real payloads.
fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

fn b64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn with_magic(magic: &[u8], len: usize) -> String {
    let mut bytes = magic.to_vec();
    bytes.extend(noise(len, 7));
    b64(&bytes)
}

fn s(v: &Value) -> &str {
    v.as_str().expect("string")
}

// ---- depth ---------------------------------------------------------------------------

fn nest(levels: usize) -> Value {
    let mut v = json!(1);
    for _ in 0..levels {
        v = json!([v]);
    }
    v
}

fn depth(v: &Value) -> usize {
    match v {
        Value::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
        Value::Object(m) => 1 + m.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

#[test]
fn depth_exactly_at_limit_is_kept() {
    let v = nest(8);
    assert_eq!(sanitize(&v, &limits()), v);
}

#[test]
fn depth_one_over_limit_is_marked() {
    let out = sanitize(&nest(9), &limits());
    assert_eq!(depth(&out), 8);
    let mut inner = &out;
    for _ in 0..8 {
        inner = &inner[0];
    }
    assert_eq!(inner, &json!("[depth-limit]"));
}

#[test]
fn depth_zero_marks_the_root_container_but_keeps_scalars() {
    let l = SanitizeLimits { max_depth: 0, ..limits() };
    assert_eq!(sanitize(&json!({"a":1}), &l), json!("[depth-limit]"));
    assert_eq!(sanitize(&json!(5), &l), json!(5));
}

#[test]
fn depth_is_capped_so_a_huge_limit_cannot_exhaust_the_stack() {
    let l = SanitizeLimits { max_depth: usize::MAX, max_total_chars: usize::MAX, ..limits() };
    let out = sanitize(&nest(MAX_DEPTH_CAP + 1), &l);
    assert_eq!(depth(&out), MAX_DEPTH_CAP);
}

// ---- arrays and objects ----------------------------------------------------------------

#[test]
fn array_exactly_at_limit_is_kept() {
    let v = Value::Array((0..200).map(|i| json!(i)).collect());
    assert_eq!(sanitize(&v, &limits()), v);
}

#[test]
fn array_one_over_limit_keeps_marker_in_last_slot() {
    let v = Value::Array((0..201).map(|i| json!(i)).collect());
    let out = sanitize(&v, &limits());
    let a = out.as_array().unwrap();
    assert_eq!(a.len(), 200);
    assert_eq!(a[198], json!(198));
    assert_eq!(a[199], json!("…[truncated: 2 more items]"));
}

#[test]
fn object_exactly_at_limit_is_kept_and_one_over_is_marked() {
    let at: Map<String, Value> = (0..200).map(|i| (format!("k{i:03}"), json!(i))).collect();
    let at = Value::Object(at);
    assert_eq!(sanitize(&at, &limits()), at);
    let over: Map<String, Value> = (0..201).map(|i| (format!("k{i:03}"), json!(i))).collect();
    let out = sanitize(&Value::Object(over), &limits());
    let m = out.as_object().unwrap();
    assert_eq!(m.len(), 200);
    assert_eq!(m["$truncated"], json!("[2 more keys]"));
    assert!(m.contains_key("k198") && !m.contains_key("k199"));
}

#[test]
fn marker_key_never_overwrites_an_input_key_of_the_same_name() {
    let mut m: Map<String, Value> = (0..5).map(|i| (format!("k{i}"), json!(i))).collect();
    m.insert("$truncated".into(), json!("mine"));
    let l = SanitizeLimits { max_object_keys: 3, ..limits() };
    let out = sanitize(&Value::Object(m), &l);
    let o = out.as_object().unwrap();
    assert_eq!(o["$truncated"], json!("mine"));
    assert_eq!(o["$truncated#2"], json!("[4 more keys]"));
    assert_eq!(o.len(), 3);
}

// ---- strings ---------------------------------------------------------------------------

#[test]
fn string_exactly_at_limit_is_kept() {
    let text = "é".repeat(20_000); // multi-byte: the limit counts chars, not bytes
    let l = SanitizeLimits { max_total_chars: 1_000_000, ..limits() };
    assert_eq!(sanitize(&json!(text), &l), json!(text));
}

#[test]
fn string_one_over_limit_is_cut_with_exact_count_and_fits_the_cap() {
    let text = "é".repeat(20_001);
    let l = SanitizeLimits { max_total_chars: 1_000_000, ..limits() };
    let out = sanitize(&json!(text), &l);
    let out = s(&out);
    assert_eq!(out.chars().count(), 20_000);
    let kept = out.find('…').map(|i| out[..i].chars().count()).unwrap();
    assert!(out.ends_with(&format!("…[truncated: {} more chars]", 20_001 - kept)), "{}", &out[out.len() - 40..]);
}

#[test]
fn long_keys_are_cut_and_colliding_cuts_are_counted() {
    let long_a = format!("{}a", "k".repeat(300));
    let long_b = format!("{}b", "k".repeat(300));
    let out = sanitize(&json!({ long_a: 1, long_b: 2 }), &limits());
    let o = out.as_object().unwrap();
    assert_eq!(o.len(), 2);
    assert!(o.keys().all(|k| k.chars().count() <= 256));
    assert_eq!(o["$truncated"], json!("[1 more keys]"));
}

// ---- total size ------------------------------------------------------------------------

#[test]
fn total_exactly_at_limit_is_kept_and_one_over_is_shrunk() {
    // A single string serializes to its length + 2 quotes.
    let l = SanitizeLimits { max_total_chars: 10_000, ..limits() };
    let at = json!("x".repeat(9_998));
    assert_eq!(sanitize(&at, &l), at);
    let over = json!("x".repeat(9_999));
    let out = sanitize(&over, &l);
    assert!(serde_json::to_string(&out).unwrap().len() <= 10_000);
    assert!(s(&out).contains("…[truncated: "));
}

#[test]
fn many_long_strings_share_the_budget_instead_of_the_first_taking_all() {
    let v = Value::Array((0..10).map(|i| json!(format!("{i}{}", "y".repeat(30_000)))).collect());
    let out = sanitize(&v, &limits());
    let text = serde_json::to_string(&out).unwrap();
    assert!(text.len() <= 60_000);
    let a = out.as_array().unwrap();
    assert_eq!(a.len(), 10, "every element keeps a visible prefix");
    for (i, x) in a.iter().enumerate() {
        assert!(s(x).starts_with(&format!("{i}yyy")));
    }
}

#[test]
fn tiny_total_budget_is_raised_to_minimum_and_still_valid_json() {
    let l = SanitizeLimits { max_total_chars: 1, ..limits() };
    let v = json!({"content":[{"type":"text","text":"z".repeat(5000)}],"isError":false});
    let out = sanitize(&v, &l);
    let text = serde_json::to_string(&out).unwrap();
    assert!(text.len() <= MIN_TOTAL_CHARS, "{text}");
    serde_json::from_str::<Value>(&text).unwrap();
}

#[test]
fn wide_and_deep_input_falls_back_to_budgeted_prefix() {
    // 200 x 200 small objects: even the tightest structural round is over 2 000 bytes.
    let row = Value::Array((0..200).map(|i| json!({"i": i, "v": "abc"})).collect());
    let v = Value::Array((0..200).map(|_| row.clone()).collect());
    let l = SanitizeLimits { max_total_chars: 2_000, ..limits() };
    let out = sanitize(&v, &l);
    let text = serde_json::to_string(&out).unwrap();
    assert!(text.len() <= 2_000, "{}", text.len());
    assert!(text.contains("more items]"));
}

#[test]
fn json_len_matches_serde_json() {
    let v = json!({"a\"b": [1, -2.5, 1e300, null, true, false, "\u{0}\u{1f}\n\t\\é😀", {"": []}]});
    assert_eq!(json_len(&v), serde_json::to_string(&v).unwrap().len());
}

// ---- binary detection ----------------------------------------------------------------------

#[test]
fn base64_png_is_detected_by_content_under_any_key() {
    let data = with_magic(b"\x89PNG\r\n\x1a\n", 3000);
    let out = sanitize(&json!({"payload": data}), &limits());
    let p = s(&out["payload"]);
    assert!(p.starts_with("[binary omitted: image/png, "), "{p}");
    assert!(p.contains(&format!("{} base64 chars", data.len())));
}

#[test]
fn magic_bytes_are_sniffed_for_common_formats() {
    let cases: &[(&[u8], &str)] = &[
        (b"\xff\xd8\xff\xe0", "image/jpeg"),
        (b"GIF89a", "image/gif"),
        (b"RIFF\x10\x00\x00\x00WEBPVP8 ", "image/webp"),
        (b"%PDF-1.7", "application/pdf"),
        (b"\x1f\x8b\x08\x00", "application/gzip"),
        (b"PK\x03\x04", "application/zip"),
    ];
    for (magic, mime) in cases {
        assert_eq!(sniff_base64(&with_magic(magic, 30)), Some(*mime), "{mime}");
    }
    assert_eq!(sniff_base64(&b64(&noise(40, 3))), None);
}

#[test]
fn random_base64_without_magic_is_detected_by_entropy() {
    let data = b64(&noise(600, 11));
    let out = sanitize(&json!([data]), &limits());
    assert!(s(&out[0]).starts_with("[binary omitted: application/octet-stream, 800 base64 chars"));
}

#[test]
fn url_safe_and_line_wrapped_base64_are_detected() {
    let url_safe = b64(&noise(600, 5)).replace('+', "-").replace('/', "_").trim_end_matches('=').to_owned();
    assert!(s(&sanitize(&json!(url_safe), &limits())).starts_with("[binary omitted"));
    let wrapped: String = b64(&noise(900, 9))
        .as_bytes()
        .chunks(76)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(s(&sanitize(&json!(wrapped), &limits())).starts_with("[binary omitted"));
}

#[test]
fn text_that_is_not_binary_passes_through() {
    let english = "The quick brown fox jumps over the lazy dog while the compiler checks every borrow. ".repeat(40);
    let hex = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08".repeat(20);
    let jwt = format!("eyJhbGciOiJIUzI1NiJ9.{}.{}", b64(&noise(400, 2)).trim_end_matches('='), "c2lnbmF0dXJl");
    let path = "src/components/widgets/table/cells/".repeat(12);
    let no_spaces = "thequickbrownfoxjumpsoverthelazydogandkeepsrunningaroundthefield".repeat(8);
    let ansi = "\u{1b}[32mok\u{1b}[0m test passed\n".repeat(40);
    let mixed = format!("{}+{}_", b64(&noise(300, 4)), b64(&noise(300, 8)));
    for text in [english, hex, jwt, path, no_spaces, ansi, mixed] {
        let out = sanitize(&json!({"stdout": text}), &limits());
        assert_eq!(out["stdout"], json!(text), "{}", &text[..60]);
    }
}

#[test]
fn short_base64_below_threshold_passes_through_but_image_blocks_never_do() {
    let short = b64(&noise(150, 1)); // 200 chars < 256
    assert_eq!(sanitize(&json!({"sig": short}), &limits())["sig"], json!(short));
    let block = json!({"type": "image", "data": short, "mimeType": "image/png"});
    let out = sanitize(&block, &limits());
    assert_eq!(out["type"], json!("image"));
    assert_eq!(out["mimeType"], json!("image/png"));
    assert_eq!(out["data"], json!("[binary omitted: image/png, 200 base64 chars ≈ 150 bytes]"));
}

#[test]
fn image_block_prefers_sniffed_mime_over_declared() {
    let data = with_magic(b"\xff\xd8\xff\xe0", 100);
    let out = sanitize(&json!({"type": "image", "data": data, "mimeType": "image/png"}), &limits());
    assert!(s(&out["data"]).starts_with("[binary omitted: image/jpeg, "));
}

#[test]
fn reference_key_floor_still_applies_to_non_base64_content() {
    let at = "a b ".repeat(1024); // 4096 chars: not over the floor
    assert_eq!(sanitize(&json!({"data": at}), &limits())["data"], json!(at));
    let over = format!("{at}!");
    assert_eq!(sanitize(&json!({"blob": over}), &limits())["blob"], json!("[binary omitted: 4097 chars]"));
}

#[test]
fn data_urls_are_summarised_with_their_mime() {
    let url = format!("data:image/webp;base64,{}", b64(&noise(400, 6)));
    let out = sanitize(&json!({"src": url}), &limits());
    assert_eq!(out["src"], json!(format!("[data URL omitted: image/webp, base64, {} chars]", url.len())));
    let short = "data:text/plain,hello";
    assert_eq!(sanitize(&json!(short), &limits()), json!(short));
}

#[test]
fn control_byte_strings_are_binary_but_ansi_output_is_not() {
    let raw: String = noise(1000, 13).iter().map(|b| char::from(*b % 32)).collect();
    let out = sanitize(&json!(raw), &limits());
    assert_eq!(out, json!("[binary omitted: 1000 chars of non-text data]"));
    let lossy = format!("PK{}", "\u{fffd}\u{fffd}abc".repeat(100));
    assert!(s(&sanitize(&json!(lossy), &limits())).starts_with("[binary omitted"));
}

#[test]
fn mcp_call_tool_result_keeps_its_shape() {
    let v = json!({
        "content": [
            {"type": "text", "text": "{\"ok\":true}"},
            {"type": "image", "data": with_magic(b"GIF89a", 5000), "mimeType": "image/gif"},
            {"type": "resource", "resource": {"uri": "file:///a.zip", "mimeType": "application/zip",
                "blob": with_magic(b"PK\x03\x04", 5000)}}
        ],
        "structuredContent": {"ok": true},
        "isError": false
    });
    let out = sanitize(&v, &limits());
    assert_eq!(out["content"][0], v["content"][0]);
    assert!(s(&out["content"][1]["data"]).starts_with("[binary omitted: image/gif"));
    assert!(s(&out["content"][2]["resource"]["blob"]).starts_with("[binary omitted: application/zip"));
    assert_eq!(out["structuredContent"], json!({"ok": true}));
}

#[test]
fn a_five_megabyte_result_is_bounded() {
    let big = "line of program output, nothing binary here\n".repeat(120_000);
    assert!(big.len() > 5_000_000);
    let v = json!({"content": [{"type": "text", "text": big}], "structuredContent": {"ok": true, "stdout": big}});
    let out = sanitize(&v, &limits());
    let text = serde_json::to_string(&out).unwrap();
    assert!(text.len() <= 60_000);
    assert!(s(&out["content"][0]["text"]).starts_with("line of program output"));
}
