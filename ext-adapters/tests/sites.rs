//! Adapter tests over real-looking HTML of each site, snapshotted the way the content script
//! will do it (see `support`).

mod support;

use ext_adapters::composer::{InsertMethod, SubmitMethod};
use ext_adapters::messages::ComposerKind;
use ext_adapters::{adapter_for_site, identify, interpret, BusyReason, Scope, Site};
use ext_core::fold::{FoldLabel, Role};
use support::{css, fixture, snapshot};

const ZAI_CONV: &str = "https://chat.z.ai/c/7f3c2a10-5b1e-4c7e-9a77-1d2e3f4a5b6c";
const DS_CONV: &str = "https://chat.deepseek.com/a/chat/s/0c9d7e3a-2f41-4b8e-a6f0-55aa12bc34de";
const GPT_PROJECT: &str =
    "https://chatgpt.com/g/g-p-0123456789abcdef0123456789abcdef-herdr-demo/c/6752c0de-aaaa-bbbb-cccc-0123456789ab";
const GPT_PLAIN: &str = "https://www.chatgpt.com/c/6752c0de-1111-2222-3333-0123456789ab/";

fn snap(site: Site, file: &str, url: &str) -> ext_adapters::PageSnapshot {
    snapshot(&fixture(file), url, &adapter_for_site(site).selectors())
}

fn roles(view: &ext_adapters::PageView<'_>) -> Vec<Role> {
    view.entries.iter().map(|e| e.role).collect()
}

#[test]
fn every_selector_of_every_site_is_valid_css() {
    for site in [Site::ZAi, Site::DeepSeek, Site::ChatGpt] {
        let s = adapter_for_site(site).selectors();
        let all = s.composer.iter().chain(&s.send_buttons).chain([&s.message_root, &s.content]);
        for sel in all.chain(s.probes.iter().map(|p| &p.selector)) {
            css(sel);
        }
    }
}

#[test]
fn zai_finished_round_has_roles_reply_and_folds() {
    let snapshot = snap(Site::ZAi, "zai_conversation_done.html", ZAI_CONV);
    assert_eq!(snapshot.total_roots, 4, "the -start sentinel is not a message");
    let view = interpret(&snapshot).unwrap();
    assert_eq!(view.identity.conv_key, ZAI_CONV);
    assert_eq!(view.identity.scope, Scope::Conversation { conversation_id: "7f3c2a10-5b1e-4c7e-9a77-1d2e3f4a5b6c".into() });
    assert_eq!(roles(&view), [Role::User, Role::Assistant, Role::User, Role::Assistant]);
    let reply = view.latest_reply.as_ref().unwrap();
    assert!(reply.finished());
    assert_eq!(reply.entry.text, "The README is titled demo and contains the token magic-token-42.");
    assert!(!view.awaiting_reply);
    // The thinking block is not part of the call reply's text.
    assert!(!view.entries[1].text.contains("I will read it"));
    let folds: Vec<_> = view.pending_folds().into_iter().map(|(i, id, label)| (i, id.unwrap(), label)).collect();
    assert_eq!(
        folds,
        [
            (0, "message-a1b2c3d4-0001".to_owned(), FoldLabel::Tools),
            (1, "message-a1b2c3d4-0002".to_owned(), FoldLabel::ToolCall),
            (2, "message-a1b2c3d4-0003".to_owned(), FoldLabel::ToolResult),
        ]
    );
    assert_eq!(snapshot.composer.kind, Some(ComposerKind::Textarea));
    assert!(snapshot.send_button.is_none(), "the only send button is disabled");
}

#[test]
fn zai_new_chat_shows_thinking_as_busy() {
    let snapshot = snap(Site::ZAi, "zai_new_chat_thinking.html", "https://chat.z.ai/");
    let view = interpret(&snapshot).unwrap();
    assert_eq!(view.identity.conv_key, "https://chat.z.ai");
    assert_eq!(view.identity.scope, Scope::NewChat);
    assert_eq!(roles(&view), [Role::User, Role::Assistant]);
    let reply = view.latest_reply.as_ref().unwrap();
    assert_eq!(reply.busy, Some(BusyReason::StatusText("thinking...")));
    assert_eq!(snapshot.composer.text, "next question draft");
    assert_eq!(snapshot.send_button.map(|b| (b.candidate, b.enabled)), Some((0, true)));
}

#[test]
fn zai_composer_strategy_sets_textarea_value_and_clicks_send() {
    let c = adapter_for_site(Site::ZAi).composer();
    assert_eq!(c.insert, InsertMethod::TextareaValueSetter);
    assert_eq!(c.submit, [SubmitMethod::ClickSendButton, SubmitMethod::RequestSubmit, SubmitMethod::PressEnter]);
    assert!(c.intercept.unwrap().send_button_click);
    assert!(adapter_for_site(Site::ZAi).json_bridge());
}

#[test]
fn deepseek_streaming_call_with_cursor_is_not_finished() {
    let snapshot = snap(Site::DeepSeek, "deepseek_streaming.html", DS_CONV);
    let view = interpret(&snapshot).unwrap();
    assert_eq!(view.identity.scope, Scope::Conversation { conversation_id: "0c9d7e3a-2f41-4b8e-a6f0-55aa12bc34de".into() });
    assert_eq!(roles(&view), [Role::User, Role::Assistant]);
    let reply = view.latest_reply.as_ref().unwrap();
    assert_eq!(reply.busy, Some(BusyReason::Cursor));
    assert_eq!(reply.entry.text, r#"{"tool":"herdr_exec","args":{"cmd":"cargo te"#);
    // Only the bridged task folds; the streaming reply waits.
    assert_eq!(view.pending_folds().into_iter().map(|f| f.2).collect::<Vec<_>>(), [FoldLabel::Tools]);
    assert_eq!(snapshot.composer.kind, Some(ComposerKind::Textarea));
    assert!(snapshot.send_button.is_none(), "Send is disabled");
}

#[test]
fn deepseek_thought_for_header_means_finished_despite_loading_icon() {
    let snapshot = snap(Site::DeepSeek, "deepseek_thought_done.html", DS_CONV);
    let view = interpret(&snapshot).unwrap();
    assert!(snapshot.roots[1].probes.iter().any(|p| p == "cursor"), "the loading icon is seen");
    let reply = view.latest_reply.as_ref().unwrap();
    assert!(reply.finished(), "{:?}", reply.busy);
    assert!(reply.entry.text.starts_with(r#"{"tool":"herdr_fs_read""#), "the thinking text is excluded");
    assert_eq!(view.entries[0].text, "fix the failing test");
    let folds: Vec<_> = view.pending_folds().into_iter().map(|f| (f.0, f.2)).collect();
    assert_eq!(folds, [(1, FoldLabel::ToolCall)]);
    assert_eq!(snapshot.composer.text, "");
}

#[test]
fn deepseek_sends_with_enter_and_intercepts_a_click_on_send() {
    let c = adapter_for_site(Site::DeepSeek).composer();
    assert_eq!(c.submit, [SubmitMethod::PressEnter, SubmitMethod::RequestSubmit]);
    // The user's click on Send must become a bridged task like their Enter (issue 26 item 4).
    assert!(c.intercept.unwrap().send_button_click);
}

/// DeepSeek's composer as the page draws it: the toggles and Send are all `div[role=button]`;
/// Send is the one with the arrow icon, `aria-disabled` while the composer is empty.
fn deepseek_composer(send_disabled: bool) -> String {
    format!(
        r#"<html><body><div class="composer"><textarea name="search">hi</textarea>
<div class="ec4f5d61"><div id="deepthink" role="button" class="ds-button ds-toggle-button">DeepThink</div>
<div id="search" role="button" class="ds-button ds-toggle-button">Search</div>
<div class="bf38813a"><div id="upload" role="button" class="ds-icon-button"><svg><path d="M7 1C4 1 2 3 2 6"></path></svg></div>
<div id="send" role="button" aria-disabled="{send_disabled}" class="_f3a9c21 ds-icon-button"><svg><path d="M8.3125 0.981648C8.66767 1.05456"></path></svg></div></div>
</div></div></body></html>"#
    )
}

#[test]
fn deepseek_send_is_the_arrow_button_and_only_when_enabled() {
    let selectors = adapter_for_site(Site::DeepSeek).selectors();
    let enabled = scraper::Html::parse_document(&deepseek_composer(false));
    let matched: Vec<&str> = selectors
        .send_buttons
        .iter()
        .flat_map(|s| enabled.select(&css(s)).filter_map(|e| e.value().attr("id")).collect::<Vec<_>>())
        .collect();
    assert_eq!(matched, ["send"], "the toggles and the upload button are not Send");
    let on = snapshot(&deepseek_composer(false), DS_CONV, &selectors);
    assert_eq!(on.send_button.map(|b| (b.candidate, b.enabled)), Some((0, true)));
    assert!(snapshot(&deepseek_composer(true), DS_CONV, &selectors).send_button.is_none(), "disabled Send is not a candidate");
}

#[test]
fn chatgpt_project_conversation_streams() {
    let snapshot = snap(Site::ChatGpt, "chatgpt_project_streaming.html", GPT_PROJECT);
    let view = interpret(&snapshot).unwrap();
    let project_key = "https://chatgpt.com/g/g-p-0123456789abcdef0123456789abcdef";
    assert_eq!(view.identity.conv_key, format!("{project_key}/c/6752c0de-aaaa-bbbb-cccc-0123456789ab"));
    assert_eq!(
        view.identity.scope,
        Scope::ProjectConversation {
            conversation_id: "6752c0de-aaaa-bbbb-cccc-0123456789ab".into(),
            project_id: "g-p-0123456789abcdef0123456789abcdef".into(),
            project_key: project_key.into(),
        }
    );
    assert_eq!(roles(&view), [Role::User, Role::Assistant]);
    assert_eq!(view.latest_reply.as_ref().unwrap().busy, Some(BusyReason::Streaming));
    assert_eq!(view.latest_reply.as_ref().unwrap().entry.text, "Looking at the pane now");
    assert_eq!(snapshot.composer.kind, Some(ComposerKind::ContentEditable));
    assert_eq!(snapshot.composer.text, "follow-up");
    assert_eq!(snapshot.send_button.map(|b| b.candidate), Some(0));
}

#[test]
fn chatgpt_plain_conversation_finished_with_canonical_key() {
    let snapshot = snap(Site::ChatGpt, "chatgpt_done.html", GPT_PLAIN);
    let view = interpret(&snapshot).unwrap();
    assert_eq!(view.identity.conv_key, "https://chatgpt.com/c/6752c0de-1111-2222-3333-0123456789ab");
    let reply = view.latest_reply.as_ref().unwrap();
    assert!(reply.finished());
    assert_eq!(reply.entry.text, "The build passed; 3 warnings remain.");
    assert!(view.pending_folds().is_empty(), "no bridge messages on ChatGPT pages");
    assert!(snapshot.send_button.is_none());
    let c = adapter_for_site(Site::ChatGpt).composer();
    assert_eq!(c.insert, InsertMethod::ContentEditable { main_world: true });
    assert_eq!(c.submit, [SubmitMethod::ClickSendButton, SubmitMethod::PressEnter]);
    assert!(c.intercept.is_none() && !adapter_for_site(Site::ChatGpt).json_bridge());
}

#[test]
fn a_user_message_after_the_last_reply_means_awaiting() {
    let mut snapshot = snap(Site::ChatGpt, "chatgpt_done.html", GPT_PLAIN);
    let mut user = snapshot.roots[0].clone();
    user.index = 2;
    snapshot.roots.push(user);
    let view = interpret(&snapshot).unwrap();
    assert!(view.awaiting_reply);
    assert_eq!(view.latest_reply.unwrap().entry.root_index, 1);
}

#[test]
fn an_empty_reply_is_not_finished_and_folded_roots_are_not_refolded() {
    let mut snapshot = snap(Site::ZAi, "zai_conversation_done.html", ZAI_CONV);
    snapshot.roots[0].folded = Some(FoldLabel::Tools);
    snapshot.roots[3].text.clear();
    let view = interpret(&snapshot).unwrap();
    assert_eq!(view.latest_reply.as_ref().unwrap().busy, Some(BusyReason::Empty));
    assert!(view.pending_folds().iter().all(|f| f.0 != 0));
}

#[test]
fn snapshot_of_another_site_is_refused_by_an_adapter() {
    let snapshot = snap(Site::ChatGpt, "chatgpt_done.html", GPT_PLAIN);
    assert!(adapter_for_site(Site::ZAi).interpret(&snapshot).is_err());
    assert!(adapter_for_site(Site::ChatGpt).interpret(&snapshot).is_ok());
}

#[test]
fn identities_of_every_url_shape() {
    let cases: &[(&str, &str, Scope)] = &[
        ("https://chat.z.ai/", "https://chat.z.ai", Scope::NewChat),
        ("https://chat.z.ai/c/abc/", "https://chat.z.ai/c/abc", Scope::Conversation { conversation_id: "abc".into() }),
        ("https://chat.z.ai/c/abc/share", "https://chat.z.ai/c/abc/share", Scope::Other),
        ("https://chat.deepseek.com/", "https://chat.deepseek.com", Scope::NewChat),
        ("https://chat.deepseek.com/a/chat/s/x1?ref=1", "https://chat.deepseek.com/a/chat/s/x1",
            Scope::Conversation { conversation_id: "x1".into() }),
        ("https://chatgpt.com/", "https://chatgpt.com", Scope::NewChat),
        ("https://chatgpt.com/?model=gpt-5", "https://chatgpt.com", Scope::NewChat),
        ("https://chatgpt.com/g/g-p-0123456789abcdef0123456789abcdef-slug/project",
            "https://chatgpt.com/g/g-p-0123456789abcdef0123456789abcdef",
            Scope::ProjectHome { project_id: "g-p-0123456789abcdef0123456789abcdef".into(),
                project_key: "https://chatgpt.com/g/g-p-0123456789abcdef0123456789abcdef".into() }),
        // Not a Project id (uppercase hex / custom GPT): a plain conversation under its path.
        ("https://chatgpt.com/g/g-p-0123456789ABCDEF0123456789abcdef/c/z",
            "https://chatgpt.com/g/g-p-0123456789ABCDEF0123456789abcdef/c/z", Scope::Conversation { conversation_id: "z".into() }),
        ("https://chatgpt.com/g/g-abc123-helper/c/z", "https://chatgpt.com/g/g-abc123-helper/c/z",
            Scope::Conversation { conversation_id: "z".into() }),
        ("https://chatgpt.com/gpts", "https://chatgpt.com/gpts", Scope::Other),
    ];
    for (url, key, scope) in cases {
        let id = identify(url).unwrap_or_else(|e| panic!("{url}: {e}"));
        assert_eq!((id.conv_key.as_str(), &id.scope), (*key, scope), "{url}");
    }
    assert!(identify("https://example.com/c/1").unwrap_err().to_string().contains("example.com"));
    assert!(identify("http://chat.z.ai/").is_err());
}

#[test]
fn views_feed_the_engine_and_the_recovery_rule() {
    use ext_core::engine::Event;
    use ext_core::journal::has_pending_tool_reply;
    let streaming = snap(Site::DeepSeek, "deepseek_streaming.html", DS_CONV);
    let view = interpret(&streaming).unwrap();
    let Some(Event::ReplySnapshot { message_id, text, done, now_ms }) = view.reply_snapshot_event(5) else {
        panic!("no reply event")
    };
    assert_eq!((message_id.as_str(), done, now_ms), ("root-1", false, 5));
    assert!(text.starts_with(r#"{"tool":"herdr_exec""#));
    // Bridged task followed by tool JSON: a reload here would resume the loop.
    assert!(has_pending_tool_reply(&view.transcript()));

    let done = snap(Site::ZAi, "zai_conversation_done.html", ZAI_CONV);
    let view = interpret(&done).unwrap();
    let Some(Event::ReplySnapshot { message_id, done, .. }) = view.reply_snapshot_event(0) else { panic!() };
    assert_eq!((message_id.as_str(), done), ("message-a1b2c3d4-0004", true));
    // The last message is a normal answer: nothing to resume.
    assert!(!has_pending_tool_reply(&view.transcript()));
    assert_eq!(Site::DeepSeek.protocol_site(), ext_core::protocol_text::Site::DeepSeek);
}

#[test]
fn a_history_page_has_no_latest_reply_and_folds_every_finished_call() {
    // The worker paged back: the newest root on the page (index 9) is not in this snapshot,
    // so the streaming-looking reply here is an old one and may be folded.
    let mut page = snap(Site::DeepSeek, "deepseek_thought_done.html", DS_CONV);
    page.total_roots = 10;
    page.roots[1].head.clear(); // no "Thought for" header: alone it would count as busy
    let view = interpret(&page).unwrap();
    assert!(view.history_page && view.latest_reply.is_none() && !view.awaiting_reply);
    assert_eq!(view.pending_folds().into_iter().map(|f| f.2).collect::<Vec<_>>(), [FoldLabel::ToolCall]);
}

/// z.ai draws a fenced block in a code editor, one element per line (an empty line holds a
/// `<br>`), and prose one paragraph per line; the text read keeps every line (issue 26 item 6).
#[test]
fn zai_code_editor_lines_and_paragraphs_are_read_as_lines() {
    let html = r#"<html><body><div id="message-1" class="flex"><div class="chat-assistant"><div class="markdown-prose">
  <p>Writing the file now:</p>
  <p>second paragraph</p>
  <div class="code-block"><div class="code-header"><span>json</span><button>Copy</button></div>
    <div class="cm-editor"><div class="cm-content"><div class="cm-line">{</div><div class="cm-line">  "content": "a</div><div class="cm-line"><br></div><div class="cm-line">b"</div><div class="cm-line">}</div></div></div>
  </div>
</div></div></div></body></html>"#;
    let snapshot = snapshot(html, ZAI_CONV, &adapter_for_site(Site::ZAi).selectors());
    assert_eq!(snapshot.roots[0].text, "Writing the file now:\nsecond paragraph\njsonCopy\n{\n  \"content\": \"a\n\nb\"\n}");
}
