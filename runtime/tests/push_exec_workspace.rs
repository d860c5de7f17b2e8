//! `exec_completed` names the workspace a command ran for, so that a chat bound to a
//! workspace is woken by its own commands: the workspace herdr_exec was given, else
//! the one Herdr workspace whose projects include the session's root.

mod exec_support;
mod herdr_sim;

use std::sync::Arc;
use std::time::Duration;

use exec_support::Rig;
use herdr_mcp::exec::ExitReport;
use herdr_mcp::herdr::HerdrService;
use herdr_mcp::push::{Delivery, Filter, PushBus, PushConfig, PushEvent, Subscription, kinds};
use herdr_sim::HerdrSim;
use herdr_sim::harness::config;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(10);

/// The next `exec_completed` for `session_id` (other events are skipped).
async fn completed(sub: &Subscription, session_id: &str) -> PushEvent {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        match tokio::time::timeout_at(deadline, sub.next()).await.expect("exec_completed within the deadline") {
            Delivery::Event(e) if e.kind == kinds::EXEC_COMPLETED && e.data["session_id"] == session_id => return e,
            _ => {}
        }
    }
}

fn filter(ws: &str) -> Filter {
    Filter { workspace: Some(ws.into()), pane: None }
}

#[tokio::test]
async fn herdr_exec_names_its_workspace_without_herdr() {
    let rig = Rig::new();
    let bus = Arc::new(PushBus::new(PushConfig::default()));
    bus.follow_exec(&rig.exec);
    let mine = bus.subscribe(filter("proj"));
    let other = bus.subscribe(filter("elsewhere"));
    // Announced because the call gave up waiting (exec_timeout) while the command went on.
    let out = rig.call("herdr_exec", json!({"workspace": "proj", "command": "sleep 0.3; exit 4", "timeout_ms": 1})).await;
    assert_eq!(out["code"], "exec_timeout", "{out}");
    let id = out["session_id"].as_str().unwrap().to_string();
    let e = completed(&mine, &id).await;
    assert_eq!((e.workspace.as_deref(), &e.data["workspace"], &e.data["exit_code"]), (Some("proj"), &json!("proj"), &json!(4)));
    assert_eq!(e.data["root"], rig.root_str());
    assert!(other.try_next().is_none(), "another workspace's filter does not see it");
}

#[tokio::test]
async fn a_herdr_exec_answered_in_its_reply_is_not_announced() {
    let rig = Rig::new();
    let bus = Arc::new(PushBus::new(PushConfig::default()));
    bus.follow_exec(&rig.exec);
    let sub = bus.subscribe(filter("proj"));
    let quiet = rig.call("herdr_exec", json!({"workspace": "proj", "command": "exit 4"})).await;
    assert_eq!(quiet["execution"]["exit_code"], 4, "{quiet}");
    let quiet_id = quiet["session_id"].as_str().unwrap().to_string();
    // Sessions end in order here, so the next announced end is the timed-out one: had the
    // answered command been announced, its event would come first.
    let out = rig.call("herdr_exec", json!({"workspace": "proj", "command": "sleep 0.2; exit 5", "timeout_ms": 1})).await;
    let loud_id = out["session_id"].as_str().unwrap().to_string();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        match tokio::time::timeout_at(deadline, sub.next()).await.expect("exec_completed within the deadline") {
            Delivery::Event(e) if e.kind == kinds::EXEC_COMPLETED => {
                assert_ne!(e.data["session_id"], quiet_id.as_str(), "the answered herdr_exec was announced");
                assert_eq!(e.data["session_id"], loud_id.as_str());
                break;
            }
            _ => {}
        }
    }
}

#[tokio::test]
async fn a_session_started_by_root_gets_the_workspace_whose_project_it_is() {
    let rig = Rig::new();
    std::fs::create_dir(rig.root.join(".git")).unwrap();
    let sim = HerdrSim::start().await;
    sim.add_workspace("w1", "proj");
    sim.add_pane("w1", "w1:p1", &rig.root_str());
    sim.add_workspace("w2", "other");
    sim.add_pane("w2", "w2:p1", "/tmp");
    let bus = Arc::new(PushBus::new(PushConfig::default()));
    let service = HerdrService::new(config(&sim.socket), Some(Arc::clone(&bus)));
    let cancel = CancellationToken::new();
    service.start(cancel.clone());
    assert!(service.cache.wait_for(WAIT, |c| c.is_live()).await);
    bus.follow_exec(&rig.exec);
    let w1 = bus.subscribe(filter("w1"));
    let w2 = bus.subscribe(filter("w2"));

    // herdr_exec_start names only a root: w1 is the one workspace working in it.
    let id = rig.start("true").await;
    let e = completed(&w1, &id).await;
    assert_eq!(e.workspace.as_deref(), Some("w1"));
    assert_eq!(e.data["workspace"], "w1");
    assert!(w2.try_next().is_none());

    // An explicit workspace wins over what the root suggests.
    let s = rig.exec.start(&rig.root, &rig.root, "true", Some("w2"), ExitReport::Announced).await.unwrap();
    assert_eq!(completed(&w2, &s.id).await.workspace.as_deref(), Some("w2"));

    // Open in two workspaces: the event reaches both filters and lists them.
    sim.add_pane("w2", "w2:p2", &rig.root_str());
    assert!(service.cache.wait_for(WAIT, |c| c.last_topology().is_some_and(|t| t.pane_ids().len() == 3)).await);
    let id = rig.start("true").await;
    let e1 = completed(&w1, &id).await;
    let e2 = completed(&w2, &id).await;
    assert_eq!(e1.seq, e2.seq);
    assert_eq!(e1.workspace, None);
    assert_eq!(e1.data["workspaces"], json!(["w1", "w2"]));
    assert_eq!(e1.data.get("workspace"), None::<&Value>);
    cancel.cancel();
}
