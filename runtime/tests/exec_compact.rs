//! Compaction of complete, successful output (spec §1.15) through herdr_exec_read and
//! herdr_exec, at its limits: 80 lines / 8192 bytes are left alone, one more is not.

mod exec_support;

use exec_support::Rig;
use serde_json::{Value, json};

/// `seq`-style numbered lines, as a shell loop (portable `/bin/sh`).
fn lines_cmd(n: usize) -> String {
    format!("i=1; while [ $i -le {n} ]; do echo line $i; i=$((i+1)); done")
}

async fn finished(rig: &Rig, command: &str) -> String {
    let id = rig.start(command).await;
    rig.wait_done(&id).await;
    id
}

#[tokio::test]
async fn eighty_lines_stay_whole_and_eighty_one_are_compacted_with_the_omitted_range() {
    let rig = Rig::new();
    let at = finished(&rig, &lines_cmd(80)).await;
    let r = rig.read(&at, "stdout", 0, 65_536).await;
    assert_eq!(r["compacted"], Value::Null, "{r}");
    assert_eq!(r["text"].as_str().unwrap().lines().count(), 80);

    let over = finished(&rig, &lines_cmd(81)).await;
    let r = rig.read(&over, "stdout", 0, 65_536).await;
    assert_eq!(r["compacted"], true, "{r}");
    assert_eq!(r["counts"]["lines"], 81);
    assert_eq!(r["counts"]["omitted_lines"], 21);
    let text = r["text"].as_str().unwrap();
    let kept: Vec<&str> = text.lines().collect();
    assert_eq!(kept.len(), 20 + 1 + 40);
    assert_eq!((kept[0], kept[19], kept[20], kept[21], kept[60]), ("line 1", "line 20", "…[omitted 21 lines]…", "line 42", "line 81"));
    // next_offset still covers the whole stream, and the omitted range reads verbatim.
    let total = r["bytes_total"].as_u64().unwrap();
    assert_eq!(r["next_offset"], total);
    let (from, to) = (r["counts"]["omitted_from_offset"].as_u64().unwrap(), r["counts"]["omitted_to_offset"].as_u64().unwrap());
    let middle = rig.read(&over, "stdout", from, to - from).await;
    assert_eq!(middle["compacted"], Value::Null);
    let middle: Vec<&str> = middle["text"].as_str().unwrap().lines().collect();
    assert_eq!((middle.len(), middle[0], middle[20]), (21, "line 21", "line 41"));
    // The verbatim whole is still there for a reader that pages.
    assert_eq!(rig.read_all(&over, "stdout").await.0.lines().count(), 81);
}

#[tokio::test]
async fn byte_limit_counts_too_and_only_whole_reads_of_successful_commands_compact() {
    let rig = Rig::new();
    // 70 lines of 117 bytes + newline = 8260 bytes: over 8192 bytes, under 80 lines.
    let wide = finished(&rig, "i=1; while [ $i -le 70 ]; do printf '%0117d\\n' $i; i=$((i+1)); done").await;
    let r = rig.read(&wide, "both", 0, 65_536).await;
    assert_eq!(r["bytes_total"], 70 * 118);
    assert_eq!(r["compacted"], true, "{r}");
    assert_eq!(r["counts"]["omitted_lines"], 10);
    // 69 such lines are 8142 bytes: left alone.
    let narrow = finished(&rig, "i=1; while [ $i -le 69 ]; do printf '%0117d\\n' $i; i=$((i+1)); done").await;
    assert_eq!(rig.read(&narrow, "both", 0, 65_536).await["compacted"], Value::Null);

    // A partial window, a later offset, or a failed command: verbatim.
    let partial = rig.read(&wide, "both", 0, 8000).await;
    assert_eq!((partial["compacted"].clone(), partial["text"].as_str().unwrap().len()), (Value::Null, 8000));
    assert_eq!(rig.read(&wide, "both", 1, 65_536).await["compacted"], Value::Null);
    let failed = finished(&rig, &format!("{}; exit 3", lines_cmd(200))).await;
    let r = rig.read(&failed, "both", 0, 65_536).await;
    assert_eq!((r["exit_code"].clone(), r["compacted"].clone()), (json!(3), Value::Null));
    assert_eq!(r["text"].as_str().unwrap().lines().count(), 200);
}

#[tokio::test]
async fn a_uniform_json_array_comes_back_as_a_table_and_herdr_exec_compacts_too() {
    let rig = Rig::new();
    let cmd = "echo '['; i=1; while [ $i -le 150 ]; do [ $i -gt 1 ] && echo ','; \
               echo \"{\\\"id\\\": $i, \\\"name\\\": \\\"item-$i\\\"}\"; i=$((i+1)); done; echo ']'";
    let id = finished(&rig, cmd).await;
    let r = rig.read(&id, "stdout", 0, 65_536).await;
    assert_eq!(r["compacted"], true, "{r}");
    let table: Value = serde_json::from_str(r["text"].as_str().unwrap()).unwrap();
    let t = &table["$herdr_table"];
    assert_eq!(t["encoding"], "object-array/v1");
    assert_eq!(t["columns"], json!(["id", "name"]));
    assert_eq!(t["items"], 150);
    assert_eq!(t["rows"][149], json!([150, "item-150"]));

    let sync = rig.call("herdr_exec", json!({"workspace": "proj", "command": lines_cmd(100)})).await;
    assert_eq!(sync["ok"], true, "{sync}");
    assert_eq!(sync["compacted"], true);
    assert_eq!(sync["counts"]["omitted_lines"], 40);
    assert!(sync["output"].as_str().unwrap().contains("…[omitted 40 lines]…"));
    let small = rig.call("herdr_exec", json!({"workspace": "proj", "command": lines_cmd(5)})).await;
    assert_eq!((small["compacted"].clone(), small["output"].as_str().unwrap().lines().count()), (Value::Null, 5));
}
