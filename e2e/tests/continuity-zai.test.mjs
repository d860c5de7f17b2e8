// A wake for a bound z.ai conversation goes through the bridge's raw send: it reaches the
// chat as the wake text itself, not wrapped as a new bridged task.

import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { startStack, stopStack, openChat, until } from '../lib/harness.mjs';
import { MARKER } from '../lib/bridge-steps.mjs';
import { tabIdOf, bindInPopup, streamConnected, callTool, WAKE_PREFIX } from '../lib/continuity.mjs';

describe('continuity: z.ai wake', () => {
  let stack;
  before(async () => {
    stack = await startStack('continuity-zai', { sites: ['zai'] });
  });
  after(async () => stopStack(stack));

  test('an exec wake reaches the bound z.ai chat unwrapped, once', async () => {
    const [root] = (await callTool(stack, 'herdr_inspect', {})).workstation_info.managed_git_roots;
    const chatId = randomUUID();
    const convKey = `https://chat.z.ai/c/${chatId}`;
    await openChat(stack, convKey);
    const chat = { chatId, convKey, tabId: await tabIdOf(stack, convKey) };
    await bindInPopup(stack, chat, root, { auto: true });
    await streamConnected(stack);

    const started = await callTool(stack, 'herdr_exec_start', { root, command: 'echo zai-exec' });
    const sent = () => stack.store.messages('zai', chatId).filter((m) => m.role === 'user').map((m) => m.text);
    const [wake] = await until(() => (sent().length ? sent() : null), { timeoutMs: 20_000, what: 'the wake in the z.ai chat' });
    assert.match(wake, WAKE_PREFIX, 'the text is the wake itself');
    assert.match(wake, new RegExp(started.session_id));
    assert.ok(!wake.includes(MARKER), 'not wrapped as a bridged task');
    // A quiet period is the only way to show that no second copy follows.
    const end = Date.now() + 2_000;
    while (Date.now() < end) {
      assert.equal(sent().length, 1, 'exactly one message');
      await new Promise((r) => setTimeout(r, 100));
    }
  });
});
