//! The loop engine driven through whole conversations with a scripted shell.

use ext_core::engine::{CallReply, Command, Engine, EngineConfig, Event, ExecCall, MessageKind, Status, StopReason, TaskId};
use ext_core::journal::{CallState, Role, TranscriptEntry};
use ext_core::protocol_text::{BRIDGE_MARKER, Site};
use ext_core::tool_result::TOOL_RESULT_PREFIX;
use serde_json::{Value, json};

const CONV: &str = "https://chat.z.ai/c/conv1";

fn catalog() -> Vec<Value> {
    ["herdr_inspect", "herdr_fs_read", "herdr_fs_write"]
        .iter()
        .map(|n| json!({"name": n, "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}}}))
        .chain([json!({"name": "herdr_exec", "inputSchema": {"type": "object", "properties": {"command": {}, "intent": {}, "idempotency_key": {}}}})])
        .collect()
}

/// Records every command and keeps track of what the page and runtime would see.
struct Shell {
    engine: Engine,
    now: u64,
    log: Vec<Command>,
    running: Vec<ExecCall>,
    max_running: usize,
    sent: Vec<(MessageKind, String)>,
    stops: Vec<(TaskId, StopReason, String)>,
    reply_seq: u32,
}

impl Shell {
    fn new(config: EngineConfig) -> Self {
        Shell::with_engine(Engine::new(CONV, Site::Zai, config))
    }

    fn with_engine(engine: Engine) -> Self {
        Shell { engine, now: 1_000, log: vec![], running: vec![], max_running: 0, sent: vec![], stops: vec![], reply_seq: 0 }
    }

    fn apply(&mut self, event: Event) -> Vec<Command> {
        let cmds = self.engine.handle(event);
        let mut journal_saved_before_exec = false;
        for c in &cmds {
            match c {
                Command::SaveJournal { .. } => journal_saved_before_exec = true,
                Command::ExecuteCalls { calls, .. } => {
                    assert!(journal_saved_before_exec, "journal must be saved before executing");
                    self.running.extend(calls.iter().cloned());
                    self.max_running = self.max_running.max(self.running.len());
                }
                Command::SendMessage { kind, text, .. } => self.sent.push((*kind, text.clone())),
                Command::Stop { task, reason, message } => self.stops.push((*task, *reason, message.clone())),
                _ => {}
            }
        }
        self.log.extend(cmds.iter().cloned());
        cmds
    }

    fn submit(&mut self, text: &str) -> Vec<Command> {
        self.apply(Event::Submit { text: text.into(), catalog: Some(catalog()), previous_reply_id: None, now_ms: self.now })
    }

    /// Stream a reply in a few growing snapshots, then mark it done.
    fn reply(&mut self, text: &str) -> Vec<Command> {
        self.reply_seq += 1;
        let id = format!("msg-{}", self.reply_seq);
        let mut cut = text.len() / 3;
        while !text.is_char_boundary(cut) {
            cut += 1;
        }
        for part in [&text[..cut], text] {
            let cmds = self.apply(Event::ReplySnapshot { message_id: id.clone(), text: part.into(), done: false, now_ms: self.now });
            assert!(cmds.is_empty(), "streaming snapshots do nothing: {cmds:?}");
        }
        self.apply(Event::ReplySnapshot { message_id: id, text: text.into(), done: true, now_ms: self.now })
    }

    fn answer_next(&mut self, reply: CallReply) -> Vec<Command> {
        let call = self.running.remove(0);
        self.apply(Event::CallResult { call_id: call.call_id, reply, now_ms: self.now })
    }

    fn tick_at(&mut self, at: u64) -> Vec<Command> {
        self.now = at;
        self.apply(Event::Tick { now_ms: at })
    }

    fn last_sent(&self) -> &(MessageKind, String) {
        self.sent.last().expect("a message was sent")
    }
}

fn rows_of(message: &str) -> Vec<Value> {
    let body = message.strip_prefix(&format!("{TOOL_RESULT_PREFIX}\n")).expect("TOOL_RESULT prefix");
    serde_json::from_str(body).expect("valid JSON rows")
}

fn wake_at(cmds: &[Command]) -> Option<u64> {
    cmds.iter().find_map(|c| match c {
        Command::WakeAt { at_ms } => Some(*at_ms),
        _ => None,
    })
}

fn call_line(tool: &str, args: Value) -> String {
    json!({"tool": tool, "args": args}).to_string()
}

#[test]
fn full_loop_submit_calls_results_final_answer() {
    let mut s = Shell::new(EngineConfig::default());
    let cmds = s.submit("what is in README?");
    let (kind, text) = s.last_sent().clone();
    assert_eq!(kind, MessageKind::Task);
    assert!(text.starts_with(BRIDGE_MARKER) && text.ends_with("USER_TASK:\nwhat is in README?"));
    assert_eq!(wake_at(&cmds), Some(s.now + 120_000));
    assert!(cmds.contains(&Command::Fold));

    let reply = format!("{}\n{}", call_line("herdr_fs_read", json!({"path": "README.md"})), call_line("herdr_inspect", json!({})));
    let cmds = s.reply(&reply);
    let exec = cmds.iter().find_map(|c| if let Command::ExecuteCalls { calls, .. } = c { Some(calls.clone()) } else { None }).unwrap();
    assert_eq!(exec.iter().map(|c| c.tool.as_str()).collect::<Vec<_>>(), ["herdr_fs_read", "herdr_inspect"]);
    assert_eq!(exec[0].args, json!({"path": "README.md"}));

    s.answer_next(CallReply::Ok { result: json!({"content": [{"type": "text", "text": "# Hello"}]}) });
    let cmds = s.answer_next(CallReply::Failed { error: "mcp-rpc--32000".into(), detail: "boom".into() });
    assert!(cmds.iter().any(|c| matches!(c, Command::Status { status: Status::SendingResults { .. }, .. })));
    let send_at = wake_at(&cmds).unwrap();
    assert_eq!(send_at, s.now + 650);
    assert!(!s.tick_at(send_at - 1).iter().any(|c| matches!(c, Command::SendMessage { .. })), "no send before 650 ms");
    let cmds = s.tick_at(send_at);
    assert!(cmds.iter().any(|c| matches!(c, Command::SendMessage { kind: MessageKind::ToolResult, .. })));
    let rows = rows_of(&s.last_sent().1);
    assert_eq!(rows[0], json!({"index": 1, "tool": "herdr_fs_read", "ok": true, "result": "# Hello"}));
    assert_eq!(rows[1], json!({"index": 2, "tool": "herdr_inspect", "ok": false, "error": "mcp-rpc--32000", "detail": "boom"}));

    s.reply("README says Hello.");
    assert_eq!(s.stops.last().map(|s| s.1), Some(StopReason::Finished));
    assert!(!s.engine.is_running());
    assert!(s.engine.journal().entries().iter().all(|e| matches!(e.state, CallState::Delivered { .. })));
}

#[test]
fn at_most_four_calls_run_at_once_and_more_start_as_results_arrive() {
    let mut s = Shell::new(EngineConfig::default());
    s.submit("read ten files");
    let reply: Vec<String> = (0..10).map(|i| call_line("herdr_fs_read", json!({"path": format!("f{i}")}))).collect();
    s.reply(&reply.join("\n"));
    assert_eq!(s.running.len(), 4);
    for _ in 0..10 {
        s.answer_next(CallReply::Ok { result: json!({"ok": true}) });
        assert!(s.running.len() <= 4);
    }
    assert_eq!(s.max_running, 4);
    assert!(s.running.is_empty());
    let at = wake_at(s.log.iter().rev().take(3).cloned().collect::<Vec<_>>().as_slice()).unwrap();
    s.tick_at(at);
    let rows = rows_of(&s.last_sent().1);
    assert_eq!(rows.len(), 10);
    assert_eq!(rows.iter().map(|r| r["index"].as_u64().unwrap()).collect::<Vec<_>>(), (1..=10).collect::<Vec<_>>(), "reply order kept");
}

#[test]
fn a_bound_of_one_runs_calls_strictly_one_by_one() {
    let mut s = Shell::new(EngineConfig { max_parallel: 1, ..EngineConfig::default() });
    s.submit("x");
    s.reply(&[call_line("herdr_inspect", json!({})), call_line("herdr_inspect", json!({"a": 1}))].join("\n"));
    assert_eq!(s.running.len(), 1);
    s.answer_next(CallReply::Ok { result: json!(1) });
    assert_eq!(s.running.len(), 1);
    assert_eq!(s.max_running, 1);
}

#[test]
fn a_submit_while_a_task_runs_is_refused_and_the_running_task_reports_its_results() {
    let mut s = Shell::new(EngineConfig::default());
    s.submit("task A");
    let first_task = s.engine.current_task().unwrap();
    s.reply(&call_line("herdr_exec", json!({"command": "make"})));
    assert_eq!(s.running.len(), 1);
    assert_eq!(s.running[0].args["intent"], "non_idempotent_write");
    assert_eq!(s.running[0].args["idempotency_key"], json!(s.running[0].idempotency_key.clone().unwrap()));

    let sent_before = s.sent.len();
    let cmds = s.submit("task B");
    assert_eq!(cmds, vec![Command::Busy { task: first_task }], "refused, nothing else happens");
    assert_eq!(s.sent.len(), sent_before, "task B is not sent");
    assert!(s.stops.is_empty(), "task A goes on");
    assert_eq!(s.engine.current_task(), Some(first_task));

    // The call that ran is reported to the model: it must not think it never happened.
    let cmds = s.answer_next(CallReply::Ok { result: json!({"exit_code": 0}) });
    assert!(matches!(s.engine.journal().entries()[0].state, CallState::Delivered { .. }));
    s.tick_at(wake_at(&cmds).unwrap());
    assert_eq!(s.last_sent().0, MessageKind::ToolResult);
    assert_eq!(rows_of(&s.last_sent().1)[0]["result"], json!({"exit_code": 0}));
    s.reply("make ran.");
    assert_eq!(s.stops.last().map(|x| (x.0, x.1)), Some((first_task, StopReason::Finished)));

    // Once it is over, the next submit starts a task.
    s.submit("task B");
    assert_eq!(s.last_sent().0, MessageKind::Task);
    assert!(s.last_sent().1.ends_with("task B"));
    assert_ne!(s.engine.current_task(), Some(first_task));
}

#[test]
fn three_repairs_are_sent_and_the_fourth_bad_reply_stops() {
    let mut s = Shell::new(EngineConfig::default());
    s.submit("x");
    for attempt in 1..=3u32 {
        let cmds = s.reply(r#"{"tool":"herdr_inspect","args":{"#);
        assert!(cmds.iter().any(|c| matches!(c, Command::Status { status: Status::Repairing { attempt: a }, .. } if *a == attempt)));
        s.tick_at(wake_at(&cmds).unwrap());
        let (kind, text) = s.last_sent().clone();
        assert_eq!(kind, MessageKind::Repair);
        assert_eq!(rows_of(&text)[0]["error"], "incomplete-tool-json");
    }
    s.reply(r#"{"status":"still wrong"}"#);
    let (_, reason, message) = s.stops.last().cloned().unwrap();
    assert_eq!(reason, StopReason::RepeatedInvalidToolJson);
    assert!(message.contains("4 times"), "{message}");
    assert!(!s.engine.is_running());
}

#[test]
fn a_complete_round_resets_the_repair_count() {
    let mut s = Shell::new(EngineConfig::default());
    s.submit("x");
    for _ in 0..3 {
        let cmds = s.reply("{\"tool\":oops}");
        s.tick_at(wake_at(&cmds).unwrap());
    }
    s.reply(&call_line("herdr_inspect", json!({})));
    let cmds = s.answer_next(CallReply::Ok { result: json!(1) });
    s.tick_at(wake_at(&cmds).unwrap());
    let cmds = s.reply("{\"tool\":oops}");
    assert!(cmds.iter().any(|c| matches!(c, Command::Status { status: Status::Repairing { attempt: 1 }, .. })));
    assert!(s.stops.is_empty());
}

#[test]
fn no_reply_within_the_timeout_stops_and_a_stalled_reply_is_used() {
    let mut s = Shell::new(EngineConfig::default());
    let start = s.now;
    s.submit("x");
    assert!(s.tick_at(start + 119_999).is_empty());
    s.tick_at(start + 120_000);
    assert_eq!(s.stops.last().map(|x| x.1), Some(StopReason::ReplyTimeout));

    let mut s = Shell::new(EngineConfig::default());
    s.submit("x");
    s.apply(Event::ReplySnapshot { message_id: "m".into(), text: call_line("herdr_inspect", json!({})), done: false, now_ms: s.now + 5_000 });
    assert!(s.tick_at(s.now + 120_000).is_empty(), "the deadline moved with the last change");
    s.tick_at(s.now + 5_000);
    assert_eq!(s.running.len(), 1, "a reply that never reported done is acted on at the deadline");
}

#[test]
fn refused_and_drifted_calls_become_rows() {
    let mut s = Shell::new(EngineConfig::default());
    s.submit("x");
    let reply = format!("```json\n{}\n{}\n```", call_line("herdr_nope", json!({})), call_line("herdr_inspect", json!({})));
    s.reply(&reply);
    assert_eq!(s.running.len(), 1);
    let cmds = s.answer_next(CallReply::Ok { result: json!("fine") });
    s.tick_at(wake_at(&cmds).unwrap());
    let rows = rows_of(&s.last_sent().1);
    assert_eq!(rows[0]["error"], "unknown-tool");
    assert_eq!(rows[1]["result"], "fine");
    assert_eq!(rows[2]["tool"], "bridge_protocol");
    assert_eq!(rows[2]["result"]["forms"], json!(["fenced"]));
}

#[test]
fn a_call_without_answer_times_out_as_delivery_unknown() {
    let mut s = Shell::new(EngineConfig { call_timeout_ms: 10_000, ..EngineConfig::default() });
    s.submit("x");
    s.reply(&call_line("herdr_fs_write", json!({"path": "a"})));
    let t0 = s.now;
    assert!(s.tick_at(t0 + 9_999).is_empty());
    let cmds = s.tick_at(t0 + 10_000);
    assert!(matches!(s.engine.journal().entries()[0].state, CallState::Unknown));
    s.tick_at(wake_at(&cmds).unwrap());
    let rows = rows_of(&s.last_sent().1);
    assert_eq!(rows[0]["error"], "delivery_unknown");
    // The late answer is ignored: the call stays unknown.
    let late = s.running.remove(0);
    assert!(s.apply(Event::CallResult { call_id: late.call_id, reply: CallReply::Ok { result: json!(1) }, now_ms: s.now }).is_empty());
}

#[test]
fn reload_replays_delivered_reports_unknown_and_runs_only_unsent() {
    let config = EngineConfig { max_parallel: 2, ..EngineConfig::default() };
    let mut s = Shell::new(config.clone());
    s.submit("three writes");
    let reply = [0, 1, 2].map(|i| call_line("herdr_fs_write", json!({"path": format!("f{i}")}))).join("\n");
    s.reply(&reply);
    assert_eq!(s.running.len(), 2);
    s.answer_next(CallReply::Ok { result: json!({"written": "f0"}) });
    // The third call started after the first answer; now the page reloads before call 2/3 answer.
    assert_eq!(s.running.len(), 2);
    let stored = serde_json::to_string(s.engine.journal()).unwrap();

    let journal = serde_json::from_str(&stored).unwrap();
    let mut after = Shell::with_engine(Engine::restore(CONV, Site::Zai, config.clone(), journal));
    let transcript = vec![
        TranscriptEntry { role: Role::User, text: format!("{BRIDGE_MARKER}\n…") },
        TranscriptEntry { role: Role::Assistant, text: reply.clone() },
    ];
    let cmds = after.apply(Event::Resume { transcript: transcript.clone(), message_id: "msg-1".into(), catalog: catalog(), now_ms: after.now });
    assert!(!cmds.iter().any(|c| matches!(c, Command::ExecuteCalls { .. })), "nothing runs twice: {cmds:?}");
    after.tick_at(wake_at(&cmds).unwrap());
    let rows = rows_of(&after.last_sent().1);
    assert_eq!(rows[0]["result"], json!({"written": "f0"}));
    assert_eq!(rows[1]["error"], "delivery_unknown");
    assert_eq!(rows[2]["error"], "delivery_unknown");

    // A reload before anything was sent for a call: only that never-sent call runs.
    let mut s = Shell::new(EngineConfig { max_parallel: 1, ..EngineConfig::default() });
    s.submit("two writes");
    let reply2 = [0, 1].map(|i| call_line("herdr_fs_write", json!({"path": format!("g{i}")}))).join("\n");
    s.reply(&reply2);
    s.answer_next(CallReply::Ok { result: json!("g0 ok") });
    let mut journal: ext_core::journal::CallJournal = serde_json::from_str(&serde_json::to_string(s.engine.journal()).unwrap()).unwrap();
    // Simulate the reload landing before the second call was journaled.
    let keep: Vec<_> = journal.entries().iter().filter(|e| e.index == 1).cloned().collect();
    assert_eq!(keep.len(), 1);
    journal = serde_json::from_value(json!({"conv_key": CONV, "entries": keep, "next_seq": 5})).unwrap();
    let mut after = Shell::with_engine(Engine::restore(CONV, Site::Zai, EngineConfig::default(), journal));
    let transcript2 = vec![TranscriptEntry { role: Role::User, text: "TOOL_RESULT:\n[]".into() }, TranscriptEntry { role: Role::Assistant, text: reply2 }];
    after.apply(Event::Resume { transcript: transcript2, message_id: "msg-1".into(), catalog: catalog(), now_ms: after.now });
    assert_eq!(after.running.len(), 1);
    assert_eq!(after.running[0].args["path"], "g1");

    // Without a bridge message in the transcript, nothing resumes.
    let mut idle = Shell::new(EngineConfig::default());
    let plain = vec![TranscriptEntry { role: Role::User, text: "hi".into() }, TranscriptEntry { role: Role::Assistant, text: call_line("herdr_inspect", json!({})) }];
    assert!(idle.apply(Event::Resume { transcript: plain, message_id: "m".into(), catalog: catalog(), now_ms: 0 }).is_empty());
}

#[test]
fn unbridged_submit_and_stale_reply_and_send_failure() {
    let mut s = Shell::new(EngineConfig::default());
    let cmds = s.apply(Event::Submit { text: "hello".into(), catalog: None, previous_reply_id: None, now_ms: 0 });
    assert_eq!(s.last_sent(), &(MessageKind::Unbridged, "hello".to_string()));
    assert!(cmds.iter().any(|c| matches!(c, Command::Status { status: Status::Unbridged, .. })));
    assert!(!s.engine.is_running());

    s.apply(Event::Submit { text: "x".into(), catalog: Some(catalog()), previous_reply_id: Some("old".into()), now_ms: 0 });
    let stale = s.apply(Event::ReplySnapshot { message_id: "old".into(), text: "Earlier answer.".into(), done: true, now_ms: 1 });
    assert!(stale.is_empty(), "the reply already on the page is not the answer");
    assert!(s.engine.is_running());
    s.apply(Event::SendFailed { detail: "composer missing".into(), now_ms: 2 });
    assert_eq!(s.stops.last().map(|x| x.1), Some(StopReason::SubmitFailed));
}

#[test]
fn a_read_repeated_back_to_back_runs_once_and_every_repeat_gets_its_answer() {
    let mut s = Shell::new(EngineConfig::default());
    s.submit("x");
    let read_a = call_line("herdr_fs_read", json!({"path": "a"}));
    let write_a = call_line("herdr_fs_write", json!({"path": "a"}));
    let reply = [
        read_a.clone(),
        read_a.clone(),
        read_a.clone(),
        call_line("herdr_fs_read", json!({"path": "b"})),
        write_a.clone(),
        write_a,
        read_a,
    ]
    .join("\n");
    s.reply(&reply);
    let mut executed = Vec::new();
    while !s.running.is_empty() {
        let call = s.running[0].clone();
        executed.push((call.tool.clone(), call.args["path"].clone()));
        let result = json!({"content": [{"type": "text", "text": format!("{} #{}", call.tool, executed.len())}]});
        s.answer_next(CallReply::Ok { result });
    }
    let paths: Vec<String> = executed.iter().map(|(t, p)| format!("{t} {}", p.as_str().unwrap())).collect();
    assert_eq!(
        paths,
        ["herdr_fs_read a", "herdr_fs_read b", "herdr_fs_write a", "herdr_fs_write a", "herdr_fs_read a"],
        "the two repeats of the first read are not sent; writes always run, and so does a read after a write"
    );
    let at = wake_at(s.log.iter().rev().take(3).cloned().collect::<Vec<_>>().as_slice()).unwrap();
    s.tick_at(at);
    let rows = rows_of(&s.last_sent().1);
    assert_eq!(rows.len(), 7);
    assert_eq!(rows.iter().map(|r| r["index"].as_u64().unwrap()).collect::<Vec<_>>(), (1..=7).collect::<Vec<_>>());
    for repeat in &rows[1..3] {
        assert_eq!(repeat["tool"], "herdr_fs_read");
        assert_eq!(repeat["result"], rows[0]["result"], "a repeat shares the first answer");
    }
    assert_ne!(rows[6]["result"], rows[0]["result"], "the read after the writes ran on its own");
    assert_eq!(s.engine.journal().entries().len(), 5, "only calls that were sent are journaled");
}

/// One round: the model asks for a read, the result goes back.
fn one_round(s: &mut Shell, n: u32) {
    s.reply(&call_line("herdr_fs_read", json!({"path": format!("f{n}.txt")})));
    s.answer_next(CallReply::Ok { result: json!({"content": [{"type": "text", "text": "{\"ok\":true}"}]}) });
    let at = s.now + 650;
    s.tick_at(at);
    assert_eq!(s.last_sent().0, MessageKind::ToolResult, "round {n} sent its results");
}

#[test]
fn the_round_limit_stops_a_looping_model_with_one_final_tool_result() {
    let mut s = Shell::new(EngineConfig { max_rounds: 3, ..EngineConfig::default() });
    s.submit("loop forever");
    for n in 1..=3 {
        one_round(&mut s, n);
        assert!(s.engine.is_running(), "round {n} is within the limit");
    }
    assert!(s.running.is_empty());
    // The fourth request for calls: nothing runs, one last TOOL_RESULT says why, the loop ends.
    let sent_before = s.sent.len();
    let cmds = s.reply(&format!("{}\n{}", call_line("herdr_fs_write", json!({"path": "x"})), call_line("herdr_inspect", json!({}))));
    assert!(!cmds.iter().any(|c| matches!(c, Command::ExecuteCalls { .. } | Command::SaveJournal { .. })), "{cmds:?}");
    assert!(s.running.is_empty(), "no call of a reply past the limit runs");
    let at = s.now + 650;
    s.tick_at(at);
    assert_eq!(s.sent.len(), sent_before + 1, "exactly one more message");
    let (kind, text) = s.last_sent().clone();
    assert_eq!(kind, MessageKind::ToolResult);
    let rows = rows_of(&text);
    assert_eq!(rows.len(), 2);
    for row in &rows {
        assert_eq!(row["ok"], false, "{row}");
        assert_eq!(row["error"], ext_core::engine::ERR_ROUND_LIMIT, "{row}");
        assert!(row.to_string().contains("limit of 3 tool rounds"), "{row}");
    }
    assert!(!s.engine.is_running(), "the loop stopped");
    let (_, reason, message) = s.stops.last().expect("a stop").clone();
    assert_eq!(reason, StopReason::RoundLimit);
    assert!(message.contains("limit of 3 tool rounds"), "{message}");
    // Whatever the model says next is not acted on.
    let cmds = s.reply(&call_line("herdr_inspect", json!({})));
    assert!(cmds.is_empty(), "{cmds:?}");
    assert_eq!(s.engine.journal().entries().len(), 3, "only the three rounds' calls were ever journaled");
}

#[test]
fn the_default_limit_is_24_rounds_and_a_task_under_it_ends_normally() {
    assert_eq!(EngineConfig::default().max_rounds, 24);
    // A stored config from before the setting existed gets the default.
    let old: EngineConfig = serde_json::from_value(json!({
        "max_parallel": 4, "reply_idle_timeout_ms": 1, "result_send_delay_ms": 1, "max_repairs": 3, "call_timeout_ms": 1
    }))
    .unwrap();
    assert_eq!(old.max_rounds, 24);
    let mut s = Shell::new(EngineConfig { max_rounds: 2, ..EngineConfig::default() });
    s.submit("two rounds then answer");
    one_round(&mut s, 1);
    one_round(&mut s, 2);
    s.reply("All done.");
    assert_eq!(s.stops.last().map(|(_, r, _)| *r), Some(StopReason::Finished));
    // A limit of 0 is taken as 1: the first round still runs.
    let mut s = Shell::new(EngineConfig { max_rounds: 0, ..EngineConfig::default() });
    s.submit("one");
    one_round(&mut s, 1);
    s.reply(&call_line("herdr_inspect", json!({})));
    assert!(s.running.is_empty());
    let at = s.now + 650;
    s.tick_at(at);
    assert_eq!(s.stops.last().map(|(_, r, _)| *r), Some(StopReason::RoundLimit));
}

#[test]
fn the_round_limit_setting_takes_whole_numbers_from_1_to_1000() {
    use ext_core::engine::parse_max_rounds;
    assert_eq!(parse_max_rounds("1"), Ok(1));
    assert_eq!(parse_max_rounds(" 24 "), Ok(24));
    assert_eq!(parse_max_rounds("1000"), Ok(1000));
    for bad in ["0", "1001", "-1", "2.5", "", "many"] {
        assert!(parse_max_rounds(bad).is_err(), "{bad:?}");
    }
    assert!(parse_max_rounds("0").unwrap_err().contains("out of range"));
}
