//! `herdr_prompt`: type a prompt into a Herdr agent (text plus Enter, atomically,
//! via `agent.prompt`) and report what could be observed about its effect. An
//! `idempotency_key` makes a retry return the first answer instead of typing again.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::common::{object_schema, req_str, str_arg};
use super::{Access, BoxFuture, Handler, ToolContext, ToolOutput, ToolSpec};
use crate::herdr::HerdrService;
use crate::herdr::error::{HerdrError, START_HERDR_HINT, codes};
use crate::herdr::prompt_registry::{Reservation, fingerprint};
use crate::herdr::utility_pane::is_transient;

pub const DEFAULT_WAIT_MS: u64 = 25_000;
pub const MAX_WAIT_MS: u64 = 60_000;
/// The prompt call's own budget without `wait`.
const PROMPT_BUDGET: Duration = Duration::from_secs(30);
/// Beyond `wait.timeout_ms`, for Herdr to answer.
const WAIT_SLACK: Duration = Duration::from_secs(5);
/// Without `wait`, the agent gets this long to show a change before the second look.
const SECOND_LOOK_DELAY: Duration = Duration::from_millis(250);
pub const MAX_TEXT_BYTES: usize = 64 * 1024;
const STATUSES: &[&str] = &["idle", "working", "blocked", "done", "unknown"];
/// Herdr's answer when a prompted agent shows no change within 5 s (the text was typed).
const PROMPT_STALLED: &str = "agent_prompt_stalled";
const RESOLVE_CODES: &[&str] = &["agent_not_found", "unknown_agent", "unknown_pane", "pane_not_found"];
/// Code and failure phase of a task-group failure inside Herdr.
const TASKGROUP: &str = "control_plane_taskgroup";

pub fn spec() -> ToolSpec {
    ToolSpec {
        name: "herdr_prompt",
        description: concat!(
            "Send a prompt to a coding agent running in Herdr: the text is typed into the agent and submitted ",
            "with Enter in one step. target is the agent's name or its pane id (see herdr_inspect). The result ",
            "shows the agent's status and change counter before and after, so you can tell whether it picked the ",
            "prompt up; with wait, the call returns once the agent reaches one of the wait.until statuses (or ",
            "the timeout passes). Always pass an idempotency_key unique to this prompt: a retry with the same key ",
            "returns the first answer and never types the prompt twice. If delivery_uncertain is true, check the ",
            "agent before sending again."
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
            "target": {"type": "string", "minLength": 1, "maxLength": 256, "description": "Agent name or pane id, e.g. w1:p2."},
            "text": {"type": "string", "maxLength": MAX_TEXT_BYTES, "description": "The prompt text; Enter is added."},
            "idempotency_key": {"type": "string", "minLength": 1, "maxLength": 256, "description": "Unique per intended prompt; a repeat with the same key replays the first answer."},
            "wait": {
                "type": "object",
                "additionalProperties": false,
                "description": "Wait until the agent reaches one of these statuses.",
                "properties": {
                    "until": {"type": "array", "minItems": 1, "items": {"type": "string", "enum": STATUSES}},
                    "timeout_ms": {"type": "integer", "minimum": 1, "maximum": MAX_WAIT_MS, "default": DEFAULT_WAIT_MS},
                },
            },
        }),
        &["target", "text"],
    )
}

/// `{agent_status, state_change_seq, pane_id}` of an `agent.get` result.
fn observe(result: &Value) -> Value {
    let agent = result.get("agent").unwrap_or(result);
    json!({
        "agent_status": agent.get("agent_status").or_else(|| agent.get("status")),
        "state_change_seq": agent.get("state_change_seq"),
        "pane_id": agent.get("pane_id"),
    })
}

/// `agent.get`, whose answer also tells the event cache the agent's current name.
async fn agent_get(herdr: &HerdrService, target: &str) -> Result<Value, HerdrError> {
    let answer = herdr.client.call("agent.get", json!({"target": target})).await?;
    herdr.cache.adopt_answer(&answer);
    Ok(observe(&answer))
}

/// A failure payload with the delivery facts every prompt failure carries.
fn failure(err: &HerdrError, phase: &str, submitted: Value, target: &str) -> Value {
    let unavailable = err.is_unavailable();
    let mut out = json!({
        "ok": false,
        "code": if unavailable { codes::HERDR_UNAVAILABLE } else { err.code.as_str() },
        "message": err.message,
        "target": target,
        "failure_phase": phase,
        "submitted": submitted,
        "retryable": unavailable,
        "delivery_uncertain": !unavailable && submitted != json!(false),
    });
    if unavailable {
        out["herdr_code"] = json!(err.code);
        out["hint"] = json!(START_HERDR_HINT);
    }
    out
}

/// A task group failing inside Herdr while it handled the prompt (spec §1.18).
/// The text may or may not have been typed, so the outcome is unknown and the
/// call is not to be repeated blindly: the answer says to look at the agent
/// first, and carries Herdr's error as it came.
fn taskgroup_failure(err: &HerdrError, target: &str) -> Value {
    let mut out = failure(err, TASKGROUP, json!("unknown"), target);
    out["code"] = json!(TASKGROUP);
    out["failure"] = json!("herdr_internal");
    out["retryable"] = json!(false);
    out["delivery_uncertain"] = json!(true);
    out["error"] = json!({"type": err.code, "message": err.message, "raw": err.to_string()});
    out
}

fn run(ctx: Arc<ToolContext>, args: Map<String, Value>) -> BoxFuture<ToolOutput> {
    Box::pin(async move {
        if ctx.policy.readonly {
            return ToolOutput::refusal(
                "readonly_mode",
                "this runtime runs in read-only mode (HERDR_MCP_READONLY=1); prompts are not sent",
                json!({"action": "herdr_prompt", "hint": "Ask the user to restart herdr-mcp without HERDR_MCP_READONLY to prompt agents."}),
            );
        }
        let Some(herdr) = ctx.services.herdr.clone() else { return crate::herdr::not_configured() };
        let requested = req_str(&args, "target").to_string();
        // The name herdr_inspect shows may be a kind, which Herdr does not resolve (spec/herdr.md E.6).
        let target = match herdr.agent_target(&requested) {
            Ok(t) => t,
            Err(out) => return out,
        };
        let text = req_str(&args, "text").to_string();
        let wait = args.get("wait").cloned().map(|mut w| {
            if w.get("timeout_ms").is_none() {
                w["timeout_ms"] = json!(DEFAULT_WAIT_MS);
            }
            if w.get("until").is_none() {
                w["until"] = json!(["idle", "done", "blocked"]);
            }
            w
        });
        let key = str_arg(&args, "idempotency_key").map(str::to_string);
        if let Some(key) = &key {
            let fp = fingerprint(&target, &text, wait.as_ref().unwrap_or(&Value::Null));
            match herdr.prompts.reserve(key, &fp) {
                Reservation::Fresh => {}
                Reservation::Replay(mut stored) => {
                    stored["idempotent_replay"] = json!(true);
                    return ToolOutput::payload(stored);
                }
                Reservation::Conflict => {
                    return ToolOutput::code(
                        "idempotency_key_conflict",
                        "this idempotency_key was already used for a different prompt (target, text or wait differ)",
                        json!({"retryable": false, "idempotency_key": key}),
                    );
                }
                Reservation::InFlight => {
                    return ToolOutput::code(
                        "idempotency_in_flight",
                        "a prompt with this idempotency_key is still being delivered; ask again shortly for its result",
                        json!({"submitted": "unknown", "retryable": true, "idempotency_key": key}),
                    );
                }
                Reservation::Full => {
                    return ToolOutput::code(
                        "idempotency_registry_full",
                        "too many keyed prompts are being delivered at once; retry later",
                        json!({"submitted": false, "retryable": true, "idempotency_key": key}),
                    );
                }
            }
        }
        let (mut payload, deliverable) = deliver(&herdr, &target, &text, wait.as_ref()).await;
        if target != requested {
            payload["requested_target"] = json!(requested);
        }
        if let Some(key) = &key {
            payload["idempotency_key"] = json!(key);
            payload["idempotent_replay"] = json!(false);
            if deliverable {
                herdr.prompts.complete(key, &payload);
            } else {
                herdr.prompts.release(key);
            }
        } else if payload["ok"] == true {
            payload["idempotency_hint"] =
                json!("Pass an idempotency_key so that a retry of this prompt can never be delivered twice.");
        }
        ToolOutput::payload(payload)
    })
}

/// Runs the before/prompt/after sequence. The flag is false when nothing was sent
/// (the key may then be used again).
async fn deliver(herdr: &HerdrService, target: &str, text: &str, wait: Option<&Value>) -> (Value, bool) {
    let client = &herdr.client;
    let before = match agent_get(herdr, target).await {
        Ok(b) => b,
        Err(e) => {
            let phase =
                if RESOLVE_CODES.contains(&e.code.as_str()) || e.from_daemon { "resolve" } else { "submit_or_response_lost" };
            return (failure(&e, phase, json!(false), target), false);
        }
    };
    let wanted = wait.map(|w| Duration::from_millis(w["timeout_ms"].as_u64().unwrap_or(DEFAULT_WAIT_MS)) + WAIT_SLACK);
    let budget = wanted.map_or(PROMPT_BUDGET, |t| client.timeouts().clamp(t));
    // The cap (60 s) leaves a long wait less than its slack, or none: our own timeout
    // then ends Herdr's wait, not a stuck Herdr.
    let wait_outlasts_budget = wanted.is_some_and(|t| t > budget);
    let params = json!({"target": target, "text": text, "wait": wait});
    let prompted = match client.call_with_timeout("agent.prompt", params, budget).await {
        Ok(r) => {
            herdr.cache.adopt_answer(&r);
            r
        }
        Err(e) if e.is_unavailable() => return (failure(&e, "submit_or_response_lost", json!(false), target), false),
        Err(e) if e.from_daemon && e.code == "agent_blocked" => {
            let mut out = failure(&e, "submit", json!(false), target);
            out["before"] = before;
            out["delivery_uncertain"] = json!(false);
            return (out, true);
        }
        // Both come after Herdr typed the prompt: a wait that ran out, or (from a
        // non-working agent) no reaction within Herdr's stall window. A retry would type
        // it a second time, so the key is kept.
        Err(e) if e.from_daemon && wait.is_some() && (e.code == codes::TIMEOUT || e.code == PROMPT_STALLED) => {
            let stalled = e.code == PROMPT_STALLED;
            let after = agent_get(herdr, target).await.ok();
            let mut out = failure(&e, "post_submission_status_wait", json!(true), target);
            out["failure"] = json!(if stalled { PROMPT_STALLED } else { "agent_status_wait_timeout" });
            out["before"] = before;
            out["after"] = json!(after);
            out["wait"] =
                json!({"completed": false, "reason": if stalled { "agent_did_not_react" } else { "agent_status_timeout" }});
            return (out, true);
        }
        Err(e) if !e.from_daemon && e.code == codes::TIMEOUT && wait_outlasts_budget => {
            let after = agent_get(herdr, target).await.ok();
            let mut out = failure(&e, "post_submission_status_wait", json!("unknown"), target);
            out["failure"] = json!("agent_status_wait_timeout");
            out["before"] = before;
            out["after"] = json!(after);
            out["wait"] = json!({"completed": false, "reason": "agent_status_timeout"});
            return (out, true);
        }
        Err(e) if e.from_daemon && RESOLVE_CODES.contains(&e.code.as_str()) => {
            return (failure(&e, "resolve", json!(false), target), false);
        }
        Err(e) if e.from_daemon && is_transient(&e) => {
            let mut out = taskgroup_failure(&e, target);
            out["before"] = before;
            return (out, true);
        }
        Err(e) => {
            let mut out = failure(&e, "submit_or_response_lost", json!("unknown"), target);
            out["before"] = before;
            return (out, true);
        }
    };
    let mut after = agent_get(herdr, target).await.ok();
    let moved = |a: &Option<Value>| {
        a.as_ref()
            .is_some_and(|a| a["state_change_seq"] != before["state_change_seq"] || a["agent_status"] != before["agent_status"])
    };
    if wait.is_none() && !moved(&after) {
        tokio::time::sleep(SECOND_LOOK_DELAY).await;
        if let Ok(second) = agent_get(herdr, target).await {
            after = Some(second);
        }
    }
    let changed = if moved(&after) {
        json!(true)
    } else if wait.is_some() {
        json!(false)
    } else {
        json!("unknown")
    };
    let status = prompted.get("status").and_then(Value::as_str).unwrap_or("submitted").to_string();
    let resolved_pane = after
        .as_ref()
        .and_then(|a| a["pane_id"].as_str().map(str::to_string))
        .or_else(|| before["pane_id"].as_str().map(str::to_string))
        .or_else(|| prompted.pointer("/agent/pane_id").and_then(Value::as_str).map(str::to_string));
    let mut out = json!({
        "ok": true,
        "target": target,
        "resolved_pane": resolved_pane,
        "status": status,
        "submitted": status != "agent_blocked",
        "before": before,
        "after": after,
        "state_observation": {"changed": changed, "fresh": after.is_some()},
        "state_changed": changed == json!(true),
        "prompt": text,
    });
    if wait.is_none() {
        out["seq_note"] =
            json!("Without wait the agent may not have reacted yet; compare state_change_seq later or use herdr_since.");
    } else {
        out["wait"] = json!({"completed": true});
    }
    (out, true)
}
