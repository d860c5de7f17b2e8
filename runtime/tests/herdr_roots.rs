//! Managed roots that follow Herdr (spec §2.1): a project a pane works in becomes
//! readable through the file tools while the pane exists, and stops being so when
//! the pane goes; `/` and `$HOME` never become roots; read-only mode and write roots
//! still govern the new roots.

mod herdr_sim;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use herdr_mcp::herdr::HerdrService;
use herdr_mcp::policy::Policy;
use herdr_mcp::runtime_info::RuntimeInfo;
use herdr_mcp::tools::ToolContext;
use herdr_sim::HerdrSim;
use herdr_sim::harness::{call, config};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(5);

struct Rig {
    sim: HerdrSim,
    service: Arc<HerdrService>,
    ctx: Arc<ToolContext>,
    cancel: CancellationToken,
    /// A configured root (inside the temp dir).
    configured: PathBuf,
    /// A git repo outside every configured root.
    outside: PathBuf,
    /// Stands in for `$HOME`: itself a git repo, as a dotfiles home is.
    home: PathBuf,
    _tmp: tempfile::TempDir,
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

async fn rig(adjust: impl FnOnce(Policy, &Path) -> Policy) -> Rig {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let configured = base.join("configured");
    let outside = base.join("elsewhere/repo");
    let home = base.join("home");
    for d in [&configured, &outside.join("src"), &home.join("notes")] {
        std::fs::create_dir_all(d).unwrap();
    }
    for repo in [&configured, &outside, &home] {
        std::fs::create_dir(repo.join(".git")).unwrap();
    }
    std::fs::write(outside.join("src/lib.rs"), "pub fn outside() {}\n").unwrap();
    std::fs::write(home.join("notes/todo.txt"), "private\n").unwrap();

    let sim = HerdrSim::start().await;
    sim.add_workspace("w1", "one");
    sim.add_pane("w1", "w1:p1", &s(&configured));
    let policy = adjust(Policy::for_tests(vec![configured.clone()]), &configured);
    let mut ctx = ToolContext::new(RuntimeInfo::new(), policy);
    let service = HerdrService::new(config(&sim.socket), None);
    service.bind_policy(&ctx.policy, Some(home.clone()));
    ctx.services.herdr = Some(Arc::clone(&service));
    let cancel = CancellationToken::new();
    service.start(cancel.clone());
    assert!(service.cache.wait_for(WAIT, |c| c.is_live()).await, "cache goes live");
    Rig { sim, service, ctx: Arc::new(ctx), cancel, configured, outside, home, _tmp: tmp }
}

/// Waits (event-driven, bounded) until the managed roots satisfy `pred`.
async fn roots_until(policy: &Policy, pred: impl Fn(&[PathBuf]) -> bool) -> Vec<PathBuf> {
    let mut rx = policy.roots_changes();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let roots = policy.managed_roots().to_vec();
        if pred(&roots) {
            return roots;
        }
        if tokio::time::timeout_at(deadline, rx.changed()).await.is_err() {
            panic!("managed roots never reached the expected state: {roots:?}");
        }
    }
}

async fn read(rig: &Rig, path: &Path) -> Value {
    call(&rig.ctx, "herdr_fs_read", json!({"path": s(path)})).await.payload
}

#[tokio::test]
async fn a_pane_outside_the_configured_roots_manages_its_project_until_it_closes() {
    let rig = rig(|p, _| p).await;
    let file = rig.outside.join("src/lib.rs");
    let before = read(&rig, &file).await;
    assert_eq!(before["reason"], "outside_managed_roots", "{before}");

    rig.sim.add_pane("w1", "w1:p2", &s(&rig.outside.join("src")));
    let roots = roots_until(&rig.ctx.policy, |r| r.contains(&rig.outside)).await;
    assert!(roots.contains(&rig.configured), "configured roots stay: {roots:?}");

    let got = read(&rig, &file).await;
    assert_eq!(got["ok"], true, "{got}");
    assert_eq!(got["root"], s(&rig.outside));
    assert!(got["content"].as_str().unwrap().contains("outside"));
    let listed = call(&rig.ctx, "herdr_fs_list", json!({"path": s(&rig.outside)})).await.payload;
    assert_eq!(listed["ok"], true, "{listed}");

    let inspect = call(&rig.ctx, "herdr_inspect", json!({})).await.payload;
    let managed: Vec<&str> = inspect["workstation_info"]["managed_git_roots"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(managed.contains(&s(&rig.outside).as_str()), "{inspect}");
    assert!(managed.contains(&s(&rig.configured).as_str()), "{inspect}");

    rig.sim.close_pane("w1:p2");
    roots_until(&rig.ctx.policy, |r| !r.contains(&rig.outside)).await;
    let after = read(&rig, &file).await;
    assert_eq!(after["reason"], "outside_managed_roots", "{after}");
    let managed = after["managed_roots"].as_array().unwrap();
    assert_eq!(managed, &vec![json!(s(&rig.configured))]);
}

#[tokio::test]
async fn an_agent_cwd_counts_and_herdr_going_away_leaves_only_configured_roots() {
    let rig = rig(|p, _| p).await;
    rig.sim.add_pane("w1", "w1:p2", &s(&rig.configured));
    rig.sim.add_agent("w1:p2", "pi", "idle");
    // The agent's cwd wins over its pane's; it is read on the next snapshot.
    rig.sim.set_agent_cwd("w1:p2", &s(&rig.outside));
    rig.sim.drop_subscribers();
    roots_until(&rig.ctx.policy, |r| r.contains(&rig.outside)).await;
    assert_eq!(read(&rig, &rig.outside.join("src/lib.rs")).await["ok"], true);

    // Herdr stops: after the cache loses it, only configured roots are managed.
    rig.cancel.cancel();
    roots_until(&rig.ctx.policy, |r| r == [rig.configured.clone()]).await;
    assert_eq!(read(&rig, &rig.outside.join("src/lib.rs")).await["reason"], "outside_managed_roots");
}

#[tokio::test]
async fn filesystem_root_and_home_never_become_managed() {
    let rig = rig(|p, _| p).await;
    rig.sim.add_pane("w1", "w1:p2", "/");
    rig.sim.add_pane("w1", "w1:p3", &s(&rig.home));
    // Below home, without a repo of its own: its git top-level is home itself.
    rig.sim.add_pane("w1", "w1:p4", &s(&rig.home.join("notes")));
    // A marker pane that does become a root proves the others were considered.
    rig.sim.add_pane("w1", "w1:p5", &s(&rig.outside));
    let roots = roots_until(&rig.ctx.policy, |r| r.contains(&rig.outside)).await;
    assert!(!roots.contains(&PathBuf::from("/")), "{roots:?}");
    assert!(!roots.contains(&rig.home), "{roots:?}");
    let got = read(&rig, &rig.home.join("notes/todo.txt")).await;
    assert_eq!(got["reason"], "outside_managed_roots", "{got}");
    let got = read(&rig, Path::new("/etc/hostname")).await;
    assert_eq!(got["reason"], "outside_managed_roots", "{got}");
    assert!(rig.service.cache.is_live());
}

#[tokio::test]
async fn readonly_mode_and_write_roots_still_govern_derived_roots() {
    // Write roots name only the configured root: a derived root is readable, not writable.
    let wr = rig(|p, configured| p.with_write_roots(Some(vec![configured.to_path_buf()]))).await;
    wr.sim.add_pane("w1", "w1:p2", &s(&wr.outside));
    roots_until(&wr.ctx.policy, |r| r.contains(&wr.outside)).await;
    let target = wr.outside.join("src/new.txt");
    let out = call(&wr.ctx, "herdr_fs_write", json!({"path": s(&target), "content": "x"})).await.payload;
    assert_eq!(out["reason"], "root_not_whitelisted", "{out}");
    assert!(!target.exists());
    let ok = call(&wr.ctx, "herdr_fs_write", json!({"path": s(&wr.configured.join("a.txt")), "content": "x"})).await.payload;
    assert_eq!(ok["ok"], true, "{ok}");

    let ro = rig(|p, _| p.with_readonly(true)).await;
    ro.sim.add_pane("w1", "w1:p2", &s(&ro.outside));
    roots_until(&ro.ctx.policy, |r| r.contains(&ro.outside)).await;
    assert_eq!(read(&ro, &ro.outside.join("src/lib.rs")).await["ok"], true);
    let out = call(&ro.ctx, "herdr_fs_write", json!({"path": s(&ro.outside.join("src/new.txt")), "content": "x"})).await.payload;
    assert_eq!(out["reason"], "readonly_mode", "{out}");
}
