// Steps shared by the bridge e2e tests: what the user does, what the scripted model does, and
// how the test reads what reached the conversation.

import { until } from './harness.mjs';

export const SITE_INFO = {
  zai: { slug: 'zai', site: 'zai', name: 'z.ai', origin: 'https://chat.z.ai', root: 'https://chat.z.ai/' },
  deepseek: { slug: 'deepseek', site: 'deepseek', name: 'deepseek', origin: 'https://chat.deepseek.com', root: 'https://chat.deepseek.com/' },
};

export const MARKER = '[HERDR_JSON_BRIDGE_V1]';

export function chatIdOf(page) {
  return page.evaluate(() => window.__fixture.chatId());
}

export function convKeyOf(page) {
  return page.evaluate(() => location.origin + location.pathname.replace(/\/+$/, ''));
}

/// Next user message in `site` after `sinceIndex` of the store log that matches `test`.
export function nextUserMessage(store, site, test, { sinceIndex = 0, timeoutMs = 20_000, what = 'a user message' } = {}) {
  return store.waitFor((m) => m.site === site && m.role === 'user' && test(m.text), { sinceIndex, timeoutMs, what });
}

/// Parses a TOOL_RESULT message into its rows.
export function toolResultRows(text) {
  const body = text.replace(/^\s*TOOL_RESULT:\s*/, '');
  return JSON.parse(body);
}

export const isToolResult = (t) => /^\s*TOOL_RESULT:/.test(t);

/// Tool names declared in the preamble's typed API.
export function preambleToolNames(text) {
  return [...text.matchAll(/^\s+"?([A-Za-z_$][\w$]*)"?: \(input/gm)].map((m) => m[1]);
}

/// The text of a tool row's result payload.
export function rowText(row) {
  return JSON.stringify(row.result ?? row);
}

export async function waitIdle(stackOrFn, key, timeoutMs = 20_000) {
  return until(async () => {
    const c = await stackOrFn(key);
    return c && !c.running ? c : null;
  }, { timeoutMs, what: `conversation ${key} to be idle` });
}

/// The tool's own payload inside a TOOL_RESULT row: the row's `result` is that payload,
/// carried once (not the MCP result with its text block and `structuredContent`).
export function payloadOf(row) {
  return row.ok ? (row.result ?? null) : null;
}
