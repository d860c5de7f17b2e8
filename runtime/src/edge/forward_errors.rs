//! The error results of forwarded calls (spec edge.md §8 error taxonomy): each
//! says whether the call reached the workstation (`delivery_state`) and whether
//! repeating it is safe (`retryable`). A model reads these to decide between
//! retrying, probing with `herdr_inspect`, or asking the user.

use serde_json::{Value, json};

use super::relay::DeliveryState;

/// Codes that describe a passing condition of the link, not of the request.
const TRANSIENT: &[&str] = &["workstation_offline", "workstation_reconnecting", "edge_capacity_exceeded", "request_timeout"];

#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub code: String,
    pub message: String,
    pub retryable: bool,
    pub delivery_state: DeliveryState,
    pub request_id: Option<String>,
    pub workstation_id: Option<String>,
    /// Boxed: rare, and keeps `Result<_, Failure>` small.
    pub details: Option<Box<Value>>,
    /// The answer is an earlier request's, replayed for its idempotency key.
    pub idempotent_replay: bool,
}

impl Failure {
    pub fn new(code: &str, message: impl Into<String>, retryable: bool, delivery_state: DeliveryState) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
            retryable,
            delivery_state,
            request_id: None,
            workstation_id: None,
            details: None,
            idempotent_replay: false,
        }
    }

    /// Refused by the edge before anything was sent; never safe to repeat as is.
    pub fn refused(code: &str, message: impl Into<String>) -> Self {
        Self::new(code, message, false, DeliveryState::NotDelivered)
    }

    pub fn offline(workstation_id: &str) -> Self {
        Self::new("workstation_offline", format!("workstation {workstation_id} has no live link"), true, DeliveryState::NotDelivered)
            .on(workstation_id)
    }

    pub fn on(mut self, workstation_id: &str) -> Self {
        self.workstation_id = Some(workstation_id.into());
        self
    }

    pub fn request(mut self, request_id: &str) -> Self {
        self.request_id = Some(request_id.into());
        self
    }

    pub fn replayed(mut self) -> Self {
        self.idempotent_replay = true;
        self
    }

    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(Box::new(details));
        self
    }

    /// The `structuredContent` of the error result.
    pub fn payload(&self) -> Value {
        let mut p = json!({
            "ok": false,
            "code": self.code,
            "retryable": self.retryable,
            "delivery_state": self.delivery_state.as_str(),
            "message": self.message,
            "request_id": self.request_id,
            "workstation_id": self.workstation_id,
        });
        match self.code.as_str() {
            "workstation_offline" | "workstation_reconnecting" => {
                p["retry_after_ms"] = json!(5000);
                p["recovery"] = json!({
                    "action": "retry_read_only_probe",
                    "probe_tool": "herdr_inspect",
                    "max_attempts": 3,
                    "backoff_ms": [5000, 10000, 20000],
                    "mutation_replay": "only_after_not_delivered_or_verified_not_applied",
                });
            }
            "edge_capacity_exceeded" => p["retry_after_ms"] = json!(1000),
            _ => {}
        }
        if TRANSIENT.contains(&self.code.as_str()) {
            p["requires_human"] = json!(false);
        }
        if self.idempotent_replay {
            p["idempotent_replay"] = json!(true);
        }
        if let Some(d) = &self.details {
            p["details"] = (**d).clone();
        }
        p
    }

    /// A `CallToolResult` with `isError:true`.
    pub fn result(&self) -> Value {
        let payload = self.payload();
        json!({"content": [{"type": "text", "text": payload.to_string()}], "structuredContent": payload, "isError": true})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offline_carries_the_probe_recovery() {
        let p = Failure::offline("dev_1").payload();
        assert_eq!((p["code"].as_str(), p["retryable"].as_bool(), p["delivery_state"].as_str()), (Some("workstation_offline"), Some(true), Some("not_delivered")));
        assert_eq!(p["retry_after_ms"], 5000);
        assert_eq!(p["recovery"]["probe_tool"], "herdr_inspect");
        assert_eq!(p["requires_human"], false);
        assert_eq!(p["workstation_id"], "dev_1");
    }

    #[test]
    fn uncertain_is_not_transient() {
        let f = Failure::new("delivery_uncertain", "link lost", false, DeliveryState::DeliveryUnknown).request("r1");
        let r = f.result();
        assert_eq!(r["isError"], true);
        assert_eq!(r["structuredContent"]["delivery_state"], "delivery_unknown");
        assert!(r["structuredContent"].get("requires_human").is_none());
        assert!(r["structuredContent"].get("retry_after_ms").is_none());
        assert_eq!(Failure::refused("edge_capacity_exceeded", "full").payload()["retry_after_ms"], 1000);
    }
}
