#!/usr/bin/env python3
"""Writes replies.json: assistant reply texts with the classification and calls expected.

Expectations are stated here by hand, per case, from the protocol rules (spec/extension.md
§1.5 plus our drift tolerance); they are never produced by the Rust parser under test.
Run: python3 generate.py > replies.json
"""
import json

cases = []


def add(name, text, state, calls=(), variants=()):
    cases.append({
        "name": name,
        "text": text,
        "state": state,
        "calls": [{"tool": t, "args": a} for t, a in calls],
        "variants": sorted(set(variants)),
    })


def canon(tool, args, spaced=False):
    if spaced:
        return json.dumps({"tool": tool, "args": args}, ensure_ascii=False)
    return json.dumps({"tool": tool, "args": args}, separators=(",", ":"), ensure_ascii=False)


SAMPLES = [
    ("herdr_fs_read", {"workspace": "w1", "path": "src/main.rs"}),
    ("herdr_fs_list", {"workspace": "w1", "path": "."}),
    ("herdr_git", {"workspace": "w1", "args": ["status", "--short"]}),
    ("herdr_exec", {"workspace": "w1", "command": "cargo test -p ext-core", "timeout_ms": 60000}),
    ("herdr_inspect", {}),
    ("herdr_methods", {}),
    ("herdr_fs_grep", {"workspace": "w1", "pattern": "fn main", "glob": "*.rs"}),
    ("herdr_fs_write", {"workspace": "w1", "path": "notes.md", "content": "# Notes\n\nline two\n"}),
    ("herdr_fs_edit", {"workspace": "w1", "path": "a.txt", "old": "foo", "new": "bar"}),
    ("herdr_prompt", {"target": "claude-1", "text": "run the tests", "wait": {"until": ["idle", "done"], "timeout_ms": 20000}}),
    ("herdr_since", {"cursor": 42}),
    ("herdr_skill", {"name": "review"}),
    ("herdr_exec_start", {"workspace": "w1", "command": "npm run dev"}),
    ("herdr_exec_read", {"session_id": "s-1", "offset": 0}),
    ("herdr_exec_kill", {"session_id": "s-1"}),
    ("herdr_call", {"method": "workspace.list", "params": {"all": True, "limit": 5, "ratio": 0.5, "none": None}}),
    ("herdr_fs_image", {"workspace": "w1", "path": "shot.png"}),
    ("herdr_fs_patch", {"workspace": "w1", "patch": "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n", "dry_run": True}),
    ("herdr_git", {"workspace": "w1", "args": ["log", "-n", "3"]}),
    ("herdr_fs_read", {"workspace": "w1", "path": "dir with spaces/файл.txt", "start_line": 10, "end_line": 20}),
]

# 1. Canonical single calls, compact and spaced.
for i, (tool, args) in enumerate(SAMPLES):
    add(f"canonical_single_{i}", canon(tool, args, spaced=i % 2 == 1), "complete", [(tool, args)])

# 2. Batches, one call per line.
for n in range(2, 9):
    picked = [SAMPLES[(n * 3 + k) % len(SAMPLES)] for k in range(n)]
    add(f"batch_{n}_lines", "\n".join(canon(t, a) for t, a in picked), "complete", picked)
    add(f"batch_{n}_lines_trailing_newline", "\n".join(canon(t, a, True) for t, a in picked) + "\n", "complete", picked)
add("two_calls_same_line", canon(*SAMPLES[0]) + canon(*SAMPLES[1]), "complete", SAMPLES[0:2])
add("two_calls_same_line_space", canon(*SAMPLES[0]) + " " + canon(*SAMPLES[1]), "complete", SAMPLES[0:2])
add("batch_25_calls", "\n".join(canon("herdr_fs_read", {"path": f"f{k}"}) for k in range(25)), "complete",
    [("herdr_fs_read", {"path": f"f{k}"}) for k in range(25)])

# 3. CRLF line endings and pretty-printed calls with CRLF.
for i in range(6):
    picked = SAMPLES[i:i + 3]
    add(f"crlf_batch_{i}", "\r\n".join(canon(t, a) for t, a in picked) + "\r\n", "complete", picked)
pretty = json.dumps({"tool": "herdr_git", "args": {"workspace": "w1", "args": ["diff"]}}, indent=2)
add("crlf_pretty_printed", pretty.replace("\n", "\r\n"), "complete", [("herdr_git", {"workspace": "w1", "args": ["diff"]})])
add("pretty_printed_lf", pretty, "complete", [("herdr_git", {"workspace": "w1", "args": ["diff"]})])
add("tabs_and_spaces_inside", '{\t"tool" :\t"herdr_inspect" ,\n "args" : { } }', "complete", [("herdr_inspect", {})])

# 4. Raw Markdown fences.
for i in range(8):
    t, a = SAMPLES[i + 4]
    add(f"fenced_json_{i}", "```json\n" + canon(t, a) + "\n```", "complete", [(t, a)], ["fenced"])
add("fenced_plain", "```\n" + canon(*SAMPLES[0]) + "\n```", "complete", [SAMPLES[0]], ["fenced"])
add("fenced_two_calls", "```json\n" + canon(*SAMPLES[1]) + "\n" + canon(*SAMPLES[2]) + "\n```\n", "complete",
    SAMPLES[1:3], ["fenced"])
add("fenced_with_prose", "I will read the file first.\n\n```json\n" + canon(*SAMPLES[0]) + "\n```\n\nThen I will report.",
    "complete", [SAMPLES[0]], ["fenced"])
add("fence_then_outside_call", "```\nexample text\n```\n" + canon(*SAMPLES[3]), "complete", [SAMPLES[3]])

# 5. Rendered code blocks: fences gone, labels left as text.
for i, label in enumerate(["json\n", "json\nCopy\n", "jsonCopy", "JSON\nCopy code\n", "json Copy ", "Copy\n"]):
    t, a = SAMPLES[i + 10]
    add(f"rendered_label_{i}", label + canon(t, a), "complete", [(t, a)], ["fenced"])

# 6. Arrays of calls.
for n in range(1, 6):
    picked = SAMPLES[n:n + n]
    arr = "[" + ",".join(canon(t, a) for t, a in picked) + "]"
    add(f"array_{n}_calls", arr, "complete", picked, ["array"])
arr = json.dumps([{"tool": t, "args": a} for t, a in SAMPLES[0:3]], indent=2)
add("array_pretty", arr, "complete", SAMPLES[0:3], ["array"])
add("array_in_fence", "```json\n" + arr + "\n```", "complete", SAMPLES[0:3], ["array", "fenced"])
add("array_crlf", arr.replace("\n", "\r\n"), "complete", SAMPLES[0:3], ["array"])
add("array_mixed_with_number", '[{"tool":"herdr_inspect","args":{}}, 5]', "malformed")
add("array_mixed_with_object", '[{"tool":"herdr_inspect","args":{}}, {"note":"x"}]', "malformed")

# 7. OpenAI-style shapes.
for i in range(5):
    t, a = SAMPLES[i]
    add(f"name_arguments_object_{i}", json.dumps({"name": t, "arguments": a}), "complete", [(t, a)], ["name_arguments"])
for i in range(3):
    t, a = SAMPLES[i + 5]
    add(f"name_arguments_string_{i}", json.dumps({"name": t, "arguments": json.dumps(a)}), "complete", [(t, a)],
        ["name_arguments", "string_arguments"])
add("function_wrapper", json.dumps({"type": "function", "function": {"name": "herdr_git", "arguments": json.dumps({"args": ["status"]})}}),
    "complete", [("herdr_git", {"args": ["status"]})], ["name_arguments", "string_arguments"])
add("tool_with_arguments_key", '{"tool":"herdr_fs_list","arguments":{"path":"."}}', "complete", [("herdr_fs_list", {"path": "."})],
    ["name_arguments"])
add("name_args_key", '{"name":"herdr_fs_list","args":{"path":"src"}}', "complete", [("herdr_fs_list", {"path": "src"})], ["name_arguments"])
add("name_arguments_bad_string", '{"name":"herdr_git","arguments":"not json"}', "malformed")
add("tool_args_as_string", '{"tool":"herdr_fs_read","args":"{\\"path\\":\\"x\\"}"}', "complete", [("herdr_fs_read", {"path": "x"})],
    ["string_arguments"])
add("name_arguments_array", json.dumps([{"name": "herdr_inspect", "arguments": {}}, {"name": "herdr_methods", "arguments": {}}]),
    "complete", [("herdr_inspect", {}), ("herdr_methods", {})], ["array", "name_arguments"])

# 8. Wrappers.
add("tool_calls_wrapper", json.dumps({"tool_calls": [{"function": {"name": "herdr_inspect", "arguments": "{}"}}]}), "complete",
    [("herdr_inspect", {})], ["name_arguments", "string_arguments", "wrapped"])
add("calls_wrapper", json.dumps({"calls": [{"tool": "herdr_methods", "args": {}}, {"tool": "herdr_inspect", "args": {}}]}), "complete",
    [("herdr_methods", {}), ("herdr_inspect", {})], ["wrapped"])
add("calls_wrapper_empty", '{"calls": []}', "malformed")

# 9. Prose around canonical calls (tolerated, not a drift).
for i, (before, after) in enumerate([
    ("Let me check.\n", ""), ("", "\nThat should do it."), ("Sure! ", " Next I'll look at the diff."),
    ("Step 1:\n", "\nStep 2 comes after the result."), ("I need two things:\n", "\n(and nothing else)"),
    ("Okay — reading now…\n\n", "\n\n"), ("先看一下文件。\n", "\n然后再说。"), ("Note: {braces} in prose are fine.\n", ""),
]):
    t, a = SAMPLES[i + 2]
    add(f"prose_around_{i}", before + canon(t, a) + after, "complete", [(t, a)])
add("prose_between_calls", canon(*SAMPLES[0]) + "\nand also\n" + canon(*SAMPLES[1]), "complete", SAMPLES[0:2])
add("prose_with_noncall_json_and_call", 'The config is {"debug": true}.\n' + canon(*SAMPLES[4]), "complete", [SAMPLES[4]])

# 10. Normal answers (none).
for i, text in enumerate([
    "The tests pass: 42 passed, 0 failed.",
    "Done. I changed `src/lib.rs` to add the parser module.",
    "In Rust you write a closure as |x| { x + 1 } and a block as { ... }.",
    'Set the key in config as {"retries": 3 } and restart.',
    "Use arrays like [1, 2, 3] or [\"a\", \"b\"].",
    "Markdown link: [docs](https://example.com) and a footnote[1].",
    "```rust\nfn main() { println!(\"hi\"); }\n```",
    "The object {name} is interpolated by the template.",
    "",
    "   \n\t  ",
    "I could call a tool, but the answer is simply: yes.",
    'The response contained "tool": "x" as a quoted fragment, not JSON.',
    "Math: $x^2$ and sets {1,2}.",
    "你好！任务已经完成。",
    "Emoji answer 🎉 with no JSON at all.",
    'Here is the result object: {"status": "ok", "count": 3}',
    "Trailing brace in prose }",
]):
    add(f"answer_none_{i}", text, "none")

# 11. Broken call JSON (malformed).
for i, text in enumerate([
    '{"tool":oops}',
    '{"tool":"herdr_inspect","args":{},}',
    "{'tool':'herdr_inspect','args':{}}",
    '{"tool":"","args":{}}',
    '{"tool":"   ","args":{}}',
    '{"tool":5,"args":{}}',
    '{"tool":null}',
    '{"tool":["herdr_git"],"args":{}}',
    '{"tool":"herdr_git" "args":{}}',
    '{"tool":"herdr_git","args":{"a":01}}',
    canon(*SAMPLES[0]) + '\n{"tool":"herdr_fs_list","args":{"path":}}',
    '{"tool":"herdr_git","args":{"x":NaN}}',
    'Calling now: {"tool": herdr_inspect, "args": {}}',
    '{"tool":"herdr_exec","args":{"command":"echo \\q"}}',
]):
    add(f"broken_{i}", text, "malformed")
add("extra_closing_brace_is_prose", '{"tool":"herdr_git","args":{"a":1}}}', "complete", [("herdr_git", {"a": 1})])
add("syntax_mention_in_prose_is_call_like", 'Use `{"tool": ...}` syntax only when calling tools.', "malformed")
add("single_quoted_only", "{'tool':'herdr_inspect'}", "malformed")
add("leading_prose_brace_only", "{braces} start this answer", "malformed")
add("deep_nesting_over_parser_limit", '{"tool":"herdr_call","args":{"x":' + "[" * 200 + "]" * 200 + "}}", "malformed")

# 12. Only non-call JSON.
for i, text in enumerate(['{"status":"x"}', '  {"answer": 42}  ', "json\n{\"result\": [1,2]}", '[{"a":1},{"b":2}]',
                          '```json\n{"summary": "done"}\n```', '{}']):
    add(f"only_noncall_json_{i}", text, "malformed")
# A reply opening with `[` is treated like one opening with `{` (spec §1.5: "malformed if it then
# starts with [ or {"), whether or not what follows parses.
for i, text in enumerate(["[1, 2, 3]", '["herdr_inspect", {}]', "```json\n[1,2]\n```", "json\n[]", "[Note] The build passed."]):
    add(f"leading_bracket_{i}", text, "malformed")

# 13. Truncated streams: cuts inside the last call are incomplete; cuts between calls complete.
stream_calls = SAMPLES[7:10]
full = "\n".join(canon(t, a) for t, a in stream_calls)
starts = []
pos = 0
for t, a in stream_calls:
    s = canon(t, a)
    starts.append((pos, pos + len(s)))
    pos += len(s) + 1
for k, cut in enumerate([1, 2, 9, starts[0][1] - 1, starts[0][1], starts[0][1] + 1, starts[1][0] + 1, starts[1][0] + 15,
                         starts[1][1] - 2, starts[1][1] + 1, starts[2][0] + 30, len(full) - 1, len(full) - 3]):
    text = full[:cut]
    done = [c for c, (s, e) in zip(stream_calls, starts) if e <= cut]
    inside = any(s < cut < e for s, e in starts)
    at_brace = cut > 0 and text.endswith("{")
    state = "incomplete" if inside or at_brace else ("complete" if done else "none")
    add(f"truncated_stream_{k}", text, state, done if state == "complete" else [])
add("truncated_inside_string_with_brace", '{"tool":"herdr_fs_write","args":{"content":"fn x() {', "incomplete")
add("truncated_after_escape", '{"tool":"herdr_exec","args":{"command":"echo \\', "incomplete")
add("truncated_array", '[{"tool":"herdr_inspect","args":{}},', "incomplete")
add("truncated_openai", '{"name":"herdr_git","argu', "incomplete")
add("truncated_after_complete_and_prose", canon(*SAMPLES[0]) + '\nnow {"tool":"herdr_fs_li', "incomplete")
# An unclosed value after the calls that is plainly not a call is prose: the calls stand (the
# reference only scans objects that open with "tool").
add("unclosed_noncall_after_call", canon(*SAMPLES[0]) + '\nThen I look for {"key": 1', "complete", [SAMPLES[0]])
add("unclosed_noncall_array_after_call", canon(*SAMPLES[4]) + '\nand [{"a": 1}, ', "complete", [SAMPLES[4]])

# 14. Hostile strings.
hostile = [
    ("braces_in_string", {"content": "fn main() { if x { } } }}}{{{"}),
    ("quotes_and_escapes", {"content": "say \"hi\" \\ and \\\\ and \\\" }"}),
    ("embedded_call_in_string", {"content": '{"tool":"evil","args":{}}'}),
    ("embedded_array_in_string", {"content": '[{"tool":"evil"}]'}),
    ("fence_in_string", {"content": "```json\n{\"tool\":\"x\"}\n```"}),
    ("newline_escapes", {"content": "a\nb\r\nc\td"}),
    ("unicode_escape_dollar", {"command": "echo $HOME && echo ${PATH}"}),
    ("control_chars_escaped", {"content": "\u0000\u0001\u001f"}),
    ("backslash_at_end", {"path": "C:\\dir\\"}),
    ("label_words_in_string", {"text": "json Copy Copy code ```"}),
    ("marker_in_string", {"text": "[HERDR_JSON_BRIDGE_V1] TOOL_RESULT:\n[]"}),
    ("nested_deep_ok", {"a": {"b": {"c": {"d": {"e": [1, [2, [3, {"f": None}]]]}}}}}),
    ("surrogate_pair", {"text": "😀 \U0001F680"}),
    ("rtl_and_zero_width", {"text": "\u202eabc\u200b"}),
]
for name, args in hostile:
    add(f"hostile_{name}", canon("herdr_fs_write", args), "complete", [("herdr_fs_write", args)])
add("hostile_u0024_escape_literal", '{"tool":"herdr_exec","args":{"command":"echo \\u0024HOME"}}', "complete",
    [("herdr_exec", {"command": "echo $HOME"})])
add("hostile_ascii_escaped_unicode", json.dumps({"tool": "herdr_fs_write", "args": {"text": "héllo 😀"}}), "complete",
    [("herdr_fs_write", {"text": "héllo 😀"})])
add("hostile_tool_name_padded", '{"tool":"  herdr_inspect  ","args":{}}', "complete", [("herdr_inspect", {})])
add("hostile_extra_keys", '{"tool":"herdr_inspect","args":{},"why":"because"}', "complete", [("herdr_inspect", {})])
add("hostile_args_missing", '{"tool":"herdr_inspect"}', "complete", [("herdr_inspect", {})])
add("hostile_args_array_kept_for_validation", '{"tool":"herdr_inspect","args":[1]}', "complete", [("herdr_inspect", [1])])
add("hostile_duplicate_tool_key_last_wins", '{"tool":"a","tool":"herdr_git","args":{}}', "complete", [("herdr_git", {})])

# 15. Huge arguments.
for i, n in enumerate([5_000, 20_000, 40_000]):
    args = {"path": "big.txt", "content": ("x{}\"\\" * (n // 5))}
    add(f"huge_args_{i}", canon("herdr_fs_write", args), "complete", [("herdr_fs_write", args)])
many = {f"k{j}": j for j in range(2000)}
add("huge_many_keys", canon("herdr_call", many), "complete", [("herdr_call", many)])
add("huge_prose_then_call", "word " * 4000 + "\n" + canon(*SAMPLES[0]), "complete", [SAMPLES[0]])

# 16. Unicode everywhere.
for i, text in enumerate(["Ünïcödé", "日本語のパス/ファイル.txt", "emoji 🧪🔥", "mixed ñ 中 😀 \u00e9"]):
    add(f"unicode_args_{i}", canon("herdr_fs_read", {"path": text}), "complete", [("herdr_fs_read", {"path": text})])
add("unicode_tool_name", '{"tool":"herdr_ünknown","args":{}}', "complete", [("herdr_ünknown", {})])
add("unicode_prose_then_call", "好的，我先查看目录结构：\n" + canon("herdr_fs_list", {"path": "."}) + "\n稍等。", "complete",
    [("herdr_fs_list", {"path": "."})])

# 17. Raw control characters inside strings (invalid JSON that models often write).
add("raw_newline_in_string", '{"tool":"herdr_fs_write","args":{"content":"line1\nline2"}}', "complete",
    [("herdr_fs_write", {"content": "line1\nline2"})], ["raw_control_chars"])
add("raw_tab_and_crlf_in_string", '{"tool":"herdr_fs_write","args":{"content":"a\tb\r\nc"}}', "complete",
    [("herdr_fs_write", {"content": "a\tb\r\nc"})], ["raw_control_chars"])

# 18. A bad object blocks the whole reply, even next to good calls.
add("good_then_bad_blocks_reply", canon(*SAMPLES[0]) + '\n{"tool":7,"args":{}}', "malformed")
add("bad_then_good_blocks_reply", '{"tool":"herdr_git","args":{"a":]}}\n' + canon(*SAMPLES[1]), "malformed")
add("good_then_incomplete", canon(*SAMPLES[0]) + '\n{"tool":"herdr_git","args":{"a":[1,2', "incomplete")
add("trailing_open_brace_only", "Let me think {", "incomplete")

names = [c["name"] for c in cases]
assert len(names) == len(set(names)), "duplicate case names"
print(json.dumps({"comment": "Generated by generate.py; expectations are hand-stated per case.", "cases": cases}, ensure_ascii=False, indent=1))
