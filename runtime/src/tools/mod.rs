//! The tool contract: every tool is declared once — name, description, JSON Schema,
//! read/write class and handler together — in its own module, and collected here.
//!
//! The registry validates arguments against the declared schema (with the
//! `jsonschema` crate) before a handler ever runs, and shapes every result the same
//! way: one JSON payload that always carries `ok`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::policy::Policy;
use crate::runtime_info::RuntimeInfo;

pub mod common;
pub mod exec;
pub mod exec_common;
pub mod exec_kill;
pub mod exec_pane;
pub mod exec_read;
pub mod exec_start;
pub mod fs_read;
pub mod fs_read_window;
pub mod unsized_read;
pub mod mutation;
pub mod git_cli;
pub mod inspect;
pub mod inspect_exec;
pub mod skill;
pub mod git;
pub mod fs_write;
pub mod fs_list;
pub mod fs_patch;
pub mod patch_apply;
pub mod patch_parse;
pub mod fs_image;
pub mod fs_grep;
pub mod fs_edit;
pub mod call;
pub mod call_access;
pub mod methods;
pub mod prompt;
pub mod since;
mod validation;

/// Everything a tool handler may consult. Shared as `Arc<ToolContext>` by all calls.
/// Build it with [`ToolContext::new`]; optional subsystems hang off `services`.
pub struct ToolContext {
    pub info: RuntimeInfo,
    pub policy: Policy,
    pub services: Services,
}

/// Optional subsystems (exec sessions, durable state, Herdr client, push bus) that
/// later parts of the runtime attach. Every field has a default so that adding one
/// never breaks code that builds a context.
#[derive(Default, Clone)]
pub struct Services {
    /// The Herdr connection (client, event cache, schema, prompt registry).
    pub herdr: Option<Arc<crate::herdr::HerdrService>>,
    /// The push bus behind `/push/events`.
    pub push: Option<Arc<crate::push::PushBus>>,
    /// The state database (exec sessions, operations ledger, prompt registry).
    pub state: Option<Arc<crate::state::StateDb>>,
    /// Exec sessions; without it the exec tools answer `exec_unavailable`.
    pub exec: Option<Arc<crate::exec::ExecRegistry>>,
    /// Live workspaces and agent activity (Herdr); without it `herdr_exec` offers
    /// one workspace per managed root and nobody counts as busy.
    pub workspaces: Option<Arc<dyn crate::exec::workspaces::WorkspaceSource>>,
    /// How `herdr_exec` runs commands (`HERDR_MCP_EXEC_BACKEND`).
    pub exec_backend: crate::exec::backend::BackendChoice,
}

impl ToolContext {
    pub fn new(info: RuntimeInfo, policy: Policy) -> Self {
        ToolContext { info, policy, services: Services::default() }
    }
}

/// The outcome of one tool call, before it is wrapped into an MCP `CallToolResult`.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// The JSON payload; always an object with an `ok` boolean.
    pub payload: Value,
    /// An extra image block (`herdr_fs_image`): base64 data and MIME type.
    pub image: Option<ImageBlock>,
    /// Protocol-level failure (`isError:true`); domain failures keep this false.
    pub is_error: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ImageBlock {
    pub data_base64: String,
    pub mime_type: String,
}

impl ToolOutput {
    /// A normal result; `payload` must carry `ok`.
    pub fn payload(payload: Value) -> Self {
        debug_assert!(payload.get("ok").is_some_and(Value::is_boolean), "payload without ok: {payload}");
        ToolOutput { payload, image: None, is_error: false }
    }

    /// A domain refusal: `{ok:false, reason, message, ...extra}` (not an MCP error).
    pub fn refusal(reason: &str, message: impl Into<String>, extra: Value) -> Self {
        let mut obj = Map::new();
        obj.insert("ok".into(), Value::Bool(false));
        obj.insert("reason".into(), Value::String(reason.into()));
        obj.insert("message".into(), Value::String(message.into()));
        if let Value::Object(extra) = extra {
            obj.extend(extra);
        }
        ToolOutput::payload(Value::Object(obj))
    }

    /// A failure identified by `code` (e.g. `invalid_params`), not an MCP error.
    pub fn code(code: &str, message: impl Into<String>, extra: Value) -> Self {
        let mut obj = Map::new();
        obj.insert("ok".into(), Value::Bool(false));
        obj.insert("code".into(), Value::String(code.into()));
        obj.insert("message".into(), Value::String(message.into()));
        if let Value::Object(extra) = extra {
            obj.extend(extra);
        }
        ToolOutput::payload(Value::Object(obj))
    }

    /// A protocol-level failure: payload with `ok:false` and `isError:true`.
    pub fn protocol_error(code: &str, message: impl Into<String>) -> Self {
        let mut out = ToolOutput::code(code, message, Value::Null);
        out.is_error = true;
        out
    }

    pub fn ok(&self) -> bool {
        self.payload.get("ok").and_then(Value::as_bool).unwrap_or(false)
    }
}

pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// How a tool runs. File and Git tools block (they touch the disk), so the registry
/// moves them onto tokio's blocking pool; tools that wait on processes or sockets
/// are async.
#[derive(Clone, Copy)]
pub enum Handler {
    Blocking(fn(&ToolContext, &Map<String, Value>) -> ToolOutput),
    Async(fn(Arc<ToolContext>, Map<String, Value>) -> BoxFuture<ToolOutput>),
}

/// Whether a tool can change the machine (goes through the mutation gate).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// One tool, declared once.
#[derive(Clone, Copy)]
pub struct ToolSpec {
    pub name: &'static str,
    pub description: &'static str,
    /// Builds the tool's JSON Schema (draft-07).
    pub input_schema: fn() -> Value,
    pub access: Access,
    /// Adds `annotations.readOnlyHint:true` to the catalog entry.
    pub read_only_hint: bool,
    pub handler: Handler,
}

struct Entry {
    spec: ToolSpec,
    schema: Value,
    validator: jsonschema::Validator,
}

/// All tools of the contract, with compiled argument validators.
pub struct ToolRegistry {
    entries: Vec<Entry>,
}

impl ToolRegistry {
    /// The registry with every tool this runtime serves, in catalog order.
    pub fn standard() -> Self {
        Self::from_specs(all_specs())
    }

    /// Builds a registry from explicit specs (tests use small hand-made sets).
    ///
    /// Panics if a schema does not compile: schemas are source code, and a broken one
    /// is a programming error that every test run catches.
    pub fn from_specs(specs: Vec<ToolSpec>) -> Self {
        let entries = specs
            .into_iter()
            .map(|spec| {
                let schema = (spec.input_schema)();
                let validator = jsonschema::validator_for(&schema)
                    .unwrap_or_else(|e| panic!("schema of {} does not compile: {e}", spec.name));
                Entry { spec, schema, validator }
            })
            .collect();
        ToolRegistry { entries }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn spec(&self, name: &str) -> Option<&ToolSpec> {
        self.entries.iter().find(|e| e.spec.name == name).map(|e| &e.spec)
    }

    /// The MCP `tools/list` entries, as JSON, in catalog order. The contract hash is
    /// computed over exactly these objects.
    pub fn catalog(&self) -> Vec<Value> {
        self.entries
            .iter()
            .map(|e| {
                let mut tool = json!({
                    "name": e.spec.name,
                    "description": e.spec.description,
                    "inputSchema": e.schema,
                    "execution": {"taskSupport": "forbidden"},
                });
                if e.spec.read_only_hint {
                    tool["annotations"] = json!({"readOnlyHint": true});
                }
                tool
            })
            .collect()
    }

    /// Validates `arguments` and runs the tool. Never panics on bad input: unknown
    /// tools and non-object arguments are protocol errors, schema failures are
    /// `invalid_params` results listing the JSON pointer of every bad field.
    pub async fn call(&self, ctx: &Arc<ToolContext>, name: &str, arguments: Option<Value>) -> ToolOutput {
        let Some(entry) = self.entries.iter().find(|e| e.spec.name == name) else {
            return ToolOutput::protocol_error("unknown_tool", format!("unknown tool: {name}"));
        };
        let mut args = match arguments {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(map)) => map,
            Some(_) => {
                return ToolOutput::protocol_error("invalid_params", "arguments must be a JSON object");
            }
        };
        // `null` counts as absent (spec §0): drop null members before validation.
        args.retain(|_, v| !v.is_null());
        let instance = Value::Object(args);
        if let Some(refusal) = validate(&entry.validator, &entry.schema, &instance) {
            return refusal;
        }
        let Value::Object(args) = instance else {
            return ToolOutput::protocol_error("internal_error", "validated arguments are no longer an object");
        };
        match entry.spec.handler {
            Handler::Blocking(f) => {
                let ctx = Arc::clone(ctx);
                match tokio::task::spawn_blocking(move || f(&ctx, &args)).await {
                    Ok(out) => out,
                    Err(e) => ToolOutput::protocol_error("internal_error", format!("tool {name} failed: {e}")),
                }
            }
            Handler::Async(f) => f(Arc::clone(ctx), args).await,
        }
    }
}

/// Runs the schema validator and turns every error into `{pointer, message}`.
fn validate(validator: &jsonschema::Validator, schema: &Value, instance: &Value) -> Option<ToolOutput> {
    // The yes/no check skips the error bookkeeping that only a failure needs.
    if validator.is_valid(instance) {
        return None;
    }
    let errors: Vec<Value> = validator
        .iter_errors(instance)
        .map(|e| {
            let pointer = e.instance_path().to_string();
            let message = validation::message(schema, &e).unwrap_or_else(|| e.to_string());
            json!({"pointer": if pointer.is_empty() { "/".to_string() } else { pointer }, "message": message})
        })
        .collect();
    if errors.is_empty() {
        return None;
    }
    // The first error, worded as the contract words it (spec §0), is the message.
    let first = errors[0]["message"].as_str().unwrap_or("invalid arguments").to_string();
    Some(ToolOutput::code("invalid_params", first, json!({"errors": errors})))
}

/// Every tool of the contract, in catalog order. Tools not yet implemented are
/// simply absent; each module contributes its `spec()`.
pub fn all_specs() -> Vec<ToolSpec> {
    vec![methods::spec(), inspect::spec(), skill::spec(), call::spec(), since::spec(), fs_read::spec(), fs_list::spec(), fs_grep::spec(), fs_patch::spec(), fs_image::spec(), git::spec(), exec_start::spec(), exec_read::spec(), exec_kill::spec(), exec::spec(), fs_edit::spec(), fs_write::spec(), prompt::spec()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn echo_schema() -> Value {
        json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {"text": {"type": "string"}, "n": {"type": "integer", "minimum": 1, "maximum": 5}},
            "required": ["text"],
            "additionalProperties": false
        })
    }

    fn echo(_: &ToolContext, args: &Map<String, Value>) -> ToolOutput {
        ToolOutput::payload(json!({"ok": true, "text": args["text"]}))
    }

    fn registry() -> ToolRegistry {
        ToolRegistry::from_specs(vec![ToolSpec {
            name: "echo",
            description: "Echo text back.",
            input_schema: echo_schema,
            access: Access::Read,
            read_only_hint: true,
            handler: Handler::Blocking(echo),
        }])
    }

    fn ctx() -> Arc<ToolContext> {
        Arc::new(ToolContext::new(RuntimeInfo::new(), Policy::for_tests(vec![])))
    }

    #[tokio::test]
    async fn valid_arguments_reach_the_handler() {
        let out = registry().call(&ctx(), "echo", Some(json!({"text": "hi"}))).await;
        assert_eq!(out.payload, json!({"ok": true, "text": "hi"}));
        assert!(!out.is_error);
    }

    #[tokio::test]
    async fn schema_failures_name_each_bad_field() {
        let out = registry().call(&ctx(), "echo", Some(json!({"text": 3, "n": 9}))).await;
        assert!(!out.is_error);
        assert_eq!(out.payload["code"], "invalid_params");
        let pointers: Vec<&str> =
            out.payload["errors"].as_array().unwrap().iter().map(|e| e["pointer"].as_str().unwrap()).collect();
        assert!(pointers.contains(&"/text"), "{pointers:?}");
        assert!(pointers.contains(&"/n"), "{pointers:?}");
    }

    #[tokio::test]
    async fn null_counts_as_absent_and_missing_required_is_reported() {
        let out = registry().call(&ctx(), "echo", Some(json!({"text": null}))).await;
        assert_eq!(out.payload["code"], "invalid_params");
        assert!(out.payload["message"].as_str().unwrap().contains("text"));
    }

    #[tokio::test]
    async fn unknown_tool_and_non_object_arguments_are_protocol_errors() {
        let out = registry().call(&ctx(), "nope", None).await;
        assert!(out.is_error);
        assert_eq!(out.payload["code"], "unknown_tool");
        let out = registry().call(&ctx(), "echo", Some(json!([1]))).await;
        assert!(out.is_error);
        assert_eq!(out.payload["code"], "invalid_params");
    }

    #[test]
    fn catalog_entries_carry_execution_and_annotations() {
        let cat = registry().catalog();
        assert_eq!(cat[0]["execution"]["taskSupport"], "forbidden");
        assert_eq!(cat[0]["annotations"]["readOnlyHint"], true);
    }
}
