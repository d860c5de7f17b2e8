//! Every integer limit of the contract (spec §1) at its edges, through the
//! registry: min-1 and max+1 are refused with `invalid_params` worded as the
//! contract words it (`<key> must be an integer in MIN..=MAX`), min, min+1,
//! max-1 and max get past validation. The table is the spec's; a schema that
//! drifts from it fails here.

mod tools_support;

use serde_json::{Value, json};
use tools_support::*;

const MAX_SAFE: u64 = 9_007_199_254_740_991;

/// `(tool, key, min, max)` as spec §1 gives them.
const LIMITS: &[(&str, &str, u64, u64)] = &[
    ("herdr_fs_read", "start_line", 1, MAX_SAFE),
    ("herdr_fs_read", "end_line", 1, MAX_SAFE),
    ("herdr_fs_read", "max_bytes", 1, 262_144),
    ("herdr_fs_list", "max_entries", 1, 2000),
    ("herdr_fs_grep", "max_matches", 1, 1000),
    ("herdr_fs_grep", "max_bytes", 1, 1_048_576),
    ("herdr_fs_image", "max_bytes", 1, 8_000_000),
    ("herdr_git", "max_count", 1, 100),
    ("herdr_git", "max_bytes", 1, 512_000),
    ("herdr_exec_read", "offset", 0, MAX_SAFE),
    ("herdr_exec_read", "limit", 1, 262_144),
    ("herdr_exec", "timeout_ms", 1, 60_000),
    ("herdr_since", "cursor", 0, MAX_SAFE),
    ("herdr_prompt", "wait.timeout_ms", 1, 60_000),
];

/// Arguments that make each tool valid apart from the limit under test. The
/// calls may still fail (no Herdr, no exec, a window past the end), just never
/// with invalid_params.
fn base(repo: &Repo, tool: &str) -> Value {
    match tool {
        "herdr_fs_read" => json!({"path": repo.p("f.txt"), "end_line": MAX_SAFE}),
        "herdr_fs_list" => json!({"path": repo.p("")}),
        "herdr_fs_grep" => json!({"root": repo.p(""), "pattern": "x"}),
        "herdr_fs_image" => json!({"path": repo.p("f.txt")}),
        "herdr_git" => json!({"root": repo.p(""), "action": "log"}),
        "herdr_exec_read" => json!({"session_id": "es_1-1-1"}),
        "herdr_exec" => json!({"workspace": "w", "command": "true"}),
        "herdr_since" => json!({}),
        "herdr_prompt" => json!({"target": "pi", "text": "hi", "wait": {}}),
        other => panic!("no base arguments for {other}"),
    }
}

fn with(mut args: Value, key: &str, value: Value) -> Value {
    let mut at = &mut args;
    let mut parts = key.split('.').peekable();
    while let Some(part) = parts.next() {
        if parts.peek().is_none() {
            at[part] = value;
            break;
        }
        at = &mut at[part];
    }
    args
}

#[test]
fn every_integer_limit_holds_at_its_edges() {
    let repo = Repo::with_files(&[("f.txt", "x\n")]);
    let ctx = repo.ctx();
    for &(tool, key, min, max) in LIMITS {
        let expected = format!("{key} must be an integer in {min}..={max}");
        let pointer = format!("/{}", key.replace('.', "/"));
        let mut inside = vec![min, min + 1, max - 1, max];
        inside.dedup();
        for value in inside {
            let r = call(&ctx, tool, with(base(&repo, tool), key, json!(value)));
            assert_ne!(r["code"], "invalid_params", "{tool} {key}={value} is within the limit: {r}");
        }
        let mut outside = vec![json!(max + 1)];
        if min > 0 {
            outside.push(json!(min - 1));
        } else {
            outside.push(json!(-1));
        }
        for value in outside {
            let r = call(&ctx, tool, with(base(&repo, tool), key, value.clone()));
            assert_code(&r, "invalid_params");
            assert_eq!(r["message"], expected, "{tool} {key}={value}");
            assert_eq!(r["errors"][0]["pointer"], pointer, "{tool} {key}={value}");
        }
    }
}

/// Wrong types name the argument and the type it needs.
#[test]
fn wrong_types_name_the_argument_and_its_type() {
    let repo = Repo::with_files(&[("f.txt", "x\n")]);
    let ctx = repo.ctx();
    let cases: &[(&str, Value, &str)] = &[
        ("herdr_fs_read", json!({"path": 5}), "path must be a string"),
        ("herdr_fs_read", json!({"path": repo.p("f.txt"), "max_bytes": "5"}), "max_bytes must be an integer"),
        ("herdr_fs_read", json!({"path": repo.p("f.txt"), "start_line": 1.5}), "start_line must be an integer"),
        ("herdr_fs_list", json!({"path": repo.p(""), "recursive": "yes"}), "recursive must be a boolean"),
        ("herdr_prompt", json!({"target": "pi", "text": "hi", "wait": []}), "wait must be an object"),
        ("herdr_exec", json!({"workspace": "w", "steps": {}}), "steps must be an array"),
    ];
    for (tool, args, expected) in cases {
        let r = call(&ctx, tool, args.clone());
        assert_code(&r, "invalid_params");
        assert_eq!(r["message"], *expected, "{tool} {args}");
    }
}

/// String length limits, in characters: 1 (or 0 where empty is allowed),
/// max-1 and max get past validation; max+1 and, where a minimum of 1 holds,
/// the empty string are refused in words that name the limit.
#[test]
fn string_lengths_hold_at_their_edges() {
    let repo = Repo::with_files(&[]);
    let ctx = repo.ctx();
    // (tool, other arguments, field, may be empty, max characters)
    let cases: &[(&str, Value, &str, bool, usize)] = &[
        (
            "herdr_exec",
            json!({"workspace": "w", "command": "true", "intent": "read_only"}),
            "idempotency_key",
            false,
            256,
        ),
        ("herdr_exec", json!({"command": "true"}), "workspace", false, 256),
        ("herdr_exec", json!({"workspace": "w"}), "command", false, 65_536),
        ("herdr_exec_start", json!({"root": repo.p("")}), "command", false, 65_536),
        ("herdr_exec_read", json!({}), "session_id", false, 128),
        ("herdr_exec_kill", json!({}), "session_id", false, 128),
        ("herdr_prompt", json!({"target": "pi", "text": "hi"}), "idempotency_key", false, 256),
        ("herdr_prompt", json!({"text": "hi"}), "target", false, 256),
        ("herdr_prompt", json!({"target": "pi"}), "text", true, 65_536),
        ("herdr_methods", json!({}), "query", true, 256),
        ("herdr_since", json!({}), "workspace", false, 256),
        ("herdr_call", json!({}), "method", false, 128),
        ("herdr_call", json!({"method": "pane.list"}), "params", true, 262_144),
        ("herdr_fs_list", json!({"path": repo.p("")}), "glob", false, 512),
        ("herdr_fs_grep", json!({"root": repo.p(""), "pattern": "x"}), "glob", false, 512),
        ("herdr_fs_grep", json!({"root": repo.p("")}), "pattern", false, 4096),
        ("herdr_fs_read", json!({}), "path", false, 4096),
        ("herdr_fs_patch", json!({"root": repo.p("")}), "patch", false, 1_000_000),
    ];
    for (tool, args, field, may_be_empty, max) in cases {
        let call_with = |n: usize| {
            let mut args = args.clone();
            args[*field] = json!("k".repeat(n));
            call(&ctx, tool, args)
        };
        let shortest = if *may_be_empty { 0 } else { 1 };
        for n in [shortest, max - 1, *max] {
            let r = call_with(n);
            assert_ne!(r["code"], "invalid_params", "{tool} {field} of {n} characters: {r}");
        }
        let r = call_with(max + 1);
        assert_code(&r, "invalid_params");
        assert_eq!(r["message"], format!("{field} must be at most {max} characters long"), "{tool}");
        if !may_be_empty {
            let r = call_with(0);
            assert_code(&r, "invalid_params");
            assert_eq!(r["message"], format!("{field} must not be empty"), "{tool}");
        }
    }
}

/// herdr_exec's steps: 1..=16 steps of at most 128 arguments each.
#[test]
fn exec_steps_hold_at_their_edges() {
    let repo = Repo::with_files(&[]);
    let ctx = repo.ctx();
    let steps = |n: usize, args: usize| {
        let step = json!({"program": "echo", "args": vec!["a"; args]});
        json!({"workspace": "w", "steps": vec![step; n]})
    };
    for (n, args) in [(1, 0), (15, 1), (16, 127), (16, 128)] {
        let r = call(&ctx, "herdr_exec", steps(n, args));
        assert_ne!(r["code"], "invalid_params", "{n} steps of {args} args: {r}");
    }
    for (n, args, message) in [
        (0, 0, "steps must not be empty"),
        (17, 0, "steps must hold at most 16 items"),
        (1, 129, "steps.0.args must hold at most 128 items"),
    ] {
        let r = call(&ctx, "herdr_exec", steps(n, args));
        assert_code(&r, "invalid_params");
        assert_eq!(r["message"], message, "{n} steps of {args} args");
    }
}

/// A missing argument, an unknown one and a value outside an enum are named
/// with what would be accepted, so the next call can be right.
#[test]
fn missing_unknown_and_enum_arguments_say_what_is_accepted() {
    let repo = Repo::with_files(&[("f.txt", "x\n")]);
    let ctx = repo.ctx();
    let cases: &[(&str, Value, &str)] = &[
        ("herdr_fs_read", json!({}), "path is required"),
        ("herdr_git", json!({"root": repo.p("")}), "action is required"),
        (
            "herdr_fs_read",
            json!({"path": repo.p("f.txt"), "lines": 5}),
            "unknown argument lines; the tool accepts end_line, max_bytes, path, start_line",
        ),
        (
            "herdr_prompt",
            json!({"target": "pi", "text": "hi", "wait": {"for": ["idle"]}}),
            "unknown argument wait.for; wait accepts timeout_ms, until",
        ),
        ("herdr_git", json!({"root": repo.p(""), "action": "push"}), "action must be one of status, diff, log"),
        ("herdr_exec_read", json!({"session_id": "s", "stream": "all"}), "stream must be one of stdout, stderr, both"),
    ];
    for (tool, args, expected) in cases {
        let r = call(&ctx, tool, args.clone());
        assert_code(&r, "invalid_params");
        assert_eq!(r["message"], *expected, "{tool} {args}");
    }
}
