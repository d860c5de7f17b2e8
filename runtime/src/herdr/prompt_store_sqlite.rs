//! The prompt registry on the state database (`state::prompts`), so a keyed prompt
//! is not typed twice even across a runtime restart.

use std::sync::Arc;

use serde_json::Value;

use super::prompt_registry::{MemoryPromptStore, PromptStore, Reservation};
use crate::state::{StateDb, now_ms, prompts};

pub struct SqlitePromptStore {
    db: Arc<StateDb>,
    /// Used only when the database fails, so a broken disk degrades to the
    /// in-memory guarantee instead of none.
    fallback: MemoryPromptStore,
}

impl SqlitePromptStore {
    pub fn new(db: Arc<StateDb>) -> Self {
        SqlitePromptStore { db, fallback: MemoryPromptStore::default() }
    }
}

impl PromptStore for SqlitePromptStore {
    fn reserve(&self, key: &str, fingerprint: &str) -> Reservation {
        let digest = prompts::key_digest(key);
        let boot = self.db.boot_id().to_string();
        match self.db.with(|c| prompts::reserve(c, &digest, fingerprint, &boot, now_ms())) {
            Ok(prompts::PromptReservation::Fresh) => Reservation::Fresh,
            Ok(prompts::PromptReservation::Replay(v)) => Reservation::Replay(v),
            Ok(prompts::PromptReservation::InFlight(_)) => Reservation::InFlight,
            Ok(prompts::PromptReservation::Conflict(_)) => Reservation::Conflict,
            Ok(prompts::PromptReservation::Full) => Reservation::Full,
            Err(e) => {
                tracing::warn!("prompt registry unavailable, keeping keys in memory: {e}");
                self.fallback.reserve(key, fingerprint)
            }
        }
    }

    fn complete(&self, key: &str, result: &Value) {
        let digest = prompts::key_digest(key);
        if let Err(e) = self.db.with(|c| prompts::complete(c, &digest, result, now_ms())) {
            tracing::warn!("cannot record a prompt result: {e}");
        }
        self.fallback.complete(key, result);
    }

    fn release(&self, key: &str) {
        let digest = prompts::key_digest(key);
        if let Err(e) = self.db.with(|c| prompts::release(c, &digest)) {
            tracing::warn!("cannot release a prompt key: {e}");
        }
        self.fallback.release(key);
    }
}
