// A wake whose write-ahead record cannot be saved. Before a delivery touches the page, the
// worker writes its claim to chrome.storage.local and waits for the write; if that write
// fails, the page must stay untouched, the wake must not be lost but wait in the popup
// (`state-not-saved`, certain: nothing reached the chat), and the user's "Send now" must
// deliver it once storage works again.
//
// The write fails for real: the test fills chrome.storage.local up to its quota (the
// manifest asks for no `unlimitedStorage`, so QUOTA_BYTES applies) from an extension page,
// leaving less room than one more wake takes, and proves a small write is refused.

import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startStack, stopStack, until, extensionPage } from '../lib/harness.mjs';
import { waitForWakes, wakesIn, staysAt, continuityState, chatWithWorkingAgent, openPopup, savedGuard } from '../lib/continuity.mjs';

/// ext-core's `delivery_guard::STATE_NOT_SAVED`.
const STATE_NOT_SAVED = 'state-not-saved';
const FILLER_KEY = 'e2eFiller';
/// Bytes left free: far less than a wake's JSON (its text alone is longer).
const ROOM = 16;

/// Fills storage to `ROOM` bytes below its quota; returns what is left and the refusal of a
/// write one byte larger than that. chrome.storage counts an item as its key's length plus
/// its JSON's length.
function fillStorage(page) {
  return page.evaluate(async ([key, room]) => {
    const quota = chrome.storage.local.QUOTA_BYTES;
    const used = await chrome.storage.local.getBytesInUse(null);
    await chrome.storage.local.set({ [key]: 'x'.repeat(quota - used - key.length - 2 - room) });
    const left = quota - (await chrome.storage.local.getBytesInUse(null));
    let refusal = null;
    try {
      await chrome.storage.local.set({ p: 'y'.repeat(left - 'p'.length - 2 + 1) });
    } catch (error) {
      refusal = String(error?.message ?? error);
    }
    return { quota, left, refusal };
  }, [FILLER_KEY, ROOM]);
}

describe('continuity: the claim of a delivery cannot be saved', () => {
  let stack;
  before(async () => {
    stack = await startStack('continuity-state-not-saved', { herdr: true });
  });
  after(async () => stopStack(stack));

  test('the page stays untouched, the popup offers the wake, and Send now delivers it once', async () => {
    const chat = await chatWithWorkingAgent(stack, stack.herdrSim, { workspace: 'ws-q', label: 'quota-alpha', pane: 'ws-q-p1', name: 'claude-q' });
    const options = await extensionPage(stack);
    const full = await fillStorage(options);
    assert.ok(full.left >= 0 && full.left <= ROOM, `storage is full to ${ROOM} bytes (left: ${full.left} of ${full.quota})`);
    assert.match(full.refusal ?? 'accepted', /quota/i, 'a write larger than the room left is refused');

    await stack.herdrSim.setStatus('ws-q-p1', 'done', 'finished while storage is full (marker-q1)');
    const attempt = await until(async () => (await continuityState(stack)).deliveries.find((d) => d.conv === chat.convKey) ?? null, {
      timeoutMs: 20_000, what: 'the delivery attempt',
    });
    assert.equal(attempt.ok, false);
    assert.equal(attempt.result.error, STATE_NOT_SAVED);
    assert.match(attempt.result.detail, /quota/i, 'the reason names the storage failure');
    assert.equal(await chat.page.evaluate(() => window.__fixture.composerModel()), '', 'nothing was inserted');
    assert.deepEqual(wakesIn(stack, chat), [], 'nothing was sent');

    const state = await continuityState(stack);
    const pending = state.pending.find((p) => p.id === attempt.wake);
    assert.ok(pending, 'the wake is kept as pending');
    assert.equal(pending.reason, STATE_NOT_SAVED);
    assert.equal(pending.uncertain, false, 'certainly not in the chat');
    assert.deepEqual(state.guard.in_flight, {}, 'the tab is free');
    await staysAt(stack, chat, 0, 2_000);
    assert.equal((await continuityState(stack)).deliveries.filter((d) => d.conv === chat.convKey).length, 1, 'not retried on its own');

    const popup = await openPopup(stack, chat.tabId);
    const shown = await popup.$eval(`[data-pending="${attempt.wake}"] .state`, (el) => ({ text: el.textContent, uncertain: el.dataset.uncertain }));
    assert.equal(shown.text, STATE_NOT_SAVED, 'the popup says why it waits');
    assert.equal(shown.uncertain, 'false');

    await options.evaluate((k) => chrome.storage.local.remove(k), FILLER_KEY);
    await popup.click(`[data-send="${attempt.wake}"]`);
    await popup.waitForSelector('#result[data-state="sent"]', { timeout: 20_000 });
    const [wake] = await waitForWakes(stack, chat, 1);
    assert.match(wake, /marker-q1/);
    await staysAt(stack, chat, 1, 2_000);
    assert.equal(await popup.$(`[data-pending="${attempt.wake}"]`), null, 'the popup offers it no more');

    const later = await continuityState(stack);
    const attempts = later.deliveries.filter((d) => d.conv === chat.convKey);
    assert.deepEqual(attempts.map((d) => [d.wake, d.trigger, d.ok]), [[attempt.wake, 'Automatic', false], [attempt.wake, 'Manual', true]]);
    assert.equal(later.pending.find((p) => p.id === attempt.wake), undefined);
    const saved = await until(async () => {
      const g = await savedGuard(options);
      return g && !g.pending.some((p) => p.wake.id === attempt.wake) && Object.keys(g.in_flight).length === 0 ? g : null;
    }, { what: 'the delivered state to be on disk' });
    assert.deepEqual(saved.accepted, []);
    await popup.close();
    await options.close();
  });
});
