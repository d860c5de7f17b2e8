//! Herdr integration: the socket client, the event cache, derived projects and
//! roots, the API schema, and the pieces the Herdr-backed tools share.
//!
//! Herdr is optional. Without a server on the socket every Herdr-backed tool
//! answers `herdr_unavailable` quickly (a missing socket fails at connect; a
//! socket that never answers hits its time budget).

pub mod agent_names;
pub mod cache;
pub mod client;
pub mod config;
pub mod error;
pub mod history;
pub mod inspect;
pub mod live_roots;
pub mod prompt_registry;
pub mod prompt_store_sqlite;
pub mod push_view;
pub mod roots;
pub mod schema;
pub mod snapshot;
pub mod socket_path;
pub mod topology;
pub mod utility_pane;
pub mod visibility;
pub mod workspaces;

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

pub use self::cache::EventCache;
pub use self::client::HerdrClient;
pub use self::config::{HerdrConfig, Timeouts};
pub use self::error::HerdrError;
use self::prompt_registry::{MemoryPromptStore, PromptStore};
use self::schema::SchemaCache;
use crate::push::PushBus;
use crate::tools::ToolOutput;

/// Everything the Herdr-backed tools use, shared by all calls.
pub struct HerdrService {
    pub config: HerdrConfig,
    pub client: Arc<HerdrClient>,
    pub cache: Arc<EventCache>,
    pub schema: SchemaCache,
    pub prompts: Arc<dyn PromptStore>,
    /// The policy whose managed roots follow Herdr's panes, and the home directory
    /// that never becomes one (see [`HerdrService::bind_policy`]).
    roots_target: std::sync::OnceLock<(crate::policy::Policy, Option<PathBuf>)>,
    /// The panes that utility-pane exec sessions typed their commands into.
    pub pane_sessions: utility_pane::PaneSessions,
}

impl HerdrService {
    /// Builds the service; when a push bus is given, the cache feeds it and answers
    /// its `hello` and `/push/state`.
    pub fn new(config: HerdrConfig, push: Option<Arc<PushBus>>) -> Arc<Self> {
        let client = Arc::new(HerdrClient::new(config.socket_path.clone(), config.timeouts.clone()));
        let cache = EventCache::new(Arc::clone(&client), config.visibility.clone(), push.clone());
        if let Some(bus) = &push {
            bus.set_source(cache.clone());
        }
        let schema = SchemaCache::new(config.herdr_bin.clone(), config.timeouts.schema_cli);
        Arc::new(HerdrService { config, client, cache, schema, prompts: Arc::new(MemoryPromptStore::default()),
            roots_target: std::sync::OnceLock::new(),
            pane_sessions: utility_pane::PaneSessions::default(),
        })
    }

    /// Replaces the prompt registry (e.g. with a durable one).
    pub fn with_prompt_store(self: Arc<Self>, store: Arc<dyn PromptStore>) -> Arc<Self> {
        match Arc::try_unwrap(self) {
            Ok(mut s) => {
                s.prompts = store;
                Arc::new(s)
            }
            Err(shared) => shared,
        }
    }

    /// Makes `policy`'s managed roots follow the projects of Herdr's panes once
    /// [`HerdrService::start`] runs (spec §2.1). `home` is never managed. Only the first
    /// binding counts.
    pub fn bind_policy(&self, policy: &crate::policy::Policy, home: Option<PathBuf>) {
        let _ = self.roots_target.set((policy.clone(), home));
    }

    /// Starts the event cache's background loop (and the managed-roots follower when a
    /// policy is bound) and warms the API schema cache.
    pub fn start(self: &Arc<Self>, cancel: CancellationToken) -> tokio::task::JoinHandle<()> {
        if let Some((policy, home)) = self.roots_target.get() {
            live_roots::spawn(Arc::clone(&self.cache), policy.clone(), home.clone(), cancel.clone());
        }
        let me = Arc::clone(self);
        tokio::spawn(async move {
            if let Err(why) = me.schema.get().await {
                tracing::debug!("Herdr API schema not loaded at startup: {why}");
            }
        });
        self.cache.spawn(cancel)
    }

    /// Managed roots: those derived from Herdr's panes (when the cache has a
    /// topology) merged with `configured`, deepest first.
    pub async fn managed_roots(&self, configured: &[PathBuf]) -> Vec<PathBuf> {
        let Some(topology) = self.cache.last_topology() else { return configured.to_vec() };
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let projects = roots::derive_projects(&topology, home.as_deref()).await;
        roots::merge_roots(&projects, configured)
    }
}

impl HerdrService {
    /// The target to send Herdr for an agent `target` a tool was given (see
    /// [`agent_names::resolve_target`]), or the tool's answer when it names several
    /// agents.
    pub fn agent_target(&self, target: &str) -> Result<String, ToolOutput> {
        let Some(topology) = self.cache.last_topology() else { return Ok(target.to_string()) };
        match agent_names::resolve_target(&topology, &self.config.visibility, target) {
            agent_names::Target::AsIs => Ok(target.to_string()),
            agent_names::Target::Pane(pane) => Ok(pane),
            agent_names::Target::Ambiguous(panes) => Err(ToolOutput::code(
                "agent_ambiguous",
                format!("{target} is the kind of several agents without a name; use one of their pane ids"),
                json!({"target": target, "candidates": panes, "submitted": false, "failure_phase": "resolve"}),
            )),
        }
    }
}

/// The tool result for a failed Herdr call: `herdr_unavailable` (with how to start
/// Herdr) when no server is there, else the error's own code. `extra` members are
/// added to the payload.
pub fn failure_output(err: &HerdrError, extra: Value) -> ToolOutput {
    let mut extra: Map<String, Value> = match extra {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    if err.is_unavailable() {
        extra.insert("herdr_code".into(), json!(err.code));
        extra.insert("hint".into(), json!(error::START_HERDR_HINT));
        return ToolOutput::code(error::codes::HERDR_UNAVAILABLE, err.message.clone(), Value::Object(extra));
    }
    ToolOutput::code(&err.code, err.message.clone(), Value::Object(extra))
}

/// The result for a Herdr-backed tool in a runtime built without Herdr at all.
pub fn not_configured() -> ToolOutput {
    ToolOutput::code(
        error::codes::HERDR_UNAVAILABLE,
        "this runtime has no Herdr connection configured",
        json!({"hint": error::START_HERDR_HINT}),
    )
}

// Tool futures must be Send: everything the Herdr tools share must be Send + Sync.
const _: fn() = || {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<HerdrService>();
    send_sync::<crate::push::PushBus>();
    send_sync::<crate::tools::ToolContext>();
};

/// Startup wiring: builds the push bus and the Herdr service from the environment
/// and attaches them (and Herdr as `herdr_exec`'s workspace source) to `services`.
/// The caller starts the event cache with [`HerdrService::start`] once a tokio
/// runtime runs. When Herdr's config directory cannot be found (no `HOME`, no
/// `XDG_CONFIG_HOME`), Herdr is left out, with a warning, rather than stopping the runtime.
pub fn attach(services: &mut crate::tools::Services, policy: &crate::policy::Policy) -> Option<Arc<HerdrService>> {
    let bus = Arc::new(PushBus::new(crate::push::PushConfig::default()));
    services.push = Some(Arc::clone(&bus));
    let config = match HerdrConfig::from_env() {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!("Herdr integration disabled: {e}");
            return None;
        }
    };
    let cli = config.herdr_bin.as_ref().map_or_else(|| "not found (herdr_methods and herdr_call need it)".to_string(), |p| p.display().to_string());
    tracing::info!(socket = %config.socket_path.display(), %cli, "Herdr socket");
    let mut service = HerdrService::new(config, Some(bus));
    service.bind_policy(policy, std::env::var_os("HOME").map(PathBuf::from));
    if let Some(db) = &services.state {
        service = service.with_prompt_store(Arc::new(prompt_store_sqlite::SqlitePromptStore::new(Arc::clone(db))));
    }
    services.herdr = Some(Arc::clone(&service));
    services.exec_backend = crate::exec::backend::BackendChoice::from_env();
    let fallback = crate::exec::workspaces::StandaloneWorkspaces::from_policy(policy);
    services.workspaces = Some(Arc::new(workspaces::HerdrWorkspaces::new(Arc::clone(&service), fallback)));
    Some(service)
}
