//! Every file/git tool through the real `herdr-mcp serve` binary over its Unix
//! socket, with rmcp's client: success paths, refusals, schema errors with JSON
//! pointers, and the read-only / write-root gates configured through the real
//! environment variables.

mod common;

use std::path::PathBuf;

use common::{Runtime, call_tool, call_tool_raw, git_repo};
use serde_json::{Value, json};

fn canonical(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().canonicalize().unwrap()
}

fn p(root: &std::path::Path, rel: &str) -> String {
    root.join(rel).display().to_string()
}

#[track_caller]
fn refused(payload: &Value, reason: &str) {
    assert_eq!(payload["ok"], false, "{payload}");
    assert_eq!(payload["reason"], reason, "{payload}");
}

const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tool_works_over_the_unix_socket() {
    let dir = git_repo(&[("src/lib.rs", "pub fn one() -> u32 {\n    1\n}\n"), ("README.md", "# demo\n")]);
    let root = canonical(&dir);
    std::fs::write(root.join("logo.png"), PNG).unwrap();
    let rt = Runtime::start(&[&root], &[]).await;
    let client = rt.client().await;

    let tools = client.list_all_tools().await.expect("tools/list");
    let names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    for name in [
        "herdr_inspect", "herdr_skill", "herdr_fs_read", "herdr_fs_list", "herdr_fs_grep", "herdr_fs_patch",
        "herdr_fs_image", "herdr_git", "herdr_fs_edit", "herdr_fs_write",
    ] {
        assert!(names.iter().any(|n| n == name), "{name} missing from {names:?}");
    }

    let r = call_tool(&client, "herdr_inspect", json!({})).await;
    assert_eq!(r["workstation_info"]["managed_git_roots"], json!([root.display().to_string()]), "{r}");
    assert_eq!(r["workspaces"][0]["projects"][0]["dirty"], true, "logo.png is untracked: {r}");

    let r = call_tool(&client, "herdr_skill", json!({"include_native_reference": false})).await;
    assert!(r["content"].as_str().unwrap().contains("herdr-mcp"), "{r}");

    let r = call_tool(&client, "herdr_fs_read", json!({"path": "src/lib.rs", "start_line": 2, "end_line": 2})).await;
    assert_eq!(r["content"], "    1\n", "{r}");

    let r = call_tool(&client, "herdr_fs_list", json!({"path": p(&root, ""), "recursive": true})).await;
    assert_eq!(r["count"], 4, "{r}");

    let r = call_tool(&client, "herdr_fs_grep", json!({"root": p(&root, ""), "pattern": "fn one"})).await;
    assert_eq!(r["matches"][0]["file"], p(&root, "src/lib.rs"), "{r}");

    let raw = call_tool_raw(&client, "herdr_fs_image", json!({"path": p(&root, "logo.png")})).await;
    assert_eq!(raw["content"][1]["type"], "image", "{raw}");
    assert_eq!(raw["content"][1]["mimeType"], "image/png");

    let patch = "*** Begin Patch\n*** Update File: src/lib.rs\n-    1\n+    2\n*** Add File: NOTES.md\n+note\n*** End Patch\n";
    let r = call_tool(&client, "herdr_fs_patch", json!({"root": p(&root, ""), "patch": patch, "dry_run": true})).await;
    assert_eq!(r["summary"], "M src/lib.rs\nA NOTES.md", "{r}");
    assert!(!root.join("NOTES.md").exists());
    let r = call_tool(&client, "herdr_fs_patch", json!({"root": p(&root, ""), "patch": patch})).await;
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(std::fs::read_to_string(root.join("src/lib.rs")).unwrap(), "pub fn one() -> u32 {\n    2\n}\n");

    let r = call_tool(&client, "herdr_git", json!({"root": p(&root, ""), "action": "diff"})).await;
    assert!(r["output"].as_str().unwrap().contains("+    2"), "{r}");

    let r = call_tool(&client, "herdr_fs_edit", json!({"path": p(&root, "README.md"), "old_string": "demo", "new_string": "Demo"})).await;
    assert_eq!(r["ok"], true, "{r}");
    let r = call_tool(&client, "herdr_fs_write", json!({"path": p(&root, "out.txt"), "content": "written\n"})).await;
    assert_eq!(r["created"], true, "{r}");
    assert_eq!(std::fs::read_to_string(root.join("out.txt")).unwrap(), "written\n");

    // Refusals and error codes travel as normal (non-error) results.
    let raw = call_tool_raw(&client, "herdr_fs_read", json!({"path": p(&root, ".env")})).await;
    assert_ne!(raw["isError"], true, "{raw}");
    refused(&common::payload_of(&raw), "secret_path_denied");
    let outside = call_tool(&client, "herdr_fs_read", json!({"path": "/etc/passwd"})).await;
    refused(&outside, "outside_managed_roots");
    // The gate refusals tell the model what it can do instead (spec §2.1, §2.4).
    assert!(outside["hint"].as_str().is_some_and(|h| h.contains("managed_roots")), "{outside}");
    refused(&call_tool(&client, "herdr_fs_write", json!({"path": p(&root, "out.txt"), "content": "x"})).await, "overwrite_confirmation_required");
    let r = call_tool(&client, "herdr_fs_edit", json!({"path": p(&root, "src/lib.rs"), "old_string": "    2", "new_string": "    3"})).await;
    refused(&r, "file_dirty_confirmation_required");
    let r = call_tool(&client, "herdr_fs_patch", json!({"root": p(&root, ""), "patch": "*** Begin Patch\n*** Update File: README.md\n-nope\n*** End Patch"})).await;
    assert_eq!(r["code"], "PATCH_CONTEXT_NOT_FOUND", "{r}");

    // Schema failures name every bad field by JSON pointer.
    let r = call_tool(&client, "herdr_fs_read", json!({"path": 3, "max_bytes": 0, "extra": true})).await;
    assert_eq!(r["code"], "invalid_params", "{r}");
    let pointers: Vec<&str> = r["errors"].as_array().unwrap().iter().map(|e| e["pointer"].as_str().unwrap()).collect();
    assert!(pointers.contains(&"/path") && pointers.contains(&"/max_bytes"), "{pointers:?}");
    let r = call_tool(&client, "herdr_git", json!({"root": p(&root, ""), "action": "push"})).await;
    assert_eq!(r["errors"][0]["pointer"], "/action", "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readonly_mode_from_the_environment_blocks_every_mutation() {
    let dir = git_repo(&[("a.txt", "one\n")]);
    let root = canonical(&dir);
    let rt = Runtime::start(&[&root], &[("HERDR_MCP_READONLY", "1")]).await;
    let client = rt.client().await;
    let ro = call_tool(&client, "herdr_fs_write", json!({"path": p(&root, "b.txt"), "content": "x"})).await;
    refused(&ro, "readonly_mode");
    assert!(ro["hint"].as_str().is_some_and(|h| h.contains("HERDR_MCP_READONLY")), "{ro}");
    refused(&call_tool(&client, "herdr_fs_edit", json!({"path": p(&root, "a.txt"), "old_string": "one", "new_string": "1"})).await, "readonly_mode");
    let patch = "*** Begin Patch\n*** Add File: c.txt\n+c\n*** End Patch";
    refused(&call_tool(&client, "herdr_fs_patch", json!({"root": p(&root, ""), "patch": patch})).await, "readonly_mode");
    let r = call_tool(&client, "herdr_fs_patch", json!({"root": p(&root, ""), "patch": patch, "dry_run": true})).await;
    assert_eq!(r["ok"], true, "{r}");
    let r = call_tool(&client, "herdr_inspect", json!({})).await;
    assert_eq!(r["workstation_info"]["readonly_mode"], true);
    assert_eq!(std::fs::read_to_string(root.join("a.txt")).unwrap(), "one\n");
    assert!(!root.join("b.txt").exists() && !root.join("c.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_roots_from_the_environment_limit_mutations() {
    let open = git_repo(&[("a.txt", "a\n")]);
    let locked = git_repo(&[("b.txt", "b\n")]);
    let (open_root, locked_root) = (canonical(&open), canonical(&locked));
    let write_roots = open_root.display().to_string();
    let rt = Runtime::start(&[&open_root, &locked_root], &[("HERDR_MCP_WRITE_ROOTS", write_roots.as_str())]).await;
    let client = rt.client().await;
    let r = call_tool(&client, "herdr_fs_write", json!({"path": p(&locked_root, "x.txt"), "content": "x"})).await;
    refused(&r, "root_not_whitelisted");
    assert_eq!(r["write_roots"], json!([write_roots]));
    let r = call_tool(&client, "herdr_fs_write", json!({"path": p(&open_root, "x.txt"), "content": "x"})).await;
    assert_eq!(r["ok"], true, "{r}");
    let r = call_tool(&client, "herdr_fs_read", json!({"path": p(&locked_root, "b.txt")})).await;
    assert_eq!(r["content"], "b\n", "reads stay allowed everywhere: {r}");
}
