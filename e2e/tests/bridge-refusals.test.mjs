// Every submit the bridge refuses says so on the page (issue 26 item 5), the way the
// runtime-down case does: a site switched off while its tab is open, the runtime (so the
// catalog) unavailable, a task still running, a conversation that is not the sender's. The
// text is the service worker's (Rust); the page only shows it.

import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startStack, stopStack, openChat, userSends, enableSite, stopRuntime, restartRuntime, conversationState, until } from '../lib/harness.mjs';
import { MARKER, nextUserMessage, convKeyOf } from '../lib/bridge-steps.mjs';
import { tabIdOf } from '../lib/continuity.mjs';

const notice = (page) => page.locator('#h2w-indicator').textContent({ timeout: 1_000 }).catch(() => '');
const noticeMatching = (page, re, what) => until(async () => (re.test((await notice(page)) ?? '') ? notice(page) : null), { timeoutMs: 10_000, what });

describe('bridge: refusals are shown on the page', () => {
  let stack;
  before(async () => {
    stack = await startStack('refusals', { sites: ['zai', 'deepseek'] });
  });
  after(async () => stopStack(stack));

  test('a site switched off while its tab is open: sent as typed, and the page says so', async () => {
    const page = await openChat(stack, 'https://chat.z.ai/');
    await enableSite(stack, 'zai', false);
    try {
      const since = stack.store.log.length;
      await userSends(page, 'Question while the bridge is off.');
      const sent = await nextUserMessage(stack.store, 'zai', () => true, { sinceIndex: since, what: 'the unbridged message' });
      assert.equal(sent.text, 'Question while the bridge is off.');
      const shown = await noticeMatching(page, /sent without tools/i, 'the site-off notice');
      assert.match(shown, /switched off/i, shown);
    } finally {
      await enableSite(stack, 'zai', true);
    }
  });

  test('the runtime down: sent as typed, and the page says so', async () => {
    const page = await openChat(stack, 'https://chat.deepseek.com/');
    await stopRuntime(stack);
    try {
      const since = stack.store.log.length;
      await userSends(page, 'Question while the runtime is down.');
      const sent = await nextUserMessage(stack.store, 'deepseek', () => true, { sinceIndex: since, what: 'the unbridged message' });
      assert.equal(sent.text, 'Question while the runtime is down.');
      await noticeMatching(page, /sent without tools/i, 'the catalog-unavailable notice');
    } finally {
      await restartRuntime(stack);
    }
  });

  test('a task still running: not sent, the text stays, and the page says so', async () => {
    const page = await openChat(stack, 'https://chat.deepseek.com/');
    const since = stack.store.log.length;
    await userSends(page, 'First task.');
    await nextUserMessage(stack.store, 'deepseek', (t) => t.includes(MARKER), { sinceIndex: since, what: 'the bridged task' });
    const key = await convKeyOf(page);
    await until(async () => (await conversationState(stack, key))?.state === 'waiting for reply', { what: 'the task to be sent' });
    await userSends(page, 'Second task.');
    await noticeMatching(page, /not sent/i, 'the busy notice');
    assert.equal(await page.locator('textarea').first().inputValue(), 'Second task.');
  });

  test('a submit naming another conversation than its page: refused with a notice for the page', async () => {
    const page = await openChat(stack, 'https://chat.z.ai/');
    const tabId = await tabIdOf(stack, 'https://chat.z.ai/');
    // What the page's script would receive had it claimed another chat than the one it shows.
    const answer = await stack.sw.evaluate(async (tabId) => {
      const tab = await chrome.tabs.get(tabId);
      const snapshot = { seq: 1, url: 'https://chat.z.ai/c/someone-else', visible: true, total_roots: 0, roots: [], composer: { present: false } };
      return globalThis.herdr.shell.handle_message(
        { type: 'h2w_submit', site: 'z.ai', convKey: 'https://chat.z.ai', pageId: 'p', text: 'spoofed', snapshot },
        { tab: { id: tab.id, url: tab.url }, frameId: 0 },
      );
    }, tabId);
    assert.equal(answer.ok, false, JSON.stringify(answer));
    assert.equal(answer.error, 'json-bridge-sender-mismatch', JSON.stringify(answer));
    assert.match(answer.notice ?? '', /sent without tools/i, JSON.stringify(answer));
    assert.equal(await page.evaluate(() => document.documentElement.dataset.herdrBridge), 'ready');
  });
});
