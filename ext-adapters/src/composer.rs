//! How text gets into a site's composer and how it is sent.

use serde::{Deserialize, Serialize};

/// How the content script puts text into the composer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "method", rename_all = "snake_case")]
pub enum InsertMethod {
    /// `<textarea>`: the native `HTMLTextAreaElement.prototype.value` setter (so frameworks
    /// that wrap `value` see the change), then bubbling `input` and `change` events.
    TextareaValueSetter,
    /// `contenteditable` editor (ProseMirror): `execCommand("insertText")` after selecting
    /// the contents. `main_world` means it must run in the page's own JS world, because the
    /// editor only listens to events its own world dispatches.
    ContentEditable { main_world: bool },
}

/// One way of sending the composed message, tried in the order given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SubmitMethod {
    /// Click the first enabled, visible send-button candidate.
    ClickSendButton,
    /// `form.requestSubmit()` on the composer's form.
    RequestSubmit,
    /// Focus the composer, wait `focus_before_enter_ms`, dispatch `keydown` + `keypress`
    /// Enter (`key:"Enter", code:"Enter", keyCode:13`, bubbling).
    PressEnter,
}

/// Which user gestures the content script intercepts to turn a send into a bridged task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterceptTriggers {
    /// Enter without Shift, not during IME composition (`isComposing`, keyCode 229).
    pub enter_key: bool,
    pub form_submit: bool,
    pub send_button_click: bool,
}

/// A site's composer strategy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComposerStrategy {
    pub insert: InsertMethod,
    /// Fallback chain: the next method is tried when the composer has not cleared within
    /// `clear_timeout_ms` after the previous one.
    pub submit: Vec<SubmitMethod>,
    /// The reference waits 400 ms between focus and Enter; sites ignore an Enter that lands
    /// before their editor has taken focus.
    pub focus_before_enter_ms: u32,
    /// Pause between inserting and sending (reference: 420 ms) so the site's state catches up.
    pub settle_after_insert_ms: u32,
    /// How long a send may take to clear the composer before the next method (reference: 5 s).
    pub clear_timeout_ms: u32,
    /// `None` for sites without the JSON bridge (nothing is intercepted).
    pub intercept: Option<InterceptTriggers>,
}

pub(crate) const FOCUS_BEFORE_ENTER_MS: u32 = 400;
pub(crate) const SETTLE_AFTER_INSERT_MS: u32 = 420;
pub(crate) const CLEAR_TIMEOUT_MS: u32 = 5_000;
