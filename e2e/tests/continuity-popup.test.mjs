// The popup as the user meets it: bind a new ChatGPT chat (a pending binding on the site
// root) that follows the chat to its /c/<id> after the first message; a wake that finds no
// tab waits in the popup instead of being lost, and goes out with "Send now" once the chat
// is open again; unbinding removes the binding.

import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startStack, stopStack, until } from '../lib/harness.mjs';
import { CHATGPT, tabIdOf, openPopup, streamConnected, callTool, continuityState, wakesIn, waitForWakes, staysAt } from '../lib/continuity.mjs';

describe('continuity: popup bindings and waiting wakes', () => {
  let stack;
  before(async () => {
    stack = await startStack('continuity-popup');
  });
  after(async () => stopStack(stack));

  test('pending binding follows the new chat; an undelivered wake waits for "Send now"; unbind', async () => {
    const inspect = await callTool(stack, 'herdr_inspect', {});
    const [root] = inspect.workstation_info.managed_git_roots;
    const page = await stack.context.newPage();
    stack.pages.push(page);
    await page.goto(`${CHATGPT}/`);
    await page.waitForFunction(() => document.documentElement.dataset.herdrContinuity === 'ready');
    const firstTab = await tabIdOf(stack, `${CHATGPT}/`);

    const popup = await openPopup(stack, firstTab);
    assert.equal(await popup.textContent('#page-key'), CHATGPT, 'the new-chat page is bound by the site root');
    await popup.selectOption('#workspace', { label: `${root} (root)` });
    await popup.click('#bind');
    await popup.waitForSelector('#result[data-state="bound"]');
    assert.match(await popup.textContent('#page-bindings'), /pending/);
    await popup.check('#auto');
    await popup.waitForSelector('#result[data-state="auto:on"]');

    await page.click('#prompt-textarea');
    await page.keyboard.type('start a new chat please');
    await page.keyboard.press('Enter');
    await page.waitForURL(/\/c\//);
    const convKey = await page.evaluate(() => location.origin + location.pathname);
    const moved = await until(async () => {
      const s = await continuityState(stack);
      return s.bindings.find((v) => v.binding.conv_key === convKey) ?? null;
    }, { what: `the binding to follow the chat to ${convKey}` });
    assert.equal(moved.binding.scope, 'conversation');
    assert.equal(moved.auto, true, 'Auto came along');
    const chat = { chatId: convKey.split('/c/')[1], convKey };

    await streamConnected(stack);
    await page.close();
    const started = await callTool(stack, 'herdr_exec_start', { root, command: 'echo popup-exec' });
    const waiting = await until(async () => (await continuityState(stack)).pending.find((w) => w.conv_key === convKey) ?? null, {
      what: 'the wake to wait as pending (no tab shows the chat)',
    });
    assert.equal(waiting.reason, 'no_tab');
    assert.match(waiting.text, new RegExp(started.session_id));
    assert.deepEqual(wakesIn(stack, chat), [], 'nothing was delivered while no tab showed the chat');

    const again = await stack.context.newPage();
    stack.pages.push(again);
    await again.goto(convKey);
    await again.waitForFunction(() => document.documentElement.dataset.herdrContinuity === 'ready');
    const secondTab = await tabIdOf(stack, convKey);
    await staysAt(stack, chat, 0, 1_500);
    await popup.goto(popup.url().replace(/tab=\d+/, `tab=${secondTab}`));
    await popup.waitForSelector('body[data-ready="1"]');
    assert.equal(await popup.getAttribute('body', 'data-pending'), '1');
    await popup.click(`[data-send="${waiting.id}"]`);
    await popup.waitForSelector('#result[data-state="sent"]', { timeout: 20_000 });
    const [wake] = await waitForWakes(stack, chat, 1);
    assert.match(wake, new RegExp(started.session_id));
    assert.equal(await popup.getAttribute('body', 'data-pending'), '0');

    await popup.click(`[data-unbind="${moved.binding.key}"]`);
    await popup.waitForSelector('#result[data-state="unbound"]');
    assert.equal(await popup.getAttribute('body', 'data-bindings'), '0');
    assert.equal((await continuityState(stack)).bindings.length, 0);
  });
});
