//! `GET /info` and `GET /health`: the identity of the public catalog and of the
//! runtime contract links must serve, each computed from the very catalogs `/mcp`
//! lists and the hub enforces, so an operator (or a monitor) can compare them.

use std::sync::Arc;

use axum::extract::State;
use axum::response::Response;
use serde_json::{Value, json};

use super::EdgeState;
use super::http::json_response;
use super::mcp::{PUBLIC_CONTRACT_EPOCH, public_catalog};

const SERVICE: &str = "herdr-mcp-edge";
/// The edge serves OAuth, `/mcp` and workstation links: the last stage of the
/// upstream rollout (`oauth` → `link`).
const STAGE: &str = "link";

/// `{epoch, hash, toolCount}` of the public catalog (what a ChatGPT app
/// snapshots), and of the runtime catalog the edge forwards to and a link's hello
/// must match (`None` where no link can exist). `herdr-mcp update check` compares
/// the latter with a workstation's own runtime.
fn contracts(s: &EdgeState) -> (Value, Option<Value>) {
    let public = public_catalog(s.router.as_ref());
    let public = json!({
        "epoch": PUBLIC_CONTRACT_EPOCH,
        "hash": crate::contract::contract_hash(&public).unwrap_or_default(),
        "toolCount": public.len(),
    });
    let runtime = s.router.runtime_catalog().map(|tools| {
        json!({
            "epoch": crate::contract::CONTRACT_EPOCH,
            "hash": crate::contract::contract_hash(&tools).unwrap_or_default(),
            "toolCount": tools.len(),
        })
    });
    (public, runtime)
}

pub async fn info(State(s): State<Arc<EdgeState>>) -> Response {
    let (public, runtime) = contracts(&s);
    json_response(
        200,
        json!({
            "ok": true,
            "service": SERVICE,
            "stage": STAGE,
            "edgeVersion": env!("CARGO_PKG_VERSION"),
            "publicContract": public,
            "runtimeContract": runtime,
            "routes": [
                {"path": "/mcp", "stage": "oauth"},
                {"path": "/oauth/authorize", "stage": "oauth"},
                {"path": "/oauth/token", "stage": "oauth"},
                {"path": "/oauth/register", "stage": "oauth"},
                {"path": "/ws/:workstationId", "stage": "link"},
            ],
        }),
    )
}

/// Spec §2's flat health shape: the same identities as `/info`, plus the
/// deployment name (`--env`) and the edge's clock so a monitor sees skew.
pub async fn health(State(s): State<Arc<EdgeState>>) -> Response {
    let (public, runtime) = contracts(&s);
    let runtime = runtime.unwrap_or(Value::Null);
    json_response(
        200,
        json!({
            "ok": true,
            "service": SERVICE,
            "stage": STAGE,
            "edgeVersion": env!("CARGO_PKG_VERSION"),
            "edgeEnv": s.config.env,
            "contractEpoch": public["epoch"],
            "contractHash": public["hash"],
            "contractToolCount": public["toolCount"],
            "runtimeContractEpoch": runtime["epoch"],
            "runtimeContractHash": runtime["hash"],
            "runtimeContractToolCount": runtime["toolCount"],
            "timestampMs": s.store.now_ms(),
        }),
    )
}
