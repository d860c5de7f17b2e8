//! Argument errors in the contract's words (spec §0): `<key> must be a string`,
//! `<key> must be an integer in MIN..=MAX`, and the length limits of strings
//! and lists. A model fixes its call from the message alone, so it names the
//! argument and the allowed range instead of echoing the schema keyword that
//! failed.

use jsonschema::error::{ValidationError, ValidationErrorKind};
use serde_json::Value;

/// The contract wording of `e`, or `None` for errors it has no wording for (the
/// validator's own message is used then).
pub fn message(schema: &Value, e: &ValidationError<'_>) -> Option<String> {
    let keyword_path = e.schema_path().to_string();
    // The schema holding the keyword that failed: the keyword's parent.
    let (parent, _) = keyword_path.rsplit_once('/')?;
    let property = schema.pointer(parent)?;
    let instance = key(&e.instance_path().to_string());
    // Members of an object: `name` at the top, `wait.name` inside `wait`.
    let member = |name: &str| instance.as_ref().map_or_else(|| name.to_string(), |k| format!("{k}.{name}"));
    match e.kind() {
        ValidationErrorKind::Required { property: name } => {
            return Some(format!("{} is required", member(name.as_str()?)));
        }
        ValidationErrorKind::AdditionalProperties { unexpected } => {
            // The accepted names, sorted so the message does not depend on map order.
            let mut accepted: Vec<&str> =
                property.get("properties").and_then(Value::as_object)?.keys().map(String::as_str).collect();
            accepted.sort_unstable();
            let unknown: Vec<String> = unexpected.iter().map(|u| member(u)).collect();
            let s = if unknown.len() == 1 { "" } else { "s" };
            let owner = instance.as_deref().unwrap_or("the tool");
            return Some(format!(
                "unknown argument{s} {}; {owner} accepts {}",
                unknown.join(", "),
                accepted.join(", ")
            ));
        }
        _ => {}
    }
    let key = instance?;
    match e.kind() {
        ValidationErrorKind::Enum { options } => {
            let options: Vec<String> =
                options.as_array()?.iter().map(|o| o.as_str().map_or_else(|| o.to_string(), str::to_string)).collect();
            Some(format!("{key} must be one of {}", options.join(", ")))
        }
        ValidationErrorKind::Minimum { .. } | ValidationErrorKind::Maximum { .. } => {
            let kind = a(property.get("type").and_then(Value::as_str).unwrap_or("number"));
            let (min, max) = (property.get("minimum"), property.get("maximum"));
            Some(match (min, max) {
                (Some(min), Some(max)) => format!("{key} must be {kind} in {min}..={max}"),
                (Some(min), None) => format!("{key} must be {kind} >= {min}"),
                (None, Some(max)) => format!("{key} must be {kind} <= {max}"),
                (None, None) => return None,
            })
        }
        ValidationErrorKind::Type { .. } => {
            let kind = property.get("type").and_then(Value::as_str)?;
            Some(format!("{key} must be {}", a(kind)))
        }
        ValidationErrorKind::MinItems { limit: 1 } => Some(format!("{key} must not be empty")),
        ValidationErrorKind::MinItems { limit } => Some(format!("{key} must hold at least {limit} items")),
        ValidationErrorKind::MaxItems { limit } => Some(format!("{key} must hold at most {limit} items")),
        ValidationErrorKind::MinLength { limit: 1 } => Some(format!("{key} must not be empty")),
        ValidationErrorKind::MinLength { limit } => Some(format!("{key} must be at least {limit} characters long")),
        ValidationErrorKind::MaxLength { limit } => Some(format!("{key} must be at most {limit} characters long")),
        _ => None,
    }
}

/// `wait.timeout_ms` for the instance path `/wait/timeout_ms`; `None` for the
/// arguments object itself, whose errors name no single argument.
fn key(instance_path: &str) -> Option<String> {
    let inner = instance_path.strip_prefix('/')?;
    (!inner.is_empty())
        .then(|| inner.split('/').map(|s| s.replace("~1", "/").replace("~0", "~")).collect::<Vec<_>>().join("."))
}

/// "an integer", "a string".
fn a(kind: &str) -> String {
    let article = if kind.starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" };
    format!("{article} {kind}")
}
