//! How often the mutation gate runs for one patch, seen through a counting gate.

use std::cell::Cell;

use super::*;
use crate::policy::Policy;
use crate::runtime_info::RuntimeInfo;

const THREE_FILES: &str = "*** Begin Patch\n*** Add File: new.txt\n+n\n*** Update File: a.txt\n@@\n-a\n+A\n*** Delete File: b.txt\n*** End Patch\n";

fn project() -> (tempfile::TempDir, PathBuf, ToolContext) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join("a.txt"), "a\n").unwrap();
    std::fs::write(root.join("b.txt"), "b\n").unwrap();
    let ctx = ToolContext::new(RuntimeInfo::new(), Policy::for_tests(vec![root.clone()]));
    (dir, root, ctx)
}

/// Three files of one root: one gate check. (Before, one per file.)
#[test]
fn the_gate_runs_once_for_a_patch_of_one_root() {
    let (_dir, root, ctx) = project();
    let runs = Cell::new(0);
    let check = |r: &Path| {
        assert_eq!(r, root);
        runs.set(runs.get() + 1);
        Ok(())
    };
    let gate = Gate::new(&ctx, &root, Some(&check));
    let planned = plan(&gate, &parse(THREE_FILES).unwrap()).unwrap_or_else(|out| panic!("{}", out.payload));
    assert_eq!(planned.changes.len(), 3);
    assert_eq!(runs.get(), 1);
}

/// A refusing gate refuses the patch at its first file, with the gate's own
/// reason, and is not asked again.
#[test]
fn a_refusing_gate_refuses_the_patch_once() {
    let (_dir, root, ctx) = project();
    let runs = Cell::new(0);
    let check = |r: &Path| {
        runs.set(runs.get() + 1);
        Err(Refusal::new("root_not_whitelisted", "not whitelisted", json!({"root": r.display().to_string()})))
    };
    let gate = Gate::new(&ctx, &root, Some(&check));
    let Err(out) = plan(&gate, &parse(THREE_FILES).unwrap()) else { panic!("the patch was planned") };
    assert_eq!(out.payload["reason"], "root_not_whitelisted", "{}", out.payload);
    assert_eq!(runs.get(), 1);
}

/// dry_run has no gate at all.
#[test]
fn without_a_gate_nothing_is_checked() {
    let (_dir, root, ctx) = project();
    let gate = Gate::new(&ctx, &root, None);
    assert_eq!(plan(&gate, &parse(THREE_FILES).unwrap()).map(|p| p.changes.len()).ok(), Some(3));
}
