//! Herdr's API schema (`herdr api schema --json`): the method catalogue behind
//! `herdr_methods` and the parameter checks `herdr_call` runs before anything
//! reaches the socket.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

/// How long a loaded schema is reused.
pub const SCHEMA_TTL: Duration = Duration::from_secs(60);
/// Largest schema output accepted from the CLI (the real one is about 280 KB).
pub const MAX_SCHEMA_BYTES: usize = 8 * 1024 * 1024;
/// Nesting depth at which parameter checks stop descending (guards against `$ref` cycles).
const MAX_DEPTH: usize = 16;
/// Schema nodes one `check_params` call may visit. Nested `anyOf`/`oneOf` multiply
/// the branches tried (up to the depth cap), so without a bound a hostile schema
/// could make a check take hours; real Herdr params need a few dozen visits.
pub const MAX_CHECK_VISITS: usize = 10_000;

pub const SOURCE_LABEL: &str = "herdr api schema --json (live, 60s cache)";

#[derive(Debug, Clone, PartialEq)]
pub struct MethodSchema {
    pub name: String,
    /// The params object schema, with a top-level `$ref` resolved.
    pub params: Value,
}

impl MethodSchema {
    pub fn properties(&self) -> Map<String, Value> {
        self.params.get("properties").and_then(Value::as_object).cloned().unwrap_or_default()
    }

    pub fn required(&self) -> Vec<String> {
        self.params
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).map(str::to_string).collect())
            .unwrap_or_default()
    }
}

#[derive(Debug, Clone)]
pub struct ApiSchema {
    pub document: Value,
    pub protocol: Option<u64>,
    pub methods: BTreeMap<String, MethodSchema>,
}

/// A parameter problem found before dispatch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamIssue {
    pub name: String,
    pub message: String,
}

impl ApiSchema {
    /// Reads the request variants (`schemas.request.oneOf[]`, each with a `method`
    /// const and a `params` schema).
    pub fn parse(document: Value) -> Result<ApiSchema, String> {
        let variants = document
            .pointer("/schemas/request/oneOf")
            .and_then(Value::as_array)
            .ok_or("the schema has no schemas.request.oneOf list")?;
        let mut methods = BTreeMap::new();
        for variant in variants {
            let Some(name) = variant.pointer("/properties/method/const").and_then(Value::as_str) else { continue };
            let raw = variant.pointer("/properties/params").cloned().unwrap_or_else(|| json!({"type": "object"}));
            let params = resolve(&document, &raw, 0).clone();
            methods.insert(name.to_string(), MethodSchema { name: name.to_string(), params });
        }
        if methods.is_empty() {
            return Err("the schema lists no request methods".into());
        }
        let protocol = document.get("protocol").and_then(Value::as_u64);
        Ok(ApiSchema { document, protocol, methods })
    }

    /// `{method, params:{properties, required, empty}}` per method whose name
    /// contains `query` (case-insensitive).
    pub fn describe(&self, query: &str) -> Vec<Value> {
        let q = query.trim().to_ascii_lowercase();
        self.methods
            .values()
            .filter(|m| q.is_empty() || m.name.to_ascii_lowercase().contains(&q))
            .map(|m| {
                let properties: Map<String, Value> =
                    m.properties().into_iter().map(|(k, v)| (k, resolve(&self.document, &v, 0).clone())).collect();
                json!({"method": m.name, "params": {"empty": properties.is_empty(), "properties": properties, "required": m.required()}})
            })
            .collect()
    }

    /// Errors (missing required, wrong type, value outside an enum) and warnings
    /// (unknown params) for `params` of `method`.
    pub fn check_params(&self, method: &MethodSchema, params: &Map<String, Value>) -> (Vec<ParamIssue>, Vec<String>) {
        let props = method.properties();
        let mut errors = vec![];
        for name in method.required() {
            if !params.contains_key(&name) {
                errors.push(ParamIssue { name: name.clone(), message: format!("{name} is required") });
            }
        }
        let mut warnings = vec![];
        let mut budget = MAX_CHECK_VISITS;
        for (name, value) in params {
            match props.get(name) {
                None => warnings.push(format!("unknown param {name} (not in Herdr's schema for {}; sent anyway)", method.name)),
                Some(schema) => {
                    if let Err(why) = conforms(&self.document, schema, value, 0, &mut budget) {
                        errors.push(ParamIssue { name: name.clone(), message: format!("{name}: {why}") });
                    }
                }
            }
        }
        (errors, warnings)
    }
}

/// Follows `$ref: "#/..."` pointers within the document.
fn resolve<'a>(document: &'a Value, schema: &'a Value, depth: usize) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix('#')) {
        Some(pointer) if depth < MAX_DEPTH => match document.pointer(pointer) {
            Some(target) => resolve(document, target, depth + 1),
            None => schema,
        },
        _ => schema,
    }
}

fn type_matches(name: &str, value: &Value) -> bool {
    match name {
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        "null" => value.is_null(),
        _ => true,
    }
}

/// A shallow conformance check: type, enum, const, and the alternatives of
/// `anyOf`/`oneOf`; array items and object members one level down. Herdr itself
/// is the final judge; this only catches mistakes before they cost a call.
///
/// Past the depth cap or once `budget` visits are spent the answer is "cannot
/// check", which passes: an `Err` is only ever a mismatch actually seen.
fn conforms(document: &Value, schema: &Value, value: &Value, depth: usize, budget: &mut usize) -> Result<(), String> {
    if depth > MAX_DEPTH || *budget == 0 {
        return Ok(());
    }
    *budget -= 1;
    let schema = resolve(document, schema, depth);
    if let Some(options) = schema.get("anyOf").or_else(|| schema.get("oneOf")).and_then(Value::as_array) {
        let mut reasons = vec![];
        for option in options {
            match conforms(document, option, value, depth + 1, budget) {
                Ok(()) => return Ok(()),
                Err(r) => reasons.push(r),
            }
        }
        return Err(reasons.into_iter().next().unwrap_or_else(|| "matches no allowed form".into()));
    }
    if let Some(c) = schema.get("const")
        && c != value
    {
        return Err(format!("must be {c}"));
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array)
        && !options.contains(value)
    {
        let list: Vec<String> = options.iter().map(Value::to_string).collect();
        return Err(format!("must be one of {}", list.join(", ")));
    }
    match schema.get("type") {
        Some(Value::String(t)) if !type_matches(t, value) => return Err(format!("must be of type {t}")),
        Some(Value::Array(ts)) if !ts.iter().filter_map(Value::as_str).any(|t| type_matches(t, value)) => {
            let names: Vec<&str> = ts.iter().filter_map(Value::as_str).collect();
            return Err(format!("must be of type {}", names.join(" or ")));
        }
        _ => {}
    }
    if let (Some(items), Some(values)) = (schema.get("items"), value.as_array()) {
        for (i, v) in values.iter().enumerate() {
            conforms(document, items, v, depth + 1, budget).map_err(|e| format!("item {i} {e}"))?;
        }
    }
    if let (Some(props), Some(obj)) = (schema.get("properties").and_then(Value::as_object), value.as_object()) {
        for req in schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
            if !obj.contains_key(req) {
                return Err(format!("is missing its member {req}"));
            }
        }
        for (k, v) in obj {
            if let Some(s) = props.get(k) {
                conforms(document, s, v, depth + 1, budget).map_err(|e| format!("member {k} {e}"))?;
            }
        }
    }
    Ok(())
}

/// Loads the schema through the `herdr` CLI, reusing it for [`SCHEMA_TTL`].
pub struct SchemaCache {
    herdr_bin: Option<PathBuf>,
    timeout: Duration,
    cached: Mutex<Option<(Instant, Arc<ApiSchema>)>>,
}

impl SchemaCache {
    pub fn new(herdr_bin: Option<PathBuf>, timeout: Duration) -> Self {
        SchemaCache { herdr_bin, timeout, cached: Mutex::new(None) }
    }

    /// The schema, or a message saying why it is unavailable. Failures are not
    /// cached, so installing Herdr takes effect on the next call.
    pub async fn get(&self) -> Result<Arc<ApiSchema>, String> {
        if let Some((at, schema)) = self.cached.lock().unwrap_or_else(|e| e.into_inner()).as_ref()
            && at.elapsed() < SCHEMA_TTL
        {
            return Ok(Arc::clone(schema));
        }
        let Some(bin) = &self.herdr_bin else {
            return Err(
                "the herdr CLI was not found (neither HERDR_BIN_PATH nor PATH has it), so Herdr's API schema cannot be read"
                    .into(),
            );
        };
        let schema = Arc::new(load_from_cli(bin, self.timeout).await?);
        *self.cached.lock().unwrap_or_else(|e| e.into_inner()) = Some((Instant::now(), Arc::clone(&schema)));
        Ok(schema)
    }
}

async fn load_from_cli(bin: &Path, timeout: Duration) -> Result<ApiSchema, String> {
    let child = tokio::process::Command::new(bin)
        .args(["api", "schema", "--json"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot run {} api schema --json: {e}", bin.display()))?;
    let out = tokio::time::timeout(timeout, child.wait_with_output())
        .await
        .map_err(|_| format!("{} api schema --json did not finish within {} ms", bin.display(), timeout.as_millis()))?
        .map_err(|e| format!("{} api schema --json failed: {e}", bin.display()))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Err(format!("{} api schema --json exited with {}: {}", bin.display(), out.status, stderr.trim()));
    }
    if out.stdout.len() > MAX_SCHEMA_BYTES {
        return Err(format!("the schema printed by {} exceeds {MAX_SCHEMA_BYTES} bytes", bin.display()));
    }
    let document: Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("{} api schema --json printed invalid JSON: {e}", bin.display()))?;
    ApiSchema::parse(document)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> ApiSchema {
        ApiSchema::parse(json!({"protocol": 20, "schemas": {"request": {
            "oneOf": [
                {"properties": {"method": {"const": "ping"}, "params": {"$ref": "#/schemas/request/$defs/Empty"}}},
                {"properties": {"method": {"const": "pane.read"}, "params": {"$ref": "#/schemas/request/$defs/Read"}}}
            ],
            "$defs": {
                "Empty": {"type": "object", "properties": {}},
                "Source": {"type": "string", "enum": ["visible", "recent"]},
                "Read": {"type": "object", "required": ["pane_id", "source"], "properties": {
                    "pane_id": {"type": "string"},
                    "source": {"$ref": "#/schemas/request/$defs/Source"},
                    "lines": {"type": ["integer", "null"], "minimum": 0}
                }}
            }
        }}}))
        .unwrap()
    }

    #[test]
    fn methods_and_queries() {
        let s = schema();
        assert_eq!(s.protocol, Some(20));
        assert_eq!(s.describe("").len(), 2);
        let read = s.describe("PANE.R");
        assert_eq!(read.len(), 1);
        assert_eq!(read[0]["params"]["required"], json!(["pane_id", "source"]));
        assert_eq!(read[0]["params"]["properties"]["source"]["enum"], json!(["visible", "recent"]));
        assert_eq!(s.describe("ping")[0]["params"]["empty"], true);
    }

    #[test]
    fn params_are_checked_for_required_type_and_enum() {
        let s = schema();
        let m = &s.methods["pane.read"];
        let p = |v: Value| v.as_object().unwrap().clone();
        let (errors, warnings) = s.check_params(m, &p(json!({"pane_id": "w1:p1", "source": "recent", "lines": null, "x": 1})));
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(warnings.len(), 1);
        let (errors, _) = s.check_params(m, &p(json!({"pane_id": 3, "source": "bogus"})));
        let names: Vec<&str> = errors.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["pane_id", "source"]);
        let (errors, _) = s.check_params(m, &p(json!({"source": "visible"})));
        assert_eq!(errors[0].message, "pane_id is required");
    }

    /// One method `m` whose only param `x` has the schema `x`, plus `$defs`.
    fn single_param(x: Value, defs: Value) -> ApiSchema {
        ApiSchema::parse(json!({"schemas": {"request": {
            "oneOf": [{"properties": {"method": {"const": "m"}, "params": {"type": "object", "properties": {"x": x}}}}],
            "$defs": defs
        }}}))
        .unwrap()
    }

    fn errors_for(s: &ApiSchema, x: Value) -> Vec<ParamIssue> {
        s.check_params(&s.methods["m"], json!({"x": x}).as_object().unwrap()).0
    }

    #[test]
    fn the_visit_budget_is_exact() {
        let s = single_param(json!({"type": "array", "items": {"type": "string"}}), json!({}));
        // One visit for the array, one per item; only the last item is wrong.
        let with_bad_last = |n: usize| {
            let mut items = vec![json!("ok"); n - 1];
            items.push(json!(7));
            Value::Array(items)
        };
        let errors = errors_for(&s, with_bad_last(MAX_CHECK_VISITS - 1));
        assert_eq!(errors.len(), 1, "the last visit within the budget still finds the mismatch");
        assert!(errors[0].message.contains(&format!("item {}", MAX_CHECK_VISITS - 2)), "{errors:?}");
        assert!(errors_for(&s, with_bad_last(MAX_CHECK_VISITS)).is_empty(), "one visit past the budget cannot be checked");
    }

    #[test]
    fn nested_alternatives_stop_at_the_budget() {
        // Every level offers four ways down to the next, all ending in a string that
        // the number 7 never matches, above the depth cap (which would pass the first
        // branch at once): 4^12 failing branches to try without a bound.
        const LEVELS: usize = 12;
        let mut defs = Map::new();
        for level in 0..LEVELS {
            let next = json!({"$ref": format!("#/schemas/request/$defs/L{}", level + 1)});
            defs.insert(format!("L{level}"), json!({"anyOf": [next, next, next, next]}));
        }
        defs.insert(format!("L{LEVELS}"), json!({"type": "string"}));
        let s = single_param(json!({"$ref": "#/schemas/request/$defs/L0"}), Value::Object(defs));
        let started = Instant::now();
        let errors = errors_for(&s, json!(7));
        assert!(started.elapsed() < Duration::from_secs(1), "took {:?}", started.elapsed());
        assert!(errors.is_empty(), "an unfinished check passes, as past the depth cap: {errors:?}");
        // The same shape shallow enough to finish is still checked.
        let s = single_param(json!({"anyOf": [{"anyOf": [{"type": "string"}, {"type": "boolean"}]}, {"type": "null"}]}), json!({}));
        assert_eq!(errors_for(&s, json!(7)).len(), 1);
    }

    #[test]
    fn documents_without_requests_are_rejected() {
        assert!(ApiSchema::parse(json!({"schemas": {}})).is_err());
        assert!(ApiSchema::parse(json!({"schemas": {"request": {"oneOf": []}}})).is_err());
    }
}
