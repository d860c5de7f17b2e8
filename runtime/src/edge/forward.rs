//! [`LinkRouter`]: the real [`WorkstationRouter`] — routes a public `/mcp` tool
//! call to one device's link and turns the answer (or its absence) into a
//! `CallToolResult`.
//!
//! Reads are tracked in memory only. Mutations get a durable row before their
//! frame is queued ([`super::forward_pending`]); the edge never sends a request
//! twice, so when a link drops after sending, the caller gets
//! `delivery_uncertain` and must verify before repeating a change. A mutation
//! with an `idempotency_key` already in the ledger is answered from it and not
//! sent ([`super::forward_idem`]).

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Map, Value};

use super::forward_errors::Failure;
use super::forward_idem;
use super::forward_pending::{self, Claim, PendingError};
use super::forward_route::{Directory, resolve_bound_in, resolve_in, take_selectors, wrap_refs};
use super::link_hub_auth::DeviceInfo;
use super::link_hub::{LinkHub, Outcome};
use super::mcp::WorkstationRouter;
use super::relay::{self, Cancel, DeliveryState, Frame, ToolRequest};
use super::secrets::random_hex;
use super::store::EdgeStore;
use super::token::Principal;

/// Tools that change nothing; everything else is a mutation (spec §8 step 4).
pub const READ_TOOLS: &[&str] =
    &["herdr_inspect", "herdr_since", "herdr_methods", "herdr_skill", "herdr_fs_list", "herdr_fs_grep", "herdr_fs_read"];
/// How long a call waits for a link that is reconnecting.
pub const RECONNECT_GRACE: Duration = Duration::from_secs(2);
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
/// Clamp of a call's `timeout_ms` argument (spec §8: 1–60 s).
pub const MIN_CALL_TIMEOUT_MS: u64 = 1_000;
pub const MAX_CALL_TIMEOUT_MS: u64 = 60_000;
/// Extra wait past the timeout the link was given, for its answer to travel back.
const ANSWER_SLACK: Duration = Duration::from_secs(2);

pub struct LinkRouter {
    hub: Arc<LinkHub>,
    store: Arc<EdgeStore>,
    catalog: Vec<Value>,
}

impl LinkRouter {
    /// `catalog`: the runtime tool catalog whose contract the hub accepts.
    pub fn new(hub: Arc<LinkHub>, store: Arc<EdgeStore>, catalog: Vec<Value>) -> Self {
        Self { hub, store, catalog }
    }

    pub fn hub(&self) -> &Arc<LinkHub> {
        &self.hub
    }

    async fn call(&self, principal: &Principal, name: &str, arguments: Value) -> Result<Value, Failure> {
        let mut args = match arguments {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        let (selector, ref_device) = take_selectors(&mut args)?;
        // Indexed lookups in the registry and the hub: a call costs the same
        // whether ten devices are enrolled or ten thousand.
        let dir = HubDirectory(&self.hub);
        let route = match principal.device_id.as_deref() {
            Some(bound) => resolve_bound_in(&dir, bound, selector.as_deref(), ref_device.as_deref())?,
            None => resolve_in(&dir, selector.as_deref(), ref_device.as_deref())?,
        };
        let ws = route.device.workstation_id.clone();
        let is_read = READ_TOOLS.contains(&name);
        let idempotency_key = args.get("idempotency_key").and_then(Value::as_str).map(str::to_string);
        // Only a keyed mutation is ever looked up again, so only it needs a
        // fingerprint (and only its answer is kept).
        let keyed = match &idempotency_key {
            Some(key) if !is_read => Some((key.clone(), forward_idem::request_hash(name, &args))),
            _ => None,
        };
        if let Some((key, request_hash)) = &keyed {
            match forward_pending::lookup(&self.store, &ws, key, request_hash) {
                Ok(Some(claim)) => return forward_idem::answer_claim(claim, &ws, &route.device.device_id),
                Ok(None) => {}
                // record_sent below checks again and reports the failure.
                Err(e) => tracing::warn!("idempotency lookup for {ws}: {e}"),
            }
        }
        let Some(conn) = self.hub.wait_for_link(&ws, RECONNECT_GRACE).await else {
            return Err(Failure::offline(&ws));
        };
        let timeout_ms = args
            .get("timeout_ms")
            .and_then(Value::as_u64)
            .unwrap_or(DEFAULT_TIMEOUT_MS)
            .clamp(MIN_CALL_TIMEOUT_MS, MAX_CALL_TIMEOUT_MS);
        let request_id = random_hex::<16>();
        let (epoch, hash) = self.hub.runtime_contract.clone();
        let frame = Frame::ToolRequest(ToolRequest {
            workstation_id: ws.clone(),
            request_id: request_id.clone(),
            operation: name.to_string(),
            arguments: Some(Value::Object(args)),
            // The link's own budget leaves it time to report a local timeout.
            timeout_ms: Some(timeout_ms.max(relay::MIN_TIMEOUT_MS)),
            contract_epoch: Some(epoch),
            contract_hash: Some(hash),
            idempotency_key: idempotency_key.clone(),
            trace: Some(route.reason.to_string()),
        })
        .encode();
        let fail = |f: Failure| f.on(&ws).request(&request_id);
        if frame.len() > relay::MAX_LINK_INBOUND {
            return Err(fail(Failure::refused(
                "payload_too_large",
                format!("the request is {} bytes; a link accepts at most {}", frame.len(), relay::MAX_LINK_INBOUND),
            )));
        }
        if !is_read {
            match forward_pending::record_sent(&self.store, &request_id, &ws, name, keyed.as_ref().map(|(k, h)| (k.as_str(), h.as_str()))) {
                Ok(Claim::Fresh) => {}
                Ok(claim) => return forward_idem::answer_claim(claim, &ws, &route.device.device_id),
                Err(PendingError::Full(m)) => return Err(fail(Failure::refused("edge_capacity_exceeded", m))),
                Err(PendingError::Sqlite(e)) => {
                    tracing::error!("cannot record pending {name} for {ws}: {e}");
                    return Err(fail(Failure::refused("internal_error", "the edge could not record the request")));
                }
            }
        }
        let finish = |state: &str, outcome: &str, answer: Option<&str>| {
            if !is_read && let Err(e) = forward_pending::finish(&self.store, &request_id, state, outcome, answer) {
                tracing::error!("cannot settle pending request {request_id}: {e}");
            }
        };
        let Some(rx) = conn.send_request(&request_id, frame) else {
            finish("not_delivered", "link_gone_before_send", None);
            return Err(fail(Failure::new(
                "workstation_reconnecting",
                "the link closed before the request could be sent",
                true,
                DeliveryState::NotDelivered,
            )));
        };
        let wait = Duration::from_millis(timeout_ms) + ANSWER_SLACK;
        match tokio::time::timeout(wait, rx).await {
            Ok(Ok(outcome @ (Outcome::Result(_) | Outcome::Error(_)))) => {
                let (state, label, stored) = settlement(&outcome, keyed.is_some());
                finish(state, &label, stored.as_deref());
                answer_of(outcome, &route.device.device_id).map_err(fail)
            }
            Ok(Ok(Outcome::Dropped { revoked: true })) => {
                finish("uncertain", "link_auth_failed", None);
                Err(fail(Failure::new("link_auth_failed", "the device's link was closed (revoked, suspended or re-keyed) while the request was in flight", false, DeliveryState::DeliveryUnknown)))
            }
            Ok(Ok(Outcome::Dropped { revoked: false })) | Ok(Err(_)) => {
                finish("uncertain", "link_lost", None);
                Err(fail(Failure::new(
                    "delivery_uncertain",
                    if is_read {
                        "the link dropped after the request was sent; it is safe to repeat this read"
                    } else {
                        "the link dropped after the change was sent; it may or may not have happened, so check before repeating it"
                    },
                    is_read,
                    DeliveryState::DeliveryUnknown,
                )))
            }
            Err(_) => {
                conn.forget(&request_id);
                conn.send(&Frame::Cancel(Cancel { workstation_id: ws.clone(), request_id: request_id.clone(), reason: Some("timeout".into()) }));
                finish("uncertain", "request_timeout", None);
                Err(fail(Failure::new(
                    "request_timeout",
                    format!("no answer within {} ms", wait.as_millis()),
                    is_read,
                    DeliveryState::DeliveryUnknown,
                )))
            }
        }
    }
}

/// Routing's view of the registry (indexed reads) and the hub's live links.
struct HubDirectory<'a>(&'a LinkHub);

fn registry_unavailable(e: String) -> Failure {
    Failure::new("device_registry_unavailable", e, true, DeliveryState::NotDelivered)
}

impl Directory for HubDirectory<'_> {
    fn by_id(&self, device_id: &str) -> Result<Option<DeviceInfo>, Failure> {
        self.0.authenticator().device_by_id(device_id).map_err(registry_unavailable)
    }
    fn named(&self, name: &str) -> Result<Vec<DeviceInfo>, Failure> {
        self.0.authenticator().devices_named(name).map_err(registry_unavailable)
    }
    fn once_named(&self, name: &str) -> Result<Vec<DeviceInfo>, Failure> {
        self.0.authenticator().devices_once_named(name).map_err(registry_unavailable)
    }
    fn routable(&self, limit: usize) -> Result<Vec<DeviceInfo>, Failure> {
        self.0.authenticator().routable_devices(limit).map_err(registry_unavailable)
    }
    fn live_routable(&self, limit: usize) -> Result<Vec<DeviceInfo>, Failure> {
        self.0.live_routable(limit).map_err(registry_unavailable)
    }
}

/// How an answer settles its row: (state, outcome label, the answer frame to keep,
/// encoded only when `keep_answer` — a row without an idempotency key never
/// replays, and a result can be up to 1 MiB).
/// An error the link marks `not_delivered`, or a runtime answer saying nothing
/// was run ([`forward_idem::nothing_ran`]), frees the idempotency key for a retry.
pub(crate) fn settlement(outcome: &Outcome, keep_answer: bool) -> (&'static str, String, Option<String>) {
    match outcome {
        Outcome::Result(r) if r.result.as_ref().is_some_and(forward_idem::nothing_ran) => ("not_delivered", "refused_by_runtime".into(), None),
        Outcome::Result(r) => ("settled", "tool_result".into(), keep_answer.then(|| Frame::ToolResult(r.clone()).encode())),
        Outcome::Error(e) if e.delivery_state == Some(DeliveryState::NotDelivered) => ("not_delivered", e.code.clone(), None),
        Outcome::Error(e) => ("settled", e.code.clone(), keep_answer.then(|| Frame::ToolError(e.clone()).encode())),
        Outcome::Dropped { .. } => ("uncertain", "link_lost".into(), None),
    }
}

/// The caller's answer from a link's `tool_result`/`tool_error`; ids in a result's
/// `structuredContent` become refs of `device_id`.
pub(crate) fn answer_of(outcome: Outcome, device_id: &str) -> Result<Value, Failure> {
    match outcome {
        Outcome::Result(r) => {
            let mut result = call_tool_result(r.result.unwrap_or(Value::Null));
            if let Some(sc) = result.get_mut("structuredContent") {
                wrap_refs(sc, device_id);
            }
            Ok(result)
        }
        Outcome::Error(e) => {
            let state = e.delivery_state.unwrap_or(DeliveryState::Delivered);
            let mut f = Failure::new(&e.code, e.message.unwrap_or_else(|| e.code.clone()), e.retryable, state);
            if let Some(d) = e.details {
                f = f.with_details(d);
            }
            Err(f)
        }
        Outcome::Dropped { .. } => Err(Failure::new("delivery_uncertain", "the link dropped before answering", false, DeliveryState::DeliveryUnknown)),
    }
}

/// The runtime's `CallToolResult`, passed through, with `structuredContent`
/// added from its JSON text when the runtime gave none (only the edge emits it).
/// The text block stays the runtime's own words; refs appear only in
/// `structuredContent`, and plain ids keep working with a `device` argument.
fn call_tool_result(result: Value) -> Value {
    let Value::Object(mut r) = result else {
        return Failure::new("invalid_edge_response", "the link returned no tool result", false, DeliveryState::Delivered).result();
    };
    if !r.contains_key("structuredContent")
        && let Some(text) = r.get("content").and_then(|c| c.get(0)).and_then(|c| c.get("text")).and_then(Value::as_str)
        && let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(text)
    {
        r.insert("structuredContent".into(), v);
    }
    Value::Object(r)
}

impl WorkstationRouter for LinkRouter {
    fn runtime_catalog(&self) -> Option<Vec<Value>> {
        Some(self.catalog.clone())
    }

    fn devices(&self) -> Result<Vec<Value>, String> {
        self.hub.device_rows()
    }

    fn device_row(&self, device_id: &str) -> Result<Option<Value>, String> {
        self.hub.device_row(device_id)
    }

    fn forward<'a>(&'a self, principal: &'a Principal, name: &'a str, arguments: Value) -> BoxFuture<'a, Value> {
        Box::pin(async move { self.call(principal, name, arguments).await.unwrap_or_else(|f| f.result()) })
    }
}

/// The runtime catalog and contract this build serves: what the edge offers
/// publicly and what a link's hello must match.
pub fn local_runtime_contract() -> (Vec<Value>, (u32, String)) {
    let catalog = crate::tools::ToolRegistry::standard().catalog();
    let hash = crate::contract::contract_hash(&catalog).unwrap_or_default();
    (catalog, (crate::contract::CONTRACT_EPOCH, hash))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn results_gain_structured_content() {
        let r = call_tool_result(json!({"content": [{"type": "text", "text": "{\"ok\":true}"}]}));
        assert_eq!(r["structuredContent"], json!({"ok": true}));
        let plain = call_tool_result(json!({"content": [{"type": "text", "text": "hello"}]}));
        assert!(plain.get("structuredContent").is_none());
        assert_eq!(call_tool_result(Value::Null)["structuredContent"]["code"], "invalid_edge_response");
    }

    #[test]
    fn the_local_contract_is_the_runtime_catalog() {
        let (catalog, (epoch, hash)) = local_runtime_contract();
        assert_eq!(catalog.len(), 18);
        assert_eq!(epoch, crate::contract::CONTRACT_EPOCH);
        assert!(crate::contract::is_valid_hash(&hash));
    }
}
