// Continuity across a service-worker restart (MV3 stops idle workers; Chrome may kill one at
// any time). The worker is stopped through the DevTools protocol while a bound ChatGPT
// conversation's agent works; its memory, its native port and the push stream go with it.
// Chrome starts it again for the next extension event, and the continuity state it restores
// from chrome.storage must still hold the binding:
//   (a) the agent settles while no worker runs; the user opening the popup wakes the worker,
//       which shows the binding with Auto on and sends the missed settle's wake exactly once;
//   (b) the worker is woken by the chat page itself (a reload: its content script registers
//       the tab) while the agent still works; the later settle wakes exactly once.

import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startStack, stopStack, until, hostPids } from '../lib/harness.mjs';
import {
  openPopup, streamConnected, waitForWakes, staysAt, continuityState, chatWithWorkingAgent, runtimeStatus, bindingWorking,
} from '../lib/continuity.mjs';
import { stopWorkerAndHost, wakeServiceWorker, alive } from '../lib/service-worker.mjs';

const bindingOf = async (stack, convKey) => (await continuityState(stack)).bindings.find((v) => v.binding.conv_key === convKey) ?? null;

describe('continuity: service-worker restart while an agent works', () => {
  let stack;
  let sim;
  before(async () => {
    stack = await startStack('continuity-sw-restart', { herdr: true });
    sim = stack.herdrSim;
  });
  after(async () => stopStack(stack));

  test('(a) the settle that happened while no worker ran wakes once after the popup wakes the worker', async () => {
    const chat = await chatWithWorkingAgent(stack, sim, { workspace: 'ws-a', label: 'sw-alpha', pane: 'ws-a-p1', name: 'claude-swa' });

    const { hosts: oldHosts, watch } = await stopWorkerAndHost(stack);
    await sim.setStatus('ws-a-p1', 'done', 'finished while the worker slept (marker-sa1)');
    // The settle is over on the workstation before anything of the extension runs again.
    await until(async () => (await runtimeStatus(stack, 'ws-a-p1')) === 'done', { what: 'the runtime to see the agent done' });
    assert.deepEqual((await staysAt(stack, chat, 0, 500)), [], 'no wake without a worker');

    const popup = await wakeServiceWorker(stack, watch, () => openPopup(stack, chat.tabId));
    assert.equal(await popup.$$eval('#page-bindings [data-binding]', (els) => els.length), 1, 'the popup shows the restored binding');
    assert.ok(await popup.isChecked('#auto'), 'with Auto still on');
    await popup.close();

    const [wake] = await waitForWakes(stack, chat, 1, { timeoutMs: 30_000 });
    assert.match(wake, /claude-swa/, 'the wake names the agent');
    await staysAt(stack, chat, 1, 3_000);
    const state = await continuityState(stack);
    assert.equal(state.deliveries.filter((d) => d.conv === chat.convKey && d.ok).length, 1, 'the new worker delivered it, once');
    assert.equal((await bindingOf(stack, chat.convKey)).binding.status, 'idle', 'the round is over');
    assert.ok(hostPids(stack).some((pid) => !oldHosts.includes(pid) && alive(pid)), 'the new worker started its own native host');
  });

  test('(b) a worker woken by the chat page while the agent works wakes once at the later settle', async () => {
    const chat = await chatWithWorkingAgent(stack, sim, { workspace: 'ws-b', label: 'sw-beta', pane: 'ws-b-p1', name: 'claude-swb' });

    const { watch } = await stopWorkerAndHost(stack);
    await wakeServiceWorker(stack, watch, async () => {
      await chat.page.reload();
      await chat.page.waitForFunction(() => document.documentElement.dataset.herdrContinuity === 'ready', null, { timeout: 15_000 });
    });
    await streamConnected(stack);
    const view = await bindingWorking(stack, chat.convKey);
    assert.ok(view.auto, 'the restored binding keeps Auto on');
    assert.deepEqual(view.binding.working_panes, ['ws-b-p1']);

    await sim.setStatus('ws-b-p1', 'done', 'finished after the restart (marker-sb2)');
    const [wake] = await waitForWakes(stack, chat, 1);
    assert.match(wake, /claude-swb/);
    assert.match(wake, /marker-sb2/, 'and carries the output read after the settle');
    await staysAt(stack, chat, 1, 3_000);
    assert.equal((await continuityState(stack)).deliveries.filter((d) => d.conv === chat.convKey && d.ok).length, 1);
  });
});
