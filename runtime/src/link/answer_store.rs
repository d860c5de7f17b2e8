//! The link's kept answers in the runtime's state database
//! ([`crate::state::link_answers`]): the runtime's own handle for a link inside
//! `herdr-mcp serve --link`, a second connection to the same file for a
//! standalone `herdr-mcp link`. Only when that file cannot be opened are the
//! answers kept in memory alone.

use std::sync::Arc;

use super::holder_lock::{self, HolderKind, HolderLock, HolderLockError};
use crate::state::link_answers::{self, StoredAnswer};
use crate::state::{StateDb, StateError, now_ms};

/// The state database claimed by this process for one workstation's link: the
/// only way to hand a link its database, so no link keeps answers there
/// without first holding the workstation's [`holder_lock`].
pub struct ClaimedState {
    db: Arc<StateDb>,
    workstation_id: String,
    _lock: HolderLock,
}

impl ClaimedState {
    /// Locks `workstation_id`'s link in the directory of `db`, or says who holds it.
    pub fn claim(db: Arc<StateDb>, workstation_id: &str, kind: HolderKind) -> Result<ClaimedState, HolderLockError> {
        let dir = db.path().parent().unwrap_or_else(|| std::path::Path::new("."));
        let lock = holder_lock::acquire(dir, workstation_id, kind)?;
        Ok(ClaimedState { db, workstation_id: workstation_id.to_string(), _lock: lock })
    }

    pub fn db_path(&self) -> &std::path::Path {
        self.db.path()
    }

    pub fn workstation_id(&self) -> &str {
        &self.workstation_id
    }

    pub fn store(&self) -> AnswerStore {
        AnswerStore::new(Arc::clone(&self.db), &self.workstation_id)
    }
}

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
