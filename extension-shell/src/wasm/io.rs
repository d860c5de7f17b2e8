//! The few `chrome.*` operations the service worker needs, imported from `io.js` (copied next
//! to the generated bindings). Keeping them in one small JS module lets Rust own every decision
//! while the browser calls stay readable and promise-based.

use js_sys::{Function, Promise};
use wasm_bindgen::prelude::*;

#[wasm_bindgen(raw_module = "./io.js")]
extern "C" {
    #[wasm_bindgen(js_name = nativeConnect)]
    pub fn native_connect(host: &str, on_message: &Function, on_disconnect: &Function) -> JsValue;
    #[wasm_bindgen(js_name = portPost, catch)]
    pub fn port_post(port: &JsValue, message: &JsValue) -> Result<(), JsValue>;
    #[wasm_bindgen(js_name = sendNativeOnce)]
    pub fn send_native_once(host: &str, message: &JsValue) -> Promise;
    #[wasm_bindgen(js_name = storageGetAll)]
    pub fn storage_get_all() -> Promise;
    #[wasm_bindgen(js_name = storageSet)]
    pub fn storage_set(items: &JsValue) -> Promise;
    #[wasm_bindgen(js_name = storageRemove)]
    pub fn storage_remove(keys: &JsValue) -> Promise;
    #[wasm_bindgen(js_name = tabSend)]
    pub fn tab_send(tab_id: i32, frame_id: i32, message: &JsValue) -> Promise;
    #[wasm_bindgen(js_name = setTimer)]
    pub fn set_timer(ms: f64, callback: &Function);
    #[wasm_bindgen(js_name = nowMs)]
    pub fn now_ms() -> f64;
    #[wasm_bindgen(js_name = perfNow)]
    pub fn perf_now() -> f64;
    #[wasm_bindgen(js_name = syncSiteScripts)]
    pub fn sync_site_scripts(wanted: &JsValue) -> Promise;
    #[wasm_bindgen(js_name = extensionOrigin)]
    pub fn extension_origin() -> String;
    #[wasm_bindgen(js_name = log)]
    pub fn log(level: &str, message: &str);
}

pub fn now() -> u64 {
    now_ms() as u64
}

pub fn to_js(value: &serde_json::Value) -> JsValue {
    use serde::Serialize;
    value.serialize(&serde_wasm_bindgen::Serializer::json_compatible()).unwrap_or(JsValue::NULL)
}

pub fn from_js(value: &JsValue) -> serde_json::Value {
    if value.is_undefined() || value.is_null() {
        return serde_json::Value::Null;
    }
    serde_wasm_bindgen::from_value(value.clone()).unwrap_or(serde_json::Value::Null)
}

pub async fn wait(promise: Promise) -> Result<JsValue, JsValue> {
    wasm_bindgen_futures::JsFuture::from(promise).await
}
