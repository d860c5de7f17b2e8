//! Every text the bridge shows a person in a chat page, in English, Chinese and Japanese: the
//! in-page status badge, the stop notices and the submit notices. The browser's UI language
//! (`chrome.i18n.getUILanguage`, read by the worker) picks one through [`Lang::from_tag`]; the
//! extension's own pages take theirs from `_locales` instead. Texts meant for the model
//! (preamble, TOOL_RESULT, repair prompts) stay English and are not here.

use crate::continuity::Lang;
use crate::engine::{Status, StopReason};
use crate::fold::FoldLabel;

/// The caption of a folded protocol message in the page.
pub fn fold_label(lang: Lang, label: FoldLabel) -> &'static str {
    match (lang, label) {
        (Lang::En, label) => label.text(),
        (Lang::Zh, FoldLabel::Tools) => "Herdr JSON 工具",
        (Lang::Zh, FoldLabel::ToolResult) => "Herdr 工具结果",
        (Lang::Zh, FoldLabel::ToolCall) => "Herdr 工具调用",
        (Lang::Ja, FoldLabel::Tools) => "Herdr JSON ツール",
        (Lang::Ja, FoldLabel::ToolResult) => "Herdr ツール結果",
        (Lang::Ja, FoldLabel::ToolCall) => "Herdr ツール呼び出し",
    }
}

/// The badge while a task runs (`Herdr: …` is added by the caller).
pub fn status(lang: Lang, status: &Status) -> String {
    match (status, lang) {
        (Status::WaitingForReply { .. }, Lang::En) => "waiting for reply".into(),
        (Status::WaitingForReply { .. }, Lang::Zh) => "等待回复".into(),
        (Status::WaitingForReply { .. }, Lang::Ja) => "返信を待っています".into(),
        (Status::RunningCalls { running, queued, .. }, lang) => {
            let n = running + queued;
            match lang {
                Lang::En => format!("running {n} tool{}", if n == 1 { "" } else { "s" }),
                Lang::Zh => format!("正在运行 {n} 个工具"),
                Lang::Ja => format!("ツールを {n} 件実行中"),
            }
        }
        (Status::SendingResults { .. }, Lang::En) => "sending results".into(),
        (Status::SendingResults { .. }, Lang::Zh) => "正在发送结果".into(),
        (Status::SendingResults { .. }, Lang::Ja) => "結果を送信中".into(),
        (Status::Repairing { attempt }, Lang::En) => format!("asking for valid tool JSON (attempt {attempt})"),
        (Status::Repairing { attempt }, Lang::Zh) => format!("正在请求有效的工具 JSON(第 {attempt} 次)"),
        (Status::Repairing { attempt }, Lang::Ja) => format!("正しいツール JSON を求めています({attempt} 回目)"),
        (Status::Unbridged, lang) => without_tools_body(lang, &why_catalog_unavailable(lang)),
    }
}

/// A short name of why a task ended.
pub fn stop_label(lang: Lang, reason: StopReason) -> &'static str {
    match (reason, lang) {
        (StopReason::Finished, Lang::En) => "idle",
        (StopReason::Finished, Lang::Zh) => "空闲",
        (StopReason::Finished, Lang::Ja) => "待機中",
        (StopReason::RepeatedInvalidToolJson, Lang::En) => "stopped: repeated invalid tool JSON",
        (StopReason::RepeatedInvalidToolJson, Lang::Zh) => "已停止:工具 JSON 多次无效",
        (StopReason::RepeatedInvalidToolJson, Lang::Ja) => "停止: ツール JSON が繰り返し無効",
        (StopReason::ReplyTimeout, Lang::En) => "stopped: reply timeout",
        (StopReason::ReplyTimeout, Lang::Zh) => "已停止:回复超时",
        (StopReason::ReplyTimeout, Lang::Ja) => "停止: 返信のタイムアウト",
        (StopReason::SubmitFailed, Lang::En) => "stopped: message could not be sent",
        (StopReason::SubmitFailed, Lang::Zh) => "已停止:消息无法发送",
        (StopReason::SubmitFailed, Lang::Ja) => "停止: メッセージを送信できませんでした",
        (StopReason::RoundLimit, Lang::En) => "stopped: round limit reached",
        (StopReason::RoundLimit, Lang::Zh) => "已停止:达到轮数上限",
        (StopReason::RoundLimit, Lang::Ja) => "停止: ラウンド数の上限に達しました",
    }
}

/// The page notice when a task stopped for `reason`; `english` is the engine's own message
/// (kept as is in English, and as the detail of a failed send in the others).
pub fn stopped(lang: Lang, reason: StopReason, english: &str, numbers: StopNumbers) -> String {
    let body = match (lang, reason) {
        (Lang::En, _) => {
            if english.is_empty() {
                stop_label(lang, reason).to_string()
            } else {
                english.to_string()
            }
        }
        (Lang::Zh, StopReason::RepeatedInvalidToolJson) => format!(
            "模型在被要求修正后连续 {} 次发送了无法使用的工具调用 JSON。请检查最后一条回复,然后重新发送你的请求。",
            numbers.repairs
        ),
        (Lang::Ja, StopReason::RepeatedInvalidToolJson) => format!(
            "修正を求めた後も、モデルが使えないツール呼び出し JSON を {} 回続けて送りました。最後の返信を確認してから、もう一度依頼を送ってください。",
            numbers.repairs
        ),
        (Lang::Zh, StopReason::ReplyTimeout) => format!("{} 秒内没有收到回复。", numbers.reply_timeout_sec),
        (Lang::Ja, StopReason::ReplyTimeout) => {
            format!("{} 秒以内に返信がありませんでした。", numbers.reply_timeout_sec)
        }
        (Lang::Zh, StopReason::SubmitFailed) => format!("无法在页面中发送消息。({english})"),
        (Lang::Ja, StopReason::SubmitFailed) => format!("ページでメッセージを送信できませんでした。({english})"),
        (Lang::Zh, StopReason::RoundLimit) => format!(
            "此任务已达到 {} 轮工具调用的上限(可在扩展的选项中更改)。发送新的请求即可继续。",
            numbers.max_rounds
        ),
        (Lang::Ja, StopReason::RoundLimit) => format!(
            "このタスクはツールのラウンド数の上限 {} に達しました(拡張機能のオプションで変更できます)。続けるには新しい依頼を送ってください。",
            numbers.max_rounds
        ),
        (_, StopReason::Finished) => stop_label(lang, reason).to_string(),
    };
    match lang {
        Lang::En => format!("Herdr stopped: {body}"),
        Lang::Zh => format!("Herdr 已停止:{body}"),
        Lang::Ja => format!("Herdr 停止: {body}"),
    }
}

/// The limits a stop notice may name.
#[derive(Debug, Clone, Copy, Default)]
pub struct StopNumbers {
    pub repairs: u32,
    pub reply_timeout_sec: u64,
    pub max_rounds: u32,
}

/// A submit kept in the composer because a task still runs (`blocked` is its word).
pub fn not_sent_busy(lang: Lang, blocked: Option<&str>) -> String {
    match (lang, blocked) {
        (Lang::En, None) => {
            "Herdr: not sent: still working on the previous request; send this once it has answered.".into()
        }
        (Lang::En, Some(other)) => format!("Herdr: not sent: the bridge is busy ({other})."),
        (Lang::Zh, None) => "Herdr:未发送:仍在处理上一个请求;请在它回答后再发送。".into(),
        (Lang::Zh, Some(other)) => format!("Herdr:未发送:桥接正忙({other})。"),
        (Lang::Ja, None) => "Herdr: 未送信: 前の依頼をまだ処理しています。応答が終わってから送ってください。".into(),
        (Lang::Ja, Some(other)) => format!("Herdr: 未送信: ブリッジが使用中です({other})。"),
    }
}

/// Why a submit went out without tools, by refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WithoutTools<'a> {
    SiteDisabled,
    Unconfirmed,
    CatalogUnavailable,
    ConversationGone,
    Refused(Option<&'a str>),
}

pub fn without_tools(lang: Lang, why: WithoutTools<'_>) -> String {
    let text = match (why, lang) {
        (WithoutTools::SiteDisabled, Lang::En) => {
            "the Herdr bridge is switched off for this site (turn it on in the extension's options)".into()
        }
        (WithoutTools::SiteDisabled, Lang::Zh) => "此网站的 Herdr 桥接已关闭(可在扩展的选项中开启)".into(),
        (WithoutTools::SiteDisabled, Lang::Ja) => {
            "このサイトでは Herdr ブリッジがオフです(拡張機能のオプションでオンにできます)".into()
        }
        (WithoutTools::Unconfirmed, Lang::En) => {
            "the bridge could not confirm which conversation this page shows (reload the page)".into()
        }
        (WithoutTools::Unconfirmed, Lang::Zh) => "桥接无法确认此页面显示的是哪个对话(请重新加载页面)".into(),
        (WithoutTools::Unconfirmed, Lang::Ja) => {
            "ブリッジはこのページがどの会話か確認できませんでした(ページを再読み込みしてください)".into()
        }
        (WithoutTools::CatalogUnavailable, lang) => why_catalog_unavailable(lang),
        (WithoutTools::ConversationGone, Lang::En) => {
            "this conversation is no longer known to the bridge (reload the page)".into()
        }
        (WithoutTools::ConversationGone, Lang::Zh) => "桥接已不再认识此对话(请重新加载页面)".into(),
        (WithoutTools::ConversationGone, Lang::Ja) => {
            "ブリッジはこの会話をもう把握していません(ページを再読み込みしてください)".into()
        }
        (WithoutTools::Refused(None), Lang::En) => "the bridge refused this message".into(),
        (WithoutTools::Refused(Some(code)), Lang::En) => format!("the bridge refused this message ({code})"),
        (WithoutTools::Refused(None), Lang::Zh) => "桥接拒绝了这条消息".into(),
        (WithoutTools::Refused(Some(code)), Lang::Zh) => format!("桥接拒绝了这条消息({code})"),
        (WithoutTools::Refused(None), Lang::Ja) => "ブリッジはこのメッセージを拒否しました".into(),
        (WithoutTools::Refused(Some(code)), Lang::Ja) => format!("ブリッジはこのメッセージを拒否しました({code})"),
    };
    sent_without_tools(lang, &text)
}

fn why_catalog_unavailable(lang: Lang) -> String {
    match lang {
        Lang::En => "the Herdr runtime did not answer with its tools (catalog unavailable)".into(),
        Lang::Zh => "Herdr 运行时没有返回其工具(工具目录不可用)".into(),
        Lang::Ja => "Herdr ランタイムがツールを返しませんでした(カタログを利用できません)".into(),
    }
}

fn without_tools_body(lang: Lang, why: &str) -> String {
    match lang {
        Lang::En => format!("sent without tools: {why}"),
        Lang::Zh => format!("已不带工具发送:{why}"),
        Lang::Ja => format!("ツールなしで送信しました: {why}"),
    }
}

fn sent_without_tools(lang: Lang, why: &str) -> String {
    match lang {
        Lang::En => format!("Herdr: {}.", without_tools_body(lang, why)),
        Lang::Zh => format!("Herdr:{}。", without_tools_body(lang, why)),
        Lang::Ja => format!("Herdr: {}。", without_tools_body(lang, why)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn english_is_the_wording_the_bridge_always_had() {
        assert_eq!(status(Lang::En, &Status::RunningCalls { running: 1, queued: 0, done: 0 }), "running 1 tool");
        assert_eq!(status(Lang::En, &Status::RunningCalls { running: 1, queued: 2, done: 0 }), "running 3 tools");
        assert_eq!(
            status(Lang::En, &Status::Unbridged),
            "sent without tools: the Herdr runtime did not answer with its tools (catalog unavailable)"
        );
        assert_eq!(
            stopped(Lang::En, StopReason::ReplyTimeout, "Stopped: x.", StopNumbers::default()),
            "Herdr stopped: Stopped: x."
        );
        assert_eq!(
            without_tools(Lang::En, WithoutTools::Refused(Some("snapshot-invalid"))),
            "Herdr: sent without tools: the bridge refused this message (snapshot-invalid)."
        );
    }

    #[test]
    fn chinese_and_japanese_have_every_text_with_its_numbers() {
        let n = StopNumbers { repairs: 4, reply_timeout_sec: 120, max_rounds: 24 };
        let reasons = [
            StopReason::RepeatedInvalidToolJson,
            StopReason::ReplyTimeout,
            StopReason::SubmitFailed,
            StopReason::RoundLimit,
        ];
        for lang in [Lang::Zh, Lang::Ja] {
            for reason in reasons {
                let text = stopped(lang, reason, "detail-x", n);
                assert!(!text.contains("stopped") && text.starts_with("Herdr"), "{text}");
                let number = match reason {
                    StopReason::RepeatedInvalidToolJson => "4",
                    StopReason::ReplyTimeout => "120",
                    StopReason::RoundLimit => "24",
                    _ => "detail-x",
                };
                assert!(text.contains(number), "{lang:?} {reason:?}: {text}");
                assert_ne!(stop_label(lang, reason), stop_label(Lang::En, reason));
            }
            assert!(status(lang, &Status::Repairing { attempt: 2 }).contains('2'));
            assert!(status(lang, &Status::RunningCalls { running: 3, queued: 0, done: 0 }).contains('3'));
            assert!(!not_sent_busy(lang, None).contains("not sent"));
            assert!(not_sent_busy(lang, Some("w")).contains('w'));
            for why in [
                WithoutTools::SiteDisabled,
                WithoutTools::Unconfirmed,
                WithoutTools::CatalogUnavailable,
                WithoutTools::ConversationGone,
                WithoutTools::Refused(Some("c")),
            ] {
                let text = without_tools(lang, why);
                assert!(text.starts_with("Herdr") && !text.contains("without tools"), "{text}");
            }
        }
        for label in [FoldLabel::Tools, FoldLabel::ToolResult, FoldLabel::ToolCall] {
            assert_eq!(fold_label(Lang::En, label), label.text());
            assert!(fold_label(Lang::Zh, label).starts_with("Herdr") && fold_label(Lang::Zh, label) != label.text());
            assert!(fold_label(Lang::Ja, label).starts_with("Herdr") && fold_label(Lang::Ja, label) != label.text());
        }
        assert!(stopped(Lang::Zh, StopReason::RoundLimit, "", n).contains("上限"));
        assert!(stopped(Lang::Ja, StopReason::RoundLimit, "", n).contains("上限"));
    }
}
