//! Contract identity: an epoch number and a `sha256:` hash of the tool catalog,
//! computed as spec/contract.md §2.8 describes, so that clients (the extension, the
//! edge) can tell exactly which contract a runtime serves.
//!
//! Our descriptions are our own words, so our hash is our own; the algorithm is the
//! upstream one, which a unit test pins against independently computed vectors.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Epoch of this project's own contract.
pub const CONTRACT_EPOCH: u32 = 1;

/// Deepest nesting canonical JSON accepts (§2.8).
const MAX_DEPTH: usize = 64;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ContractError {
    #[error("a tool has an empty or missing name")]
    EmptyName,
    #[error("tool name {0:?} appears more than once")]
    DuplicateName(String),
    #[error("catalog nests deeper than {MAX_DEPTH} levels")]
    TooDeep,
}

/// `sha256:<hex>` of the canonical JSON of the tools sorted by name.
pub fn contract_hash(tools: &[Value]) -> Result<String, ContractError> {
    let mut sorted: Vec<&Value> = Vec::with_capacity(tools.len());
    for tool in tools {
        match tool.get("name").and_then(Value::as_str) {
            Some(name) if !name.is_empty() => sorted.push(tool),
            _ => return Err(ContractError::EmptyName),
        }
    }
    sorted.sort_by(|a, b| utf16_cmp(name_of(a), name_of(b)));
    for pair in sorted.windows(2) {
        if name_of(pair[0]) == name_of(pair[1]) {
            return Err(ContractError::DuplicateName(name_of(pair[0]).to_string()));
        }
    }
    let mut out = String::new();
    out.push('[');
    for (i, tool) in sorted.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_canonical(tool, &mut out, 1)?;
    }
    out.push(']');
    Ok(format!("sha256:{}", hex::encode(Sha256::digest(out.as_bytes()))))
}

/// Canonical JSON text of a value: keys sorted by UTF-16 code unit, no whitespace,
/// strings and numbers as serde_json writes them.
pub fn canonical_json(value: &Value) -> Result<String, ContractError> {
    let mut out = String::new();
    write_canonical(value, &mut out, 0)?;
    Ok(out)
}

/// True for `sha256:` followed by 64 lowercase hex digits.
pub fn is_valid_hash(s: &str) -> bool {
    s.strip_prefix("sha256:")
        .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

fn name_of(v: &Value) -> &str {
    v.get("name").and_then(Value::as_str).unwrap_or("")
}

fn utf16_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

fn write_canonical(value: &Value, out: &mut String, depth: usize) -> Result<(), ContractError> {
    if depth > MAX_DEPTH {
        return Err(ContractError::TooDeep);
    }
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_by(|a, b| utf16_cmp(a, b));
            out.push('{');
            for (i, key) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String((*key).clone()).to_string());
                out.push(':');
                write_canonical(&map[key.as_str()], out, depth + 1)?;
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out, depth + 1)?;
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A hand-made catalog whose hash was computed independently with
    /// `python3 -c 'import json,hashlib; ...json.dumps(sorted(tools,key=name), sort_keys=True,
    /// separators=(",",":"), ensure_ascii=False)...'` (keys here are ASCII/BMP, where
    /// Python's code-point order equals UTF-16 order).
    fn tiny_catalog() -> Vec<Value> {
        vec![
            json!({"name": "zeta", "description": "Last — with a dash", "inputSchema": {"type": "object", "properties": {"b": {"type": "integer", "maximum": 9007199254740991_u64}, "a": {"type": "string"}}}}),
            json!({"name": "alpha", "description": "First \"quoted\"\n", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "forbidden"}}),
        ]
    }

    #[test]
    fn hash_matches_an_independent_computation() {
        let ours = contract_hash(&tiny_catalog()).unwrap();
        assert_eq!(ours, RECORDED_TINY_HASH, "fixed vector recorded from python3");
        assert_eq!(ours, python_hash(&tiny_catalog()), "live python3 computation");
    }

    #[test]
    fn hash_is_order_independent_and_valid() {
        let mut reversed = tiny_catalog();
        reversed.reverse();
        let h = contract_hash(&reversed).unwrap();
        assert_eq!(h, contract_hash(&tiny_catalog()).unwrap());
        assert!(is_valid_hash(&h));
        assert!(!is_valid_hash("sha256:ABC"));
    }

    #[test]
    fn duplicate_and_empty_names_are_rejected() {
        let dup = vec![json!({"name": "a"}), json!({"name": "a"})];
        assert_eq!(contract_hash(&dup), Err(ContractError::DuplicateName("a".into())));
        assert_eq!(contract_hash(&[json!({"name": ""})]), Err(ContractError::EmptyName));
    }

    #[test]
    fn keys_sort_by_utf16_code_unit_not_by_utf8_byte() {
        // U+FF61 sorts after U+1F600 in UTF-8 byte order but before it in UTF-16 order
        // (the emoji is a surrogate pair starting 0xD83D).
        let v = json!({"\u{ff61}": 1, "\u{1F600}": 2});
        assert_eq!(canonical_json(&v).unwrap(), "{\"\u{1F600}\":2,\"\u{ff61}\":1}");
    }

    #[test]
    fn depth_is_bounded() {
        let mut v = json!(1);
        for _ in 0..70 {
            v = json!([v]);
        }
        assert_eq!(canonical_json(&v), Err(ContractError::TooDeep));
    }

    /// Computes the expected hash with python3 when it is installed (it is on this
    /// project's machines); without python3 only the recorded vector is checked.
    fn python_hash(tools: &[Value]) -> String {
        let script = r#"
import sys, json, hashlib
tools = json.load(sys.stdin)
tools.sort(key=lambda t: t["name"].encode("utf-16-be"))
text = json.dumps(tools, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
print("sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest())
"#;
        use std::io::Write;
        let child = std::process::Command::new("python3")
            .args(["-c", script])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn();
        match child {
            Ok(mut child) => {
                child.stdin.take().unwrap().write_all(Value::Array(tools.to_vec()).to_string().as_bytes()).unwrap();
                let out = child.wait_with_output().unwrap();
                assert!(out.status.success());
                String::from_utf8(out.stdout).unwrap().trim().to_string()
            }
            Err(_) => RECORDED_TINY_HASH.to_string(),
        }
    }

    const RECORDED_TINY_HASH: &str = "sha256:d146e0e919606655c20fb087b3839ca7ec84df1e51165a4e7d7aeb94342a3b1b";
}
