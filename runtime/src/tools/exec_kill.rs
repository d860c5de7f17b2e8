//! `herdr_exec_kill`: stop a session's whole process group.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::common::{object_schema, req_str};
use super::{Access, BoxFuture, Handler, ToolContext, ToolOutput, ToolSpec, exec_common};
use crate::exec::KillOutcome;

pub fn spec() -> ToolSpec {
    ToolSpec {
        name: "herdr_exec_kill",
        description: concat!(
            "Stop a running exec session: its whole process group (the shell and everything it started) gets ",
            "SIGTERM, and SIGKILL 1.5 seconds later if anything is still alive. Returns at once with killed:true; ",
            "read the session afterwards to see the final signal. If the session had already ended, killed is ",
            "false and its exit_code and signal are returned."
        ),
        input_schema: schema,
        access: Access::Write,
        read_only_hint: false,
        handler: Handler::Async(run),
    }
}

fn schema() -> Value {
    object_schema(
        json!({"session_id": {"type": "string", "minLength": 1, "maxLength": 128, "description": "Session to stop."}}),
        &["session_id"],
    )
}

fn run(ctx: Arc<ToolContext>, args: Map<String, Value>) -> BoxFuture<ToolOutput> {
    Box::pin(async move {
        let registry = match exec_common::registry(&ctx) {
            Ok(r) => r,
            Err(out) => return out,
        };
        let session = match exec_common::live_session(&registry, req_str(&args, "session_id")).await {
            Ok(s) => s,
            Err(out) => return out,
        };
        let payload = match registry.kill(&session) {
            KillOutcome::Signalled => {
                let mut p = json!({"ok": true, "session_id": session.id, "killed": true, "exit_code": null, "signal": null});
                // A utility-pane session's process only watches; the command itself
                // runs in the pane and is interrupted there.
                if let Some(herdr) = &ctx.services.herdr
                    && let Some(pane) = herdr.pane_sessions.pane_of(&session.id)
                {
                    let sent = crate::herdr::utility_pane::interrupt(&herdr.client, &pane).await;
                    p["pane_id"] = json!(pane);
                    p["pane_interrupted"] = json!(sent.is_ok());
                }
                p
            }
            KillOutcome::AlreadyEnded(exit) => json!({
                "ok": true,
                "session_id": session.id,
                "killed": false,
                "exit_code": exit.exit_code,
                "signal": exit.signal,
            }),
        };
        ToolOutput::payload(payload)
    })
}
