// A ChatGPT Project binding follows its tab (spec §7.5 target: "a Project tab must still
// resolve to active_conv_key, else project-target-moved"). Here the tab leaves the Project for
// a plain conversation; the next wake is not typed into whatever that tab shows now, and is
// kept as pending with the reason project-target-moved.

import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { startStack, stopStack, until } from '../lib/harness.mjs';
import { CHATGPT, bindInPopup, streamConnected, callTool, continuityState, tabIdOf, userTurns } from '../lib/continuity.mjs';

const PROJECT = 'g-p-0123456789abcdef0123456789abcdef';
const PROJECT_KEY = `${CHATGPT}/g/${PROJECT}`;

describe('continuity: a Project tab that moved on', () => {
  let stack;
  before(async () => {
    stack = await startStack('continuity-project-target');
  });
  after(async () => stopStack(stack));

  test('the wake is kept as project-target-moved, not typed into the chat the tab shows now', async () => {
    const inspect = await callTool(stack, 'herdr_inspect', {});
    const [root] = inspect.workstation_info.managed_git_roots;
    assert.ok(root, 'the runtime serves one managed root');
    const page = await stack.context.newPage();
    stack.pages.push(page);
    const chatId = randomUUID();
    const url = `${CHATGPT}/g/${PROJECT}-release/c/${chatId}`;
    await page.goto(url);
    await page.waitForFunction(() => document.documentElement.dataset.herdrContinuity === 'ready', null, { timeout: 15_000 });
    const tabId = await tabIdOf(stack, url);
    await bindInPopup(stack, { tabId }, root, { auto: true });
    const activeKey = `${PROJECT_KEY}/c/${chatId}`;
    const view = (await continuityState(stack)).bindings.find((v) => v.binding.conv_key === PROJECT_KEY);
    assert.ok(view, 'a Project binding');
    assert.equal(view.binding.active_conv_key, activeKey);
    assert.equal(view.auto, true);
    await streamConnected(stack);

    // The same tab leaves the Project for a plain conversation.
    const elsewhereId = randomUUID();
    await page.goto(`${CHATGPT}/c/${elsewhereId}`);
    await page.waitForFunction(() => document.documentElement.dataset.herdrContinuity === 'ready', null, { timeout: 15_000 });
    await until(async () => {
      const b = (await continuityState(stack)).bindings.find((v) => v.binding.conv_key === PROJECT_KEY)?.binding;
      return b && b.tab_id === tabId && b.active_conv_key === activeKey ? b : null;
    }, { what: 'the Project binding to keep its tab and chat' });

    const started = await callTool(stack, 'herdr_exec_start', { root, command: 'echo moved-target-marker' });
    assert.ok(started.session_id, `exec started: ${JSON.stringify(started)}`);
    const delivery = await until(async () => {
      const s = await continuityState(stack);
      return s.deliveries.find((d) => d.binding?.startsWith(`${PROJECT_KEY}::`)) ?? null;
    }, { timeoutMs: 30_000, what: 'a delivery attempt for the Project binding' });
    assert.equal(delivery.ok, false, JSON.stringify(delivery));
    assert.equal(delivery.result.error, 'project-target-moved', JSON.stringify(delivery));
    const pending = (await continuityState(stack)).pending.filter((p) => p.conv_key === activeKey);
    assert.equal(pending.length, 1, JSON.stringify(pending));
    assert.equal(pending[0].reason, 'project-target-moved');
    assert.deepEqual(userTurns(stack, { chatId: elsewhereId }), [], 'nothing was typed into the chat the tab shows now');
    assert.deepEqual(userTurns(stack, { chatId }), []);
  });
});
