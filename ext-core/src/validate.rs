//! Checks a reply's calls before anything runs (spec §1.6). A refused call is not dropped:
//! it becomes a row in the TOOL_RESULT so the model learns what was wrong.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::journal::is_mutating;
use crate::parser::{ParsedCall, Variant};

/// A reply with more calls than this runs none of them (spec §1.6, one batch).
pub const MAX_CALLS_PER_REPLY: usize = 24;
/// Longest accepted tool name, in characters.
pub const MAX_TOOL_NAME_CHARS: usize = 128;

/// Error codes of refused calls (wire words of the reference bridge).
pub const ERR_UNKNOWN_TOOL: &str = "unknown-tool";
pub const ERR_BATCH_TOO_LARGE: &str = "json-bridge-batch-too-large";
pub const ERR_BATCH_INVALID: &str = "json-bridge-batch-invalid";
/// A call that changes something, whose string arguments held raw line breaks or tabs.
pub const ERR_RAW_CONTROL_CHARS: &str = "json-bridge-raw-line-breaks";

/// The live `tools/list` catalog, indexed by name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Catalog {
    tools: BTreeMap<String, Value>,
}

impl Catalog {
    /// Build from `tools/list` result entries; entries without a non-empty name are skipped.
    pub fn from_tools(tools: &[Value]) -> Self {
        let tools = tools
            .iter()
            .filter_map(|t| {
                let name = t.get("name")?.as_str().filter(|n| !n.is_empty())?;
                Some((name.to_string(), t.clone()))
            })
            .collect();
        Catalog { tools }
    }

    pub fn contains(&self, name: &str) -> bool {
        self.tools.contains_key(name)
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// Whether the tool's input schema declares a property with this name.
    pub fn accepts_property(&self, tool: &str, property: &str) -> bool {
        self.tools
            .get(tool)
            .and_then(|t| t.get("inputSchema"))
            .and_then(|s| s.get("properties"))
            .and_then(Value::as_object)
            .is_some_and(|p| p.contains_key(property))
    }
}

/// A call that passed validation. `index` is its 1-based position in the reply.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidCall {
    pub index: usize,
    pub tool: String,
    pub args: Value,
}

/// A call refused before execution, with the row fields the TOOL_RESULT needs.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub index: usize,
    pub tool: String,
    pub error: &'static str,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Checked {
    Run(ValidCall),
    Refused(Refusal),
}

/// Validate every call of a reply, in order.
pub fn validate_calls(calls: &[ParsedCall], catalog: &Catalog) -> Vec<Checked> {
    // The reply's calls are one batch and an oversized batch is refused as a whole: running
    // only its first part would leave the model's plan half done, in an order it did not choose.
    let too_many = calls.len() > MAX_CALLS_PER_REPLY;
    calls
        .iter()
        .enumerate()
        .map(|(i, call)| {
            if too_many {
                let detail = format!(
                    "Not run: this reply holds {} calls and one reply may hold at most {MAX_CALLS_PER_REPLY}; none of them ran. Send them again split over several replies.",
                    calls.len()
                );
                return Checked::Refused(Refusal { index: i + 1, tool: shorten_name(&call.tool), error: ERR_BATCH_TOO_LARGE, detail });
            }
            check_one(i + 1, call, catalog)
        })
        .collect()
}

fn check_one(index: usize, call: &ParsedCall, catalog: &Catalog) -> Checked {
    let refuse = |error: &'static str, detail: String| {
        Checked::Refused(Refusal { index, tool: shorten_name(&call.tool), error, detail })
    };
    let name_chars = call.tool.chars().count();
    if name_chars > MAX_TOOL_NAME_CHARS {
        return refuse(
            ERR_BATCH_INVALID,
            format!("Not run: the tool name has {name_chars} characters; the limit is {MAX_TOOL_NAME_CHARS}."),
        );
    }
    if !call.args.is_object() {
        return refuse(ERR_BATCH_INVALID, format!("Not run: \"args\" of {} must be a JSON object.", call.tool));
    }
    if !catalog.contains(&call.tool) {
        return refuse(ERR_UNKNOWN_TOOL, format!("Unknown Herdr tool: {}. Use a name from the typed API.", call.tool));
    }
    // Raw line breaks inside a JSON string are invalid JSON the parser repairs, but the text
    // it repaired is the page's rendering: paragraphs may have been joined, blank lines
    // collapsed, a fence line inside the content swallowed. Nothing proves the lines are the
    // model's, so nothing that changes state runs on them; the model is asked for escapes.
    if call.variants.contains(&Variant::RawControlChars) && is_mutating(&call.tool) {
        return refuse(
            ERR_RAW_CONTROL_CHARS,
            format!(
                "Not run: a string in the arguments of {} had raw line breaks or tabs inside the JSON string, and the chat page may have changed them (joined or dropped lines) before the bridge read them. Send the call again with every line break in file contents and commands written as the escape \\n (and tabs as \\t), so the JSON string stays on one line.",
                call.tool
            ),
        );
    }
    Checked::Run(ValidCall { index, tool: call.tool.clone(), args: call.args.clone() })
}

/// Names echoed back in rows are bounded too, so a hostile name cannot flood the result.
fn shorten_name(name: &str) -> String {
    if name.chars().count() <= MAX_TOOL_NAME_CHARS {
        name.to_string()
    } else {
        let head: String = name.chars().take(MAX_TOOL_NAME_CHARS).collect();
        format!("{head}…")
    }
}
