//! `herdr_methods`: the Herdr API methods this machine's Herdr understands, read
//! from its own schema, optionally filtered by a substring.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::common::{object_schema, str_arg};
use super::{Access, BoxFuture, Handler, ToolContext, ToolOutput, ToolSpec};
use crate::herdr::schema::SOURCE_LABEL;

pub fn spec() -> ToolSpec {
    ToolSpec {
        name: "herdr_methods",
        description: concat!(
            "List the methods of the local Herdr API with their parameters (names, types, which are required), ",
            "taken from the installed Herdr's own schema and refreshed at most once a minute. Pass query to keep ",
            "only methods whose name contains it, e.g. \"agent\" or \"pane.read\". Use it to find the exact method ",
            "and parameters before calling herdr_call."
        ),
        input_schema: schema,
        access: Access::Read,
        read_only_hint: false,
        handler: Handler::Async(run),
    }
}

fn schema() -> Value {
    object_schema(
        json!({"query": {"type": "string", "default": "", "maxLength": 256, "description": "Case-insensitive substring of the method name; empty lists all."}}),
        &[],
    )
}

fn run(ctx: Arc<ToolContext>, args: Map<String, Value>) -> BoxFuture<ToolOutput> {
    Box::pin(async move {
        let Some(herdr) = ctx.services.herdr.clone() else { return crate::herdr::not_configured() };
        let query = str_arg(&args, "query").unwrap_or("");
        match herdr.schema.get().await {
            Ok(schema) => {
                let methods = schema.describe(query);
                ToolOutput::payload(json!({"ok": true, "count": methods.len(), "methods": methods, "source": SOURCE_LABEL}))
            }
            Err(message) => ToolOutput::refusal("schema_unavailable", message, json!({})),
        }
    })
}
