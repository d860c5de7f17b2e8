//! The bridge's tool loop as a pure state machine: events in, commands out.
//!
//! One [`Engine`] drives one conversation. It never waits, sleeps or reads a clock: time comes
//! in with every event (`now_ms`), and delays are requested with [`Command::WakeAt`], after
//! which the shell delivers a [`Event::Tick`]. Commands must be applied in the order given;
//! in particular a [`Command::SaveJournal`] always precedes the [`Command::ExecuteCalls`] it
//! protects (write-ahead), so a reload can never forget that a call was sent.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::journal::{CallIdentity, CallJournal, CallOutcome, Plan, TranscriptEntry, fingerprint, has_pending_tool_reply, prepare_args};
use crate::parser::{ParseOutcome, ReplyState, ToolCallParser, Variant};
use crate::protocol_text::{Site, render_task_message};
use crate::tool_result::{ERR_DELIVERY_UNKNOWN, ResultRow, present, render_repair, render_tool_result, repair_limit_message};
use crate::validate::{Catalog, Checked, validate_calls};

/// Loop limits; every one is explicit and tested at its edge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineConfig {
    /// Calls of one reply running at the same time.
    pub max_parallel: usize,
    /// A reply that shows no change for this long ends the wait.
    pub reply_idle_timeout_ms: u64,
    /// Pause before a TOOL_RESULT or repair message is sent, so the page settles.
    pub result_send_delay_ms: u64,
    /// Repair messages sent in a row before the loop gives up.
    pub max_repairs: u32,
    /// A call without an answer after this long is reported as `delivery_unknown`.
    pub call_timeout_ms: u64,
    /// Rounds of tool results one task may send. A reply asking for more calls after that
    /// many gets one last TOOL_RESULT saying the limit was reached (its calls not run) and
    /// the loop stops. 0 is taken as 1.
    #[serde(default = "default_max_rounds")]
    pub max_rounds: u32,
}

/// Rounds per task unless the user sets another limit (options page).
pub const DEFAULT_MAX_ROUNDS: u32 = 24;
/// The error of a call the round limit kept from running.
pub const ERR_ROUND_LIMIT: &str = "round_limit";

fn default_max_rounds() -> u32 {
    DEFAULT_MAX_ROUNDS
}

/// Highest round limit the options page accepts.
pub const MAX_ROUNDS_LIMIT: u32 = 1000;

/// The round limit typed in the options page: a whole number from 1 to [`MAX_ROUNDS_LIMIT`].
pub fn parse_max_rounds(text: &str) -> Result<u32, String> {
    let t = text.trim();
    match t.parse::<u32>() {
        Ok(n) if (1..=MAX_ROUNDS_LIMIT).contains(&n) => Ok(n),
        Ok(n) => Err(format!("maxRounds = {n} is out of range (1..={MAX_ROUNDS_LIMIT} rounds)")),
        Err(_) => Err(format!("maxRounds = {t:?} is not a whole number of rounds")),
    }
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            max_parallel: 4,
            reply_idle_timeout_ms: 120_000,
            result_send_delay_ms: 650,
            max_repairs: 3,
            call_timeout_ms: 150_000,
            max_rounds: DEFAULT_MAX_ROUNDS,
        }
    }
}

pub type TaskId = u64;

/// How a call ended, as reported by the shell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum CallReply {
    /// The runtime answered (the MCP `CallToolResult`).
    Ok { result: Value },
    /// The call failed with a definite answer (e.g. `mcp-rpc-…`, `unknown-tool`).
    Failed { error: String, detail: String },
    /// The transport broke after sending: nobody knows whether it ran.
    Lost { detail: String },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// The user submitted `text`. `catalog` is the live `tools/list` (None when unavailable:
    /// the text is then sent unbridged). `previous_reply_id` names the reply already on the
    /// page, so it is not mistaken for the answer. While a task runs it is refused ([`Command::Busy`]).
    Submit { text: String, catalog: Option<Vec<Value>>, previous_reply_id: Option<String>, now_ms: u64 },
    /// The latest assistant reply as rendered now.
    ReplySnapshot { message_id: String, text: String, done: bool, now_ms: u64 },
    CallResult { call_id: String, reply: CallReply, now_ms: u64 },
    Tick { now_ms: u64 },
    /// Inserting or sending a message failed in the page.
    SendFailed { detail: String, now_ms: u64 },
    /// After a reload: the transcript read from the page and the last reply's id.
    Resume { transcript: Vec<TranscriptEntry>, message_id: String, catalog: Vec<Value>, now_ms: u64 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageKind {
    /// Preamble + catalog + USER_TASK.
    Task,
    /// The user's text as is (no catalog available).
    Unbridged,
    ToolResult,
    Repair,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecCall {
    pub call_id: String,
    pub tool: String,
    /// Arguments to send, with the idempotency key injected where the tool accepts it.
    pub args: Value,
    pub idempotency_key: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model answered normally.
    Finished,
    RepeatedInvalidToolJson,
    ReplyTimeout,
    SubmitFailed,
    /// The task sent [`EngineConfig::max_rounds`] rounds of tool results.
    RoundLimit,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Status {
    WaitingForReply { round: u32 },
    RunningCalls { running: usize, queued: usize, done: usize },
    SendingResults { round: u32 },
    Repairing { attempt: u32 },
    Unbridged,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum Command {
    SendMessage { task: TaskId, kind: MessageKind, text: String },
    /// Persist this journal before applying the commands that follow.
    SaveJournal { journal: CallJournal },
    ExecuteCalls { task: TaskId, calls: Vec<ExecCall> },
    /// Re-run folding of protocol messages in the page.
    Fold,
    Status { task: TaskId, status: Status },
    /// Deliver a `Tick` at (or after) this time.
    WakeAt { at_ms: u64 },
    Stop { task: TaskId, reason: StopReason, message: String },
    /// A submit arrived while this task runs: refused, the task goes on (`json-bridge-busy`).
    Busy { task: TaskId },
}

/// Read-only tools whose identical repeat right after itself in one reply is not sent again:
/// the repeat shares the first call's answer (spec §1.7, `runJsonBridgeBatch`).
pub const SHARED_READ_TOOLS: [&str; 8] = [
    "herdr_inspect",
    "herdr_since",
    "herdr_fs_read",
    "herdr_fs_list",
    "herdr_fs_grep",
    "herdr_fs_image",
    "herdr_methods",
    "herdr_skill",
];

#[derive(Debug, Clone)]
enum SlotState {
    Queued { tool: String, args: Value },
    Running { call_id: String, tool: String },
    /// A repeated read: takes the row of the slot at this position once that one is done.
    SameAs(usize),
    Done(ResultRow),
}

#[derive(Debug, Clone)]
struct Slot {
    index: usize,
    state: SlotState,
}

#[derive(Debug, Clone)]
enum Phase {
    AwaitingReply { parser: ToolCallParser, message_id: Option<String>, deadline_ms: u64 },
    Executing { message_id: String, slots: Vec<Slot>, variants: Vec<Variant> },
    /// `last`: the task stops once this message is sent (the round limit's final TOOL_RESULT).
    Sending { kind: MessageKind, text: String, at_ms: u64, last: bool },
}

#[derive(Debug, Clone)]
struct Task {
    id: TaskId,
    catalog: Catalog,
    round: u32,
    /// TOOL_RESULT messages sent (repairs not counted), against the round limit.
    tool_rounds: u32,
    repairs: u32,
    phase: Phase,
}

/// A call handed to the runtime and not yet answered, across tasks (a stopped task's answers
/// still settle the journal).
#[derive(Debug, Clone)]
struct InFlight {
    task: TaskId,
    fingerprint: String,
    deadline_ms: u64,
}

/// The loop engine of one conversation.
#[derive(Debug, Clone)]
pub struct Engine {
    conv_key: String,
    site: Site,
    config: EngineConfig,
    journal: CallJournal,
    next_task: TaskId,
    task: Option<Task>,
    /// Replies that must not be treated as a new answer (already handled or pre-existing).
    ignored_reply: Option<String>,
    in_flight: BTreeMap<String, InFlight>,
    next_call: u64,
}

impl Engine {
    pub fn new(conv_key: &str, site: Site, config: EngineConfig) -> Self {
        Self::restore(conv_key, site, config, CallJournal::new(conv_key))
    }

    /// Rebuild after a reload from the stored journal: anything pending may have run.
    pub fn restore(conv_key: &str, site: Site, config: EngineConfig, mut journal: CallJournal) -> Self {
        journal.after_reload();
        Engine {
            conv_key: conv_key.to_string(),
            site,
            config: EngineConfig { max_parallel: config.max_parallel.max(1), max_rounds: config.max_rounds.max(1), ..config },
            journal,
            next_task: 1,
            task: None,
            ignored_reply: None,
            in_flight: BTreeMap::new(),
            next_call: 0,
        }
    }

    pub fn journal(&self) -> &CallJournal {
        &self.journal
    }

    pub fn is_running(&self) -> bool {
        self.task.is_some()
    }

    pub fn current_task(&self) -> Option<TaskId> {
        self.task.as_ref().map(|t| t.id)
    }

    pub fn handle(&mut self, event: Event) -> Vec<Command> {
        let mut out = Vec::new();
        match event {
            Event::Submit { text, catalog, previous_reply_id, now_ms } => {
                self.on_submit(text, catalog, previous_reply_id, now_ms, &mut out)
            }
            Event::ReplySnapshot { message_id, text, done, now_ms } => {
                self.on_snapshot(message_id, &text, None, done, now_ms, &mut out)
            }
            Event::CallResult { call_id, reply, now_ms } => self.on_call_result(&call_id, reply, now_ms, &mut out),
            Event::Tick { now_ms } => self.on_tick(now_ms, &mut out),
            Event::SendFailed { detail, .. } => {
                if let Some(task) = self.task.take() {
                    out.push(Command::Stop {
                        task: task.id,
                        reason: StopReason::SubmitFailed,
                        message: format!("Stopped: the message could not be sent in the page ({detail})."),
                    });
                }
            }
            Event::Resume { transcript, message_id, catalog, now_ms } => {
                self.on_resume(&transcript, message_id, catalog, now_ms, &mut out)
            }
        }
        out
    }

    /// Like [`Event::ReplySnapshot`] for a reply text that only grows while `epoch` stays
    /// the same (see [`ToolCallParser::feed_stream`]): the text is borrowed, not copied, and
    /// only its new part is parsed.
    pub fn reply_stream(&mut self, message_id: &str, text: &str, epoch: u64, done: bool, now_ms: u64) -> Vec<Command> {
        let mut out = Vec::new();
        self.on_snapshot(message_id.to_string(), text, Some(epoch), done, now_ms, &mut out);
        out
    }

    fn on_submit(&mut self, text: String, catalog: Option<Vec<Value>>, previous: Option<String>, now: u64, out: &mut Vec<Command>) {
        // One task at a time (spec §1.10): a new task now would leave the model without the
        // results of calls that already ran, and it might then repeat a mutation.
        if let Some(task) = &self.task {
            out.push(Command::Busy { task: task.id });
            return;
        }
        if previous.is_some() {
            self.ignored_reply = previous;
        }
        let id = self.next_task;
        self.next_task += 1;
        let Some(tools) = catalog else {
            out.push(Command::SendMessage { task: id, kind: MessageKind::Unbridged, text });
            out.push(Command::Status { task: id, status: Status::Unbridged });
            return;
        };
        let message = render_task_message(&tools, self.site, &text);
        self.task = Some(Task { id, catalog: Catalog::from_tools(&tools), round: 0, tool_rounds: 0, repairs: 0, phase: self.awaiting(now) });
        out.push(Command::SendMessage { task: id, kind: MessageKind::Task, text: message });
        self.after_send(now, out);
    }

    fn awaiting(&self, now: u64) -> Phase {
        Phase::AwaitingReply { parser: ToolCallParser::new(), message_id: None, deadline_ms: now + self.config.reply_idle_timeout_ms }
    }

    fn after_send(&mut self, now: u64, out: &mut Vec<Command>) {
        let Some(task) = &self.task else { return };
        out.push(Command::Fold);
        out.push(Command::Status { task: task.id, status: Status::WaitingForReply { round: task.round } });
        out.push(Command::WakeAt { at_ms: now + self.config.reply_idle_timeout_ms });
    }

    fn on_snapshot(&mut self, message_id: String, text: &str, epoch: Option<u64>, done: bool, now: u64, out: &mut Vec<Command>) {
        if self.ignored_reply.as_deref() == Some(message_id.as_str()) {
            return;
        }
        let timeout = self.config.reply_idle_timeout_ms;
        let Some(Task { phase: Phase::AwaitingReply { parser, message_id: current, deadline_ms }, .. }) = &mut self.task else {
            return;
        };
        if current.as_deref() != Some(message_id.as_str()) {
            *parser = ToolCallParser::new();
            *current = Some(message_id.clone());
        }
        let (len_before, restarts_before) = (parser.text().len(), parser.restarts());
        match epoch {
            Some(epoch) => parser.feed_stream(text, epoch),
            None => parser.feed(text, done),
        };
        // Only a reply that is still changing keeps the wait alive.
        if parser.text().len() != len_before || parser.restarts() != restarts_before {
            *deadline_ms = now + timeout;
        }
        if done {
            let outcome = parser.outcome();
            self.ignored_reply = Some(message_id.clone());
            self.on_reply(message_id, outcome, now, out);
        }
    }

    /// A finished reply: answer, repair or run its calls.
    fn on_reply(&mut self, message_id: String, outcome: ParseOutcome, now: u64, out: &mut Vec<Command>) {
        let max_repairs = self.config.max_repairs;
        let delay = self.config.result_send_delay_ms;
        let Some(task) = &mut self.task else { return };
        match outcome.state {
            ReplyState::None => {
                let id = task.id;
                self.task = None;
                out.push(Command::Fold);
                out.push(Command::Stop { task: id, reason: StopReason::Finished, message: String::new() });
            }
            ReplyState::Incomplete | ReplyState::Malformed => {
                task.repairs += 1;
                if task.repairs > max_repairs {
                    let id = task.id;
                    self.task = None;
                    out.push(Command::Stop {
                        task: id,
                        reason: StopReason::RepeatedInvalidToolJson,
                        message: repair_limit_message(max_repairs + 1),
                    });
                    return;
                }
                let text = render_repair(outcome.state, &outcome.problems);
                task.phase = Phase::Sending { kind: MessageKind::Repair, text, at_ms: now + delay, last: false };
                out.push(Command::Status { task: task.id, status: Status::Repairing { attempt: task.repairs } });
                out.push(Command::WakeAt { at_ms: now + delay });
            }
            ReplyState::Complete => {
                task.repairs = 0;
                self.start_calls(message_id, outcome, now, out);
            }
        }
    }

    fn start_calls(&mut self, message_id: String, outcome: ParseOutcome, now: u64, out: &mut Vec<Command>) {
        let (max_rounds, delay) = (self.config.max_rounds, self.config.result_send_delay_ms);
        let Some(task) = &mut self.task else { return };
        if task.tool_rounds >= max_rounds {
            // The limit: nothing of this reply runs; the model is told once, then the loop ends.
            let detail = round_limit_detail(max_rounds);
            let rows = outcome.calls.iter().enumerate().map(|(i, c)| ResultRow::failure(i + 1, &c.tool.chars().take(64).collect::<String>(), ERR_ROUND_LIMIT, &detail)).collect();
            let text = render_tool_result(rows, &outcome.variants);
            task.phase = Phase::Sending { kind: MessageKind::ToolResult, text, at_ms: now + delay, last: true };
            out.push(Command::Fold);
            out.push(Command::Status { task: task.id, status: Status::SendingResults { round: task.round } });
            out.push(Command::WakeAt { at_ms: now + delay });
            return;
        }
        let checked = validate_calls(&outcome.calls, &task.catalog);
        let repeats = repeated_reads(&checked);
        let slots = checked
            .into_iter()
            .zip(repeats)
            .map(|pair| match pair {
                (Checked::Refused(r), _) => Slot { index: r.index, state: SlotState::Done(ResultRow::failure(r.index, &r.tool, r.error, &r.detail)) },
                (Checked::Run(call), Some(of)) => Slot { index: call.index, state: SlotState::SameAs(of) },
                (Checked::Run(call), None) => {
                    let id = CallIdentity { conv_key: &self.conv_key, message_id: &message_id, index: call.index, tool: &call.tool, args: &call.args };
                    let state = match self.journal.plan(&fingerprint(&id)) {
                        Plan::Run => SlotState::Queued { tool: call.tool.clone(), args: call.args.clone() },
                        Plan::Replay(CallOutcome::Ok { result }) => SlotState::Done(ResultRow::success_presented(call.index, &call.tool, result)),
                        Plan::Replay(CallOutcome::Err { error, detail }) => SlotState::Done(ResultRow::failure(call.index, &call.tool, &error, &detail)),
                        Plan::DeliveryUnknown | Plan::InFlight => SlotState::Done(delivery_unknown_row(call.index, &call.tool)),
                    };
                    Slot { index: call.index, state }
                }
            })
            .collect();
        task.phase = Phase::Executing { message_id, slots, variants: outcome.variants };
        out.push(Command::Fold);
        self.dispatch(now, out);
    }

    /// Start queued calls up to the concurrency bound; finish the round when all are done.
    fn dispatch(&mut self, now: u64, out: &mut Vec<Command>) {
        let max_parallel = self.config.max_parallel;
        let call_timeout = self.config.call_timeout_ms;
        let Some(task) = &mut self.task else { return };
        let Phase::Executing { message_id, slots, .. } = &mut task.phase else { return };
        let running = slots.iter().filter(|s| matches!(s.state, SlotState::Running { .. })).count();
        let mut batch = Vec::new();
        for slot in slots.iter_mut() {
            if running + batch.len() >= max_parallel {
                break;
            }
            let SlotState::Queued { tool, args } = &slot.state else { continue };
            let id = CallIdentity { conv_key: &self.conv_key, message_id, index: slot.index, tool, args };
            let entry = match self.journal.begin(&id) {
                Ok(entry) => entry,
                Err(_) => {
                    // Journaled meanwhile (e.g. the same reply resumed twice): never send again.
                    slot.state = SlotState::Done(delivery_unknown_row(slot.index, tool));
                    continue;
                }
            };
            let call_id = format!("c{}", self.next_call);
            self.next_call += 1;
            let args = prepare_args(tool, args, entry.idempotency_key.as_deref(), &task.catalog);
            batch.push(ExecCall { call_id: call_id.clone(), tool: tool.clone(), args, idempotency_key: entry.idempotency_key });
            self.in_flight.insert(call_id.clone(), InFlight { task: task.id, fingerprint: entry.fingerprint, deadline_ms: now + call_timeout });
            slot.state = SlotState::Running { call_id, tool: tool.clone() };
        }
        share_rows(slots);
        let queued = slots.iter().filter(|s| matches!(s.state, SlotState::Queued { .. })).count();
        let done = slots.iter().filter(|s| matches!(s.state, SlotState::Done(_))).count();
        let running_now = slots.len() - queued - done;
        if !batch.is_empty() {
            out.push(Command::SaveJournal { journal: self.journal.clone() });
            out.push(Command::ExecuteCalls { task: task.id, calls: batch });
            out.push(Command::WakeAt { at_ms: now + call_timeout });
        }
        if running_now > 0 || queued > 0 {
            out.push(Command::Status { task: task.id, status: Status::RunningCalls { running: running_now, queued, done } });
            return;
        }
        self.finish_round(now, out);
    }

    fn finish_round(&mut self, now: u64, out: &mut Vec<Command>) {
        let delay = self.config.result_send_delay_ms;
        let Some(task) = &mut self.task else { return };
        let Phase::Executing { slots, variants, .. } = &mut task.phase else { return };
        let rows = slots
            .iter()
            .map(|s| match &s.state {
                SlotState::Done(row) => row.clone(),
                // Unreachable by construction (a round finishes only when every slot is done),
                // but a missing answer is reported rather than trusted.
                _ => ResultRow::failure(s.index, "unknown", crate::tool_result::ERR_MISSING_RESPONSE, ""),
            })
            .collect();
        let text = render_tool_result(rows, variants);
        task.phase = Phase::Sending { kind: MessageKind::ToolResult, text, at_ms: now + delay, last: false };
        out.push(Command::Status { task: task.id, status: Status::SendingResults { round: task.round } });
        out.push(Command::WakeAt { at_ms: now + delay });
    }

    fn on_call_result(&mut self, call_id: &str, reply: CallReply, now: u64, out: &mut Vec<Command>) {
        let Some(flight) = self.in_flight.remove(call_id) else { return };
        let journaled = match &reply {
            CallReply::Ok { result } => CallOutcome::Ok { result: present(result) },
            CallReply::Failed { error, detail } => CallOutcome::Err { error: error.clone(), detail: detail.clone() },
            CallReply::Lost { .. } => {
                let _ = self.journal.mark_unknown(&flight.fingerprint);
                out.push(Command::SaveJournal { journal: self.journal.clone() });
                let detail = match &reply {
                    CallReply::Lost { detail } => detail.clone(),
                    _ => String::new(),
                };
                self.settle_slot(flight.task, call_id, |index, tool| unknown_row(index, tool, &detail), now, out);
                return;
            }
        };
        // A journal that no longer has the entry (pruned) is not a reason to drop the answer.
        let _ = self.journal.deliver(&flight.fingerprint, journaled.clone());
        out.push(Command::SaveJournal { journal: self.journal.clone() });
        self.settle_slot(
            flight.task,
            call_id,
            |index, tool| match &journaled {
                CallOutcome::Ok { result } => ResultRow::success_presented(index, tool, result.clone()),
                CallOutcome::Err { error, detail } => ResultRow::failure(index, tool, error, detail),
            },
            now,
            out,
        );
    }

    /// Put a finished call's row into the current round, if the call belongs to it.
    fn settle_slot(&mut self, task_id: TaskId, call_id: &str, row: impl FnOnce(usize, &str) -> ResultRow, now: u64, out: &mut Vec<Command>) {
        let Some(task) = &mut self.task else { return };
        if task.id != task_id {
            return;
        }
        let Phase::Executing { slots, .. } = &mut task.phase else { return };
        let Some(slot) = slots.iter_mut().find(|s| matches!(&s.state, SlotState::Running { call_id: c, .. } if c == call_id)) else {
            return;
        };
        let SlotState::Running { tool, .. } = &slot.state else { return };
        let tool = tool.clone();
        slot.state = SlotState::Done(row(slot.index, &tool));
        self.dispatch(now, out);
    }

    fn on_tick(&mut self, now: u64, out: &mut Vec<Command>) {
        // Calls past their deadline: their fate is unknown and they are never re-sent.
        let expired: Vec<String> = self.in_flight.iter().filter(|(_, f)| now >= f.deadline_ms).map(|(id, _)| id.clone()).collect();
        for call_id in expired {
            let detail = format!("No answer within {} s; it may or may not have run. Check before repeating it.", self.config.call_timeout_ms / 1000);
            self.on_call_result(&call_id, CallReply::Lost { detail }, now, out);
        }
        let timeout = self.config.reply_idle_timeout_ms;
        let Some(task) = &mut self.task else { return };
        match &mut task.phase {
            Phase::Sending { kind, text, at_ms, last } if now >= *at_ms => {
                let (kind, text, last) = (*kind, std::mem::take(text), *last);
                if last {
                    let id = task.id;
                    self.task = None;
                    out.push(Command::SendMessage { task: id, kind, text });
                    out.push(Command::Fold);
                    out.push(Command::Stop { task: id, reason: StopReason::RoundLimit, message: round_limit_message(self.config.max_rounds) });
                    return;
                }
                if kind == MessageKind::ToolResult {
                    task.tool_rounds += 1;
                }
                task.round += 1;
                task.phase = Phase::AwaitingReply { parser: ToolCallParser::new(), message_id: None, deadline_ms: now + timeout };
                out.push(Command::SendMessage { task: task.id, kind, text });
                self.after_send(now, out);
            }
            Phase::AwaitingReply { parser, message_id, deadline_ms } if now >= *deadline_ms => {
                match message_id.clone() {
                    // A reply started but never reported done: act on what it says now.
                    Some(id) if !parser.text().is_empty() => {
                        let outcome = parser.outcome();
                        self.ignored_reply = Some(id.clone());
                        self.on_reply(id, outcome, now, out);
                    }
                    _ => {
                        let id = task.id;
                        self.task = None;
                        out.push(Command::Stop {
                            task: id,
                            reason: StopReason::ReplyTimeout,
                            message: format!("Stopped: no reply arrived within {} s.", timeout / 1000),
                        });
                    }
                }
            }
            _ => {}
        }
    }

    fn on_resume(&mut self, transcript: &[TranscriptEntry], message_id: String, catalog: Vec<Value>, now: u64, out: &mut Vec<Command>) {
        if self.task.is_some() || !has_pending_tool_reply(transcript) {
            return;
        }
        let Some(last) = transcript.last() else { return };
        let id = self.next_task;
        self.next_task += 1;
        self.task = Some(Task { id, catalog: Catalog::from_tools(&catalog), round: 0, tool_rounds: 0, repairs: 0, phase: self.awaiting(now) });
        self.ignored_reply = Some(message_id.clone());
        let mut parser = ToolCallParser::new();
        parser.feed(&last.text, true);
        self.on_reply(message_id, parser.outcome(), now, out);
    }
}

/// For each call, the position of the call it repeats: a read tool called with the same
/// arguments as the call right before it (itself possibly a repeat). Only back-to-back repeats
/// share, so a read after a write in the same reply always runs.
fn repeated_reads(checked: &[Checked]) -> Vec<Option<usize>> {
    let mut out: Vec<Option<usize>> = Vec::with_capacity(checked.len());
    for (i, call) in checked.iter().enumerate() {
        let repeat = match (i.checked_sub(1).map(|p| &checked[p]), call) {
            (Some(Checked::Run(prev)), Checked::Run(this))
                if SHARED_READ_TOOLS.contains(&this.tool.as_str()) && prev.tool == this.tool && prev.args == this.args =>
            {
                Some(out[i - 1].unwrap_or(i - 1))
            }
            _ => None,
        };
        out.push(repeat);
    }
    out
}

/// Gives every repeat whose original is done that original's row under its own index.
fn share_rows(slots: &mut [Slot]) {
    for i in 0..slots.len() {
        let SlotState::SameAs(of) = slots[i].state else { continue };
        if let Some(SlotState::Done(row)) = slots.get(of).map(|s| &s.state) {
            let row = ResultRow { index: slots[i].index, ..row.clone() };
            slots[i].state = SlotState::Done(row);
        }
    }
}

/// What the model reads in each row of the round limit's final TOOL_RESULT.
pub fn round_limit_detail(max_rounds: u32) -> String {
    format!(
        "Not run: this task reached its limit of {max_rounds} tool rounds, so the user's bridge stopped running tools. \
         Answer the user now with what you have and say what is left to do; they can send a new request to go on."
    )
}

/// What the page says when the round limit ended the loop.
pub fn round_limit_message(max_rounds: u32) -> String {
    format!("Stopped: this task reached its limit of {max_rounds} tool rounds (change it in the extension's options). Send a new request to go on.")
}

fn delivery_unknown_row(index: usize, tool: &str) -> ResultRow {
    unknown_row(index, tool, "This call was sent before the page reloaded and its answer was lost. It was not run again; check its effect before repeating it.")
}

fn unknown_row(index: usize, tool: &str, detail: &str) -> ResultRow {
    ResultRow::failure(index, tool, ERR_DELIVERY_UNKNOWN, detail)
}
