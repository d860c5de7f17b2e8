// A service worker stopped after it decided a wake, before it began delivering it. The wake
// was accepted and saved together with the decision (the settle is already counted), but
// nothing of it reached the page, so the next worker must deliver it — exactly once, and
// without leaving it in the popup's pending list.
//
// No outside event can stop the worker at that exact step, so the test uses the development
// install's hold (extension-shell/src/wasm/dev_seams.rs: `herdrDevHoldBeforeBegin` in
// chrome.storage.local makes an unpacked install halt each delivery just before
// `DeliveryGuard::begin`). The test waits until the worker reports the delivery halted, clears
// the hold, stops the worker through the DevTools protocol and wakes it with the popup.

import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startStack, stopStack, until, extensionPage } from '../lib/harness.mjs';
import {
  waitForWakes, wakesIn, staysAt, continuityState, chatWithWorkingAgent, streamConnected, openPopup, savedGuard,
} from '../lib/continuity.mjs';
import { stopWorkerAndHost, wakeServiceWorker } from '../lib/service-worker.mjs';

/// extension-shell's `dev_seams::HOLD_BEFORE_BEGIN_KEY`.
const HOLD_KEY = 'herdrDevHoldBeforeBegin';

const setStorage = (page, items) => page.evaluate((i) => chrome.storage.local.set(i), items);

describe('continuity: the service worker stops between deciding a wake and delivering it', () => {
  let stack;
  before(async () => {
    stack = await startStack('continuity-sw-before-begin', { herdr: true });
  });
  after(async () => stopStack(stack));

  test('the accepted wake that never began is delivered once by the next worker', async () => {
    const chat = await chatWithWorkingAgent(stack, stack.herdrSim, { workspace: 'ws-h', label: 'hold-alpha', pane: 'ws-h-p1', name: 'claude-hb' });
    // An extension page writes the hold, so the worker hears of it through storage.onChanged.
    const options = await extensionPage(stack);
    await setStorage(options, { [HOLD_KEY]: true });
    await until(async () => (await continuityState(stack)).holdBeforeBegin.set, { what: 'the worker to see the hold' });

    await stack.herdrSim.setStatus('ws-h-p1', 'done', 'finished just before the stop (marker-hb1)');
    const [wakeId] = await until(async () => {
      const held = (await continuityState(stack)).holdBeforeBegin.held;
      return held.length ? held : null;
    }, { timeoutMs: 20_000, what: 'the delivery to be halted before begin' });
    const onDisk = await until(async () => {
      const guard = await savedGuard(options);
      return guard?.accepted?.some((w) => w.id === wakeId) ? guard : null;
    }, { what: `wake ${wakeId} to be saved as accepted` });
    assert.deepEqual(onDisk.in_flight, {}, 'its delivery has not begun');
    assert.deepEqual(onDisk.pending, [], 'and nothing waits for the user');
    assert.equal(await chat.page.evaluate(() => window.__fixture.composerModel()), '', 'the page is untouched');
    assert.deepEqual(wakesIn(stack, chat), []);
    assert.deepEqual((await continuityState(stack)).deliveries.filter((d) => d.conv === chat.convKey), [], 'no attempt was made');

    // Cleared while the old worker still runs: its halted delivery stays halted (it never
    // resumes), and the next worker must not halt the one it redoes.
    await setStorage(options, { [HOLD_KEY]: false });
    await options.close();
    const { watch } = await stopWorkerAndHost(stack);
    const popup = await wakeServiceWorker(stack, watch, () => openPopup(stack, chat.tabId));
    await popup.close();

    const [wake] = await waitForWakes(stack, chat, 1);
    assert.match(wake, /marker-hb1/);
    await streamConnected(stack);
    await staysAt(stack, chat, 1, 3_000);
    const state = await continuityState(stack);
    const attempts = state.deliveries.filter((d) => d.conv === chat.convKey);
    assert.deepEqual(attempts.map((d) => [d.wake, d.trigger, d.ok]), [[wakeId, 'Automatic', true]], 'the new worker delivered that very wake, once');
    assert.equal(state.pending.find((p) => p.id === wakeId), undefined, 'nothing is left pending');
    assert.deepEqual(state.guard.accepted, [], 'nothing is left accepted');
    assert.deepEqual(state.guard.in_flight, {});
    assert.deepEqual(state.holdBeforeBegin, { set: false, held: [] }, 'the new worker halted nothing');
    assert.equal(state.bindings.find((v) => v.binding.conv_key === chat.convKey).binding.status, 'idle', 'the settle made no second wake');

    const after = await openPopup(stack, chat.tabId);
    assert.equal(await after.$(`[data-pending="${wakeId}"]`), null, 'the popup offers no pending entry for it');
    assert.equal(await after.$$eval('#pending [data-pending]', (els) => els.length), 0, 'nor any other');
    assert.equal(await after.getAttribute('body', 'data-pending'), '0');
    const settled = await until(async () => {
      const g = await savedGuard(after);
      return g && g.accepted.length === 0 && Object.keys(g.in_flight).length === 0 ? g : null;
    }, { what: 'the settled guard to be on disk' });
    assert.deepEqual(settled.pending, []);
    await after.close();
    assert.equal(wakesIn(stack, chat).length, 1, 'still once after the popup looked');
  });
});
