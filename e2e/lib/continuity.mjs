// Steps shared by the continuity e2e tests: open a ChatGPT conversation, bind it through the
// real popup page, call the runtime's MCP tools as ChatGPT's connector would, and read what
// reached each conversation (the fixture store records every user turn the page sent).

import { randomUUID } from 'node:crypto';
import { EXTENSION_ID, socketRequest, until } from './harness.mjs';

export const CHATGPT = 'https://chatgpt.com';
export const WAKE_PREFIX = /^\s*\[Herdr (update|进展|報告)\]/;

/// Opens `https://chatgpt.com/c/<id>` (a fresh id unless given) and waits for the continuity
/// content script to have registered it.
export async function openChatGpt(stack, chatId = randomUUID()) {
  const page = await stack.context.newPage();
  page.on('console', (m) => stack.consoleLines.push(`[chatgpt ${chatId.slice(0, 8)} ${m.type()}] ${m.text()}`));
  stack.pages.push(page);
  await page.goto(`${CHATGPT}/c/${chatId}`);
  await page.waitForFunction(() => document.documentElement.dataset.fixtureReady === '1');
  await page.waitForFunction(() => document.documentElement.dataset.herdrContinuity === 'ready', null, { timeout: 15_000 });
  const tabId = await tabIdOf(stack, `${CHATGPT}/c/${chatId}`);
  return { page, chatId, convKey: `${CHATGPT}/c/${chatId}`, tabId };
}

/// The extension's tab id of the page showing `url` (asked in the service worker).
export async function tabIdOf(stack, url) {
  return until(
    () => stack.sw.evaluate(async (u) => (await chrome.tabs.query({ url: `${u}*` }))[0]?.id ?? null, url),
    { timeoutMs: 5_000, what: `a tab showing ${url}` },
  );
}

/// The popup page for `tabId`, opened in its own tab (the toolbar popup cannot be driven).
export async function openPopup(stack, tabId) {
  const popup = await stack.context.newPage();
  await popup.goto(`chrome-extension://${EXTENSION_ID}/popup/popup.html?tab=${tabId}`);
  await popup.waitForSelector('body[data-ready="1"]', { timeout: 15_000 });
  return popup;
}

/// Binds the chat to the workspace/root whose option label contains `labelPart`, as a user
/// would in the popup; `auto` switches Auto on afterwards.
export async function bindInPopup(stack, chat, labelPart, { auto = false } = {}) {
  const popup = await openPopup(stack, chat.tabId);
  const options = await popup.$$eval('#workspace option', (os) => os.map((o) => ({ value: o.value, label: o.textContent })));
  const choice = options.find((o) => o.label.includes(labelPart));
  if (!choice) throw new Error(`no workspace option containing ${labelPart}: ${JSON.stringify(options)}`);
  await popup.selectOption('#workspace', choice.value);
  await popup.click('#bind');
  await popup.waitForSelector('#result[data-state="bound"]', { timeout: 10_000 });
  if (auto) {
    await popup.check('#auto');
    await popup.waitForSelector('#result[data-state="auto:on"]', { timeout: 10_000 });
  }
  await popup.close();
}

/// A popup message sent from the service worker with an extension-page sender (the message
/// types are documented in extension-shell/src/wasm/continuity.rs).
export function popupMessage(stack, message) {
  return stack.sw.evaluate(
    (m) => globalThis.herdr.shell.handle_message(m, { url: chrome.runtime.getURL('popup/popup.html') }),
    message,
  );
}

export function continuityState(stack) {
  return stack.sw.evaluate(() => globalThis.herdr.shell.continuity_state());
}

/// chrome.storage.local key of the delivery guard (extension-shell's `continuity::GUARD_KEY`).
const GUARD_KEY = 'herdrDeliveryGuard';

/// The delivery guard as the worker last saved it, read through `page` (the
/// service worker or an extension page); undefined before the first save.
export async function savedGuard(page) {
  return (await page.evaluate((k) => chrome.storage.local.get(k), GUARD_KEY))[GUARD_KEY];
}

/// Waits until the push stream has delivered a `hello` (so the next events are seen).
export async function streamConnected(stack, { hellos = 1 } = {}) {
  return until(async () => {
    const s = (await continuityState(stack)).stream;
    return s.connected && s.hellos >= hellos ? s : null;
  }, { timeoutMs: 20_000, what: `the push stream to be connected (hello #${hellos})` });
}

/// User turns the page sent in `chat` (text only), oldest first.
export function userTurns(stack, chat) {
  return stack.store.messages('chatgpt', chat.chatId).filter((m) => m.role === 'user').map((m) => m.text);
}

export const wakesIn = (stack, chat) => userTurns(stack, chat).filter((t) => WAKE_PREFIX.test(t));

/// Waits for the `n`-th wake in `chat`, then returns all of them.
export async function waitForWakes(stack, chat, n, { timeoutMs = 20_000 } = {}) {
  return until(() => {
    const wakes = wakesIn(stack, chat);
    return wakes.length >= n ? wakes : null;
  }, { timeoutMs, what: `${n} wake(s) in ${chat.convKey}` });
}

/// Holds for `ms` and fails if `chat` gets more than `n` wakes meanwhile (a quiet period is
/// the only way to show that something does *not* happen).
export async function staysAt(stack, chat, n, ms = 2_500) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    const got = wakesIn(stack, chat).length;
    if (got > n) throw new Error(`${chat.convKey} got ${got} wakes, expected ${n}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return wakesIn(stack, chat);
}

/// One MCP `tools/call` straight to the runtime (what ChatGPT's connector would do).
export async function callTool(stack, name, args) {
  const res = await socketRequest(stack.socket, {
    method: 'POST',
    path: '/mcp',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-11-25' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } }),
  });
  const payload = res.body.includes('data:')
    ? JSON.parse(res.body.split('\n').filter((l) => l.startsWith('data:')).pop().slice(5))
    : JSON.parse(res.body);
  if (payload.error) throw new Error(`${name}: ${JSON.stringify(payload.error)}`);
  return payload.result.structuredContent ?? payload.result;
}

/// Waits until the popup for `chat` offers a workspace whose label contains `labelPart`
/// (the runtime has seen it in Herdr).
export async function workspaceOffered(stack, chat, labelPart) {
  return until(async () => {
    const info = await popupMessage(stack, { type: 'h2w_continuity_page', tabId: chat.tabId });
    return info.workspaces.find((w) => w.label.includes(labelPart)) ?? null;
  }, { timeoutMs: 20_000, what: `workspace ${labelPart} to be offered` });
}

/// Waits until a binding of `convKey` is armed with `panes` working panes.
export async function bindingWorking(stack, convKey, panes = 1) {
  return until(async () => {
    const s = await continuityState(stack);
    const view = s.bindings.find((v) => v.binding.conv_key === convKey);
    return view && view.binding.status === 'working' && view.binding.working_panes.length >= panes ? view : null;
  }, { timeoutMs: 15_000, what: `the binding of ${convKey} to be working (${panes} pane(s))` });
}

/// The runtime's own picture (not the extension's) of `pane`'s status.
export async function runtimeStatus(stack, pane) {
  const res = await socketRequest(stack.socket, { path: '/push/state', headers: { accept: 'application/json' } });
  return JSON.parse(res.body).agents.find((a) => a.pane === pane)?.status ?? null;
}

/// A ChatGPT conversation bound (Auto on) to a new agent of its own workspace, which then
/// starts working; returns the chat once the extension sees the binding working.
export async function chatWithWorkingAgent(stack, sim, { workspace, label, pane, name }) {
  await sim.addAgent({ workspace, label, pane, cwd: stack.project, status: 'idle', name });
  const chat = await openChatGpt(stack);
  await workspaceOffered(stack, chat, label);
  await bindInPopup(stack, chat, label, { auto: true });
  await streamConnected(stack);
  await sim.setStatus(pane, 'working');
  await bindingWorking(stack, chat.convKey);
  return chat;
}
