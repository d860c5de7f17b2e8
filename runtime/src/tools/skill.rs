//! `herdr_skill`: the bundled working guidance for models, plus a live block that
//! says exactly which runtime and contract they are talking to.
//!
//! The guidance is compiled in (`assets/`); this runtime does not fetch it from the
//! network, so `project_skill.origin` is always `"bundled"` and `refresh` has
//! nothing to refresh.

use std::sync::OnceLock;

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::common::{bool_arg, object_schema};
use super::{Access, Handler, ToolContext, ToolOutput, ToolRegistry, ToolSpec};
use crate::contract::{CONTRACT_EPOCH, contract_hash};
use crate::runtime_info::rfc3339;

pub const PROJECT_SKILL: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/assets/herdr-mcp-SKILL.md"));
pub const NATIVE_REFERENCE: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/assets/herdr-agent-SKILL.md"));
const PROJECT_SOURCE: &str = "bundled:assets/herdr-mcp-SKILL.md";
const NATIVE_SOURCE: &str = "bundled:assets/herdr-agent-SKILL.md";
/// Advertised cache lifetime of the guidance (spec §1.3 default).
const CACHE_TTL_SEC: u64 = 3600;

pub fn spec() -> ToolSpec {
    ToolSpec {
        name: "herdr_skill",
        description: concat!(
            "Get the working guide for this workstation: how to orient (herdr_inspect, project docs, git status), ",
            "which tool to use for what, how to handle refusals such as dirty files or read-only mode, and why a ",
            "mutation with an unknown outcome must be checked, never blindly repeated. Read it once at the start of ",
            "a session. The result also carries the live runtime identity (version, build, contract epoch and hash). ",
            "include_native_reference (default true) appends the reference for coordinating agents in Herdr panes."
        ),
        input_schema: schema,
        access: Access::Read,
        read_only_hint: true,
        handler: Handler::Blocking(run),
    }
}

fn schema() -> Value {
    object_schema(
        json!({
            "refresh": {"type": "boolean", "default": false, "description": "Ignore cached guidance (the bundled text is always current)."},
            "include_native_reference": {"type": "boolean", "default": true},
        }),
        &[],
    )
}

/// The contract identity of the standard catalog, computed once per process.
pub fn contract_identity() -> &'static (usize, String) {
    static ID: OnceLock<(usize, String)> = OnceLock::new();
    ID.get_or_init(|| {
        let catalog = ToolRegistry::standard().catalog();
        let hash = contract_hash(&catalog).unwrap_or_else(|e| format!("unavailable: {e}"));
        (catalog.len(), hash)
    })
}

/// What the guide's live block says about Herdr. It must follow the runtime:
/// a model told "unavailable" while Herdr runs would never use the Herdr tools.
/// The event cache is live only while Herdr answers; without it Herdr is
/// configured but was not reachable when last tried.
fn herdr_status(ctx: &ToolContext) -> &'static str {
    match &ctx.services.herdr {
        None => "unavailable (this runtime has no Herdr connection: files, git and exec only)",
        Some(herdr) if herdr.cache.is_live() => "connected (workspaces, panes and agents come from Herdr)",
        Some(_) => "configured but not answering right now (herdr_inspect shows the details)",
    }
}

fn run(ctx: &ToolContext, args: &Map<String, Value>) -> ToolOutput {
    let (tool_count, hash) = contract_identity();
    let info = &ctx.info;
    let runtime = json!({
        "server_name": info.name,
        "server_version": info.version,
        "build": {"commit": info.build_commit, "started_at": info.started_at, "pid": info.pid},
        "boot_id": info.boot_id,
        "contract": {"epoch": CONTRACT_EPOCH, "hash": hash, "tool_count": tool_count},
        "herdr": herdr_status(ctx),
        "exec": if ctx.services.exec.is_some() { "available" } else { "unavailable (no state database; see the runtime log)" },
    });
    let block = serde_json::to_string_pretty(&runtime).unwrap_or_default();
    let mut content = format!("{}\n\n## Live herdr-mcp runtime context\n\n```json\n{block}\n```\n", PROJECT_SKILL.trim_end());
    let now = rfc3339(std::time::SystemTime::now());
    let mut payload = json!({
        "ok": true,
        "project_skill": {"source": PROJECT_SOURCE, "origin": "bundled", "cached": false, "fetched_at": now},
        "runtime": runtime,
        "refreshed_at": now,
        "cache_ttl_sec": CACHE_TTL_SEC,
    });
    if bool_arg(args, "include_native_reference", true) {
        content.push_str("\n---\n\n");
        content.push_str(NATIVE_REFERENCE);
        payload["native_reference"] = json!({
            "source": NATIVE_SOURCE,
            "origin": "bundled",
            "sha256": hex::encode(Sha256::digest(NATIVE_REFERENCE.as_bytes())),
            "bytes": NATIVE_REFERENCE.len(),
        });
    }
    payload["bytes"] = json!(content.len());
    payload["content"] = json!(content);
    ToolOutput::payload(payload)
}
