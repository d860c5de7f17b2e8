//! What the page says when the bridge refuses a submit (issue 26 item 5). Every refusal is
//! shown on the page, like the runtime-down case: either the message went out without tools
//! (`sent without tools: …`), or it was kept in the composer (`not sent: …`). The content
//! script shows the text it is given and decides nothing.

use ext_core::continuity::Lang;
use ext_core::ui_text::{self, WithoutTools};
use serde_json::Value;

use crate::catalog::ERR_CATALOG_UNAVAILABLE;
use crate::sender::{ERR_SENDER_MISMATCH, ERR_SITE_DISABLED, ERR_SITE_MISMATCH};

/// A submit refused because a task is still running (spec §1.10).
pub const BLOCKED_BUSY: &str = "json-bridge-busy";
/// The conversation's state went away while the submit was handled.
pub const ERR_CONVERSATION_UNAVAILABLE: &str = "conversation-unavailable";

/// The page notice for a refused submit: `error` is the refusal's code, `blocked` its
/// `blocked` word (the text then stays in the composer). English; see [`submit_notice_in`].
pub fn submit_notice(error: Option<&str>, blocked: Option<&str>) -> String {
    submit_notice_in(Lang::En, error, blocked)
}

/// [`submit_notice`] in the browser's language (texts in ext-core `ui_text`).
pub fn submit_notice_in(lang: Lang, error: Option<&str>, blocked: Option<&str>) -> String {
    if let Some(blocked) = blocked {
        return ui_text::not_sent_busy(lang, (blocked != BLOCKED_BUSY).then_some(blocked));
    }
    let why = match error.unwrap_or("") {
        ERR_SITE_DISABLED => WithoutTools::SiteDisabled,
        ERR_SENDER_MISMATCH | ERR_SITE_MISMATCH => WithoutTools::Unconfirmed,
        ERR_CATALOG_UNAVAILABLE => WithoutTools::CatalogUnavailable,
        ERR_CONVERSATION_UNAVAILABLE => WithoutTools::ConversationGone,
        "" => WithoutTools::Refused(None),
        other => WithoutTools::Refused(Some(other)),
    };
    ui_text::without_tools(lang, why)
}

/// Adds the page notice to a submit's answer when it is a refusal and has none, in the
/// browser's language (English off the browser).
pub fn with_submit_notice(answer: Value) -> Value {
    with_submit_notice_in(answer, browser_lang())
}

/// The browser's UI language (`chrome.i18n.getUILanguage`).
#[cfg(target_arch = "wasm32")]
pub fn browser_lang() -> Lang {
    #[wasm_bindgen::prelude::wasm_bindgen(raw_module = "./continuity_io.js")]
    extern "C" {
        #[wasm_bindgen(js_name = uiLanguage)]
        fn ui_language() -> String;
    }
    Lang::from_tag(&ui_language())
}

#[cfg(not(target_arch = "wasm32"))]
pub fn browser_lang() -> Lang {
    Lang::En
}

/// [`with_submit_notice`] in the browser's language.
pub fn with_submit_notice_in(mut answer: Value, lang: Lang) -> Value {
    let refused = answer.get("ok") != Some(&Value::Bool(true));
    if let (true, Some(map)) = (refused, answer.as_object_mut())
        && !map.contains_key("notice")
    {
        let error = map.get("error").and_then(Value::as_str);
        let blocked = map.get("blocked").and_then(Value::as_str);
        let notice = submit_notice_in(lang, error, blocked);
        map.insert("notice".into(), Value::String(notice));
    }
    answer
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_refusal_gets_a_notice_that_says_what_happened_to_the_text() {
        for (answer, expected) in [
            (
                json!({ "ok": false, "error": ERR_SITE_DISABLED }),
                "sent without tools: the Herdr bridge is switched off",
            ),
            (json!({ "ok": false, "error": ERR_SENDER_MISMATCH }), "sent without tools: the bridge could not confirm"),
            (json!({ "ok": false, "error": ERR_SITE_MISMATCH }), "sent without tools: the bridge could not confirm"),
            (json!({ "ok": false, "error": ERR_CONVERSATION_UNAVAILABLE }), "sent without tools: this conversation"),
            (
                json!({ "ok": false, "error": "snapshot-invalid" }),
                "sent without tools: the bridge refused this message (snapshot-invalid)",
            ),
            (json!({ "ok": false, "blocked": BLOCKED_BUSY }), "not sent: still working on the previous request"),
        ] {
            let out = with_submit_notice(answer.clone());
            let notice = out["notice"].as_str().unwrap_or_else(|| panic!("no notice for {answer}"));
            assert!(notice.starts_with("Herdr: ") && notice.contains(expected), "{answer} → {notice}");
        }
    }

    #[test]
    fn accepted_submits_and_given_notices_are_left_alone() {
        assert_eq!(with_submit_notice(json!({ "ok": true, "bridged": true })), json!({ "ok": true, "bridged": true }));
        let given = json!({ "ok": false, "error": "x", "notice": "mine" });
        assert_eq!(with_submit_notice(given.clone()), given);
        assert!(submit_notice(Some(ERR_CATALOG_UNAVAILABLE), None).contains("catalog unavailable"));
    }

    #[test]
    fn notices_follow_the_browser_language() {
        let zh = with_submit_notice_in(json!({ "ok": false, "blocked": BLOCKED_BUSY }), Lang::Zh);
        assert!(zh["notice"].as_str().unwrap().contains("仍在处理"), "{zh}");
        let ja = with_submit_notice_in(json!({ "ok": false, "error": ERR_SITE_DISABLED }), Lang::Ja);
        assert!(ja["notice"].as_str().unwrap().contains("オフ"), "{ja}");
    }
}
