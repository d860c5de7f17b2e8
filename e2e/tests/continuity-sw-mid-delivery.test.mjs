// A service worker stopped in the middle of delivering a wake. The chat page is set to hang
// on send (it neither takes nor refuses the message), so the worker has inserted the wake and
// pressed Send and is waiting for the page's answer when the test stops it through the
// DevTools protocol — the moment its record of the delivery says "begun", not "done".
// Then the page recovers and takes the message; its content script sees the composer free
// and tells the extension, which starts a new worker. That worker cannot know whether the
// page took the wake, so it must report it (pending, uncertain, in the popup) and never send
// it again by itself: the chat ends with the wake exactly once.

import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startStack, stopStack, until } from '../lib/harness.mjs';
import {
  waitForWakes, wakesIn, staysAt, continuityState, chatWithWorkingAgent, streamConnected, openPopup, savedGuard,
} from '../lib/continuity.mjs';
import { stopWorkerAndHost, wakeServiceWorker } from '../lib/service-worker.mjs';

/// ext-core's `delivery_guard::WORKER_STOPPED`.
const WORKER_STOPPED = 'worker-stopped';

describe('continuity: the service worker stops mid-delivery', () => {
  let stack;
  before(async () => {
    stack = await startStack('continuity-sw-mid-delivery', { herdr: true });
  });
  after(async () => stopStack(stack));

  test('the wake the stopped worker was sending is reported as uncertain and never sent again', async () => {
    stack.store.holdSends.add('chatgpt');
    const chat = await chatWithWorkingAgent(stack, stack.herdrSim, { workspace: 'ws-m', label: 'mid-alpha', pane: 'ws-m-p1', name: 'claude-md' });

    await stack.herdrSim.setStatus('ws-m-p1', 'done', 'finished just before the stop (marker-md1)');
    await until(() => chat.page.evaluate(() => window.__fixture.heldSends() >= 1), { timeoutMs: 20_000, what: 'the worker to press Send on the hung page' });
    assert.match(await chat.page.evaluate(() => window.__fixture.composerModel()), /marker-md1/, 'the wake is in the composer');
    const midway = await continuityState(stack);
    assert.deepEqual(midway.deliveries.filter((d) => d.conv === chat.convKey), [], 'the delivery is not finished yet');
    const inFlight = Object.values((await savedGuard(stack.sw)).in_flight);
    assert.equal(inFlight.length, 1, 'the begun delivery is on disk before the page was touched');
    const wakeId = inFlight[0].wake.id;

    const { watch } = await stopWorkerAndHost(stack);
    // The page takes the held message after all, while no worker runs.
    await wakeServiceWorker(stack, watch, () => chat.page.evaluate(() => window.__fixture.releaseHeld()));
    assert.equal(await stack.sw.evaluate(() => globalThis.herdr.wokenBy), 'message', "the content script's message started the new worker");
    const [wake] = await waitForWakes(stack, chat, 1);
    assert.match(wake, /marker-md1/);

    const pending = await until(async () => (await continuityState(stack)).pending.find((p) => p.id === wakeId) ?? null, {
      what: `wake ${wakeId} to be reported as pending`,
    });
    assert.equal(pending.reason, WORKER_STOPPED);
    assert.equal(pending.uncertain, true, 'its fate is unknown to the extension');
    await streamConnected(stack);
    await staysAt(stack, chat, 1, 3_000);
    const later = await continuityState(stack);
    assert.deepEqual(later.deliveries.filter((d) => d.conv === chat.convKey), [], 'the new worker tried nothing by itself');
    assert.equal(later.bindings.find((v) => v.binding.conv_key === chat.convKey).binding.status, 'idle', 'and the settle makes no second wake');
    assert.deepEqual(later.guard.in_flight, {}, 'the tab is free for the next wake');

    const popup = await openPopup(stack, chat.tabId);
    const shown = await popup.$eval(`[data-pending="${wakeId}"] .state`, (el) => ({ text: el.textContent, uncertain: el.dataset.uncertain }));
    assert.equal(shown.uncertain, 'true');
    assert.match(shown.text, new RegExp(WORKER_STOPPED), 'the popup says why it waits');
    assert.ok(await popup.$(`[data-send="${wakeId}"]`), 'sending it again is left to the user');
    await popup.close();
    assert.equal(wakesIn(stack, chat).length, 1, 'still once after the popup looked');
  });
});
