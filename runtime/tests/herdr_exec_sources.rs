//! What the Herdr integration hands to other subsystems: workspaces and busy
//! agents for `herdr_exec`, and the durable prompt registry.

mod herdr_sim;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use herdr_mcp::exec::workspaces::{StandaloneWorkspaces, WorkspaceSource};
use herdr_mcp::herdr::HerdrService;
use herdr_mcp::herdr::prompt_registry::{PromptStore, Reservation, fingerprint};
use herdr_mcp::herdr::prompt_store_sqlite::SqlitePromptStore;
use herdr_mcp::herdr::workspaces::HerdrWorkspaces;
use herdr_mcp::policy::Policy;
use herdr_mcp::state::StateDb;
use herdr_sim::HerdrSim;
use herdr_sim::harness::config;
use serde_json::json;

fn repo(parent: &std::path::Path, name: &str) -> PathBuf {
    let dir = parent.join(name);
    std::fs::create_dir_all(dir.join(".git")).unwrap();
    dir.canonicalize().unwrap()
}

#[tokio::test]
async fn herdr_workspaces_carry_pane_roots_and_keep_uncovered_configured_roots() {
    let base = tempfile::tempdir().unwrap();
    let a = repo(base.path(), "a");
    let lone = repo(base.path(), "lone");
    let sim = HerdrSim::start().await;
    sim.add_workspace("w1", "alpha");
    sim.add_pane("w1", "w1:p1", &a.display().to_string());
    sim.add_pane("w1", "w1:p2", &a.join("sub").display().to_string());
    sim.add_agent("w1:p2", "pi", "working");
    sim.add_pane("w1", "w1:p3", &a.display().to_string());
    sim.add_agent("w1:p3", "pi", "idle");
    let service = HerdrService::new(config(&sim.socket), None);
    let fallback = StandaloneWorkspaces::from_policy(&Policy::for_tests(vec![a.clone(), lone.clone()]));
    let source = HerdrWorkspaces::new(Arc::clone(&service), fallback);

    let list = source.workspaces().await;
    let ids: Vec<&str> = list.iter().map(|w| w.id.as_str()).collect();
    assert_eq!(ids, ["w1", "lone"], "a is covered by w1; lone stays standalone");
    assert_eq!(list[0].label, "alpha");
    assert_eq!(list[0].roots, std::slice::from_ref(&a));

    let busy = source.working_agents(a.clone()).await;
    assert_eq!(busy, [json!({"pane": "w1:p2", "agent": "pi"})], "only working agents inside the root");
    assert!(source.working_agents(lone.clone()).await.is_empty());

    // Herdr gone: the standalone list, nobody busy, and no long wait.
    drop(sim);
    let started = std::time::Instant::now();
    let list = source.workspaces().await;
    assert_eq!(list.iter().map(|w| w.id.as_str()).collect::<Vec<_>>(), ["a", "lone"]);
    assert!(source.working_agents(a).await.is_empty());
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[test]
fn sqlite_prompt_store_survives_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let fp = fingerprint("w1:p1", "hi", &serde_json::Value::Null);
    {
        let store = SqlitePromptStore::new(Arc::new(StateDb::open(dir.path(), "boot-1").unwrap()));
        assert_eq!(store.reserve("k", &fp), Reservation::Fresh);
        assert_eq!(store.reserve("k", &fp), Reservation::InFlight);
        store.complete("k", &json!({"ok": true, "status": "submitted"}));
        assert_eq!(store.reserve("k", "other"), Reservation::Conflict);
        assert_eq!(store.reserve("gone", &fp), Reservation::Fresh);
        store.release("gone");
    }
    let store = SqlitePromptStore::new(Arc::new(StateDb::open(dir.path(), "boot-2").unwrap()));
    assert_eq!(store.reserve("k", &fp), Reservation::Replay(json!({"ok": true, "status": "submitted"})));
    assert_eq!(store.reserve("gone", &fp), Reservation::Fresh, "a released key is free again");
}
