//! rmcp's in-memory session manager with the session ids of spec §3: `ms_` and 32
//! hex digits, a SHA-256 of boot id, pid, time and a sequence number (rmcp would
//! hand out UUIDs). A random nonce drawn at start goes into the hash as well, so
//! that knowing the process and the clock is not enough to guess a live id.
//! Everything but naming a new session is rmcp's own code.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::WorkerTransport;
use rmcp::transport::streamable_http_server::session::ServerSseMessage;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, LocalSessionWorker, create_local_session,
};
use rmcp::transport::streamable_http_server::{SessionId, SessionManager};
use sha2::{Digest, Sha256};

/// Session ids start with this (spec §3).
pub const SESSION_ID_PREFIX: &str = "ms_";

pub struct SpecSessions {
    /// rmcp's manager; its `sessions` map is what the endpoint checks ids against.
    pub local: LocalSessionManager,
    boot_id: String,
    nonce: [u8; 16],
    seq: AtomicU64,
}

impl SpecSessions {
    pub fn new(local: LocalSessionManager, boot_id: &str) -> Self {
        let mut nonce = [0u8; 16];
        // Without the nonce the ids are still unique (sequence number); they are
        // only easier to guess, and an id grants nothing the bearer did not.
        if let Err(e) = getrandom::fill(&mut nonce) {
            tracing::warn!(error = %e, "no random source for session ids; they stay unique but guessable");
        }
        SpecSessions { local, boot_id: boot_id.to_string(), nonce, seq: AtomicU64::new(0) }
    }

    fn next_id(&self) -> SessionId {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let mut hash = Sha256::new();
        hash.update(format!("{}|{}|{nanos}|{seq}|", self.boot_id, std::process::id()));
        hash.update(self.nonce);
        let digest = hash.finalize();
        format!("{SESSION_ID_PREFIX}{}", hex::encode(&digest[..16])).into()
    }
}

impl SessionManager for SpecSessions {
    type Error = LocalSessionManagerError;
    type Transport = WorkerTransport<LocalSessionWorker>;

    /// rmcp's `LocalSessionManager::create_session` with our id (it keeps no
    /// event store here, as the endpoint configures none).
    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let id = self.next_id();
        let (handle, worker) = create_local_session(id.clone(), self.local.session_config.clone());
        self.local.sessions.write().await.insert(id.clone(), handle);
        Ok((id, WorkerTransport::spawn(worker)))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.local.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.local.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.local.close_session(id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.local.create_stream(id, message).await
    }

    async fn accept_message(&self, id: &SessionId, message: ClientJsonRpcMessage) -> Result<(), Self::Error> {
        self.local.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.local.create_standalone_stream(id).await
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.local.resume(id, last_event_id).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_ms_and_32_hex_digits_and_never_repeat() {
        let sessions = SpecSessions::new(LocalSessionManager::default(), "boot");
        let ids: Vec<String> = (0..1000).map(|_| sessions.next_id().to_string()).collect();
        for id in &ids {
            let hex = id.strip_prefix(SESSION_ID_PREFIX).unwrap_or_else(|| panic!("{id}"));
            assert_eq!(hex.len(), 32, "{id}");
            assert!(hex.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()), "{id}");
        }
        let unique: std::collections::HashSet<&String> = ids.iter().collect();
        assert_eq!(unique.len(), ids.len());
        // Another manager (another start) names its sessions differently.
        let other = SpecSessions::new(LocalSessionManager::default(), "boot");
        assert_ne!(other.next_id().to_string(), ids[0]);
    }
}
