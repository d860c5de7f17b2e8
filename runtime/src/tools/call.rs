//! `herdr_call`: one Herdr API call, checked against Herdr's schema before it is
//! sent. Method names reserved for this runtime's own features never reach Herdr.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::call_access::{self, MethodAccess};
use super::common::{object_schema, req_str, str_arg};
use super::{Access, BoxFuture, Handler, ToolContext, ToolOutput, ToolSpec};

/// Prefixes of methods served locally (never forwarded). None is implemented in
/// this runtime, so each fails closed with `unknown_local_method`.
pub const LOCAL_PREFIXES: &[&str] = &["herdr_mcp.", "continuity.", "work_memory.", "artifact."];
/// Largest `params` string accepted.
pub const MAX_PARAMS_BYTES: usize = 256 * 1024;
/// Extra time given to wait methods beyond their own `timeout_ms`.
const WAIT_SLACK: Duration = Duration::from_secs(5);

pub fn spec() -> ToolSpec {
    ToolSpec {
        name: "herdr_call",
        description: concat!(
            "Call one method of the local Herdr API (workspaces, tabs, panes, agents) and get its result. ",
            "method is the dotted Herdr name (see herdr_methods); params is a JSON object written as a string, ",
            "e.g. \"{\\\"pane_id\\\":\\\"w1:p1\\\",\\\"source\\\":\\\"recent\\\"}\". The params are checked against Herdr's ",
            "schema first: a missing or mistyped parameter is reported without calling Herdr, and unknown ",
            "parameters only produce warnings. To prompt an agent prefer herdr_prompt, which guards against ",
            "sending the same prompt twice. In read-only mode only methods that read are sent."
        ),
        input_schema: schema,
        access: Access::Write,
        read_only_hint: false,
        handler: Handler::Async(run),
    }
}

fn schema() -> Value {
    object_schema(
        json!({
            "method": {"type": "string", "minLength": 1, "maxLength": 128, "description": "Herdr method, e.g. pane.read."},
            "params": {"type": "string", "maxLength": MAX_PARAMS_BYTES, "description": "JSON object with the method's parameters, as a string; omit for {}."},
        }),
        &["method"],
    )
}

fn is_local(method: &str) -> bool {
    LOCAL_PREFIXES.iter().any(|p| method.starts_with(p))
}

/// Parses the `params` string: absent or blank means `{}`.
pub fn parse_params(raw: Option<&str>) -> Result<Map<String, Value>, ToolOutput> {
    let raw = raw.map(str::trim).filter(|s| !s.is_empty()).unwrap_or("{}");
    match serde_json::from_str::<Value>(raw) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(ToolOutput::code("invalid_params", "herdr_call params must decode to an object", json!({}))),
        Err(e) => Err(ToolOutput::code("invalid_params_json", format!("params is not valid JSON: {e}"), json!({}))),
    }
}

fn run(ctx: Arc<ToolContext>, args: Map<String, Value>) -> BoxFuture<ToolOutput> {
    Box::pin(async move {
        let method = req_str(&args, "method").trim().to_string();
        let params = match parse_params(str_arg(&args, "params")) {
            Ok(p) => p,
            Err(out) => return out,
        };
        if is_local(&method) {
            return ToolOutput::code(
                "unknown_local_method",
                format!("{method} names a local herdr-mcp feature that this runtime does not provide; it was not sent to Herdr"),
                json!({"method": method}),
            );
        }
        let Some(herdr) = ctx.services.herdr.clone() else { return crate::herdr::not_configured() };
        let schema = match herdr.schema.get().await {
            Ok(s) => s,
            Err(message) => return ToolOutput::refusal("schema_unavailable", message, json!({"method": method})),
        };
        let Some(method_schema) = schema.methods.get(&method) else {
            return ToolOutput::code(
                "unknown_method",
                format!("Herdr's schema has no method {method}; herdr_methods lists the available ones"),
                json!({"method": method}),
            );
        };
        if ctx.policy.readonly && call_access::classify(&method) == MethodAccess::Mutate {
            return ToolOutput::refusal(
                "readonly_mode",
                format!(
                    "this runtime runs in read-only mode (HERDR_MCP_READONLY=1); {method} can change panes or agents and was not sent to Herdr"
                ),
                json!({
                    "action": "herdr_call",
                    "method": method,
                    "hint": "Only Herdr methods that read (pane.read, pane.list, agent.get, session.snapshot, …) work in read-only mode; ask the user to restart herdr-mcp without HERDR_MCP_READONLY to change anything.",
                }),
            );
        }
        let (errors, warnings) = schema.check_params(method_schema, &params);
        if !errors.is_empty() {
            let first = errors[0].message.clone();
            return ToolOutput::code(
                "invalid_params",
                first,
                json!({
                    "method": method,
                    "errors": errors.iter().map(|e| json!({"name": e.name, "message": e.message})).collect::<Vec<_>>(),
                    "warnings": warnings,
                }),
            );
        }
        let timeouts = herdr.client.timeouts();
        // A wait method's own time limit: top-level, or inside `wait` (agent.prompt).
        let wait_ms =
            params.get("timeout_ms").or_else(|| params.get("wait").and_then(|w| w.get("timeout_ms"))).and_then(Value::as_u64);
        let budget = match wait_ms {
            Some(ms) => timeouts.clamp(Duration::from_millis(ms) + WAIT_SLACK).max(timeouts.for_method(&method)),
            None => timeouts.for_method(&method),
        };
        // An agent target herdr_inspect shows may be a kind, which Herdr does not resolve (spec/herdr.md E.6).
        let mut params = params;
        if method.starts_with("agent.")
            && let Some(target) = params.get("target").and_then(Value::as_str).map(str::to_string)
        {
            match herdr.agent_target(&target) {
                Ok(resolved) => params.insert("target".into(), Value::String(resolved)),
                Err(out) => return out,
            };
        }
        match herdr.client.call_with_timeout(&method, Value::Object(params), budget).await {
            Ok(result) => {
                // Names in the answer (a rename's record, `agent.get`, `agent.list`)
                // reach the cache at once: Herdr emits no event for a rename.
                herdr.cache.adopt_answer(&result);
                let mut out = json!({"ok": true, "method": method, "result": result});
                if !warnings.is_empty() {
                    out["warnings"] = json!(warnings);
                }
                ToolOutput::payload(out)
            }
            Err(e) => crate::herdr::failure_output(&e, json!({"method": method})),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_string_rules() {
        assert!(parse_params(None).unwrap().is_empty());
        assert!(parse_params(Some("  ")).unwrap().is_empty());
        assert_eq!(parse_params(Some("{\"a\":1}")).unwrap()["a"], 1);
        assert_eq!(parse_params(Some("[1]")).unwrap_err().payload["code"], "invalid_params");
        assert_eq!(parse_params(Some("{oops")).unwrap_err().payload["code"], "invalid_params_json");
    }

    #[test]
    fn local_prefixes_are_recognised() {
        assert!(is_local("herdr_mcp.skill.list"));
        assert!(is_local("continuity.resume"));
        assert!(!is_local("pane.read"));
        assert!(!is_local("herdr_mcpx"));
    }
}
