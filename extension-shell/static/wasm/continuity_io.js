// The chrome.* calls continuity needs (wasm-bindgen `raw_module = "./continuity_io.js"`):
// tabs, the MAIN-world composer insert, alarms. One browser operation each, no decisions.

export async function tabGet(tabId) {
  try {
    const tab = await chrome.tabs.get(tabId);
    return { id: tab.id, url: tab.url ?? '' };
  } catch {
    return null;
  }
}

// Tabs whose URL starts with `prefix` (a conversation key), most recently used first.
export async function tabsWithPrefix(prefix) {
  const tabs = await chrome.tabs.query({ url: `${prefix}*` });
  return tabs
    .filter((t) => typeof t.url === 'string' && (t.url === prefix || /^[/?#]/.test(t.url.slice(prefix.length))))
    .sort((a, b) => (b.lastAccessed ?? 0) - (a.lastAccessed ?? 0))
    .map((t) => ({ id: t.id, url: t.url }));
}

export async function activeTab() {
  const [tab] = await chrome.tabs.query({ active: true, lastFocusedWindow: true });
  return tab ? { id: tab.id, url: tab.url ?? '' } : null;
}

export async function keepTab(tabId) {
  try {
    await chrome.tabs.update(tabId, { autoDiscardable: false });
  } catch {
    // A closed tab: nothing to keep.
  }
}

// Runs in the page's own JS world, so the editor (ProseMirror) sees a real insertText edit.
// Selects the whole composer first, so the result is exactly `text`.
// Only when the composer still holds `expected` (what the worker probed: empty, or an earlier
// wake of ours) or already `text`: the check and the insert run in the same page task, so a
// keystroke of the user can never land between them and be overwritten.
function insertInMainWorld(text, selector, expected) {
  const shown = (n) => n.isConnected && (n.offsetParent || n.getBoundingClientRect().width > 0);
  const all = [...document.querySelectorAll(selector)].filter(shown);
  const el = all[all.length - 1];
  if (!el) return { ok: false, error: 'composer-missing' };
  const norm = (t) => (t || '').replace(/\s+/g, ' ').trim();
  const before = norm((el.innerText || '').replace(/\u200b/g, ''));
  if (before !== norm(expected) && before !== norm(text)) return { ok: false, error: 'user-typing' };
  el.focus();
  const range = document.createRange();
  range.selectNodeContents(el);
  const selection = window.getSelection();
  selection.removeAllRanges();
  selection.addRange(range);
  const done = document.execCommand('insertText', false, text);
  if (!done || !norm(el.innerText).includes(norm(text))) {
    el.dispatchEvent(new InputEvent('input', { inputType: 'insertText', data: text, bubbles: true }));
  }
  return { ok: true, text: (el.innerText || '').replace(/\u200b/g, '') };
}

export async function insertMain(tabId, text, selector, expected) {
  try {
    const [result] = await chrome.scripting.executeScript({ target: { tabId }, world: 'MAIN', func: insertInMainWorld, args: [text, selector, expected] });
    return result?.result ?? { ok: false, error: 'insert-no-result' };
  } catch (error) {
    return { ok: false, error: 'insert-failed', detail: String(error?.message ?? error) };
  }
}

// Takes a wake that did not take back out of the composer, in the page's own JS world like the
// insert. Only what is ours goes: the composer is emptied when all it holds is the wake text or
// a piece of it (an editor that took part of the insert); anything else is the user's and stays.
function stripInMainWorld(text, selector) {
  const shown = (n) => n.isConnected && (n.offsetParent || n.getBoundingClientRect().width > 0);
  const all = [...document.querySelectorAll(selector)].filter(shown);
  const el = all[all.length - 1];
  if (!el) return { ok: false, error: 'composer-missing' };
  const norm = (t) => (t || '').replace(/\s+/g, ' ').trim();
  const before = norm((el.innerText || '').replace(/\u200b/g, ''));
  if (before === '') return { ok: true, stripped: false };
  if (!norm(text).includes(before)) return { ok: true, stripped: false, kept: 'not-ours' };
  el.focus();
  const range = document.createRange();
  range.selectNodeContents(el);
  const selection = window.getSelection();
  selection.removeAllRanges();
  selection.addRange(range);
  document.execCommand('delete', false);
  const left = norm((el.innerText || '').replace(/\u200b/g, ''));
  return { ok: left === '', stripped: left === '', ...(left === '' ? {} : { error: 'strip-failed' }) };
}

export async function stripMain(tabId, text, selector) {
  try {
    const [result] = await chrome.scripting.executeScript({ target: { tabId }, world: 'MAIN', func: stripInMainWorld, args: [text, selector] });
    return result?.result ?? { ok: false, error: 'strip-no-result' };
  } catch (error) {
    return { ok: false, error: 'strip-failed', detail: String(error?.message ?? error) };
  }
}

// Creates the repeating alarm unless it already runs at this period: re-creating it on every
// worker start would push its next firing back each time.
export async function alarmEnsure(name, periodMinutes) {
  const existing = await chrome.alarms.get(name);
  if (existing?.periodInMinutes === periodMinutes) return;
  await chrome.alarms.create(name, { periodInMinutes: periodMinutes, delayInMinutes: periodMinutes });
}

// `development` for an unpacked extension (management.getSelf needs no permission).
export async function installType() {
  try {
    return (await chrome.management.getSelf()).installType ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

export function uiLanguage() {
  return chrome.i18n?.getUILanguage?.() ?? navigator.language ?? 'en';
}

export function setRepeating(ms, callback) {
  return setInterval(callback, ms);
}
