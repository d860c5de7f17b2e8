//! `herdr_inspect` lists the exec sessions this runtime holds (running first, then
//! newest), so a model can find a running command again instead of restarting it.

mod exec_support;

use exec_support::{DEADLINE, Rig, poll};
use herdr_mcp::tools::inspect_exec::{COMMAND_SHOWN_CHARS, EXEC_SESSIONS_SHOWN};
use serde_json::{Value, json};

async fn inspect(rig: &Rig) -> Value {
    let out = rig.call("herdr_inspect", json!({})).await;
    assert_eq!(out["ok"], true, "{out}");
    out["workstation_info"].clone()
}

/// The description points a model at the list, which it would not look for.
#[test]
fn the_description_points_at_exec_sessions() {
    let tools = herdr_mcp::tools::ToolRegistry::standard();
    assert!(tools.spec("herdr_inspect").unwrap().description.contains("exec_sessions"));
}

#[tokio::test]
async fn running_and_ended_sessions_are_listed_running_first() {
    let rig = Rig::new();
    let info = inspect(&rig).await;
    assert_eq!(
        (info["exec_sessions"].clone(), info["exec_sessions_ready"].clone()),
        (json!([]), json!(true)),
        "{info}"
    );
    assert_eq!(info["exec_sessions_diagnostics"]["count"], 0, "{info}");

    let long = rig.start("sleep 30").await;
    let short = rig.start("exit 4").await;
    rig.wait_done(&short).await;
    let info = inspect(&rig).await;
    let listed = info["exec_sessions"].as_array().unwrap();
    let ids: Vec<&str> = listed.iter().map(|s| s["session_id"].as_str().unwrap()).collect();
    assert_eq!(ids, [long.as_str(), short.as_str()], "the running one first, though started earlier");
    assert_eq!((listed[0]["running"].clone(), listed[0]["phase"].clone()), (json!(true), json!("running")));
    assert_eq!(listed[0]["command"], "sleep 30");
    assert_eq!(listed[0]["root"], rig.root_str());
    assert_eq!((listed[1]["phase"].clone(), listed[1]["exit_code"].clone()), (json!("completed"), json!(4)));
    let diag = &info["exec_sessions_diagnostics"];
    assert_eq!(
        (diag["count"].as_u64(), diag["running"].as_u64(), diag["omitted"].as_u64()),
        (Some(2), Some(1), Some(0)),
        "{diag}"
    );

    rig.call("herdr_exec_kill", json!({"session_id": long})).await;
    rig.wait_done(&long).await;
}

/// At most EXEC_SESSIONS_SHOWN are listed, the newest; the diagnostics count the rest.
#[tokio::test]
async fn the_list_is_capped_at_its_limit() {
    let rig = Rig::new();
    let mut ids = Vec::new();
    for n in 1..=EXEC_SESSIONS_SHOWN + 1 {
        ids.push(rig.start("true").await);
        if n < EXEC_SESSIONS_SHOWN - 1 {
            continue;
        }
        // Ended sessions sort newest first: wait until all are done.
        for id in &ids {
            rig.wait_done(id).await;
        }
        let info = inspect(&rig).await;
        let listed = info["exec_sessions"].as_array().unwrap();
        let diag = &info["exec_sessions_diagnostics"];
        assert_eq!(listed.len(), n.min(EXEC_SESSIONS_SHOWN), "{n} sessions");
        assert_eq!(diag["omitted"].as_u64(), Some(n.saturating_sub(EXEC_SESSIONS_SHOWN) as u64), "{n}: {diag}");
        assert_eq!(diag["count"].as_u64(), Some(n as u64));
        if n > EXEC_SESSIONS_SHOWN {
            let shown: Vec<&str> = listed.iter().map(|s| s["session_id"].as_str().unwrap()).collect();
            assert!(!shown.contains(&ids[0].as_str()), "the oldest is the one left out");
        }
    }
}

/// Commands are shown up to COMMAND_SHOWN_CHARS characters, then cut with a mark.
#[tokio::test]
async fn long_commands_are_cut_at_their_limit() {
    let rig = Rig::new();
    let command = |len: usize| format!("true #{}", "é".repeat(len - 6));
    for (len, cut) in [(COMMAND_SHOWN_CHARS - 1, false), (COMMAND_SHOWN_CHARS, false), (COMMAND_SHOWN_CHARS + 1, true)]
    {
        let text = command(len);
        assert_eq!(text.chars().count(), len);
        let id = rig.start(&text).await;
        rig.wait_done(&id).await;
        let listed = poll(DEADLINE, || async {
            let info = inspect(&rig).await;
            info["exec_sessions"].as_array().unwrap().iter().find(|s| s["session_id"] == id.as_str()).cloned()
        })
        .await
        .unwrap();
        let shown = listed["command"].as_str().unwrap();
        if cut {
            assert_eq!(shown, format!("{}…", text.chars().take(COMMAND_SHOWN_CHARS).collect::<String>()));
            assert_eq!(listed["command_truncated"], true);
        } else {
            assert_eq!(shown, text);
            assert!(listed.get("command_truncated").is_none(), "{listed}");
        }
    }
}

#[tokio::test]
async fn without_an_exec_service_inspect_says_so() {
    let root = tempfile::tempdir().unwrap();
    let ctx = std::sync::Arc::new(herdr_mcp::tools::ToolContext::new(
        herdr_mcp::runtime_info::RuntimeInfo::new(),
        herdr_mcp::policy::Policy::for_tests(vec![root.path().to_path_buf()]),
    ));
    let out = herdr_mcp::tools::ToolRegistry::standard().call(&ctx, "herdr_inspect", Some(json!({}))).await.payload;
    let info = &out["workstation_info"];
    assert_eq!(
        (info["exec_sessions"].clone(), info["exec_sessions_ready"].clone()),
        (json!([]), json!(false)),
        "{out}"
    );
    assert_eq!(info["exec_sessions_diagnostics"]["status"], "not_available", "{out}");
}

/// herdr_skill's live block says exec works when the runtime has it.
#[tokio::test]
async fn skill_says_exec_is_available() {
    let rig = Rig::new();
    let out = rig.call("herdr_skill", json!({"include_native_reference": false})).await;
    assert_eq!(out["runtime"]["exec"], "available", "{out}");
}
