//! The text that teaches a web model the JSON bridge: preamble, typed catalog, user task.
//!
//! Rendered from the live `tools/list` catalog every time a task starts, so the model only
//! ever sees tools that exist right now. The wording is ours; the marker, the `USER_TASK:`
//! label and the catalog shape are the wire contract (spec/extension.md §1.3–§1.4).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Starts the first message of every bridged task; also how folding recognises it.
pub const BRIDGE_MARKER: &str = "[HERDR_JSON_BRIDGE_V1]";
/// Introduces the user's own words after the preamble.
pub const USER_TASK_LABEL: &str = "USER_TASK:";
/// Tool descriptions are cut to this many UTF-16 code units in the catalog (the reference's
/// `slice(0, 520)`; an emoji counts twice and is never cut in half).
pub const DOC_MAX_CHARS: usize = 520;
/// Schemas nested deeper than this render as `unknown` (hostile or cyclic-looking input).
pub const SCHEMA_MAX_DEPTH: usize = 8;

/// The chat site a bridged conversation lives on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Site {
    Zai,
    DeepSeek,
    ChatGpt,
}

const RULES: &[&str] = &[
    "You can reach local Herdr tools on the user's bound workstation through a JSON bridge in this browser. Use them to look at, change, run and check real work there instead of guessing.",
    "To call a tool, write one JSON object per line, exactly shaped {\"tool\":\"<exact tool name>\",\"args\":{...}}.",
    "Calls that do not depend on each other may go on separate lines of the same reply; they may run at the same time. When one step needs another's output, wait for that result first.",
    "A reply that calls tools holds only those JSON lines: no code fences, no explanations around them.",
    "Only use tool names and arguments listed below; never make up a tool or a parameter.",
    "Results come back in a user message that starts with TOOL_RESULT:. After reading it, either call more tools or give your normal answer in plain prose.",
    "Do not say something worked until a TOOL_RESULT shows that it did.",
    "Prefer the direct file, git and exec tools over prompting coding agents when either would do.",
];

const DEEPSEEK_HINT: &str = "This page renders text between dollar signs as math, which corrupts JSON. Inside JSON string arguments, write every literal dollar sign as the escape \\u0024.";

/// The preamble: marker, rules (plus the site hint) and the typed catalog.
pub fn render_preamble(tools: &[Value], site: Site) -> String {
    let mut out = String::with_capacity(4096);
    out.push_str(BRIDGE_MARKER);
    out.push('\n');
    for rule in RULES {
        out.push_str("- ");
        out.push_str(rule);
        out.push('\n');
    }
    if let Some(hint) = site_hint(site) {
        out.push_str("- ");
        out.push_str(hint);
        out.push('\n');
    }
    out.push('\n');
    out.push_str("Tools (typed API):\n");
    out.push_str(&render_typed_api(tools));
    out
}

/// Extra guidance a site needs because of how it renders model output.
pub fn site_hint(site: Site) -> Option<&'static str> {
    match site {
        Site::DeepSeek => Some(DEEPSEEK_HINT),
        Site::Zai | Site::ChatGpt => None,
    }
}

/// The first message of a bridged task: preamble, blank line, `USER_TASK:`, the user's text.
pub fn render_task_message(tools: &[Value], site: Site, user_text: &str) -> String {
    let mut out = render_preamble(tools, site);
    out.push_str("\n\n");
    out.push_str(USER_TASK_LABEL);
    out.push('\n');
    out.push_str(user_text);
    out
}

/// The catalog as a TypeScript-like declaration the model can read at a glance.
pub fn render_typed_api(tools: &[Value]) -> String {
    let mut out = String::from("declare const herdr: {\n");
    for tool in tools {
        let Some(name) = tool.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()) else {
            continue;
        };
        let desc = tool.get("description").and_then(Value::as_str).filter(|d| !d.is_empty());
        let doc = safe_doc(&desc.map(str::to_string).unwrap_or_else(|| format!("Call {name}")));
        let input = render_input(tool.get("inputSchema").unwrap_or(&Value::Null));
        out.push_str(&format!("  /** {doc} */\n  {}: (input: {input}) => Promise<unknown>;\n", render_key(name)));
    }
    out.push_str("};");
    out
}

fn render_input(schema: &Value) -> String {
    let Some(props) = schema.get("properties").and_then(Value::as_object).filter(|p| !p.is_empty()) else {
        return "Record<string, never>".to_string();
    };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let fields: Vec<String> = props
        .iter()
        .map(|(key, prop)| {
            let optional = if required.contains(&key.as_str()) { "" } else { "?" };
            format!("{}{optional}: {}", render_key(key), schema_type(prop))
        })
        .collect();
    format!("{{ {} }}", fields.join("; "))
}

/// A property key: bare when it is a plain identifier, otherwise JSON-quoted.
pub fn render_key(key: &str) -> String {
    let mut chars = key.chars();
    let ident_start = |c: char| c.is_ascii_alphabetic() || c == '_' || c == '$';
    let plain = chars.next().is_some_and(ident_start) && chars.all(|c| ident_start(c) || c.is_ascii_digit());
    if plain { key.to_string() } else { Value::String(key.to_string()).to_string() }
}

/// The TypeScript-ish type of one JSON Schema (spec §1.4 precedence).
pub fn schema_type(schema: &Value) -> String {
    schema_type_at(schema, 0)
}

fn schema_type_at(schema: &Value, depth: usize) -> String {
    let Some(obj) = schema.as_object() else {
        return "unknown".to_string();
    };
    if depth >= SCHEMA_MAX_DEPTH {
        return "unknown".to_string();
    }
    if let Some(Value::Array(values)) = obj.get("enum")
        && !values.is_empty()
    {
        return values.iter().map(Value::to_string).collect::<Vec<_>>().join(" | ");
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = obj.get(key)
            && !branches.is_empty()
        {
            return branches.iter().map(|b| schema_type_at(b, depth + 1)).collect::<Vec<_>>().join(" | ");
        }
    }
    match obj.get("type") {
        Some(Value::Array(types)) if !types.is_empty() => types
            .iter()
            .map(|t| {
                let mut branch = obj.clone();
                branch.insert("type".to_string(), t.clone());
                schema_type_at(&Value::Object(branch), depth + 1)
            })
            .collect::<Vec<_>>()
            .join(" | "),
        Some(Value::String(t)) => match t.as_str() {
            "array" => {
                let items = schema_type_at(obj.get("items").unwrap_or(&Value::Null), depth + 1);
                if items.contains(" | ") { format!("({items})[]") } else { format!("{items}[]") }
            }
            "object" => "Record<string, unknown>".to_string(),
            "string" => "string".to_string(),
            "integer" | "number" => "number".to_string(),
            "boolean" => "boolean".to_string(),
            "null" => "null".to_string(),
            _ => "unknown".to_string(),
        },
        _ => "unknown".to_string(),
    }
}

/// A description made safe for a `/** */` comment: no `*/`, one line, at most 520 UTF-16 units.
pub fn safe_doc(description: &str) -> String {
    let no_close = description.replace("*/", "* /");
    let collapsed = no_close.split(is_js_space).filter(|w| !w.is_empty()).collect::<Vec<_>>().join(" ");
    // The catalog line puts a space before the closing `*/`, so a trailing `*` here is harmless.
    let mut units = 0;
    collapsed
        .chars()
        .take_while(|c| {
            units += c.len_utf16();
            units <= DOC_MAX_CHARS
        })
        .collect()
}

/// JavaScript's `\s`: Unicode white space without U+0085, plus the byte-order mark.
pub(crate) fn is_js_space(c: char) -> bool {
    (c.is_whitespace() && c != '\u{85}') || c == '\u{feff}'
}
