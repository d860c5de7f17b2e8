//! The bridge's tool catalog (spec §1.2), kept in the service worker's memory for every
//! bridged page (they all talk to the same runtime).
//!
//! When it is loaded:
//! - at worker start, eagerly;
//! - at every new bridged task (a submit) and every resume after a page load, forced: a
//!   runtime restarted meanwhile, perhaps with another contract hash, is picked up by the
//!   next task, as the reference's `refreshCatalog()` does;
//! - from the options page's status, forced, since that page reports the live runtime.
//!
//! Everything else (a page's direct call check, a page asking for the catalog) uses what is
//! cached, and loads only when nothing is. A running task checks its calls against the
//! catalog it started with (ext-core's engine), so no lookup happens inside a loop. After a
//! failed load the catalog is unknown: for 5 s lookups answer "unavailable" at once instead of
//! asking the host again; a forced load still goes through.
//!
//! This is the state alone; the service worker does the fetching with the tickets it hands out.

use serde_json::{Value, json};

use crate::mcp::{McpError, tools_of};

/// How long after a failed load lookups answer "unavailable" without asking again.
pub const FAILURE_QUIET_MS: u64 = 5_000;
/// Why a submit went out unbridged (spec §1.2).
pub const ERR_CATALOG_UNAVAILABLE: &str = "catalog-unavailable";

/// Hands a load's outcome back to the cache: loads may overlap, and only the latest started
/// load that finished may set what is cached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket(u64);

/// What a lookup found.
#[derive(Debug, Clone, PartialEq)]
pub enum Lookup {
    Ready(Vec<Value>),
    /// A load failed less than `FAILURE_QUIET_MS` ago: its failure, with the time left.
    Unavailable(McpError),
    /// Nothing usable is cached: fetch `tools/list`, then `finish` with this ticket.
    Load(Ticket),
}

#[derive(Debug, Clone, Default)]
enum State {
    #[default]
    Empty,
    Ready { tools: Vec<Value>, meta: Value, at: u64 },
    Failed { error: McpError, at: u64 },
}

#[derive(Debug, Clone, Default)]
pub struct CatalogCache {
    state: State,
    /// Loads handed out so far (the last ticket's number).
    started: u64,
    /// The ticket whose outcome is cached now.
    settled: u64,
}

impl CatalogCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// The cached catalog, the recent failure, or a load to make.
    pub fn lookup(&mut self, now: u64) -> Lookup {
        match &self.state {
            State::Ready { tools, .. } => Lookup::Ready(tools.clone()),
            State::Failed { error, at } if now.saturating_sub(*at) < FAILURE_QUIET_MS => {
                let left = FAILURE_QUIET_MS - now.saturating_sub(*at);
                Lookup::Unavailable(McpError {
                    code: error.code.clone(),
                    detail: format!("{} (the catalog is not asked for again for {left} ms)", error.detail),
                })
            }
            _ => Lookup::Load(self.begin()),
        }
    }

    /// A load that ignores both the cached catalog and a recent failure.
    pub fn refresh(&mut self) -> Ticket {
        self.begin()
    }

    fn begin(&mut self) -> Ticket {
        self.started += 1;
        Ticket(self.started)
    }

    /// Records the outcome of the load `ticket` (`result` is the `tools/list` result) and
    /// returns that load's catalog. An outcome older than the cached one is returned to its
    /// caller but not cached.
    pub fn finish(&mut self, ticket: Ticket, result: Result<Value, McpError>, now: u64) -> Result<Vec<Value>, McpError> {
        let outcome = result.and_then(|r| Ok((tools_of(&r)?, r.get("_meta").cloned().unwrap_or(Value::Null))));
        if ticket.0 > self.settled {
            self.settled = ticket.0;
            self.state = match &outcome {
                Ok((tools, meta)) => State::Ready { tools: tools.clone(), meta: meta.clone(), at: now },
                Err(error) => State::Failed { error: error.clone(), at: now },
            };
        }
        outcome.map(|(tools, _)| tools)
    }

    /// For the diagnostics: what is cached, since when, and how many loads were started.
    pub fn describe(&self) -> Value {
        let mut facts = match &self.state {
            State::Empty => json!({ "state": "empty" }),
            State::Ready { tools, meta, at } => {
                let names: Vec<&str> = tools.iter().filter_map(|t| t.get("name").and_then(Value::as_str)).collect();
                json!({ "state": "ready", "count": tools.len(), "names": names, "meta": meta, "at": at })
            }
            State::Failed { error, at } => json!({ "state": "failed", "error": error.code, "detail": error.detail, "at": at }),
        };
        facts["loads"] = json!(self.started);
        facts
    }
}

/// The answer to a submit: sent bridged with a catalog, else unbridged with the reason.
pub fn submit_answer(catalog: Result<&[Value], &McpError>) -> Value {
    match catalog {
        Ok(_) => json!({ "ok": true, "bridged": true }),
        Err(e) => json!({ "ok": true, "bridged": false, "error": ERR_CATALOG_UNAVAILABLE, "detail": format!("{}: {}", e.code, e.detail) }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(names: &[&str]) -> Result<Value, McpError> {
        let tools: Vec<Value> = names.iter().map(|n| json!({ "name": n, "inputSchema": { "type": "object" } })).collect();
        Ok(json!({ "tools": tools, "_meta": { "herdr": { "contract_hash": format!("sha256:{}", names.join("-")) } } }))
    }

    fn down() -> Result<Value, McpError> {
        Err(McpError { code: "extension_ipc_unavailable".into(), detail: "the runtime socket is missing".into() })
    }

    fn names(tools: &[Value]) -> Vec<&str> {
        tools.iter().map(|t| t["name"].as_str().unwrap()).collect()
    }

    fn load(cache: &mut CatalogCache, now: u64) -> Ticket {
        match cache.lookup(now) {
            Lookup::Load(ticket) => ticket,
            other => panic!("expected a load at {now}, got {other:?}"),
        }
    }

    #[test]
    fn loaded_once_then_served_from_memory() {
        let mut cache = CatalogCache::new();
        let ticket = load(&mut cache, 0);
        assert_eq!(names(&cache.finish(ticket, listed(&["a", "b"]), 10).unwrap()), ["a", "b"]);
        for now in [11, 5_000, 3_600_000] {
            assert!(matches!(cache.lookup(now), Lookup::Ready(t) if names(&t) == ["a", "b"]), "{now}");
        }
        assert_eq!(cache.describe()["loads"], 1);
        assert_eq!(cache.describe()["meta"]["herdr"]["contract_hash"], "sha256:a-b");
    }

    #[test]
    fn a_failure_is_answered_at_once_for_5_s_then_asked_again() {
        let mut cache = CatalogCache::new();
        let ticket = load(&mut cache, 1_000);
        assert_eq!(cache.finish(ticket, down(), 1_200).unwrap_err().code, "extension_ipc_unavailable");
        for now in [1_200, 3_000, 6_199] {
            match cache.lookup(now) {
                Lookup::Unavailable(e) => {
                    assert_eq!(e.code, "extension_ipc_unavailable");
                    assert!(e.detail.contains(&format!("{} ms", 6_200 - now)), "{}", e.detail);
                }
                other => panic!("at {now}: {other:?}"),
            }
        }
        assert_eq!(cache.describe()["loads"], 1, "no load during the quiet time");
        let again = load(&mut cache, 6_200);
        cache.finish(again, listed(&["a"]), 6_300).unwrap();
        assert!(matches!(cache.lookup(6_301), Lookup::Ready(_)));
    }

    #[test]
    fn a_failed_reload_forgets_the_old_catalog() {
        let mut cache = CatalogCache::new();
        let first = load(&mut cache, 0);
        cache.finish(first, listed(&["a"]), 0).unwrap();
        let forced = cache.refresh();
        assert!(cache.finish(forced, down(), 100).is_err());
        assert!(matches!(cache.lookup(200), Lookup::Unavailable(_)), "the runtime is gone: no stale catalog");
        // A malformed answer is a failure like any other.
        let forced = cache.refresh();
        assert_eq!(cache.finish(forced, Ok(json!({})), 300).unwrap_err().code, "mcp-malformed-response");
        assert_eq!(cache.describe()["state"], "failed");
    }

    #[test]
    fn a_forced_refresh_ignores_the_cache_and_the_quiet_time() {
        let mut cache = CatalogCache::new();
        let first = load(&mut cache, 0);
        cache.finish(first, listed(&["a"]), 0).unwrap();
        // Another runtime (another contract) behind the same socket: the next task sees it.
        let forced = cache.refresh();
        assert_eq!(names(&cache.finish(forced, listed(&["a", "c"]), 50).unwrap()), ["a", "c"]);
        assert!(matches!(cache.lookup(60), Lookup::Ready(t) if names(&t) == ["a", "c"]));
        let forced = cache.refresh();
        cache.finish(forced, down(), 100).unwrap_err();
        let forced = cache.refresh();
        assert_eq!(names(&cache.finish(forced, listed(&["a"]), 101).unwrap()), ["a"], "1 ms after a failure");
        assert_eq!(cache.describe()["loads"], 4);
    }

    #[test]
    fn an_older_load_finishing_last_does_not_overwrite_a_newer_one() {
        let mut cache = CatalogCache::new();
        let eager = load(&mut cache, 0);
        let forced = cache.refresh();
        cache.finish(forced, listed(&["new"]), 10).unwrap();
        // Its own caller still gets what it fetched.
        assert_eq!(names(&cache.finish(eager, listed(&["old"]), 20).unwrap()), ["old"]);
        assert!(matches!(cache.lookup(30), Lookup::Ready(t) if names(&t) == ["new"]));
        let late_failure = cache.refresh();
        let newest = cache.refresh();
        cache.finish(newest, listed(&["newest"]), 40).unwrap();
        cache.finish(late_failure, down(), 50).unwrap_err();
        assert!(matches!(cache.lookup(60), Lookup::Ready(t) if names(&t) == ["newest"]));
    }

    #[test]
    fn submit_answers() {
        let error = McpError { code: "native-host-not-installed".into(), detail: "no host".into() };
        assert_eq!(submit_answer(Ok(&[])), json!({ "ok": true, "bridged": true }));
        assert_eq!(
            submit_answer(Err(&error)),
            json!({ "ok": true, "bridged": false, "error": "catalog-unavailable", "detail": "native-host-not-installed: no host" })
        );
    }
}
