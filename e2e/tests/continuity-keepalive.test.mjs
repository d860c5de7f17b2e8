// The keep-alive alarm on its own brings a stopped service worker back. The worker is stopped
// through the DevTools protocol while a bound ChatGPT conversation's agent works, the agent
// settles, and then nothing of the user's wakes the extension: no popup, no page load, no
// message. Only the `h2w-keepalive` alarm can: Chrome starts the worker for it, the worker
// reopens the push stream and sends the missed settle's wake, exactly once — also when the
// alarm keeps firing in the running worker afterwards.
//
// The alarm runs every minute in production. Chromium (156, verified) fires alarms of an
// unpacked extension at any period, so the test shortens it to ext-core's development floor
// (0.1 min = 6 s) through the `herdrKeepaliveMinutes` storage value, which only an unpacked
// install honours.

import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startStack, stopStack, until, extensionPage, hostPids } from '../lib/harness.mjs';
import { waitForWakes, staysAt, continuityState, chatWithWorkingAgent, runtimeStatus, streamConnected } from '../lib/continuity.mjs';
import { stopWorkerAndHost, wakeServiceWorker, alive } from '../lib/service-worker.mjs';

const ALARM = 'h2w-keepalive';
const PERIOD_KEY = 'herdrKeepaliveMinutes';
/// ext-core's `keepalive::MIN_DEV_PERIOD_MIN`.
const DEV_FLOOR_MIN = 0.1;
const PERIOD_MS = DEV_FLOOR_MIN * 60_000;

/// The alarm as Chrome holds it (read from an extension page, not through the worker).
const alarmIn = (page) => page.evaluate((name) => chrome.alarms.get(name), ALARM);

describe('continuity: the keep-alive alarm wakes a stopped service worker', () => {
  let stack;
  let sim;
  before(async () => {
    stack = await startStack('continuity-keepalive', { herdr: true });
    sim = stack.herdrSim;
  });
  after(async () => stopStack(stack));

  test('the period is one minute unless an unpacked install asks for less, and never below the floor', async () => {
    const page = await extensionPage(stack);
    try {
      await until(async () => (await alarmIn(page))?.periodInMinutes === 1, { what: 'the one-minute keep-alive alarm' });
      assert.equal(await page.evaluate(async () => (await chrome.management.getSelf()).installType), 'development', 'the e2e extension is unpacked');
      await page.evaluate(([key]) => chrome.storage.local.set({ [key]: 0.01 }), [PERIOD_KEY]);
      const alarm = await until(async () => {
        const a = await alarmIn(page);
        return a?.periodInMinutes !== 1 ? a : null;
      }, { what: 'the alarm to be re-created at the stored period' });
      assert.equal(alarm.periodInMinutes, DEV_FLOOR_MIN, '0.01 min is raised to the floor');
      assert.equal((await continuityState(stack)).stream.keepalivePeriodMin, DEV_FLOOR_MIN);
    } finally {
      await page.close();
    }
  });

  test('a settle missed while no worker ran is delivered once, after the alarm alone started the worker', async () => {
    const chat = await chatWithWorkingAgent(stack, sim, { workspace: 'ws-k', label: 'keep-alpha', pane: 'ws-k-p1', name: 'claude-ka' });
    await until(async () => (await continuityState(stack)).stream.keepalivePeriodMin === DEV_FLOOR_MIN, { what: 'the short keep-alive period' });

    const { hosts: oldHosts, watch } = await stopWorkerAndHost(stack);
    await sim.setStatus('ws-k-p1', 'done', 'finished while nothing ran');
    await until(async () => (await runtimeStatus(stack, 'ws-k-p1')) === 'done', { what: 'the runtime to see the agent done' });

    // Nothing is done here to wake the worker: only the alarm can (within one period).
    await wakeServiceWorker(stack, watch, async () => {});
    assert.equal(await stack.sw.evaluate(() => globalThis.herdr.wokenBy), `alarm:${ALARM}`, 'the alarm was the event Chrome started the worker for');

    const [wake] = await waitForWakes(stack, chat, 1, { timeoutMs: 20_000 });
    assert.match(wake, /claude-ka/, 'the wake names the agent');
    assert.match(wake, /ws-k-p1, now done/, 'and its settle');
    assert.ok(hostPids(stack).some((pid) => !oldHosts.includes(pid) && alive(pid)), 'the new worker started its own native host');

    // Exactly once, also while the alarm goes on firing in the running worker.
    const alarmsSoFar = (await continuityState(stack)).stream.keepaliveAlarms;
    assert.ok(alarmsSoFar >= 1, 'the worker received the alarm');
    await until(async () => (await continuityState(stack)).stream.keepaliveAlarms > alarmsSoFar, {
      timeoutMs: PERIOD_MS * 2 + 5_000, what: 'one more keep-alive alarm in the running worker',
    });
    await streamConnected(stack);
    await staysAt(stack, chat, 1, 1_000);
    const state = await continuityState(stack);
    assert.equal(state.deliveries.filter((d) => d.conv === chat.convKey && d.ok).length, 1, 'delivered once');
    assert.equal(state.stream.opened, 1, 'the alarm in the running worker opened no second stream');
    assert.equal(state.bindings.find((v) => v.binding.conv_key === chat.convKey).binding.status, 'idle', 'the round is over');
  });
});
