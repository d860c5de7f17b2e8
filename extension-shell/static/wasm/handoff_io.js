// The chrome.* call the handoff needs beyond io.js and continuity_io.js
// (wasm-bindgen `raw_module = "./handoff_io.js"`): opening the target chat's tab.

export async function openTab(url) {
  try {
    const tab = await chrome.tabs.create({ url, active: true });
    return { id: tab.id, url: tab.pendingUrl ?? tab.url ?? url };
  } catch (error) {
    return { error: String(error?.message ?? error) };
  }
}
