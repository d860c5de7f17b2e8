// Acceptance 7 and the identity rules: z.ai's new-chat root → /c/<id> carries its binding and
// Auto setting once; /c/A → /c/B carries nothing; a site that is off gets no bridge; spoofed
// senders and conversations get no tool execution.

import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { basename, join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { modelReply } from '../lib/fixture-sites.mjs';
import { startStack, stopStack, openChat, userSends, conversationState, swState, extensionPage, enableSite, until } from '../lib/harness.mjs';
import { MARKER, nextUserMessage, convKeyOf } from '../lib/bridge-steps.mjs';

const storage = (stack) => stack.sw.evaluate(() => chrome.storage.local.get(['herdrWakeBindings', 'herdrConversationAutomation']));

describe('conversation identity', () => {
  let stack;
  before(async () => {
    stack = await startStack('identity', { sites: ['zai'] });
  });
  after(async () => stopStack(stack));

  test('z.ai root binding and Auto move to /c/<id> once; /c/A → /c/B carries nothing', async () => {
    const page = await openChat(stack, 'https://chat.z.ai/');
    const options = await extensionPage(stack);
    await options.evaluate(async () => {
      const [tab] = await chrome.tabs.query({ url: 'https://chat.z.ai/*' });
      await chrome.storage.local.set({
        herdrWakeBindings: { 'https://chat.z.ai::ws-1': { workspace_id: 'ws-1', convKey: 'https://chat.z.ai', tabId: tab.id, tabUrl: tab.url, created_at: 1 } },
        herdrConversationAutomation: { 'https://chat.z.ai': true },
      });
    });
    const since = stack.store.log.length;
    await userSends(page, 'Hello there.');
    await nextUserMessage(stack.store, 'zai', (t) => t.includes(MARKER), { sinceIndex: since, what: 'the bridged task' });
    const keyA = await convKeyOf(page);
    assert.match(keyA, /^https:\/\/chat\.z\.ai\/c\/[^/]+$/);
    const moved = await until(async () => {
      const s = await storage(stack);
      return s.herdrWakeBindings?.[`${keyA}::ws-1`] ? s : null;
    }, { what: 'the binding to move to /c/<id>' });
    assert.deepEqual(Object.keys(moved.herdrWakeBindings), [`${keyA}::ws-1`]);
    assert.equal(moved.herdrWakeBindings[`${keyA}::ws-1`].convKey, keyA);
    assert.deepEqual(moved.herdrConversationAutomation, { [keyA]: true });
    await modelReply(page, 'Hi!');
    await until(async () => (await conversationState(stack, keyA))?.running === false, { what: 'the first task to end' });

    // Same tab, another chat: nothing follows it.
    const keyB = `https://chat.z.ai/c/${randomBytes(6).toString('hex')}`;
    await page.goto(keyB);
    await page.waitForFunction(() => document.documentElement.dataset.herdrBridge === 'ready');
    await until(async () => (await conversationState(stack, keyB)) !== null, { what: 'the bridge to register /c/B' });
    const sinceB = stack.store.log.length;
    await userSends(page, 'Another question.');
    await nextUserMessage(stack.store, 'zai', (t) => t.includes(MARKER), { sinceIndex: sinceB, what: 'the task in /c/B' });
    const after = await storage(stack);
    assert.deepEqual(after, moved, 'bindings and Auto unchanged by /c/A → /c/B');
    const stateA = await conversationState(stack, keyA);
    assert.equal(stateA, null, 'the chat the tab left no longer drives it');
  });

  test('a site that is off gets no bridge, and switching z.ai off removes it', async () => {
    const page = await openChat(stack, 'https://chat.deepseek.com/', { bridged: false });
    const scripts = await stack.sw.evaluate(() => chrome.scripting.getRegisteredContentScripts().then((s) => s.map((x) => x.id)));
    assert.deepEqual(scripts, ['herdr-bridge-zai']);
    assert.equal(await page.evaluate(() => document.documentElement.dataset.herdrBridge ?? null), null);
    const since = stack.store.log.length;
    await userSends(page, 'Plain question.');
    const sent = await nextUserMessage(stack.store, 'deepseek', () => true, { sinceIndex: since, what: 'the plain DeepSeek message' });
    assert.equal(sent.text, 'Plain question.', 'sent as typed, without a preamble');

    await enableSite(stack, 'zai', false);
    const after = await stack.sw.evaluate(() => chrome.scripting.getRegisteredContentScripts().then((s) => s.map((x) => x.id)));
    assert.deepEqual(after, []);
    const zai = await openChat(stack, 'https://chat.z.ai/', { bridged: false });
    const sinceZ = stack.store.log.length;
    await userSends(zai, 'Unbridged now.');
    const plain = await nextUserMessage(stack.store, 'zai', () => true, { sinceIndex: sinceZ, what: 'the plain z.ai message' });
    assert.equal(plain.text, 'Unbridged now.');
    await enableSite(stack, 'zai', true);
  });

  test('spoofed senders, sites and conversations run nothing', async () => {
    const marker = join(stack.project, `spoof-${randomBytes(4).toString('hex')}.txt`);
    const call = { tool: 'herdr_exec', args: { workspace: basename(stack.project), command: `echo x > ${marker}` } };
    const options = await extensionPage(stack);
    // An extension page is not a chat tab.
    const fromPage = await options.evaluate((c) => chrome.runtime.sendMessage({ type: 'h2w_call', site: 'z.ai', convKey: 'https://chat.z.ai/c/x', ...c }), call);
    assert.equal(fromPage.error, 'json-bridge-sender-mismatch');
    // The real routing function, with forged senders as a compromised page could present them.
    const forged = await stack.sw.evaluate(async (c) => {
      const h = (m, s) => globalThis.herdr.shell.handle_message(m, s);
      return {
        otherTab: await h({ type: 'h2w_call', site: 'z.ai', convKey: 'https://chat.z.ai/c/x', ...c }, { tab: { id: 1, url: 'https://chat.deepseek.com/a/chat/s/1' }, frameId: 0 }),
        siteClaim: await h({ type: 'h2w_call', site: 'deepseek', convKey: 'https://chat.z.ai/c/x', ...c }, { tab: { id: 1, url: 'https://chat.z.ai/c/x' }, frameId: 0 }),
        offSite: await h({ type: 'h2w_call', site: 'deepseek', convKey: 'https://chat.deepseek.com/a/chat/s/1', ...c }, { tab: { id: 1, url: 'https://chat.deepseek.com/a/chat/s/1' }, frameId: 0 }),
        foreign: await h({ type: 'h2w_call', site: 'z.ai', convKey: 'https://evil.example/c/x', ...c }, { tab: { id: 1, url: 'https://evil.example/c/x' }, frameId: 0 }),
        unknownTool: await h({ type: 'h2w_call', site: 'z.ai', convKey: 'https://chat.z.ai/c/x', tool: 'herdr_not_a_tool', args: {} }, { tab: { id: 1, url: 'https://chat.z.ai/c/x' }, frameId: 0 }),
      };
    }, call);
    assert.deepEqual(
      Object.fromEntries(Object.entries(forged).map(([k, v]) => [k, v.error])),
      { otherTab: 'json-bridge-sender-mismatch', siteClaim: 'json-bridge-site-mismatch', offSite: 'experimental-site-disabled', foreign: 'json-bridge-site-mismatch', unknownTool: 'unknown-tool' },
    );
    assert.equal(existsSync(marker), false, 'no spoofed call ran');
    assert.equal((await swState(stack)).calls.some((c) => c.tool === 'herdr_exec'), false);
  });
});
