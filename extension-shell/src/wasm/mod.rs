//! The service worker's entry points, called by `sw.js` from listeners it registered
//! synchronously at top level. Every `chrome.runtime` message is routed here.

mod bridge;
mod continuity;
mod continuity_delivery;
mod continuity_io;
mod continuity_stream;
mod dev_seams;
mod handoff;
mod io;
mod port;
mod store;

use serde_json::{Value, json};
use wasm_bindgen::prelude::*;

use crate::sender::{SenderInfo, verify};
use crate::sites::{ALL_SITES, BridgeSite};

pub const SITES_KEY: &str = "herdrSites";

fn site_enabled(site: BridgeSite) -> bool {
    store::get(SITES_KEY).and_then(|s| s.get(site.slug()).and_then(Value::as_bool)).unwrap_or(false)
}

fn wanted_scripts() -> Value {
    let list: Vec<Value> = ALL_SITES
        .into_iter()
        .filter(|s| site_enabled(*s))
        .map(|s| json!({ "id": format!("herdr-bridge-{}", s.slug()), "matches": [s.match_pattern()] }))
        .collect();
    Value::from(list)
}

async fn sync_scripts() -> Result<(), String> {
    io::wait(io::sync_site_scripts(&io::to_js(&wanted_scripts()))).await.map(|_| ()).map_err(|e| format!("{e:?}"))
}

/// Loads storage, registers the enabled sites' content scripts and opens the native port.
#[wasm_bindgen]
pub async fn start() -> Result<(), JsValue> {
    crate::panic_log::install(io::log);
    store::load().await.map_err(|e| JsValue::from_str(&e))?;
    if let Err(e) = sync_scripts().await {
        io::log("error", &format!("registering content scripts failed: {e}"));
    }
    port::ensure_connected();
    continuity::start();
    handoff::start();
    // Fetched eagerly, so the first task's pages find it ready (spec §1.2).
    wasm_bindgen_futures::spawn_local(async {
        let _ = bridge::refresh_catalog().await;
    });
    Ok(())
}

#[wasm_bindgen]
pub fn on_storage_changed(changes: JsValue) {
    let Value::Object(changes) = io::from_js(&changes) else { return };
    for (key, change) in changes {
        store::external_change(&key, change.get("newValue").cloned().filter(|v| !v.is_null()));
        if key == continuity::SETTINGS_KEY {
            continuity::apply_settings();
        }
        if key == ext_core::continuity::keepalive::PERIOD_OVERRIDE_KEY {
            wasm_bindgen_futures::spawn_local(continuity_stream::schedule_keepalive());
        }
    }
}

fn sender_info(sender: &Value) -> SenderInfo {
    SenderInfo {
        tab_id: sender.pointer("/tab/id").and_then(Value::as_i64).map(|v| v as i32),
        tab_url: sender.pointer("/tab/url").and_then(Value::as_str).map(str::to_string),
        frame_id: sender.get("frameId").and_then(Value::as_i64).unwrap_or(0) as i32,
    }
}

/// True for this extension's own pages (options/popup), which may manage settings.
fn from_extension_page(sender: &Value) -> bool {
    let origin = io::extension_origin();
    sender.get("url").and_then(Value::as_str).is_some_and(|u| u.starts_with(&origin))
}

fn refused(error: &str) -> Value {
    json!({ "ok": false, "error": error })
}

/// The snapshot of a message: `snapshot_json` (a report: one string crosses into WASM and is
/// parsed here, instead of a walk over the object's every property) or `snapshot`.
/// A report's `last_text` is the text (or the delta's appended text) of the page's last root,
/// sent beside the JSON as a plain string.
fn snapshot_of(message: &Value, last_text: Option<String>) -> Result<ext_adapters::PageSnapshot, Value> {
    let invalid = |e: serde_json::Error| json!({ "ok": false, "error": "snapshot-invalid", "detail": e.to_string() });
    if let Some(raw) = message.get("snapshot_json").and_then(Value::as_str) {
        let mut snapshot: ext_adapters::PageSnapshot = serde_json::from_str(raw).map_err(invalid)?;
        let total = snapshot.total_roots;
        if let (Some(text), Some(root)) = (last_text, snapshot.roots.last_mut().filter(|r| r.index.saturating_add(1) == total)) {
            match root.delta.as_mut() {
                Some(delta) => delta.append = text,
                None => root.text = text,
            }
        }
        return Ok(snapshot);
    }
    let raw = message.get("snapshot").cloned().unwrap_or(Value::Null);
    serde_json::from_value(raw).map_err(invalid)
}

/// A report with its snapshot as JSON text, read field by field (the strings only).
fn report_fields(message: &JsValue) -> Option<Value> {
    let get = |k: &str| js_sys::Reflect::get(message, &JsValue::from_str(k)).ok().and_then(|v| v.as_string());
    if get("type").as_deref() != Some("h2w_report") {
        return None;
    }
    let snapshot = get("snapshot_json")?;
    Some(json!({ "type": "h2w_report", "site": get("site"), "convKey": get("convKey"), "pageId": get("pageId"), "snapshot_json": snapshot, "last_text": get("last_text") }))
}

/// The few fields of a `chrome.runtime.MessageSender` that are read, taken one by one (a
/// sender carries the whole tab, and converting all of it took longer than a report).
fn sender_fields(sender: &JsValue) -> Value {
    let get = |o: &JsValue, k: &str| js_sys::Reflect::get(o, &JsValue::from_str(k)).unwrap_or(JsValue::UNDEFINED);
    let tab = get(sender, "tab");
    let mut out = serde_json::Map::new();
    if tab.is_object() {
        out.insert("tab".into(), json!({ "id": get(&tab, "id").as_f64().map(|f| f as i64), "url": get(&tab, "url").as_string() }));
    }
    out.insert("frameId".into(), json!(get(sender, "frameId").as_f64().map(|f| f as i64)));
    out.insert("url".into(), json!(get(sender, "url").as_string()));
    Value::Object(out)
}

/// Routes one `chrome.runtime.onMessage` message; the promise resolves to the reply.
#[wasm_bindgen]
pub async fn handle_message(message: JsValue, sender: JsValue) -> JsValue {
    let started = io::perf_now();
    let message = report_fields(&message).unwrap_or_else(|| io::from_js(&message));
    let sender = sender_fields(&sender);
    let report = message.get("type").and_then(Value::as_str) == Some("h2w_report");
    let answer = io::to_js(&route(message, sender).await);
    if report {
        bridge::record_report_time(io::perf_now() - started);
    }
    answer
}

async fn route(mut message: Value, sender: Value) -> Value {
    let kind = message.get("type").and_then(Value::as_str).unwrap_or("").to_string();
    // Taken out, not copied: it may be a whole 1 MB reply.
    let last_text = match (kind.as_str(), message.as_object_mut()) {
        ("h2w_report", Some(m)) => m.remove("last_text").and_then(|v| match v {
            Value::String(s) => Some(s),
            _ => None,
        }),
        _ => None,
    };
    let text = |k: &str| message.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    match kind.as_str() {
        "h2w_hello" | "h2w_report" | "h2w_submit" | "h2w_catalog" | "h2w_call" => {
            let info = sender_info(&sender);
            let verified = match verify(&text("site"), &text("convKey"), &info, site_enabled) {
                Ok(v) => v,
                // A refused submit is said on the page (the text goes out without tools).
                Err(code) if kind == "h2w_submit" => return crate::notices::with_submit_notice(refused(code)),
                Err(code) => return refused(code),
            };
            // Bindings made on this site's pages follow the tab (z.ai new chat → /c/<id>).
            continuity::page_seen(verified.tab_id, &verified.conv_key);
            match kind.as_str() {
                "h2w_hello" => match ext_adapters::adapter_for_url(&verified.conv_key) {
                    Ok((adapter, _)) => json!({ "ok": true, "site": verified.site.name(), "selectors": adapter.selectors(), "composer": adapter.composer(),
                        "whole_snapshots": dev_seams::whole_snapshots().await }),
                    Err(e) => json!({ "ok": false, "error": "unsupported-site", "detail": format!("{e:?}") }),
                },
                "h2w_report" => match snapshot_of(&message, last_text) {
                    Ok(snapshot) => bridge::report(verified, text("pageId"), snapshot).await,
                    Err(refusal) => refusal,
                },
                "h2w_submit" => crate::notices::with_submit_notice(match snapshot_of(&message, None) {
                    Ok(snapshot) => bridge::submit(verified, text("pageId"), text("text"), snapshot).await,
                    Err(refusal) => refusal,
                }),
                "h2w_catalog" => match bridge::catalog().await {
                    Ok(tools) => json!({ "ok": true, "tools": tools }),
                    Err(e) => json!({ "ok": false, "error": e.code, "detail": e.detail }),
                },
                _ => direct_call(&message).await,
            }
        }
        // The ChatGPT content script (continuity only); the tab's own URL is what counts.
        "h2w_register" | "h2w_composer_free" if text("site") == "chatgpt" => {
            let info = sender_info(&sender);
            if info.frame_id != 0 {
                return refused(crate::sender::ERR_SENDER_MISMATCH);
            }
            match kind.as_str() {
                "h2w_register" => continuity::register(info.tab_id, info.tab_url.as_deref(), &text("url")),
                _ => continuity::composer_free(info.tab_url.as_deref()).await,
            }
        }
        "h2w_continuity_page" if from_extension_page(&sender) => continuity::page_info(&message).await,
        "h2w_bind" if from_extension_page(&sender) => continuity::bind(&message).await,
        "h2w_unbind" if from_extension_page(&sender) => continuity::unbind(&message),
        "h2w_set_auto" if from_extension_page(&sender) => continuity::set_auto(&message),
        "h2w_send_pending" if from_extension_page(&sender) => continuity::send_pending(&message).await,
        "h2w_dismiss_pending" if from_extension_page(&sender) => continuity::dismiss_pending(&message),
        "h2w_continuity_state" if from_extension_page(&sender) => continuity::state(),
        "h2w_continuity_settings" if from_extension_page(&sender) => continuity::settings_view(),
        "h2w_set_continuity_settings" if from_extension_page(&sender) => continuity::save_settings(&message).await,
        "h2w_handoff_start" if from_extension_page(&sender) => handoff::start_handoff(&message).await,
        "h2w_handoff_cancel" if from_extension_page(&sender) => handoff::cancel(&message),
        "h2w_handoff_state" if from_extension_page(&sender) => handoff::state(),
        "h2w_status" if from_extension_page(&sender) => status().await,
        "h2w_activity" if from_extension_page(&sender) => activity().await,
        "h2w_bridge_settings" if from_extension_page(&sender) => bridge::settings_view(),
        "h2w_set_bridge_settings" if from_extension_page(&sender) => bridge::save_settings(&message).await,
        "h2w_set_site" if from_extension_page(&sender) => set_site(&text("site"), message.get("enabled") == Some(&Value::Bool(true))).await,
        _ => refused("unsupported_message"),
    }
}

/// `{tool, args}` from a verified page: only names in the cached catalog run.
async fn direct_call(message: &Value) -> Value {
    let tool = message.get("tool").and_then(Value::as_str).unwrap_or("").trim().to_string();
    let args = message.get("args").cloned().filter(Value::is_object).unwrap_or_else(|| json!({}));
    let catalog = match bridge::catalog().await {
        Ok(c) => c,
        Err(e) => return json!({ "ok": false, "error": e.code, "detail": e.detail }),
    };
    if !catalog.iter().any(|t| t.get("name").and_then(Value::as_str) == Some(tool.as_str())) {
        return json!({ "ok": false, "error": "unknown-tool", "detail": format!("Unknown Herdr tool: {tool}") });
    }
    match bridge::call_tool(&tool, args).await {
        ext_core::engine::CallReply::Ok { result } => json!({ "ok": true, "result": result }),
        ext_core::engine::CallReply::Failed { error, detail } => json!({ "ok": false, "error": error, "detail": detail }),
        ext_core::engine::CallReply::Lost { detail } => json!({ "ok": false, "error": "delivery_unknown", "detail": detail }),
    }
}

async fn set_site(site: &str, enabled: bool) -> Value {
    let Some(site) = BridgeSite::from_name(site) else { return refused("unknown-site") };
    let mut sites = store::get(SITES_KEY).and_then(|v| v.as_object().cloned()).unwrap_or_default();
    sites.insert(site.slug().into(), Value::Bool(enabled));
    let mut items = serde_json::Map::new();
    items.insert(SITES_KEY.into(), Value::Object(sites));
    if let Err(e) = store::set(items).await {
        return json!({ "ok": false, "error": "storage-failed", "detail": e });
    }
    match sync_scripts().await {
        Ok(()) => json!({ "ok": true, "site": site.name(), "enabled": enabled }),
        Err(e) => json!({ "ok": false, "error": "content-script-registration-failed", "detail": e }),
    }
}

/// The runtime's newest activity-log entries of calls made through the extension (options
/// page), read through the host's read-only `GET /activity`.
async fn activity() -> Value {
    let failed = |error: &str, detail: String| json!({ "ok": false, "error": error, "detail": detail });
    match port::http("GET", "/activity?caller=extension&limit=20", json!({ "accept": "application/json" }), None, 5_000).await {
        Ok(a) if a.status == 200 => serde_json::from_str::<Value>(&a.body).unwrap_or_else(|e| failed("bad-answer", e.to_string())),
        Ok(a) => failed("runtime-refused", format!("GET /activity answered {}", a.status)),
        Err(port::PortFailure::NotSent { code, detail } | port::PortFailure::Host { code, detail }) => failed(&code, detail),
        Err(port::PortFailure::Lost { detail }) => failed("native-port-lost", detail),
    }
}

/// Every layer's state with a one-line fix for each failure (options page).
async fn status() -> Value {
    let identity = port::identity().await;
    let port_status = port::status();
    let (host, runtime_reachable) = match &identity {
        Ok(frame) => (json!({ "ok": true, "detail": format!("herdr-nmhost {} answered", frame.get("version").and_then(Value::as_str).unwrap_or("?")) }),
            frame.get("runtime_available").and_then(Value::as_bool).unwrap_or(false)),
        Err(e) => {
            let (code, detail) = match e {
                port::PortFailure::NotSent { code, detail } | port::PortFailure::Host { code, detail } => (code.clone(), detail.clone()),
                port::PortFailure::Lost { detail } => ("native-port-lost".to_string(), detail.clone()),
            };
            (json!({ "ok": false, "error": code, "detail": detail,
                "fix": format!("Install the native host: herdr-nmhost install (extension id {})", io::extension_origin().trim_start_matches("chrome-extension://").trim_end_matches('/')) }), false)
        }
    };
    let health = if identity.is_ok() {
        match port::http("GET", "/health", json!({ "accept": "application/json" }), None, 5_000).await {
            Ok(a) if a.status == 200 => serde_json::from_str::<Value>(&a.body).ok(),
            _ => None,
        }
    } else {
        None
    };
    let runtime = match &health {
        Some(h) => json!({ "ok": true, "version": h.get("version"), "contract": h.get("contract"), "herdr": h.get("herdr") }),
        None => json!({ "ok": false, "reachable": runtime_reachable,
            "fix": "Start the runtime: herdr-mcp serve (in your project folder)" }),
    };
    // Reloaded like the health above: this page shows the runtime as it is now.
    let catalog = if health.is_some() { bridge::refresh_catalog().await.map(|t| t.len()).ok() } else { None };
    let herdr_ok = health.as_ref().and_then(|h| h.pointer("/herdr/status")).and_then(Value::as_str).is_some_and(|s| s == "ok" || s == "available" || s == "connected");
    let sites: serde_json::Map<String, Value> = ALL_SITES.into_iter().map(|s| (s.slug().to_string(), Value::Bool(site_enabled(s)))).collect();
    json!({
        "ok": true,
        "nativeHost": host,
        "port": port_status,
        "runtime": runtime,
        "tools": catalog,
        "herdr": { "ok": herdr_ok, "detail": health.as_ref().and_then(|h| h.pointer("/herdr/message")).cloned(),
            "fix": if herdr_ok { Value::Null } else { Value::from("Optional: start Herdr so workspace and agent tools work") } },
        "sites": sites,
        "conversations": bridge::conversations(),
    })
}

/// `chrome.alarms.onAlarm`: the keep-alive reopens the push stream if it is down (a stopped
/// worker is started for it, and its start restores continuity first).
#[wasm_bindgen]
pub fn on_alarm(name: String) {
    continuity::on_alarm(&name);
}

/// Continuity diagnostics (bindings, pending wakes, deliveries, stream) for tests.
#[wasm_bindgen]
pub fn continuity_state() -> JsValue {
    io::to_js(&continuity::state())
}

/// Diagnostics for tests and the figures script: conversations, call log, port and catalog.
#[wasm_bindgen]
pub fn debug_state() -> JsValue {
    io::to_js(&json!({
        "conversations": bridge::conversations(),
        "calls": bridge::call_log(),
        "port": port::status(),
        "catalog": bridge::last_catalog(),
    }))
}

/// One `tools/call` through the persistent port (figures script); resolves to `{ok, ...}`.
#[wasm_bindgen]
pub async fn call_tool(tool: String, arguments: JsValue) -> JsValue {
    let reply = bridge::call_tool(&tool, io::from_js(&arguments)).await;
    io::to_js(&serde_json::to_value(reply).unwrap_or(Value::Null))
}

/// The same request as `call_tool`, through a one-shot `sendNativeMessage` (a new host process).
#[wasm_bindgen]
pub async fn call_tool_oneshot(tool: String, arguments: JsValue) -> JsValue {
    let mut message = crate::mcp::host_request("oneshot", "tools/call", json!({ "name": tool, "arguments": io::from_js(&arguments) }));
    message["oneshot"] = Value::Bool(true);
    message["id"] = Value::from("oneshot");
    match io::wait(io::send_native_once(port::HOST_NAME, &io::to_js(&message))).await {
        Ok(v) => v,
        Err(e) => io::to_js(&json!({ "ok": false, "error": format!("{e:?}") })),
    }
}

/// Worker time of the page reports so far (figures script): `[[ms, streamed bytes], ...]`.
#[wasm_bindgen]
pub fn report_times(clear: bool) -> JsValue {
    io::to_js(&bridge::report_times(clear))
}

/// The streamed length of the newest report (figures script, polled while it waits).
#[wasm_bindgen]
pub fn last_report_len() -> u32 {
    bridge::last_report_len() as u32
}

/// The catalog as a page would get it, for measuring cold start to catalog ready.
#[wasm_bindgen]
pub async fn catalog_ready() -> JsValue {
    match bridge::catalog().await {
        Ok(tools) => io::to_js(&json!({ "ok": true, "count": tools.len() })),
        Err(e) => io::to_js(&json!({ "ok": false, "error": e.code, "detail": e.detail })),
    }
}
