// The chrome.* calls the Rust service worker imports (wasm-bindgen `raw_module = "./io.js"`).
// Each function is one browser operation, without decisions.

export function nativeConnect(host, onMessage, onDisconnect) {
  const port = chrome.runtime.connectNative(host);
  port.onMessage.addListener((message) => onMessage(message));
  port.onDisconnect.addListener(() => onDisconnect(chrome.runtime.lastError?.message ?? 'the native host exited'));
  return port;
}

export function portPost(port, message) {
  port.postMessage(message);
}

export function sendNativeOnce(host, message) {
  return chrome.runtime.sendNativeMessage(host, message);
}

export function storageGetAll() {
  return chrome.storage.local.get(null);
}

export function storageSet(items) {
  return chrome.storage.local.set(items);
}

export function storageRemove(keys) {
  return chrome.storage.local.remove(keys);
}

export async function tabSend(tabId, frameId, message) {
  try {
    return await chrome.tabs.sendMessage(tabId, message, { frameId });
  } catch (error) {
    return { ok: false, error: 'tab-unreachable', detail: String(error?.message ?? error) };
  }
}

export function setTimer(ms, callback) {
  setTimeout(callback, Math.max(0, ms));
}

export function nowMs() {
  return Date.now();
}

export function perfNow() {
  return performance.now();
}

export function extensionOrigin() {
  return `chrome-extension://${chrome.runtime.id}/`;
}

// Makes the registered bridge content scripts exactly `wanted` ([{id, matches}]).
export async function syncSiteScripts(wanted) {
  const existing = await chrome.scripting.getRegisteredContentScripts();
  const wantedIds = new Set(wanted.map((w) => w.id));
  const stale = existing.filter((s) => s.id.startsWith('herdr-bridge-') && !wantedIds.has(s.id)).map((s) => s.id);
  if (stale.length) await chrome.scripting.unregisterContentScripts({ ids: stale });
  const have = new Set(existing.map((s) => s.id));
  const add = wanted
    .filter((w) => !have.has(w.id))
    .map((w) => ({ id: w.id, matches: w.matches, js: ['content/bridge.js'], css: ['content/bridge.css'], runAt: 'document_idle', persistAcrossSessions: true }));
  if (add.length) await chrome.scripting.registerContentScripts(add);
}

export function log(level, message) {
  (console[level] ?? console.log)(`herdr: ${message}`);
}
