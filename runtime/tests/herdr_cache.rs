//! The event cache against the simulator: going live, following events,
//! reconnecting, falling back to the list APIs, deriving managed roots.

mod herdr_sim;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use herdr_mcp::herdr::HerdrService;
use herdr_mcp::herdr::roots::derive_projects;
use herdr_mcp::herdr::snapshot::SNAPSHOT_FALLBACK_WARNING;
use herdr_sim::HerdrSim;
use herdr_sim::harness::config;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(5);

async fn started(sim: &HerdrSim) -> (Arc<HerdrService>, CancellationToken) {
    let service = HerdrService::new(config(&sim.socket), None);
    let cancel = CancellationToken::new();
    service.start(cancel.clone());
    assert!(service.cache.wait_for(WAIT, |c| c.is_live()).await, "cache never went live");
    (service, cancel)
}

fn status_of(service: &HerdrService, pane: &str) -> Option<String> {
    let t = service.cache.live_view()?.topology;
    t.agent_for_pane(pane).and_then(|a| a["agent_status"].as_str().map(str::to_string))
}

#[tokio::test]
async fn cache_goes_live_and_follows_status_changes() {
    let sim = HerdrSim::start().await;
    sim.add_workspace("w1", "repo");
    sim.add_pane("w1", "w1:p1", "/tmp");
    sim.add_agent("w1:p1", "pi", "idle");
    let (service, cancel) = started(&sim).await;
    assert_eq!(status_of(&service, "w1:p1").as_deref(), Some("idle"));
    // One lifecycle stream, and a status stream of its own for the pane (status
    // subscriptions do not replay, spec E.3, so a new pane never renews the others).
    assert!(sim.wait_until(WAIT, |s| s.subscriber_count() == 2).await, "{} streams", sim.subscriber_count());
    let subs: Vec<Vec<serde_json::Value>> = sim
        .requests()
        .into_iter()
        .filter(|r| r["method"] == "events.subscribe")
        .map(|r| r["params"]["subscriptions"].as_array().unwrap().clone())
        .collect();
    assert_eq!(subs.len(), 2, "{subs:?}");
    assert!(subs.iter().any(|s| s.len() == 1 && s[0]["type"] == "pane.agent_status_changed" && s[0]["pane_id"] == "w1:p1"));
    assert!(subs.iter().any(|s| s.iter().any(|s| s["type"] == "pane.closed") && s.iter().all(|s| s.get("pane_id").is_none())));

    sim.set_agent_status("w1:p1", "working");
    assert!(service.cache.wait_for(WAIT, |_| status_of(&service, "w1:p1").as_deref() == Some("working")).await);
    sim.close_pane("w1:p1");
    assert!(service.cache.wait_for(WAIT, |c| c.live_view().is_some_and(|v| v.topology.pane("w1:p1").is_none())).await);
    assert!(service.cache.live_view().unwrap().topology.agents.is_empty());
    let page = service.cache.history_page(0, |_| true);
    let kinds: Vec<&str> = page.events.iter().map(|e| e.kind.as_str()).collect();
    // What changed, once each, whatever the replays: the status, the pane, its agent with it.
    assert_eq!(kinds, ["pane.agent_status_changed", "pane_closed", "pane_agent_detected"]);
    cancel.cancel();
}

#[tokio::test]
async fn cache_reconnects_and_resnapshots_after_the_stream_ends() {
    let sim = HerdrSim::start().await;
    sim.add_workspace("w1", "repo");
    sim.add_pane("w1", "w1:p1", "/tmp");
    sim.add_agent("w1:p1", "pi", "idle");
    let (service, cancel) = started(&sim).await;
    let snapshots_before = sim.count("session.snapshot");
    // The lifecycle stream and the pane's status stream.
    assert!(sim.wait_until(WAIT, |s| s.subscriber_count() == 2).await);

    // While the cache is disconnected, the agent starts working: only a fresh
    // snapshot can tell.
    sim.drop_subscribers();
    sim.set_agent_status("w1:p1", "working");
    assert!(sim.wait_until(WAIT, |s| s.count("session.snapshot") > snapshots_before && s.subscriber_count() == 2).await);
    assert!(service.cache.wait_for(WAIT, |_| status_of(&service, "w1:p1").as_deref() == Some("working")).await);
    cancel.cancel();
}

#[tokio::test]
async fn cache_uses_the_list_apis_when_the_snapshot_fails() {
    let sim = HerdrSim::start().await;
    sim.add_workspace("w1", "repo");
    sim.add_pane("w1", "w1:p1", "/tmp");
    sim.add_agent("w1:p1", "pi", "blocked");
    sim.set_snapshot_fails(true);
    let (service, cancel) = started(&sim).await;
    let view = service.cache.live_view().unwrap();
    assert_eq!(view.warnings, [SNAPSHOT_FALLBACK_WARNING]);
    assert_eq!(view.topology.agents.len(), 1);
    assert_eq!(view.topology.tabs.len(), 1, "tabs come from tab.list");
    cancel.cancel();
}

#[tokio::test]
async fn without_herdr_the_cache_stays_down_and_stops_on_cancel() {
    let dir = tempfile::tempdir().unwrap();
    let service = HerdrService::new(config(&dir.path().join("none.sock")), None);
    let cancel = CancellationToken::new();
    let handle = service.start(cancel.clone());
    assert!(service.cache.wait_for(WAIT, |c| c.last_error().is_some()).await);
    assert_eq!(service.cache.last_error().unwrap().code, "socket_missing");
    assert!(!service.cache.is_live());
    cancel.cancel();
    tokio::time::timeout(WAIT, handle).await.expect("loop ends on cancel").unwrap();
}

#[tokio::test]
async fn managed_roots_come_from_pane_and_agent_cwds() {
    let home = tempfile::tempdir().unwrap();
    let repo_a = home.path().join("a");
    let repo_b = home.path().join("b");
    let plain = home.path().join("plain");
    for d in [&repo_a, &repo_b, &plain] {
        std::fs::create_dir_all(d.join("src")).unwrap();
    }
    std::fs::create_dir(repo_a.join(".git")).unwrap();
    std::fs::create_dir(repo_b.join(".git")).unwrap();
    let s = |p: &PathBuf| p.display().to_string();

    let sim = HerdrSim::start().await;
    sim.add_workspace("w1", "one");
    sim.add_workspace("w2", "two");
    sim.add_pane("w1", "w1:p1", &s(&repo_a.join("src")));
    sim.add_pane("w1", "w1:p2", &s(&plain));
    sim.add_pane("w2", "w2:p1", &s(&repo_a));
    sim.add_pane("w2", "w2:p2", &s(&plain));
    sim.add_agent("w2:p2", "pi", "idle");
    // The agent's cwd wins over its pane's.
    sim.set_agent_cwd("w2:p2", &s(&repo_b));
    let (service, cancel) = started(&sim).await;

    let topology = service.cache.live_view().unwrap().topology;
    let projects = derive_projects(&topology, Some(home.path())).await;
    let managed: Vec<&PathBuf> = projects.iter().filter(|p| p.managed).map(|p| &p.root).collect();
    assert_eq!(managed.len(), 2, "{projects:?}");
    assert!(managed.contains(&&repo_a) && managed.contains(&&repo_b));
    let a = projects.iter().find(|p| p.root == repo_a).unwrap();
    assert_eq!(a.pane_ids, ["w1:p1", "w2:p1"]);
    assert_eq!(a.workspace_ids, ["w1", "w2"]);
    let plain_project = projects.iter().find(|p| p.root == plain).unwrap();
    assert!(!plain_project.managed && !plain_project.is_git);

    let configured = PathBuf::from("/configured/root");
    let roots = service.managed_roots(std::slice::from_ref(&configured)).await;
    assert!(roots.contains(&configured));
    assert!(roots.contains(&repo_a.canonicalize().unwrap()));
    assert!(roots.contains(&repo_b.canonicalize().unwrap()));
    // A pane at $HOME itself never makes $HOME a managed root.
    std::fs::create_dir(home.path().join(".git")).unwrap();
    let home_projects = derive_projects(&topology, Some(home.path())).await;
    let plain_now = home_projects.iter().find(|p| p.pane_ids.contains(&"w1:p2".to_string())).unwrap();
    assert_eq!(plain_now.root, home.path());
    assert!(!plain_now.managed);
    cancel.cancel();
}

#[tokio::test]
async fn cache_renews_its_subscription_and_snapshot_on_schedule() {
    let sim = HerdrSim::start().await;
    sim.add_workspace("w1", "repo");
    sim.add_pane("w1", "w1:p1", "/tmp");
    let mut cfg = config(&sim.socket);
    cfg.timeouts.resubscribe = Duration::from_millis(60);
    cfg.timeouts.resnapshot = Duration::from_millis(200);
    let service = HerdrService::new(cfg, None);
    let cancel = CancellationToken::new();
    service.start(cancel.clone());
    assert!(sim.wait_until(WAIT, |s| s.count("session.snapshot") >= 3 && s.count("events.subscribe") >= 6).await);
    // Nothing failed in between: every renewal came from the schedule, not a reconnect.
    assert!(service.cache.last_error().is_none());
    cancel.cancel();
}

#[tokio::test]
async fn a_pane_whose_process_exits_leaves_the_cache_without_any_close_event() {
    // Spec D.3: a shell that exits gives only `pane_exited`, yet the pane is gone from
    // every list; the cache must treat it as "maybe gone" and look again.
    let sim = HerdrSim::start().await;
    sim.add_workspace("w1", "repo");
    sim.add_pane("w1", "w1:p1", "/tmp");
    sim.add_pane("w1", "w1:p2", "/tmp");
    sim.add_agent("w1:p2", "claude", "idle");
    let (service, cancel) = started(&sim).await;
    assert!(sim.wait_until(WAIT, |s| s.subscriber_count() == 3).await, "a lifecycle stream and one per pane");
    let subscribed = sim.count("events.subscribe");
    sim.exit_pane("w1:p1");
    let gone = |c: &herdr_mcp::herdr::EventCache| c.live_view().is_some_and(|v| v.topology.pane("w1:p1").is_none());
    assert!(service.cache.wait_for(WAIT, gone).await, "the exited pane stayed in the cache");
    // ... and keeps following Herdr on the same lifecycle stream (a new one would replay
    // the ring again); only the gone pane's status stream ends.
    assert!(sim.wait_until(WAIT, |s| s.subscriber_count() == 2).await, "{} streams", sim.subscriber_count());
    assert_eq!(sim.count("events.subscribe"), subscribed);
    // The agent process exits: status `unknown` without an agent, and its detection is released.
    sim.remove_agent("w1:p2");
    assert!(service.cache.wait_for(WAIT, |c| c.live_view().is_some_and(|v| v.topology.agents.is_empty())).await);
    assert!(
        service
            .cache
            .wait_for(WAIT, |c| c.history_page(0, |_| true).events.iter().any(|e| e.kind == "pane_agent_detected"))
            .await
    );
    let kinds: Vec<String> = service.cache.history_page(0, |_| true).events.iter().map(|e| e.kind.clone()).collect();
    // The history says what changed (the pane is gone), not which event hinted at it.
    assert_eq!(kinds.iter().filter(|k| *k == "pane_closed").count(), 1, "{kinds:?}");
    assert!(service.cache.live_view().unwrap().topology.pane("w1:p2").is_some(), "the pane outlives its agent");
    cancel.cancel();
}

#[tokio::test]
async fn a_change_made_while_no_stream_is_open_is_not_lost() {
    // Herdr streams only what happens after a subscription is open. Here the agent
    // starts working after the cache's picture was taken but before its stream opens:
    // only another look, once the stream is open, can tell (else it stays `idle` until
    // the next scheduled re-snapshot, 30 s away by default).
    let sim = HerdrSim::start().await;
    sim.add_workspace("w1", "repo");
    sim.add_pane("w1", "w1:p1", "/tmp");
    sim.add_agent("w1:p1", "pi", "idle");
    sim.hold_replies("agent.list");
    let service = HerdrService::new(config(&sim.socket), None);
    let cancel = CancellationToken::new();
    service.start(cancel.clone());
    assert!(sim.wait_until(WAIT, |s| s.held_replies("agent.list") == 1).await, "the cache never asked for the agents");
    sim.set_agent_status("w1:p1", "working");
    sim.release_replies("agent.list");
    assert!(
        service.cache.wait_for(WAIT, |_| status_of(&service, "w1:p1").as_deref() == Some("working")).await,
        "the cache still shows {:?}",
        status_of(&service, "w1:p1")
    );
    cancel.cancel();
}
