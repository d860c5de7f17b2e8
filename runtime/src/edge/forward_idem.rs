//! Idempotent replay of forwarded mutations (spec edge.md §8 `idem_hit`). A
//! mutation whose `idempotency_key` was already used on the same workstation
//! within the replay TTL is never sent again; the caller gets what the ledger
//! knows, in the runtime's own words for its ledger (contract §2.5):
//!
//! - same request, settled → the stored answer with `idempotent_replay:true`;
//! - same request, still running → `idempotency_in_flight`;
//! - same request, answer lost → `delivery_uncertain` again, until a late answer
//!   settles the row (then the retry gets the real outcome);
//! - a different request → `idempotency_key_conflict`.
//!
//! `request_id` in these answers names the earlier request the key belongs to.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::forward::answer_of;
use super::forward_errors::Failure;
use super::forward_pending::{Claim, Earlier};
use super::link_hub::Outcome;
use super::relay::{self, DeliveryState, Frame, Sender};

/// Arguments that only say how long to wait, not what to change; a retry may
/// differ in them and still be the same request (as in the runtime's ledger).
const NOT_PART_OF_THE_REQUEST: &[&str] = &["timeout_ms"];

/// Fingerprint of "the same request": the operation and its arguments (device
/// selector already removed, refs already unwrapped), keys in canonical order.
pub fn request_hash(operation: &str, args: &Map<String, Value>) -> String {
    let mut what = args.clone();
    for k in NOT_PART_OF_THE_REQUEST {
        what.remove(*k);
    }
    let request = serde_json::json!({"operation": operation, "arguments": what});
    // Deeper than canonical_json allows cannot reach here: frames are limited to depth 32.
    let text = crate::contract::canonical_json(&request).unwrap_or_else(|_| request.to_string());
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// The runtime's safe-retry modes that mean "nothing ran and the key was given
/// back" (contract §2.5; the runtime's refusals before delivery).
const KEY_GIVEN_BACK: &[&str] = &["retry_with_same_key", "retry_freely"];
/// Runtime codes that describe the key's state at one moment, not an outcome.
const KEY_STATE_CODES: &[&str] = &["idempotency_in_flight", "idempotency_key_conflict", "idempotency_unavailable"];

/// Whether a runtime `CallToolResult` says that nothing was run: then the edge
/// must not replay it for the key, because the runtime itself lets the same key
/// be used again (a refusal before delivery, e.g. `project_root_required`, would
/// otherwise block the corrected retry for 10 minutes). The runtime's own
/// ledger still stops a second run of anything that did run.
pub fn nothing_ran(result: &Value) -> bool {
    let payload = match result.get("structuredContent") {
        Some(sc @ Value::Object(_)) => sc.clone(),
        _ => match result.get("content").and_then(|c| c.get(0)).and_then(|c| c.get("text")).and_then(Value::as_str) {
            Some(text) => serde_json::from_str(text).unwrap_or(Value::Null),
            None => Value::Null,
        },
    };
    if payload.get("ok") != Some(&Value::Bool(false)) {
        return false;
    }
    let s = |k: &str| payload.get(k).and_then(Value::as_str);
    s("delivery_state") == Some("not_delivered")
        || payload.get("submitted") == Some(&Value::Bool(false)) && s("failure_phase") != Some("submit")
        || s("safe_retry_mode").is_some_and(|m| KEY_GIVEN_BACK.contains(&m))
        || s("code").is_some_and(|c| KEY_STATE_CODES.contains(&c))
}

/// The caller's answer for a key the ledger already holds.
pub fn answer_claim(claim: Claim, workstation_id: &str, device_id: &str) -> Result<Value, Failure> {
    match claim {
        Claim::Earlier(earlier) => earlier_answer(earlier, device_id).map_err(|f| f.on(workstation_id)),
        Claim::Conflict { request_id } => Err(Failure::refused(
            "idempotency_key_conflict",
            "this idempotency_key was already used on this workstation for a different request; nothing was sent. \
             Use a new key for a different change.",
        )
        .on(workstation_id)
        .request(&request_id)),
        Claim::Fresh => Err(Failure::refused("internal_error", "the idempotency ledger gave no earlier request").on(workstation_id)),
    }
}

fn earlier_answer(earlier: Earlier, device_id: &str) -> Result<Value, Failure> {
    let id = earlier.request_id.clone();
    match earlier.state.as_str() {
        "settled" => match earlier.answer.as_deref().map(|a| Frame::decode(a, Sender::Link, relay::MAX_EDGE_INBOUND)) {
            Some(Ok(Frame::ToolResult(r))) => {
                let mut result = answer_of(Outcome::Result(r), device_id)?;
                mark_replay(&mut result);
                Ok(result)
            }
            Some(Ok(Frame::ToolError(e))) => Err(answer_of(Outcome::Error(e), device_id)
                .err()
                .unwrap_or_else(|| Failure::refused("internal_error", "a stored error replayed as a result"))
                .request(&id)
                .replayed()),
            _ => Err(Failure::new(
                "idempotent_replay_unavailable",
                format!(
                    "a request with this idempotency_key already ran ({}), but its answer was not kept; it was not sent again. \
                     Check the workstation's state instead of repeating the change.",
                    earlier.outcome.as_deref().unwrap_or("answered")
                ),
                false,
                DeliveryState::Delivered,
            )
            .request(&id)),
        },
        "sent" => Err(Failure::new(
            "idempotency_in_flight",
            "a request with this idempotency_key is still running on the workstation; it was not sent again. \
             Ask again later with the same key to get its result.",
            false,
            DeliveryState::DeliveryUnknown,
        )
        .request(&id)),
        "uncertain" => Err(Failure::new(
            "delivery_uncertain",
            format!(
                "a request with this idempotency_key was sent earlier and its answer was lost ({}); it was not sent again. \
                 Check whether the change happened before making it under a new key.",
                earlier.outcome.as_deref().unwrap_or("unknown")
            ),
            false,
            DeliveryState::DeliveryUnknown,
        )
        .request(&id)),
        other => Err(Failure::refused("internal_error", format!("the idempotency ledger holds an unknown state {other:?}")).request(&id)),
    }
}

/// Marks a replayed `CallToolResult` the way the runtime marks its own replays:
/// `idempotent_replay:true` in the structured payload and in its JSON text.
fn mark_replay(result: &mut Value) {
    if let Some(Value::Object(sc)) = result.get_mut("structuredContent") {
        sc.insert("idempotent_replay".into(), Value::Bool(true));
    }
    if let Some(block) = result.get_mut("content").and_then(|c| c.get_mut(0))
        && let Some(text) = block.get("text").and_then(Value::as_str)
        && let Ok(Value::Object(mut payload)) = serde_json::from_str::<Value>(text)
    {
        payload.insert("idempotent_replay".into(), Value::Bool(true));
        block["text"] = Value::String(Value::Object(payload).to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edge::relay::{ToolError, ToolResult};
    use serde_json::json;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn the_fingerprint_ignores_key_order_and_timeouts_only() {
        let a = request_hash("herdr_fs_write", &args(json!({"path": "/x", "content": "1", "timeout_ms": 5000})));
        let b = request_hash("herdr_fs_write", &args(json!({"content": "1", "path": "/x"})));
        assert_eq!(a, b);
        assert_ne!(a, request_hash("herdr_fs_write", &args(json!({"path": "/x", "content": "2"}))));
        assert_ne!(a, request_hash("herdr_fs_edit", &args(json!({"path": "/x", "content": "1"}))));
    }

    #[test]
    fn runtime_refusals_before_delivery_give_the_key_back() {
        let text = |v: Value| json!({"content": [{"type": "text", "text": v.to_string()}]});
        for refused in [
            json!({"ok": false, "reason": "project_root_required", "safe_retry_mode": "retry_with_same_key"}),
            json!({"ok": false, "code": "utility_pane_not_ready", "delivery_state": "not_delivered"}),
            json!({"ok": false, "code": "agent_not_found", "submitted": false, "failure_phase": "resolve"}),
            json!({"ok": false, "code": "idempotency_in_flight"}),
        ] {
            assert!(nothing_ran(&text(refused.clone())), "{refused}");
            assert!(nothing_ran(&json!({"structuredContent": refused.clone()})), "{refused}");
        }
        for ran in [
            json!({"ok": true, "exit_code": 0}),
            json!({"ok": false, "exit_code": 1, "execution": {"started": true}, "safe_retry_mode": "replay_with_same_key"}),
            json!({"ok": false, "code": "exec_start_failed", "delivery_state": "unknown"}),
            // An agent that was blocked: the runtime keeps that answer for the key.
            json!({"ok": false, "code": "agent_blocked", "submitted": false, "failure_phase": "submit"}),
        ] {
            assert!(!nothing_ran(&text(ran.clone())), "{ran}");
        }
        assert!(!nothing_ran(&json!({"content": [{"type": "text", "text": "not json"}]})));
    }

    fn earlier(state: &str, answer: Option<String>) -> Claim {
        Claim::Earlier(Earlier { request_id: "r1".into(), state: state.into(), outcome: Some("link_lost".into()), answer })
    }

    #[test]
    fn a_settled_result_replays_marked() {
        let frame = Frame::ToolResult(ToolResult {
            workstation_id: "ws".into(),
            request_id: "r1".into(),
            result: Some(json!({"content": [{"type": "text", "text": "{\"ok\":true,\"bytes\":4}"}]})),
            served_at_ms: 1,
            runtime_generation: None,
            transport_name: None,
        });
        let r = answer_claim(earlier("settled", Some(frame.encode())), "ws", "dev_1").unwrap();
        assert_eq!(r["structuredContent"], json!({"ok": true, "bytes": 4, "idempotent_replay": true}));
        let text: Value = serde_json::from_str(r["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(text["idempotent_replay"], true);
    }

    #[test]
    fn a_settled_error_replays_marked() {
        let frame = Frame::ToolError(ToolError {
            workstation_id: "ws".into(),
            request_id: "r1".into(),
            code: "write_denied".into(),
            message: Some("no".into()),
            details: None,
            retryable: false,
            delivery_state: Some(DeliveryState::Delivered),
            served_at_ms: None,
            runtime_generation: None,
        });
        let p = answer_claim(earlier("settled", Some(frame.encode())), "ws", "dev_1").unwrap_err().payload();
        assert_eq!((p["code"].as_str(), p["idempotent_replay"].as_bool(), p["request_id"].as_str()), (Some("write_denied"), Some(true), Some("r1")));
    }

    #[test]
    fn unsettled_and_conflicting_keys_are_not_sent_again() {
        let code = |c: Claim| {
            let p = answer_claim(c, "ws", "dev_1").unwrap_err().payload();
            (p["code"].as_str().unwrap().to_string(), p["retryable"].as_bool().unwrap(), p["delivery_state"].as_str().unwrap().to_string())
        };
        assert_eq!(code(earlier("sent", None)), ("idempotency_in_flight".into(), false, "delivery_unknown".into()));
        assert_eq!(code(earlier("uncertain", None)), ("delivery_uncertain".into(), false, "delivery_unknown".into()));
        assert_eq!(code(earlier("settled", None)), ("idempotent_replay_unavailable".into(), false, "delivered".into()));
        assert_eq!(code(Claim::Conflict { request_id: "r1".into() }), ("idempotency_key_conflict".into(), false, "not_delivered".into()));
    }
}
