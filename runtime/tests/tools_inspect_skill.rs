//! `herdr_inspect` (standalone) and `herdr_skill`, and the catalog these tools form.

mod tools_support;

use herdr_mcp::tools::ToolRegistry;
use serde_json::{Value, json};
use tools_support::*;

/// The catalog is exactly the 18 tools of spec §1, in its order; every entry
/// forbids tasks, only herdr_skill carries annotations (readOnlyHint), and
/// every schema but herdr_inspect's is a closed draft-07 object.
#[test]
fn catalog_order_schemas_and_annotations() {
    let reg = ToolRegistry::standard();
    let names: Vec<String> = reg.catalog().iter().map(|t| t["name"].as_str().unwrap().to_string()).collect();
    let spec_order = [
        "herdr_methods", "herdr_inspect", "herdr_skill", "herdr_call", "herdr_since", "herdr_fs_read", "herdr_fs_list",
        "herdr_fs_grep", "herdr_fs_patch", "herdr_fs_image", "herdr_git", "herdr_exec_start", "herdr_exec_read",
        "herdr_exec_kill", "herdr_exec", "herdr_fs_edit", "herdr_fs_write", "herdr_prompt",
    ];
    assert_eq!(names, spec_order);
    for tool in reg.catalog() {
        let name = tool["name"].as_str().unwrap();
        assert_eq!(tool["execution"], json!({"taskSupport": "forbidden"}), "{name}");
        let annotations = if name == "herdr_skill" { json!({"readOnlyHint": true}) } else { Value::Null };
        assert_eq!(tool.get("annotations").cloned().unwrap_or(Value::Null), annotations, "{name}");
        let schema = &tool["inputSchema"];
        assert_eq!(schema["type"], "object");
        if name == "herdr_inspect" {
            assert_eq!(schema, &json!({"type": "object", "properties": {}}));
        } else {
            assert_eq!(schema["$schema"], "http://json-schema.org/draft-07/schema#", "{name}");
            assert_eq!(schema["additionalProperties"], false, "{name}");
        }
        assert!(tool["description"].as_str().unwrap().len() > 100, "{name} needs a helpful description");
    }
}

#[test]
fn inspect_lists_one_workspace_per_root_with_git_state() {
    let clean = Repo::with_files(&[("a.txt", "a\n")]);
    let dirty = Repo::with_files(&[("b.txt", "b\n")]);
    dirty.write("b.txt", "changed\n");
    dirty.write("new.txt", "n\n");
    let policy = herdr_mcp::policy::Policy::for_tests(vec![clean.root.clone(), dirty.root.clone()])
        .with_readonly(true)
        .with_write_roots(Some(vec![dirty.root.clone()]));
    let r = call(&ctx(policy), "herdr_inspect", json!({}));
    assert_eq!(r["ok"], true, "{r}");
    let ws = r["workspaces"].as_array().unwrap();
    assert_eq!(ws.len(), 2);
    let project = |root: &std::path::Path| -> Value {
        ws.iter().map(|w| w["projects"][0].clone()).find(|p| p["root"] == root.display().to_string()).unwrap()
    };
    let c = project(&clean.root);
    assert_eq!((c["dirty"].clone(), c["changed_files"].clone(), c["vcs"].clone(), c["managed"].clone()), (json!(false), json!(0), json!("git"), json!(true)));
    let d = project(&dirty.root);
    assert_eq!((d["dirty"].clone(), d["changed_files"].clone()), (json!(true), json!(2)));
    let info = &r["workstation_info"];
    assert_eq!(info["server_name"], "herdr-mcp");
    assert_eq!(info["readonly_mode"], true);
    assert_eq!(info["write_roots"], json!([dirty.root.display().to_string()]));
    assert_eq!(info["managed_git_roots"].as_array().unwrap().len(), 2);
    assert_eq!(info["exec_environment"]["path_has"]["git"], true);
    assert_eq!(r["herdr"]["available"], false);
    assert_eq!(r["build"]["runtime"], "rust");
    assert!(r["contract"]["hash"].as_str().unwrap().starts_with("sha256:"));
    // tabs and panes are lists of ids, as with Herdr, empty without it.
    assert!(ws.iter().all(|w| w["tabs"] == json!([]) && w["panes"] == json!([])), "{r}");
    // Workspace ids are the directory names.
    let ids: Vec<&str> = ws.iter().map(|w| w["id"].as_str().unwrap()).collect();
    assert!(ids.contains(&clean.root.file_name().unwrap().to_str().unwrap()));
}

#[test]
fn inspect_of_a_single_root() {
    let repo = Repo::with_files(&[]);
    let r = call(&repo.ctx(), "herdr_inspect", json!({}));
    assert_eq!(r["workspaces"][0]["projects"][0]["root"], repo.root.display().to_string());
}

#[test]
fn skill_returns_bundled_guidance_and_live_identity() {
    let repo = Repo::with_files(&[]);
    let ctx = repo.ctx();
    let r = call(&ctx, "herdr_skill", json!({}));
    assert_eq!(r["ok"], true, "{r}");
    let content = r["content"].as_str().unwrap();
    assert!(content.starts_with("---\nname: herdr-mcp\n"), "{content}");
    assert!(content.contains("Live herdr-mcp runtime context"));
    assert!(content.contains("# Coordinating agents in Herdr panes"));
    assert_eq!(r["bytes"], content.len());
    assert_eq!(r["project_skill"]["origin"], "bundled");
    assert_eq!(r["native_reference"]["origin"], "bundled");
    assert_eq!(r["native_reference"]["sha256"].as_str().unwrap().len(), 64);
    let hash = r["runtime"]["contract"]["hash"].as_str().unwrap();
    let expected = herdr_mcp::contract::contract_hash(&ToolRegistry::standard().catalog()).unwrap();
    assert_eq!(hash, expected);
    assert_eq!(r["runtime"]["contract"]["epoch"], herdr_mcp::contract::CONTRACT_EPOCH);
    assert!(content.contains(hash), "the live block must carry the hash");
    // Without Herdr and exec services the block says both are missing.
    assert!(r["runtime"]["herdr"].as_str().unwrap().starts_with("unavailable"), "{r}");
    assert!(r["runtime"]["exec"].as_str().unwrap().starts_with("unavailable"), "{r}");
    let r = call(&ctx, "herdr_skill", json!({"include_native_reference": false, "refresh": true}));
    assert!(r.get("native_reference").is_none());
    assert!(!r["content"].as_str().unwrap().contains("Coordinating agents"));
    assert_code(&call(&ctx, "herdr_skill", json!({"refresh": "yes"})), "invalid_params");
}
