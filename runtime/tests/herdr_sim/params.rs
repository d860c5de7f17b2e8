//! The request check Herdr does before anything else: its request type is a serde
//! enum (`tag = "method"`, `content = "params"`), so an unknown method, a missing
//! required field or a field of the wrong type fails to parse and is answered with
//! `invalid_request` and `"id":""` (spec/herdr.md §2, §A, §D.5). Unknown extra
//! fields are ignored, as Herdr's schema has no `deny_unknown_fields`.
//!
//! Without this the simulator would answer a request real Herdr refuses, and a
//! client bug (a renamed or missing parameter) would pass every test.

use serde_json::Value;

/// The 92 wire methods of Herdr 0.8.2 (spec/herdr.md §3), in the order its
/// "unknown variant" message lists them.
pub const WIRE_METHODS: &[&str] = &[
    "ping",
    "server.stop",
    "server.live_handoff",
    "server.reload_config",
    "server.agent_manifests",
    "server.reload_agent_manifests",
    "notification.show",
    "client.window_title.set",
    "client.window_title.clear",
    "popup.close",
    "session.snapshot",
    "workspace.create",
    "workspace.list",
    "workspace.get",
    "workspace.focus",
    "workspace.rename",
    "workspace.move",
    "workspace.move_block",
    "workspace.report_metadata",
    "workspace.close",
    "worktree.list",
    "worktree.create",
    "worktree.open",
    "worktree.remove",
    "tab.create",
    "tab.list",
    "tab.get",
    "tab.focus",
    "tab.rename",
    "tab.move",
    "tab.close",
    "pane.split",
    "pane.swap",
    "pane.move",
    "pane.zoom",
    "pane.layout",
    "pane.process_info",
    "pane.neighbor",
    "pane.edges",
    "pane.focus_direction",
    "pane.resize",
    "pane.list",
    "pane.current",
    "pane.get",
    "pane.focus",
    "pane.input.set",
    "pane.rename",
    "pane.send_text",
    "pane.send_keys",
    "pane.send_input",
    "pane.read",
    "pane.graphics.set",
    "pane.graphics.clear",
    "pane.graphics.info",
    "pane.graphics.stream",
    "pane.report_agent",
    "pane.report_agent_session",
    "pane.report_metadata",
    "pane.clear_agent_authority",
    "pane.release_agent",
    "pane.close",
    "pane.wait_for_output",
    "layout.export",
    "layout.apply",
    "layout.set_split_ratio",
    "agent.list",
    "agent.get",
    "agent.read",
    "agent.explain",
    "agent.send_keys",
    "agent.rename",
    "agent.view.set",
    "agent.view.clear",
    "agent.focus",
    "agent.start",
    "agent.prompt",
    "agent.wait",
    "events.subscribe",
    "events.wait",
    "integration.install",
    "integration.uninstall",
    "plugin.link",
    "plugin.list",
    "plugin.unlink",
    "plugin.enable",
    "plugin.disable",
    "plugin.action.list",
    "plugin.action.invoke",
    "plugin.log.list",
    "plugin.pane.open",
    "plugin.pane.focus",
    "plugin.pane.close",
];

pub const READ_SOURCES: &[&str] = &["visible", "recent", "recent_unwrapped", "detection"];
pub const STATUSES: &[&str] = &["idle", "working", "blocked", "done", "unknown"];

/// Subscription types that take no fields (spec/herdr.md §5).
pub const PLAIN_SUBSCRIPTIONS: &[&str] = &[
    "workspace.created",
    "workspace.updated",
    "workspace.metadata_updated",
    "workspace.renamed",
    "workspace.moved",
    "workspace.reordered",
    "workspace.closed",
    "workspace.focused",
    "worktree.created",
    "worktree.opened",
    "worktree.removed",
    "tab.created",
    "tab.closed",
    "tab.focused",
    "tab.renamed",
    "tab.moved",
    "pane.created",
    "pane.closed",
    "pane.updated",
    "pane.focused",
    "pane.moved",
    "pane.exited",
    "pane.agent_detected",
    "layout.updated",
];

#[derive(Clone, Copy)]
enum Kind {
    Str,
    Bool,
    U64,
    Number,
    OneOf(&'static [&'static str]),
    Strings,
    Statuses,
    /// `{type: "substring"|"regex", value}` of output matches.
    Match,
    /// `agent.prompt`'s `wait`: `{until?, timeout_ms?}`.
    PromptWait,
    Subscriptions,
    /// `events.wait`'s `match_event`: `{event, ...filters}`.
    EventMatch,
}

/// `events.wait` match kinds and their required filters (spec/herdr.md §5).
const EVENT_MATCHES: &[(&str, &[&str])] = &[
    ("workspace_created", &[]),
    ("workspace_updated", &["workspace_id"]),
    ("workspace_closed", &["workspace_id"]),
    ("workspace_moved", &["workspace_id"]),
    ("workspace_focused", &["workspace_id"]),
    ("workspace_renamed", &["workspace_id"]),
    ("tab_created", &[]),
    ("tab_closed", &["tab_id"]),
    ("tab_moved", &["tab_id"]),
    ("tab_focused", &["tab_id"]),
    ("tab_renamed", &["tab_id"]),
    ("pane_created", &[]),
    ("pane_closed", &["pane_id"]),
    ("pane_focused", &["pane_id"]),
    ("pane_moved", &["pane_id"]),
    ("pane_exited", &["pane_id"]),
    ("pane_output_changed", &["pane_id"]),
    ("pane_agent_detected", &["pane_id"]),
    ("pane_agent_status_changed", &["pane_id", "agent_status"]),
];

use Kind::*;

/// `(field, kind, required)` per method the simulator serves; `None` for a wire
/// method it does not serve.
fn fields(method: &str) -> Option<&'static [(&'static str, Kind, bool)]> {
    Some(match method {
        "ping" | "session.snapshot" | "workspace.list" | "agent.list" => &[],
        "tab.list" | "pane.list" => &[("workspace_id", Str, false)],
        "agent.get" => &[("target", Str, true)],
        "pane.get" => &[("pane_id", Str, true)],
        "workspace.get" => &[("workspace_id", Str, true)],
        "tab.get" => &[("tab_id", Str, true)],
        "agent.rename" => &[("target", Str, true), ("name", Str, true)],
        "agent.prompt" => &[("target", Str, true), ("text", Str, true), ("wait", PromptWait, false)],
        "pane.send_text" => &[("pane_id", Str, true), ("text", Str, true)],
        "pane.send_keys" => &[("pane_id", Str, true), ("keys", Strings, true)],
        "pane.rename" => &[("pane_id", Str, true), ("label", Str, false)],
        "pane.process_info" => &[("pane_id", Str, true)],
        "pane.split" => &[
            ("direction", OneOf(&["right", "down"]), true),
            ("workspace_id", Str, false),
            ("target_pane_id", Str, false),
            ("cwd", Str, false),
            ("focus", Bool, false),
            ("ratio", Number, false),
        ],
        "pane.read" => &[
            ("pane_id", Str, true),
            ("source", OneOf(READ_SOURCES), true),
            ("lines", U64, false),
            ("format", OneOf(&["text", "ansi"]), false),
            ("strip_ansi", Bool, false),
        ],
        "pane.wait_for_output" => &[
            ("pane_id", Str, true),
            ("source", OneOf(READ_SOURCES), true),
            ("match", Match, true),
            ("lines", U64, false),
            ("timeout_ms", U64, false),
            ("strip_ansi", Bool, false),
        ],
        "events.subscribe" => &[("subscriptions", Subscriptions, true)],
        "events.wait" => &[("match_event", EventMatch, true), ("timeout_ms", U64, false)],
        "agent.read" => &[
            ("target", Str, true),
            ("source", OneOf(READ_SOURCES), true),
            ("lines", U64, false),
            ("format", OneOf(&["text", "ansi"]), false),
            ("strip_ansi", Bool, false),
        ],
        "agent.wait" => &[("target", Str, true), ("until", Statuses, false), ("timeout_ms", U64, false)],
        _ => return None,
    })
}

/// What serde calls the JSON value it found.
fn found(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("boolean `{b}`"),
        Value::Number(n) => format!("integer `{n}`"),
        Value::String(s) => format!("string {s:?}"),
        Value::Array(_) => "sequence".into(),
        Value::Object(_) => "map".into(),
    }
}

fn invalid(v: &Value, expected: &str) -> String {
    format!("invalid type: {}, expected {expected}", found(v))
}

fn variant(v: &Value, allowed: &[&str]) -> Result<(), String> {
    let Some(s) = v.as_str() else { return Err(invalid(v, "a string")) };
    if allowed.contains(&s) {
        return Ok(());
    }
    let list: Vec<String> = allowed.iter().map(|a| format!("`{a}`")).collect();
    Err(format!("unknown variant `{s}`, expected one of {}", list.join(", ")))
}

fn strings(v: &Value, allowed: Option<&[&str]>) -> Result<(), String> {
    let Some(items) = v.as_array() else { return Err(invalid(v, "a sequence")) };
    for item in items {
        match allowed {
            Some(allowed) => variant(item, allowed)?,
            None if !item.is_string() => return Err(invalid(item, "a string")),
            None => {}
        }
    }
    Ok(())
}

fn object<'a>(v: &'a Value, what: &str) -> Result<&'a serde_json::Map<String, Value>, String> {
    v.as_object().ok_or_else(|| invalid(v, what))
}

fn required<'a>(obj: &'a serde_json::Map<String, Value>, key: &str) -> Result<&'a Value, String> {
    obj.get(key).ok_or_else(|| format!("missing field `{key}`"))
}

fn subscription(v: &Value) -> Result<(), String> {
    let obj = object(v, "internally tagged enum EventSubscription")?;
    let kind = required(obj, "type")?;
    if let Some(t) = kind.as_str()
        && PLAIN_SUBSCRIPTIONS.contains(&t)
    {
        return Ok(());
    }
    let mut all: Vec<&str> = PLAIN_SUBSCRIPTIONS.to_vec();
    all.extend(["pane.output_matched", "pane.agent_status_changed", "pane.scroll_changed"]);
    variant(kind, &all)?;
    let pane = required(obj, "pane_id")?;
    if !pane.is_string() {
        return Err(invalid(pane, "a string"));
    }
    match kind.as_str() {
        Some("pane.output_matched") => {
            variant(required(obj, "source")?, READ_SOURCES)?;
            check(Match, required(obj, "match")?)
        }
        Some("pane.agent_status_changed") => match obj.get("agent_status") {
            Some(s) if !s.is_null() => variant(s, STATUSES),
            _ => Ok(()),
        },
        _ => Ok(()),
    }
}

fn check(kind: Kind, v: &Value) -> Result<(), String> {
    match kind {
        Str if v.is_string() => Ok(()),
        Str => Err(invalid(v, "a string")),
        Bool if v.is_boolean() => Ok(()),
        Bool => Err(invalid(v, "a boolean")),
        U64 if v.is_u64() => Ok(()),
        U64 => Err(invalid(v, "u64")),
        Number if v.is_number() => Ok(()),
        Number => Err(invalid(v, "f32")),
        OneOf(allowed) => variant(v, allowed),
        Strings => strings(v, None),
        Statuses => strings(v, Some(STATUSES)),
        Match => {
            let obj = object(v, "internally tagged enum OutputMatch")?;
            variant(required(obj, "type")?, &["substring", "regex"])?;
            check(Str, required(obj, "value")?)
        }
        PromptWait => {
            let obj = object(v, "struct AgentPromptWaitOptions")?;
            for (key, kind) in [("until", Statuses), ("timeout_ms", U64)] {
                if let Some(x) = obj.get(key).filter(|x| !x.is_null()) {
                    check(kind, x)?;
                }
            }
            Ok(())
        }
        Subscriptions => {
            let Some(items) = v.as_array() else { return Err(invalid(v, "a sequence")) };
            items.iter().try_for_each(subscription)
        }
        EventMatch => {
            let obj = object(v, "internally tagged enum EventMatch")?;
            let kinds: Vec<&str> = EVENT_MATCHES.iter().map(|(k, _)| *k).collect();
            let kind = required(obj, "event")?;
            variant(kind, &kinds)?;
            let (_, needed) = EVENT_MATCHES.iter().find(|(k, _)| Some(*k) == kind.as_str()).expect("checked above");
            for key in *needed {
                check(Str, required(obj, key)?)?;
            }
            match obj.get("agent_status") {
                Some(s) if !s.is_null() => variant(s, STATUSES),
                _ => Ok(()),
            }
        }
    }
}

/// A request's `id` or `method`: a required string (the request must be a JSON object).
pub fn string_field<'a>(request: &'a Value, key: &str) -> Result<&'a str, String> {
    let Some(obj) = request.as_object() else { return Err(invalid(request, "struct Request")) };
    let v = required(obj, key)?;
    v.as_str().ok_or_else(|| invalid(v, "a string"))
}

/// How a request that parsed as JSON fares against Herdr's request type.
pub enum Verdict {
    /// Herdr would parse it; the simulator serves it.
    Served,
    /// Herdr would parse it, but the simulator has no model of this method.
    NotSimulated,
    /// Herdr refuses it with `invalid_request` (the message follows "invalid request: ").
    Invalid(String),
}

pub fn verdict(method: &str, params: Option<&Value>) -> Verdict {
    if !WIRE_METHODS.contains(&method) {
        let list: Vec<String> = WIRE_METHODS.iter().map(|m| format!("`{m}`")).collect();
        return Verdict::Invalid(format!("unknown variant `{method}`, expected one of {}", list.join(", ")));
    }
    let Some(params) = params else { return Verdict::Invalid("missing field `params`".into()) };
    let Some(spec) = fields(method) else {
        // Still a parse error when params is not even an object.
        return if params.is_object() { Verdict::NotSimulated } else { Verdict::Invalid(invalid(params, "a map")) };
    };
    let Some(obj) = params.as_object() else { return Verdict::Invalid(invalid(params, "a map")) };
    for (key, kind, needed) in spec {
        match obj.get(*key) {
            None if *needed => return Verdict::Invalid(format!("missing field `{key}`")),
            None => {}
            // Optional fields are `Option`s: null means absent.
            Some(Value::Null) if !needed => {}
            Some(v) => {
                if let Err(e) = check(*kind, v) {
                    return Verdict::Invalid(e);
                }
            }
        }
    }
    Verdict::Served
}
