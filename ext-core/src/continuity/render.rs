//! Wake texts (spec/extension.md §7.4): templates in English, Chinese and Japanese with
//! placeholders, a bounded output excerpt and a bounded pane roster.
//!
//! Every text starts with a fixed per-language prefix ([`WAKE_PREFIXES`]) so the delivery
//! guard can tell our own earlier wake in the composer from the user's draft.

use serde::{Deserialize, Serialize};

use super::push_event::AgentInfo;

/// Longest output excerpt in a wake, in characters (the tail is kept).
pub const MAX_OUTPUT_CHARS: usize = 4_000;
/// Longest pane roster, in characters.
pub const MAX_ROSTER_CHARS: usize = 6_000;
/// Longest terminal title shown per pane.
pub const MAX_TITLE_CHARS: usize = 120;
/// Longest working directory shown per pane (its tail).
pub const MAX_CWD_CHARS: usize = 60;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Lang {
    #[default]
    En,
    Zh,
    Ja,
}

impl Lang {
    /// From a browser language tag (`navigator.language`): `zh*` → Chinese, `ja*` →
    /// Japanese, anything else → English.
    pub fn from_tag(tag: &str) -> Lang {
        let tag = tag.trim().to_ascii_lowercase();
        if tag.starts_with("zh") {
            Lang::Zh
        } else if tag.starts_with("ja") {
            Lang::Ja
        } else {
            Lang::En
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WakeKind {
    /// Every agent of the workspace has stopped.
    Round,
    /// One agent stopped while others still work.
    Partial,
    /// A periodic report while agents work.
    Progress,
    /// A command session in the bound root finished.
    Exec,
}

/// The fixed start of every wake text, per language.
pub const WAKE_PREFIXES: [&str; 3] = ["[Herdr update]", "[Herdr 进展]", "[Herdr 報告]"];

pub fn prefix(lang: Lang) -> &'static str {
    match lang {
        Lang::En => WAKE_PREFIXES[0],
        Lang::Zh => WAKE_PREFIXES[1],
        Lang::Ja => WAKE_PREFIXES[2],
    }
}

/// True when `text` (e.g. what sits in a composer) is a wake text we wrote.
pub fn is_wake_text(text: &str) -> bool {
    let t = text.trim_start_matches(|c: char| c.is_whitespace() || c == '\u{200b}');
    WAKE_PREFIXES.iter().any(|p| t.starts_with(p))
}

/// The built-in template of a kind in a language.
pub fn default_template(kind: WakeKind, lang: Lang) -> &'static str {
    use Lang::*;
    use WakeKind::*;
    match (lang, kind) {
        (En, Round) => "[Herdr update] Workspace {workspace_label}: all agents have stopped. The last one was {agent} in pane {pane}, now {status}.\n\nWhat {pane} printed last:\n{output}\n\n{roster}\n\n{idle_hint}\n\nLook at these results and pick the next step. Reading files or running a quick command is preferred over starting another expensive model run.",
        (En, Partial) => "[Herdr update] Workspace {workspace_label}: {agent} in pane {pane} stopped ({status}), and {working_count} other agent(s) are still busy. This is only part of the round.\n\nWhat {pane} printed last:\n{output}\n\n{roster}\n\n{idle_hint}\n\nUse what is ready now; another update follows when the rest stop.",
        (En, Progress) => "[Herdr update] Workspace {workspace_label}: progress report, {working_count} agent(s) still working. Latest from {agent} in pane {pane}:\n{output}\n\n{roster}\n\n{idle_hint}\n\nThe working agents need nothing from you unless this looks off track.",
        (En, Exec) => "[Herdr update] Command session {agent} in {pane} (workspace {workspace_label}) has finished: {status}.\n\n{output}\n\nRead its output with the exec tools if you need it, then carry on.",
        (Zh, Round) => "[Herdr 进展] 工作区 {workspace_label}：所有 agent 都已停下。最后停下的是窗格 {pane} 中的 {agent}，状态 {status}。\n\n{pane} 最近的输出：\n{output}\n\n{roster}\n\n{idle_hint}\n\n请查看这些结果并决定下一步。优先读取文件或运行简短命令，而不是再启动一次昂贵的模型任务。",
        (Zh, Partial) => "[Herdr 进展] 工作区 {workspace_label}：窗格 {pane} 中的 {agent} 已停下（{status}），另有 {working_count} 个 agent 仍在工作。这只是本轮的一部分结果。\n\n{pane} 最近的输出：\n{output}\n\n{roster}\n\n{idle_hint}\n\n可以先处理已完成的部分；其余 agent 停下后会再通知。",
        (Zh, Progress) => "[Herdr 进展] 工作区 {workspace_label}：进度报告，仍有 {working_count} 个 agent 在工作。窗格 {pane} 中 {agent} 的最新输出：\n{output}\n\n{roster}\n\n{idle_hint}\n\n如无异常，正在工作的 agent 无需操作。",
        (Zh, Exec) => "[Herdr 进展] 命令会话 {agent}（{pane}，工作区 {workspace_label}）已结束：{status}。\n\n{output}\n\n如需查看输出，请用 exec 工具读取，然后继续。",
        (Ja, Round) => "[Herdr 報告] ワークスペース {workspace_label}：すべてのエージェントが停止しました。最後はペイン {pane} の {agent} で、状態は {status} です。\n\n{pane} の直近の出力：\n{output}\n\n{roster}\n\n{idle_hint}\n\n結果を確認して次の手順を決めてください。高価なモデル実行を増やすより、ファイルの確認や短いコマンドを優先してください。",
        (Ja, Partial) => "[Herdr 報告] ワークスペース {workspace_label}：ペイン {pane} の {agent} が停止しました（{status}）。ほかに {working_count} 個のエージェントがまだ作業中で、これはラウンドの一部です。\n\n{pane} の直近の出力：\n{output}\n\n{roster}\n\n{idle_hint}\n\n準備できた分から進めてください。残りが止まったら改めて知らせます。",
        (Ja, Progress) => "[Herdr 報告] ワークスペース {workspace_label}：途中経過です。{working_count} 個のエージェントが作業中です。ペイン {pane} の {agent} の最新出力：\n{output}\n\n{roster}\n\n{idle_hint}\n\n問題がなければ、作業中のエージェントへの対応は不要です。",
        (Ja, Exec) => "[Herdr 報告] コマンドセッション {agent}（{pane}、ワークスペース {workspace_label}）が終了しました：{status}。\n\n{output}\n\n必要なら exec ツールで出力を読み、作業を続けてください。",
    }
}

fn no_output(lang: Lang) -> &'static str {
    match lang {
        Lang::En => "(no output captured)",
        Lang::Zh => "（未捕获到输出）",
        Lang::Ja => "（出力は取得できませんでした）",
    }
}

/// Everything a wake text may mention.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WakeFacts {
    pub agent: String,
    pub pane: String,
    pub status: String,
    pub workspace_id: String,
    pub workspace_label: Option<String>,
    /// Folder names of the workspace roots, for the label when there is none.
    pub workspace_roots: Vec<String>,
    pub working_count: usize,
    pub output: String,
    /// Agents of the workspace, for the roster.
    pub agents: Vec<AgentInfo>,
}

/// Renders a wake. `custom` replaces the built-in template (Options); the prefix is added
/// when a custom template lacks it, and the roster and idle hint are appended when their
/// placeholders are missing.
pub fn render(kind: WakeKind, lang: Lang, custom: Option<&str>, facts: &WakeFacts) -> String {
    let template = custom.filter(|t| !t.trim().is_empty()).unwrap_or_else(|| default_template(kind, lang));
    let mut template = template.to_owned();
    if !is_wake_text(&template) {
        template = format!("{} {template}", prefix(lang));
    }
    let with_roster = matches!(kind, WakeKind::Round | WakeKind::Partial | WakeKind::Progress);
    let roster = if with_roster { roster(lang, facts) } else { String::new() };
    let idle_hint = if with_roster { idle_hint(lang, &facts.agents) } else { String::new() };
    if with_roster && !template.contains("{roster}") {
        template.push_str("\n\n{roster}");
    }
    if with_roster && !template.contains("{idle_hint}") {
        template.push_str("\n\n{idle_hint}");
    }
    let excerpt = tail_chars(facts.output.trim(), MAX_OUTPUT_CHARS);
    let output = if excerpt.is_empty() { no_output(lang).to_owned() } else { excerpt.to_owned() };
    let label = workspace_label(facts);
    let count = facts.working_count.to_string();
    // One pass over the template: a value containing `{…}` is never expanded again.
    let mut out = String::with_capacity(template.len() + output.len() + roster.len());
    let mut rest = template.as_str();
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open..];
        let close = after.find('}').map(|c| &after[1..c]);
        let value = match close {
            Some("agent") => Some(facts.agent.as_str()),
            Some("pane") => Some(facts.pane.as_str()),
            Some("status") => Some(facts.status.as_str()),
            Some("workspace") => Some(facts.workspace_id.as_str()),
            Some("workspace_label") => Some(label.as_str()),
            Some("roster") => Some(roster.as_str()),
            Some("idle_hint") => Some(idle_hint.as_str()),
            Some("output") => Some(output.as_str()),
            Some("working_count") => Some(count.as_str()),
            _ => None,
        };
        match (value, close) {
            (Some(v), Some(name)) => {
                out.push_str(v);
                rest = &after[name.len() + 2..];
            }
            _ => {
                out.push('{');
                rest = &after[1..];
            }
        }
    }
    out.push_str(rest);
    tidy(&out)
}

/// `label (id)`, else the root folder names, else the id.
pub fn workspace_label(facts: &WakeFacts) -> String {
    match facts.workspace_label.as_deref().map(str::trim).filter(|l| !l.is_empty()) {
        Some(label) if label != facts.workspace_id && !facts.workspace_id.is_empty() => {
            format!("{label} ({})", facts.workspace_id)
        }
        Some(label) => label.to_owned(),
        None => {
            let names: Vec<&str> = facts
                .workspace_roots
                .iter()
                .filter_map(|r| r.trim_end_matches('/').rsplit('/').next())
                .filter(|n| !n.is_empty())
                .collect();
            if names.is_empty() { facts.workspace_id.clone() } else { names.join(", ") }
        }
    }
}

/// The pane roster: a header, then each pane (sorted) with its agent, status, terminal
/// title and working directory. Cut at a pane boundary to stay within [`MAX_ROSTER_CHARS`].
pub fn roster(lang: Lang, facts: &WakeFacts) -> String {
    let mut agents: Vec<&AgentInfo> = facts.agents.iter().filter(|a| a.pane.is_some()).collect();
    agents.sort_by(|a, b| a.pane.cmp(&b.pane));
    let label = workspace_label(facts);
    let (header, no_title, focus, title_word, more) = match lang {
        Lang::En => (format!("Panes of workspace {label} ({}):", agents.len()), "(no terminal title)", " ← focus", "doing", "more pane(s) not shown"),
        Lang::Zh => (format!("工作区 {label} 的窗格（{}）：", agents.len()), "（无终端标题）", " ← 焦点", "正在做", "个窗格未列出"),
        Lang::Ja => (format!("ワークスペース {label} のペイン（{}）：", agents.len()), "（端末タイトルなし）", " ← 注目", "作業", "個のペインは省略"),
    };
    let mut out = header;
    for (i, a) in agents.iter().enumerate() {
        let pane = a.pane.as_deref().unwrap_or_default();
        let name = a.name.as_deref().unwrap_or("?");
        let status = a.status.as_deref().unwrap_or("unknown");
        let mark = if pane == facts.pane { focus } else { "" };
        let title = a.terminal_title.as_deref().map(str::trim).filter(|t| !t.is_empty());
        let title = title.map(|t| head_chars(t, MAX_TITLE_CHARS)).unwrap_or(no_title);
        let mut entry = format!("\n- {pane} · {name} · {status}{mark}\n  {title_word}: {title}");
        if let Some(cwd) = a.cwd.as_deref().filter(|c| !c.is_empty()) {
            entry.push_str(&format!("\n  cwd: {}", tail_chars(&shorten_home(cwd), MAX_CWD_CHARS)));
        }
        let left = agents.len() - i;
        let tail_note = format!("\n… {left} {more}");
        if out.chars().count() + entry.chars().count() + tail_note.chars().count() > MAX_ROSTER_CHARS {
            out.push_str(&tail_note);
            break;
        }
        out.push_str(&entry);
    }
    out
}

/// The hint about idle panes, empty when none is idle.
pub fn idle_hint(lang: Lang, agents: &[AgentInfo]) -> String {
    let n = agents.iter().filter(|a| a.settled_status().is_some()).count();
    if n == 0 {
        return String::new();
    }
    match lang {
        Lang::En => format!("{n} pane(s) are idle. Decide here what each should do: keep it for the next task, have it write up or document its work and finish, or free it and start a fresh agent. Do not simply close or keep them all."),
        Lang::Zh => format!("有 {n} 个窗格空闲。请在这里为每个窗格做决定：留给下一个任务、让它总结或整理文档后收尾，或者释放它并启动新的 agent。不要默认全部关闭或全部保留。"),
        Lang::Ja => format!("{n} 個のペインが待機中です。それぞれについてここで決めてください：次のタスクに残す、作業をまとめて文書化し終える、または解放して新しいエージェントを始める。すべて閉じる／すべて残すを既定にしないでください。"),
    }
}

/// `/home/<u>/…` or `/Users/<u>/…` → `~/…`.
fn shorten_home(path: &str) -> String {
    for base in ["/home/", "/Users/"] {
        if let Some(rest) = path.strip_prefix(base) {
            return match rest.find('/') {
                Some(i) => format!("~{}", &rest[i..]),
                None => "~".to_owned(),
            };
        }
    }
    path.to_owned()
}

/// The last `max` characters of `s` (never splits a character).
pub fn tail_chars(s: &str, max: usize) -> &str {
    let count = s.chars().count();
    if count <= max {
        return s;
    }
    let skip = count - max;
    let start = s.char_indices().nth(skip).map(|(i, _)| i).unwrap_or(s.len());
    &s[start..]
}

/// The first `max` characters of `s`.
pub fn head_chars(s: &str, max: usize) -> &str {
    let end = s.char_indices().nth(max).map(|(i, _)| i).unwrap_or(s.len());
    &s[..end]
}

/// Trailing spaces removed from every line, 3+ newlines collapsed to a blank line, and no
/// trailing blank lines.
pub fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut newlines = 0;
    for (i, line) in text.split('\n').enumerate() {
        let line = line.trim_end_matches([' ', '\t', '\r']);
        if i > 0 {
            newlines += 1;
        }
        if line.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push_str(if newlines >= 2 { "\n\n" } else { "\n" });
        }
        out.push_str(line);
        newlines = 0;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(pane: &str, status: &str) -> AgentInfo {
        AgentInfo {
            pane: Some(pane.into()),
            status: Some(status.into()),
            name: Some("claude".into()),
            terminal_title: Some("fixing tests".into()),
            cwd: Some("/home/dev/src/app".into()),
            ..Default::default()
        }
    }

    fn facts() -> WakeFacts {
        WakeFacts {
            agent: "claude".into(),
            pane: "w1:p1".into(),
            status: "done".into(),
            workspace_id: "w1".into(),
            workspace_label: Some("alpha".into()),
            workspace_roots: vec![],
            working_count: 1,
            output: "tests: 12 passed".into(),
            agents: vec![agent("w1:p2", "working"), agent("w1:p1", "done")],
        }
    }

    #[test]
    fn language_follows_the_browser_tag() {
        assert_eq!(Lang::from_tag("zh-CN"), Lang::Zh);
        assert_eq!(Lang::from_tag("ZH-tw"), Lang::Zh);
        assert_eq!(Lang::from_tag("ja"), Lang::Ja);
        assert_eq!(Lang::from_tag("en-US"), Lang::En);
        assert_eq!(Lang::from_tag("de"), Lang::En);
        assert_eq!(Lang::from_tag(""), Lang::En);
    }

    #[test]
    fn every_template_fills_its_placeholders_and_starts_with_its_prefix() {
        for lang in [Lang::En, Lang::Zh, Lang::Ja] {
            for kind in [WakeKind::Round, WakeKind::Partial, WakeKind::Progress, WakeKind::Exec] {
                let text = render(kind, lang, None, &facts());
                assert!(text.starts_with(prefix(lang)), "{lang:?} {kind:?}: {text}");
                assert!(is_wake_text(&text));
                assert!(!text.contains('{') && !text.contains('}'), "{lang:?} {kind:?}: {text}");
                assert!(text.contains("claude") && text.contains("w1:p1") && text.contains("alpha (w1)"), "{text}");
                assert!(text.contains("tests: 12 passed"), "{lang:?} {kind:?}");
                assert!(!text.contains("\n\n\n"));
            }
        }
        let partial = render(WakeKind::Partial, Lang::En, None, &facts());
        assert!(partial.contains("1 other agent(s)"), "{partial}");
        assert!(partial.contains("- w1:p1 · claude · done ← focus"), "{partial}");
        assert!(partial.contains("1 pane(s) are idle"), "{partial}");
        assert!(partial.contains("cwd: ~/src/app"), "{partial}");
    }

    #[test]
    fn progress_wakes_carry_the_idle_hint_like_rounds_and_partials() {
        for lang in [Lang::En, Lang::Zh, Lang::Ja] {
            let hint = idle_hint(lang, &facts().agents);
            assert!(!hint.is_empty());
            for kind in [WakeKind::Round, WakeKind::Partial, WakeKind::Progress] {
                assert!(render(kind, lang, None, &facts()).contains(&hint), "{lang:?} {kind:?}");
            }
            assert!(!render(WakeKind::Exec, lang, None, &facts()).contains(&hint), "{lang:?} exec has no roster");
        }
        let mut all_working = facts();
        all_working.agents.retain(|a| a.is_working());
        assert!(!render(WakeKind::Progress, Lang::En, None, &all_working).contains("idle"));
    }

    #[test]
    fn custom_templates_get_prefix_roster_and_hint_appended() {
        let text = render(WakeKind::Round, Lang::En, Some("done: {agent} {unknown} {"), &facts());
        assert!(text.starts_with("[Herdr update] done: claude {unknown} {"), "{text}");
        assert!(text.contains("Panes of workspace alpha (w1) (2):"), "{text}");
        assert!(text.contains("pane(s) are idle"));
        // Values are not expanded a second time.
        let mut f = facts();
        f.output = "{agent}{roster}".into();
        let text = render(WakeKind::Progress, Lang::En, Some("{output}"), &f);
        assert!(text.contains("{agent}{roster}"), "{text}");
    }

    #[test]
    fn output_excerpt_keeps_the_last_4000_chars_without_splitting_characters() {
        let mut f = facts();
        f.output = format!("HEAD{}", "日".repeat(MAX_OUTPUT_CHARS));
        let text = render(WakeKind::Exec, Lang::En, Some("{output}"), &f);
        assert!(!text.contains("HEAD"));
        assert_eq!(text.matches('日').count(), MAX_OUTPUT_CHARS);
        f.output = "x".repeat(MAX_OUTPUT_CHARS);
        assert_eq!(render(WakeKind::Exec, Lang::En, Some("{output}"), &f).matches('x').count(), MAX_OUTPUT_CHARS);
        f.output = "  ".into();
        assert!(render(WakeKind::Exec, Lang::En, None, &f).contains("(no output captured)"));
    }

    #[test]
    fn roster_is_bounded_at_a_pane_boundary() {
        let mut f = facts();
        f.agents = (0..200).map(|i| AgentInfo { terminal_title: Some("t".repeat(500)), ..agent(&format!("w1:p{i:03}"), "working") }).collect();
        let r = roster(Lang::En, &f);
        assert!(r.chars().count() <= MAX_ROSTER_CHARS, "{}", r.chars().count());
        assert!(r.ends_with("more pane(s) not shown"), "{}", &r[r.len() - 60..]);
        assert!(r.contains(&format!("doing: {}\n", "t".repeat(MAX_TITLE_CHARS))), "title capped at 120");
        f.agents.truncate(2);
        assert!(!roster(Lang::En, &f).contains("not shown"));
    }

    #[test]
    fn label_falls_back_to_root_names_then_id() {
        let mut f = facts();
        f.workspace_label = None;
        f.workspace_roots = vec!["/src/alpha/".into(), "/src/beta".into()];
        assert_eq!(workspace_label(&f), "alpha, beta");
        f.workspace_roots.clear();
        assert_eq!(workspace_label(&f), "w1");
        f.workspace_label = Some("w1".into());
        assert_eq!(workspace_label(&f), "w1");
    }

    #[test]
    fn tidy_trims_lines_and_collapses_blank_runs() {
        assert_eq!(tidy("a  \n\n\n\nb\t\nc\n\n"), "a\n\nb\nc");
        assert_eq!(tidy("\n\na"), "a");
        assert_eq!(tail_chars("héllo", 3), "llo");
        assert_eq!(head_chars("日本語", 2), "日本");
        assert_eq!(tail_chars("ab", 5), "ab");
    }

    #[test]
    fn own_wake_text_is_recognised_and_drafts_are_not() {
        assert!(is_wake_text("\u{200b} [Herdr 報告] x"));
        assert!(!is_wake_text("please fix [Herdr update]"));
        assert!(!is_wake_text("herdr workspace x"));
    }
}
