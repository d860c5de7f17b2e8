//! The `chrome.*` calls continuity needs beyond `io.rs` (tabs, the MAIN-world insert, alarms),
//! imported from `continuity_io.js`.

use js_sys::Promise;
use wasm_bindgen::prelude::*;

#[wasm_bindgen(raw_module = "./continuity_io.js")]
extern "C" {
    /// Resolves to `{id, url}` or null.
    #[wasm_bindgen(js_name = tabGet)]
    pub fn tab_get(tab_id: i32) -> Promise;
    /// Resolves to `[{id, url}]`, tabs showing `prefix` (or a sub-path), most recent first.
    #[wasm_bindgen(js_name = tabsWithPrefix)]
    pub fn tabs_with_prefix(prefix: &str) -> Promise;
    #[wasm_bindgen(js_name = activeTab)]
    pub fn active_tab() -> Promise;
    #[wasm_bindgen(js_name = keepTab)]
    pub fn keep_tab(tab_id: i32) -> Promise;
    /// Replaces the composer's content with `text` if it still holds `expected` (or `text`);
    /// resolves to `{ok, text}` or `{ok:false, error}` (`user-typing` when it changed).
    #[wasm_bindgen(js_name = insertMain)]
    pub fn insert_main(tab_id: i32, text: &str, selector: &str, expected: &str) -> Promise;
    /// Empties the composer when all it holds is `text` or a piece of it (never the user's own
    /// text); resolves to `{ok, stripped}` or `{ok:false, error}`.
    #[wasm_bindgen(js_name = stripMain)]
    pub fn strip_main(tab_id: i32, text: &str, selector: &str) -> Promise;
    #[wasm_bindgen(js_name = uiLanguage)]
    pub fn ui_language() -> String;
    #[wasm_bindgen(js_name = setRepeating)]
    pub fn set_repeating(ms: f64, callback: &js_sys::Function) -> JsValue;
    /// Creates the repeating alarm `name` unless it already runs at `period_minutes`.
    #[wasm_bindgen(js_name = alarmEnsure)]
    pub fn alarm_ensure(name: &str, period_minutes: f64) -> Promise;
    /// Resolves to `chrome.management.getSelf().installType` (`development` when unpacked).
    #[wasm_bindgen(js_name = installType)]
    pub fn install_type() -> Promise;
}
