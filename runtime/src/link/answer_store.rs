//! The link's kept answers in the runtime's state database
//! ([`crate::state::link_answers`]): the runtime's own handle for a link inside
//! `herdr-mcp serve --link`, a second connection to the same file for a
//! standalone `herdr-mcp link`. Only when that file cannot be opened are the
//! answers kept in memory alone.

use std::sync::Arc;

use crate::state::link_answers::{self, StoredAnswer};
use crate::state::{StateDb, StateError, now_ms};

/// One workstation's rows of `link_answers`.
#[derive(Clone)]
pub struct AnswerStore {
    db: Arc<StateDb>,
    workstation_id: String,
}

impl AnswerStore {
    pub fn new(db: Arc<StateDb>, workstation_id: &str) -> AnswerStore {
        AnswerStore { db, workstation_id: workstation_id.to_string() }
    }

    pub async fn keep(&self, request_id: &str, frame: &str) -> Result<(), StateError> {
        let (ws, id, frame) = (self.workstation_id.clone(), request_id.to_string(), frame.to_string());
        self.db.run(move |c| link_answers::keep(c, &ws, &id, &frame, now_ms())).await
    }

    pub async fn load(&self) -> Result<Vec<StoredAnswer>, StateError> {
        let ws = self.workstation_id.clone();
        self.db.run(move |c| link_answers::load(c, &ws, now_ms())).await
    }

    pub async fn forget(&self, request_ids: Vec<String>) -> Result<(), StateError> {
        let ws = self.workstation_id.clone();
        self.db.run(move |c| link_answers::forget(c, &ws, &request_ids)).await
    }
}
