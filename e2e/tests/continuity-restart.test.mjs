// Continuity across a runtime restart: the agent finishes while the runtime is down, so no
// agent_settled is ever published. When the push stream reconnects, its `hello` shows the
// agent done while the binding was still working: exactly one wake for the missed settle.

import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startStack, stopStack, restartRuntime } from '../lib/harness.mjs';
import { openChatGpt, bindInPopup, streamConnected, waitForWakes, staysAt, continuityState, workspaceOffered, bindingWorking } from '../lib/continuity.mjs';

describe('continuity: runtime restart while the agent finishes', () => {
  let stack;
  before(async () => {
    stack = await startStack('continuity-restart', { herdr: true });
  });
  after(async () => stopStack(stack));

  test('the settle missed while offline wakes the conversation once after reconnect', async () => {
    const sim = stack.herdrSim;
    await sim.addAgent({ workspace: 'wr', label: 'restart-ws', pane: 'wr-p1', cwd: stack.project, status: 'idle', name: 'claude-restart' });
    const chat = await openChatGpt(stack);
    await workspaceOffered(stack, chat, 'restart-ws');
    await bindInPopup(stack, chat, 'restart-ws', { auto: true });
    const before = await streamConnected(stack);
    await sim.setStatus('wr-p1', 'working');
    await bindingWorking(stack, chat.convKey);

    const { runtime } = stack;
    const exited = new Promise((r) => runtime.once('exit', r));
    runtime.kill('SIGTERM');
    await exited;
    await sim.setStatus('wr-p1', 'done', 'finished while nobody listened (marker-d4)');
    await restartRuntime(stack);

    await streamConnected(stack, { hellos: before.hellos + 1 });
    const [wake] = await waitForWakes(stack, chat, 1, { timeoutMs: 30_000 });
    assert.match(wake, /claude-restart/);
    await staysAt(stack, chat, 1, 3_000);
    const state = await continuityState(stack);
    assert.ok(state.stream.opened >= 2, 'the stream was opened again');
    assert.equal(state.deliveries.filter((d) => d.conv === chat.convKey && d.ok).length, 1);
  });
});
