//! `intent` + `idempotency_key` for `herdr_exec` (spec §2.5): validation, the request
//! fingerprint, the ledger round trip and the fields every such result carries.
//!
//! `safe_retry_mode` tells the caller what a retry does. Its values here:
//! - `replay_with_same_key`: the outcome is recorded; sending the same request with
//!   the same key returns it and runs nothing.
//! - `wait_then_replay_with_same_key`: the first call is still in flight; ask again
//!   later with the same key (or read its session), never with a new key.
//! - `new_key_for_a_different_request`: the key already belongs to another request.
//! - `retry_freely`: a `read_only` call without a key; nothing was recorded.
//! - `retry_with_same_key`: a refusal (gate, topology) stopped the call before
//!   delivery and the key was given back; fix the cause and retry.
//! - `fix_arguments_then_retry`: the arguments were invalid; nothing was reserved.
//! - `retry_after_resource_release`: the ledger could not be written, nothing ran.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::state::ledger::{self, NewOp, OpRecord, Reservation};
use crate::state::{StateDb, StateError, now_ms};

/// The ledger `kind` of `herdr_exec` operations.
pub const KIND: &str = "herdr_exec";
pub const MAX_KEY_CHARS: usize = 256;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Intent {
    ReadOnly,
    IdempotentWrite,
    NonIdempotentWrite,
}

impl Intent {
    pub fn parse(s: &str) -> Option<Intent> {
        match s {
            "read_only" => Some(Intent::ReadOnly),
            "idempotent_write" => Some(Intent::IdempotentWrite),
            "non_idempotent_write" => Some(Intent::NonIdempotentWrite),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Intent::ReadOnly => "read_only",
            Intent::IdempotentWrite => "idempotent_write",
            Intent::NonIdempotentWrite => "non_idempotent_write",
        }
    }
}

/// The idempotency inputs of one call, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct Idempotency {
    pub intent: Intent,
    pub key: Option<String>,
}

/// Checks the combination rules before anything runs. `Ok(None)`: neither field was
/// given and the call behaves exactly as without the ledger.
pub fn validate(intent: Option<&str>, key: Option<&str>) -> Result<Option<Idempotency>, String> {
    let intent = match intent {
        None => None,
        Some(s) => Some(Intent::parse(s).ok_or_else(|| {
            "intent must be one of read_only, idempotent_write, non_idempotent_write".to_string()
        })?),
    };
    if let Some(k) = key
        && (k.is_empty() || k.chars().count() > MAX_KEY_CHARS)
    {
        return Err(format!("idempotency_key must be 1..={MAX_KEY_CHARS} characters"));
    }
    match (intent, key) {
        (None, None) => Ok(None),
        (None, Some(_)) => Err("idempotency_key needs an intent; add intent (read_only, idempotent_write or non_idempotent_write)".into()),
        (Some(Intent::ReadOnly), key) => Ok(Some(Idempotency { intent: Intent::ReadOnly, key: key.map(str::to_string) })),
        (Some(intent), None) => Err(format!(
            "intent {} changes something and needs an idempotency_key, so a retry can never run it twice",
            intent.as_str()
        )),
        (Some(intent), Some(k)) => Ok(Some(Idempotency { intent, key: Some(k.to_string()) })),
    }
}

/// The fingerprint that decides "same request": what runs and where. Timeouts and
/// confirm_busy only change how long or whether we wait, so they are left out.
pub fn request_hash(workspace: &str, command: &str, project_root: Option<&str>, intent: Intent) -> String {
    use sha2::{Digest, Sha256};
    let request = json!({
        "kind": KIND,
        "workspace": workspace,
        "command": command,
        "project_root": project_root,
        "intent": intent.as_str(),
    });
    let canonical = crate::contract::canonical_json(&request).unwrap_or_else(|_| request.to_string());
    hex::encode(Sha256::digest(canonical.as_bytes()))
}

/// Adds the four idempotency fields to a result object.
pub fn decorate(payload: &mut Value, intent: Intent, persisted: bool, replay: bool, safe_retry_mode: &str) {
    if let Value::Object(obj) = payload {
        obj.insert("intent".into(), json!(intent.as_str()));
        obj.insert("idempotency_persisted".into(), json!(persisted));
        obj.insert("idempotent_replay".into(), json!(replay));
        obj.insert("safe_retry_mode".into(), json!(safe_retry_mode));
    }
}

/// What the ledger said about a keyed call.
#[derive(Debug)]
pub enum Claim {
    /// This call owns the key under `op_id`.
    Fresh { op_id: String },
    /// A finished (or interrupted) earlier call: return its recorded result.
    Replay(Value),
    /// The key belongs to a different request.
    Conflict(Box<OpRecord>),
    /// The earlier call has not settled.
    InFlight(Box<OpRecord>),
}

static OP_SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Reserves `key` for this request before anything is delivered.
pub async fn claim(db: &Arc<StateDb>, key: &str, request_hash: &str) -> Result<Claim, StateError> {
    let seq = OP_SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let op_id = format!("op_{:x}-{:x}-{:x}", std::process::id(), now_ms(), seq);
    let digest = ledger::key_digest(KIND, key);
    let hash = request_hash.to_string();
    let boot = db.boot_id().to_string();
    let generation = std::env::var("HERDR_MCP_RUNTIME_GENERATION").ok();
    let id = op_id.clone();
    let reservation = db
        .run(move |c| {
            ledger::reserve(
                c,
                &NewOp {
                    op_id: &id,
                    kind: KIND,
                    key_digest: &digest,
                    request_hash: &hash,
                    phase: "pending",
                    boot_id: &boot,
                    runtime_generation: generation.as_deref(),
                    now_ms: now_ms(),
                    ttl_ms: ledger::LEDGER_TTL_MS,
                },
            )
        })
        .await?;
    Ok(match reservation {
        Reservation::Fresh => Claim::Fresh { op_id },
        Reservation::Existing(rec) if rec.request_hash != request_hash => Claim::Conflict(rec),
        Reservation::Existing(rec) => match (rec.state.as_str(), &rec.result) {
            (ledger::STATE_SETTLED | ledger::STATE_INTERRUPTED, Some(result)) => Claim::Replay(result.clone()),
            _ => Claim::InFlight(rec),
        },
    })
}

/// Records that the command was handed to a session (so a crash from here on is
/// known to have delivered it).
pub async fn mark_delivered(db: &Arc<StateDb>, op_id: &str, session_id: &str) -> Result<(), StateError> {
    let (op, sid) = (op_id.to_string(), session_id.to_string());
    db.run(move |c| {
        ledger::update(c, &op, "running", ledger::STATE_DELIVERED, Some(&json!({"session_id": sid})), now_ms())
    })
    .await
}

/// Records the final result a replay returns.
pub async fn settle(db: &Arc<StateDb>, op_id: &str, phase: &str, result: &Value) -> Result<(), StateError> {
    let (op, phase, result) = (op_id.to_string(), phase.to_string(), result.clone());
    db.run(move |c| ledger::update(c, &op, &phase, ledger::STATE_SETTLED, Some(&result), now_ms())).await
}

/// Gives the key back when a refusal stopped the call before delivery.
pub async fn release(db: &Arc<StateDb>, op_id: &str) -> Result<(), StateError> {
    let op = op_id.to_string();
    db.run(move |c| ledger::release(c, &op)).await
}

/// Settles the rows a dead runtime process left open, with what is known:
/// delivered rows name their session and its recovery state; reserved rows may or
/// may not have started (the process died between reservation and delivery).
/// `recovered` maps session ids to their recovery state.
/// Rows of boots listed in `alive` belong to a runtime that still runs and are left alone.
pub async fn recover_ledger(
    db: &Arc<StateDb>,
    recovered: HashMap<String, String>,
    alive: HashSet<String>,
) -> Result<usize, StateError> {
    let boot = db.boot_id().to_string();
    db.run(move |c| {
        let now = now_ms();
        ledger::delete_expired(c, now)?;
        let mut open = ledger::unsettled_from_other_boots(c, &boot)?;
        open.retain(|op| !alive.contains(&op.boot_id));
        for op in &open {
            let session = op
                .result
                .as_ref()
                .and_then(|r| r.get("session_id"))
                .and_then(Value::as_str)
                .map(|sid| crate::state::sessions::get(c, sid))
                .transpose()?
                .flatten();
            let result = match session.filter(|row| row.state == "completed") {
                Some(row) => closed_result(&row),
                None => interrupted_result(op, &recovered),
            };
            ledger::update(c, &op.op_id, "interrupted", ledger::STATE_INTERRUPTED, Some(&result), now)?;
        }
        Ok(open.len())
    })
    .await
}

/// The command ended before the runtime died, only the settling was lost: its exit
/// status is known, its output is not.
fn closed_result(row: &crate::state::sessions::SessionRow) -> Value {
    let exit_code = row.exit_code;
    let mut obj = Map::new();
    obj.insert("ok".into(), json!(exit_code == Some(0)));
    obj.insert("phase".into(), json!("completed"));
    obj.insert("session_id".into(), json!(row.session_id));
    obj.insert("op_id".into(), json!(row.session_id));
    obj.insert("exit_code".into(), json!(exit_code));
    if let Some(sig) = &row.signal {
        obj.insert("signal".into(), json!(sig));
    }
    obj.insert("recovery_state".into(), json!("closed_before_restart"));
    obj.insert("output_lost".into(), json!(true));
    obj.insert("message".into(), json!(
        "the command finished before the runtime restarted; its exit status was kept but its output was lost"
    ));
    obj.insert("execution".into(), json!({"started": true, "completed": true, "exit_code": exit_code}));
    if exit_code != Some(0) {
        obj.insert("failure_origin".into(), json!("child_process"));
    }
    Value::Object(obj)
}

fn interrupted_result(op: &OpRecord, recovered: &HashMap<String, String>) -> Value {
    let session_id = op.result.as_ref().and_then(|r| r.get("session_id")).and_then(Value::as_str);
    let mut obj = Map::new();
    obj.insert("ok".into(), json!(false));
    obj.insert("code".into(), json!("exec_interrupted"));
    obj.insert("phase".into(), json!("interrupted"));
    match session_id {
        Some(sid) => {
            let recovery = recovered.get(sid).map(String::as_str).unwrap_or("detached_unverified");
            // Reaped: we stopped it, so it did not complete. Detached: it ended while
            // no runtime watched, outcome unknown.
            let completed = if recovery == "reaped_on_restart" { json!(false) } else { Value::Null };
            obj.insert("message".into(), json!(format!(
                "the runtime stopped while this command ran in session {sid} ({recovery}); its outcome is not known, so it is not run again"
            )));
            obj.insert("session_id".into(), json!(sid));
            obj.insert("op_id".into(), json!(sid));
            obj.insert("recovery_state".into(), json!(recovery));
            obj.insert("execution".into(), json!({"started": true, "completed": completed, "exit_code": null}));
        }
        None => {
            obj.insert("message".into(), json!(
                "the runtime stopped right after reserving this key; the command may or may not have started, so it is not run again"
            ));
            obj.insert("delivery_state".into(), json!("unknown"));
            obj.insert("execution".into(), json!({"started": null, "completed": null, "exit_code": null}));
        }
    }
    obj.insert("failure_origin".into(), json!("unknown"));
    Value::Object(obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combination_rules() {
        assert_eq!(validate(None, None), Ok(None));
        assert!(validate(None, Some("k")).unwrap_err().contains("needs an intent"));
        assert!(validate(Some("idempotent_write"), None).unwrap_err().contains("idempotency_key"));
        assert!(validate(Some("non_idempotent_write"), None).is_err());
        assert_eq!(validate(Some("read_only"), None).unwrap().unwrap().key, None);
        assert!(validate(Some("sometimes"), Some("k")).is_err());
        assert!(validate(Some("idempotent_write"), Some("")).is_err());
        let max = "k".repeat(MAX_KEY_CHARS);
        assert!(validate(Some("idempotent_write"), Some(&max)).is_ok());
        assert!(validate(Some("idempotent_write"), Some(&format!("{max}k"))).is_err());
    }

    #[test]
    fn hash_covers_what_runs_and_where() {
        let h = request_hash("w", "echo", None, Intent::IdempotentWrite);
        assert_eq!(h, request_hash("w", "echo", None, Intent::IdempotentWrite));
        assert_ne!(h, request_hash("w", "echo 2", None, Intent::IdempotentWrite));
        assert_ne!(h, request_hash("w", "echo", Some("/r"), Intent::IdempotentWrite));
        assert_ne!(h, request_hash("v", "echo", None, Intent::IdempotentWrite));
        assert_ne!(h, request_hash("w", "echo", None, Intent::NonIdempotentWrite));
    }

    #[tokio::test]
    async fn claim_replay_conflict_in_flight_and_release() {
        let tmp = tempfile::tempdir().unwrap();
        let db = Arc::new(StateDb::open(tmp.path(), "b1").unwrap());
        let Claim::Fresh { op_id } = claim(&db, "k", "h").await.unwrap() else { panic!("first claim") };
        assert!(matches!(claim(&db, "k", "h").await.unwrap(), Claim::InFlight(_)));
        assert!(matches!(claim(&db, "k", "other").await.unwrap(), Claim::Conflict(_)));
        mark_delivered(&db, &op_id, "es_1").await.unwrap();
        assert!(matches!(claim(&db, "k", "h").await.unwrap(), Claim::InFlight(_)));
        settle(&db, &op_id, "completed", &json!({"ok": true})).await.unwrap();
        assert!(matches!(claim(&db, "k", "h").await.unwrap(), Claim::Replay(v) if v == json!({"ok": true})));
        // A released key is free again; a settled one cannot be released.
        let Claim::Fresh { op_id: op2 } = claim(&db, "k2", "h").await.unwrap() else { panic!() };
        release(&db, &op2).await.unwrap();
        assert!(matches!(claim(&db, "k2", "h").await.unwrap(), Claim::Fresh { .. }));
        release(&db, &op_id).await.unwrap();
        assert!(matches!(claim(&db, "k", "h").await.unwrap(), Claim::Replay(_)));
    }

    #[tokio::test]
    async fn open_rows_of_a_dead_process_settle_truthfully() {
        let tmp = tempfile::tempdir().unwrap();
        let old = Arc::new(StateDb::open(tmp.path(), "old").unwrap());
        let Claim::Fresh { op_id: delivered } = claim(&old, "a", "h").await.unwrap() else { panic!() };
        mark_delivered(&old, &delivered, "es_x").await.unwrap();
        let Claim::Fresh { .. } = claim(&old, "b", "h").await.unwrap() else { panic!() };
        // c: the command finished (session row completed) but the ledger was not settled.
        let Claim::Fresh { op_id: closed } = claim(&old, "c", "h").await.unwrap() else { panic!() };
        mark_delivered(&old, &closed, "es_done").await.unwrap();
        old.with(|c| {
            crate::state::sessions::insert(c, &crate::state::sessions::SessionRow {
                session_id: "es_done".into(), boot_id: "old".into(), pid: 1, pgid: 1, proc_start_ticks: None,
                root: "/r".into(), cwd: "/r".into(), command: "false".into(), started_at_ms: 1,
                state: "running".into(), exit_code: None, signal: None, ended_at_ms: None, recovery_state: None,
            })?;
            crate::state::sessions::mark_completed(c, "es_done", Some(1), None, 2)
        })
        .unwrap();
        drop(old);
        let new = Arc::new(StateDb::open(tmp.path(), "new").unwrap());
        let recovered = HashMap::from([("es_x".to_string(), "reaped_on_restart".to_string())]);
        // While the old boot counts as alive, its rows are not touched.
        let alive = HashSet::from(["old".to_string()]);
        assert_eq!(recover_ledger(&new, recovered.clone(), alive).await.unwrap(), 0);
        assert_eq!(recover_ledger(&new, recovered, HashSet::new()).await.unwrap(), 3);
        let Claim::Replay(c) = claim(&new, "c", "h").await.unwrap() else { panic!() };
        assert_eq!((c["phase"].clone(), c["exit_code"].clone(), c["ok"].clone()), (json!("completed"), json!(1), json!(false)));
        assert_eq!(c["execution"], json!({"started": true, "completed": true, "exit_code": 1}));
        assert_eq!(c["recovery_state"], "closed_before_restart");
        let Claim::Replay(a) = claim(&new, "a", "h").await.unwrap() else { panic!() };
        assert_eq!(a["code"], "exec_interrupted");
        assert_eq!(a["session_id"], "es_x");
        assert_eq!(a["execution"], json!({"started": true, "completed": false, "exit_code": null}));
        let Claim::Replay(b) = claim(&new, "b", "h").await.unwrap() else { panic!() };
        assert_eq!(b["execution"]["started"], Value::Null);
        assert_eq!(b["delivery_state"], "unknown");
    }
}
