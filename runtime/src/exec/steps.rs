//! `steps:[{program, args[]}]`, the argv form of `herdr_exec`: rendered as a
//! shell-quoted `&&` chain so it runs through the same session machinery as a
//! command string, without the caller having to quote anything.

use serde_json::Value;

pub const MAX_STEPS: usize = 16;
pub const MAX_ARGS: usize = 128;

/// Renders validated steps, or says which one is wrong.
pub fn render(steps: &[Value]) -> Result<String, String> {
    if steps.is_empty() || steps.len() > MAX_STEPS {
        return Err(format!("steps must hold 1..={MAX_STEPS} entries"));
    }
    let mut rendered = Vec::with_capacity(steps.len());
    for (i, step) in steps.iter().enumerate() {
        let Some(obj) = step.as_object() else { return Err(format!("steps[{i}] must be an object")) };
        if let Some(unknown) = obj.keys().find(|k| *k != "program" && *k != "args") {
            return Err(format!("steps[{i}] has an unknown field {unknown:?}"));
        }
        let program = obj.get("program").and_then(Value::as_str).unwrap_or("");
        if program.is_empty() {
            return Err(format!("steps[{i}].program must be a non-empty string"));
        }
        let args = match obj.get("args") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a.clone(),
            Some(_) => return Err(format!("steps[{i}].args must be an array of strings")),
        };
        if args.len() > MAX_ARGS {
            return Err(format!("steps[{i}].args holds more than {MAX_ARGS} entries"));
        }
        let mut words = vec![program.to_string()];
        for (j, a) in args.iter().enumerate() {
            let Some(a) = a.as_str() else { return Err(format!("steps[{i}].args[{j}] must be a string")) };
            words.push(a.to_string());
        }
        if words.iter().any(|w| w.contains('\0')) {
            return Err(format!("steps[{i}] contains a NUL byte"));
        }
        rendered.push(words.iter().map(|w| quote(w)).collect::<Vec<_>>().join(" "));
    }
    Ok(rendered.join(" && "))
}

/// POSIX single-quote quoting; words made only of safe characters stay bare.
pub fn quote(word: &str) -> String {
    let safe = !word.is_empty()
        && word.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b));
    if safe { word.to_string() } else { format!("'{}'", word.replace('\'', "'\\''")) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_a_quoted_chain() {
        let s = render(&[json!({"program": "echo", "args": ["it's", "$HOME", ""]}), json!({"program": "true"})]).unwrap();
        assert_eq!(s, r#"echo 'it'\''s' '$HOME' '' && true"#);
    }

    #[test]
    fn limits_and_unknown_fields_are_refused() {
        assert!(render(&[]).is_err());
        let many: Vec<Value> = (0..=MAX_STEPS).map(|_| json!({"program": "true"})).collect();
        assert!(render(&many[..MAX_STEPS]).is_ok());
        assert!(render(&many).is_err());
        let args: Vec<String> = (0..=MAX_ARGS).map(|i| i.to_string()).collect();
        assert!(render(&[json!({"program": "echo", "args": args[..MAX_ARGS]})]).is_ok());
        assert!(render(&[json!({"program": "echo", "args": args})]).is_err());
        assert!(render(&[json!({"program": "echo", "env": {}})]).unwrap_err().contains("unknown field"));
        assert!(render(&[json!({"program": "echo", "args": ["a\u{0}b"]})]).unwrap_err().contains("NUL"));
        assert!(render(&[json!({"program": ""})]).is_err());
    }
}
