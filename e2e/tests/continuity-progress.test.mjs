// Progress ticks end to end: while a bound agent works, what it shows (its terminal title, the
// only thing of a working agent the runtime's picture carries) reaches the conversation as a
// progress wake — on each tick, only when it changed once normalised (spinner glyphs, clock
// times dropped), and after a report not again before the cooldown is over.
// Settings: tick 1 s (the smallest the options accept), cooldown 6 s, saved as the options
// page saves them. Ticks are observed through the binding's `next_tick_at_ms`, never waited
// for with a fixed sleep.

import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startStack, stopStack, until, socketRequest } from '../lib/harness.mjs';
import {
  openChatGpt, bindInPopup, streamConnected, waitForWakes, wakesIn, staysAt, continuityState, workspaceOffered, bindingWorking, popupMessage,
} from '../lib/continuity.mjs';

const TICK_SEC = 1;
const COOLDOWN_SEC = 6;
const PANE = 'wp-p1';

async function bindingOf(stack, convKey) {
  const view = (await continuityState(stack)).bindings.find((v) => v.binding.conv_key === convKey);
  assert.ok(view, `a binding of ${convKey}`);
  return view.binding;
}

/// Sets the pane's title and waits until the runtime's picture (what a tick fetches) shows
/// it; returns when that was.
async function showTitle(stack, title) {
  await stack.herdrSim.setTitle(PANE, title);
  await until(async () => {
    const res = await socketRequest(stack.socket, { path: '/push/state', headers: { accept: 'application/json' } });
    return JSON.parse(res.body).agents.find((a) => a.pane === PANE)?.terminal_title === title;
  }, { what: `the runtime's picture to show the title ${JSON.stringify(title)}` });
  return Date.now();
}

/// Waits until a tick has run at or after `atMs` plus one more (so its picture was fetched
/// after `atMs`): a tick at `t` moves `next_tick_at_ms` to `t + tick`.
async function ticksAfter(stack, convKey, atMs) {
  const want = atMs + 2 * TICK_SEC * 1000;
  return until(async () => {
    const b = await bindingOf(stack, convKey);
    return b.progress.next_tick_at_ms >= want + TICK_SEC * 1000 ? b : null;
  }, { timeoutMs: 10_000, what: `two progress ticks after ${atMs}` });
}

/// Tick times (ms) of the progress wakes delivered to `convKey`, oldest first (a progress
/// wake's id ends in `progress:<tick time>`).
async function progressTicks(stack, convKey) {
  const { deliveries } = await continuityState(stack);
  return deliveries.filter((d) => d.conv === convKey && d.ok && d.kind === 'progress').map((d) => Number(d.wake.split('progress:')[1]));
}

describe('continuity: progress ticks while an agent works', () => {
  let stack;
  before(async () => {
    stack = await startStack('continuity-progress', { herdr: true });
  });
  after(async () => stopStack(stack));

  test('a tick reports a changed title once per cooldown, and never an unchanged one', async () => {
    const saved = await popupMessage(stack, { type: 'h2w_set_continuity_settings', progressTickSec: String(TICK_SEC), progressFallbackSec: String(COOLDOWN_SEC) });
    assert.equal(saved.ok, true, JSON.stringify(saved));
    assert.deepEqual((await continuityState(stack)).progress, { tick_sec: TICK_SEC, cooldown_sec: COOLDOWN_SEC });

    await stack.herdrSim.addAgent({ workspace: 'wp', label: 'progress-ws', pane: PANE, cwd: stack.project, status: 'idle', name: 'claude-progress' });
    const chat = await openChatGpt(stack);
    await workspaceOffered(stack, chat, 'progress-ws');
    await bindInPopup(stack, chat, 'progress-ws', { auto: true });
    await streamConnected(stack);
    await stack.herdrSim.setStatus(PANE, 'working');
    await bindingWorking(stack, chat.convKey);

    // Working, nothing shown yet: ticks run and have nothing to say.
    await ticksAfter(stack, chat.convKey, Date.now());
    assert.deepEqual(wakesIn(stack, chat), [], 'no output, no report');

    // The first thing shown is news: one report with it.
    await showTitle(stack, '✳ Planning the change 0:03');
    let wakes = await waitForWakes(stack, chat, 1);
    assert.match(wakes[0], /progress report/);
    assert.match(wakes[0], /Planning the change/);
    const [first] = await progressTicks(stack, chat.convKey);

    // The same text under another spinner glyph and clock is no news, even once the cooldown
    // would allow a report.
    const sameShown = await showTitle(stack, '✶ Planning the change 0:09');
    let binding = await ticksAfter(stack, chat.convKey, Math.max(sameShown, first + COOLDOWN_SEC * 1000));
    assert.equal(binding.progress.last_sent_at_ms, first, 'no report was decided');
    assert.equal(wakesIn(stack, chat).length, 1);

    // Real news after the cooldown goes out at the next tick.
    await showTitle(stack, '✳ Running the test suite');
    wakes = await waitForWakes(stack, chat, 2);
    assert.match(wakes[1], /Running the test suite/);
    const second = (await progressTicks(stack, chat.convKey))[1];

    // News within the cooldown waits for its end (ticks keep running meanwhile).
    const inCooldown = await showTitle(stack, '✳ Fixing 2 failing tests');
    assert.ok(inCooldown < second + COOLDOWN_SEC * 1000, 'the change came within the cooldown');
    wakes = await waitForWakes(stack, chat, 3, { timeoutMs: COOLDOWN_SEC * 1000 + 10_000 });
    assert.match(wakes[2], /Fixing 2 failing tests/);
    const ticks = await progressTicks(stack, chat.convKey);
    assert.equal(ticks.length, 3);
    assert.ok(ticks[2] - ticks[1] >= COOLDOWN_SEC * 1000, `the third report waited for the cooldown (${ticks[2] - ticks[1]} ms)`);
    assert.ok(ticks[2] - ticks[1] < (COOLDOWN_SEC + 5) * 1000, `and went out at a tick soon after it (${ticks[2] - ticks[1]} ms)`);

    // The settle ends the round: a round wake, and no more ticks.
    await stack.herdrSim.setStatus(PANE, 'done', 'all tests pass (marker-p4)');
    wakes = await waitForWakes(stack, chat, 4);
    assert.match(wakes[3], /marker-p4/);
    binding = await bindingOf(stack, chat.convKey);
    assert.equal(binding.status, 'idle');
    await staysAt(stack, chat, 4, 2_500);
    const kinds = (await continuityState(stack)).deliveries.filter((d) => d.conv === chat.convKey && d.ok).map((d) => d.kind);
    assert.deepEqual(kinds, ['progress', 'progress', 'progress', 'round']);
  });
});
