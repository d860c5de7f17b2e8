// Continuity without Herdr: a conversation bound to a managed root (through the popup, Auto
// on) is woken exactly once when a herdr_exec_start session in that root finishes. An
// unbound conversation and one bound with Auto off receive nothing.

import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startStack, stopStack } from '../lib/harness.mjs';
import { openChatGpt, bindInPopup, streamConnected, callTool, waitForWakes, staysAt, wakesIn, continuityState } from '../lib/continuity.mjs';

describe('continuity: exec session in the bound root', () => {
  let stack;
  before(async () => {
    stack = await startStack('continuity-exec');
  });
  after(async () => stopStack(stack));

  test('a finished exec session wakes the bound Auto conversation once, and no other', async () => {
    const inspect = await callTool(stack, 'herdr_inspect', {});
    const [root] = inspect.workstation_info.managed_git_roots;
    assert.ok(root, 'the runtime serves one managed root');
    const bound = await openChatGpt(stack);
    const unbound = await openChatGpt(stack);
    const autoOff = await openChatGpt(stack);
    await bindInPopup(stack, bound, root, { auto: true });
    await bindInPopup(stack, autoOff, root, { auto: false });
    await streamConnected(stack);

    const started = await callTool(stack, 'herdr_exec_start', { root, command: 'sleep 1; echo exec-finished-marker' });
    assert.ok(started.session_id, `exec started: ${JSON.stringify(started)}`);
    const [wake] = await waitForWakes(stack, bound, 1);
    assert.match(wake, new RegExp(started.session_id), 'the wake names the session');
    assert.match(wake, /exit 0/, 'and how it ended');
    await staysAt(stack, bound, 1);
    assert.deepEqual(wakesIn(stack, unbound), [], 'the unbound conversation got nothing');
    assert.deepEqual(wakesIn(stack, autoOff), [], 'the Auto-off conversation got nothing');
    const state = await continuityState(stack);
    assert.equal(state.pending.length, 0, 'nothing is left undelivered');
    assert.ok(state.suppressed.some((w) => w.conv_key === autoOff.convKey), 'the Auto-off wake is only shown, not sent');
  });
});
