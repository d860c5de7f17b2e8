// Pressing Send on a ChatGPT page that is slow to take it (spec §7.5 "Submit"): the page's
// Send button shows only 2 s after the wake went into the composer, Enter adds a line instead
// of sending, and the first click on Send is lost. The wake still reaches the chat, once: the
// content script waits for the button (40 × 150 ms) and tries again (up to 3 attempts, 800 ms
// apart) while the wake is still in the composer and the page has not taken it.

import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startStack, stopStack } from '../lib/harness.mjs';
import { openChatGpt, bindInPopup, streamConnected, callTool, waitForWakes, staysAt, continuityState } from '../lib/continuity.mjs';

describe('continuity: submitting a wake on a slow ChatGPT page', () => {
  let stack;
  before(async () => {
    stack = await startStack('continuity-submit');
  });
  after(async () => stopStack(stack));

  test('a late Send button and a lost click still deliver the wake exactly once', async () => {
    stack.store.slowPage.chatgpt = { sendButtonDelayMs: 2_000, enterSends: false, loseClicks: 1 };
    const inspect = await callTool(stack, 'herdr_inspect', {});
    const [root] = inspect.workstation_info.managed_git_roots;
    assert.ok(root, 'the runtime serves one managed root');
    const chat = await openChatGpt(stack);
    await bindInPopup(stack, chat, root, { auto: true });
    await streamConnected(stack);

    const started = await callTool(stack, 'herdr_exec_start', { root, command: 'echo slow-page-marker' });
    assert.ok(started.session_id, `exec started: ${JSON.stringify(started)}`);
    const [wake] = await waitForWakes(stack, chat, 1, { timeoutMs: 40_000 });
    assert.match(wake, new RegExp(started.session_id));
    assert.equal(await chat.page.evaluate(() => window.__fixture.lostClicks()), 1, 'the first click on Send was lost');
    await staysAt(stack, chat, 1);

    const state = await continuityState(stack);
    const deliveries = state.deliveries.filter((d) => d.conv === chat.convKey);
    assert.equal(deliveries.length, 1, JSON.stringify(deliveries));
    assert.equal(deliveries[0].ok, true, JSON.stringify(deliveries[0]));
    assert.equal(deliveries[0].result.via, 'send-button', 'a second click sent it (Enter does not send on this page)');
    assert.equal(state.pending.length, 0, 'nothing is left undelivered');
  });
});
