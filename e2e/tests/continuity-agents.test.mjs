// Continuity with Herdr (the runtime's Herdr simulator behind a real runtime): wakes reach a
// bound ChatGPT conversation through the push stream, the native port and the page's own
// composer.
//   (a) one agent working → done: exactly one wake, naming the agent and carrying its output,
//       to the bound conversation with Auto on; nothing to an unbound one or one with Auto off;
//   (b) two agents: the first to settle gives one `partial` wake, the second one `round`;
//   (c) the user is typing a draft when the wake comes: the draft stays as typed, and the wake
//       goes out after the user sent theirs;
//   (d) working → done back to back (milliseconds apart, nobody waits for the binding to arm),
//       several rounds: every round wakes exactly once.

import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startStack, stopStack, until } from '../lib/harness.mjs';
import {
  openChatGpt, bindInPopup, streamConnected, waitForWakes, staysAt, wakesIn, userTurns, continuityState, workspaceOffered, bindingWorking,
} from '../lib/continuity.mjs';

describe('continuity: Herdr agents wake a bound ChatGPT conversation', () => {
  let stack;
  let sim;
  before(async () => {
    stack = await startStack('continuity-agents', { herdr: true });
    sim = stack.herdrSim;
  });
  after(async () => stopStack(stack));

  test('(a) working → done wakes only the bound Auto conversation, once, with the output', async () => {
    await sim.addAgent({ workspace: 'wa', label: 'alpha', pane: 'wa-p1', cwd: stack.project, status: 'idle', name: 'claude-alpha' });
    const bound = await openChatGpt(stack);
    const unbound = await openChatGpt(stack);
    const autoOff = await openChatGpt(stack);
    await workspaceOffered(stack, bound, 'alpha');
    await bindInPopup(stack, bound, 'alpha', { auto: true });
    await bindInPopup(stack, autoOff, 'alpha');
    await streamConnected(stack);

    await sim.setStatus('wa-p1', 'working');
    await bindingWorking(stack, bound.convKey);
    await sim.setStatus('wa-p1', 'done', 'tests passed: 42 green (marker-a7)');
    const [wake] = await waitForWakes(stack, bound, 1);
    assert.match(wake, /claude-alpha/, 'the wake names the agent');
    assert.match(wake, /marker-a7/, 'and carries its output');
    await staysAt(stack, bound, 1);
    assert.deepEqual(wakesIn(stack, unbound), [], 'the unbound conversation got nothing');
    assert.deepEqual(wakesIn(stack, autoOff), [], 'the Auto-off conversation got nothing');
  });

  test('(b) two agents: the first settle is a partial wake, the second a round', async () => {
    await sim.addAgent({ workspace: 'wb', label: 'beta', pane: 'wb-p1', cwd: stack.project, status: 'idle', name: 'agent-one' });
    await sim.addAgent({ workspace: 'wb', label: 'beta', pane: 'wb-p2', cwd: stack.project, status: 'idle', name: 'agent-two' });
    const chat = await openChatGpt(stack);
    await workspaceOffered(stack, chat, 'beta');
    await bindInPopup(stack, chat, 'beta', { auto: true });
    await sim.setStatus('wb-p1', 'working');
    await sim.setStatus('wb-p2', 'working');
    await bindingWorking(stack, chat.convKey, 2);

    await sim.setStatus('wb-p1', 'done', 'first half finished (marker-b1)');
    const [first] = await waitForWakes(stack, chat, 1);
    assert.match(first, /agent-one/);
    assert.match(first, /marker-b1/);
    await sim.setStatus('wb-p2', 'done', 'second half finished (marker-b2)');
    const wakes = await waitForWakes(stack, chat, 2);
    assert.match(wakes[1], /agent-two/);
    assert.match(wakes[1], /marker-b2/);
    await staysAt(stack, chat, 2);
    const kinds = (await continuityState(stack)).deliveries.filter((d) => d.conv === chat.convKey && d.ok).map((d) => d.kind);
    assert.deepEqual(kinds, ['partial', 'round']);
  });

  test('(c) a draft being typed is never overwritten; the wake follows the user\'s message', async () => {
    await sim.addAgent({ workspace: 'wc', label: 'gamma', pane: 'wc-p1', cwd: stack.project, status: 'idle', name: 'claude-gamma' });
    const chat = await openChatGpt(stack);
    await workspaceOffered(stack, chat, 'gamma');
    await bindInPopup(stack, chat, 'gamma', { auto: true });
    await sim.setStatus('wc-p1', 'working');
    await bindingWorking(stack, chat.convKey);

    const draft = 'my own question, half typed';
    await chat.page.click('#prompt-textarea');
    await chat.page.keyboard.type(draft);
    await sim.setStatus('wc-p1', 'done', 'gamma result (marker-c3)');
    const held = await until(async () => {
      const s = await continuityState(stack);
      return s.pending.find((w) => w.conv_key === chat.convKey) ?? null;
    }, { what: 'the wake to be held back as pending' });
    assert.equal(held.reason, 'user-typing');
    const composer = await chat.page.evaluate(() => document.querySelector('#prompt-textarea').innerText.trim());
    assert.equal(composer, draft, 'the draft is untouched');
    assert.deepEqual(userTurns(stack, chat), [], 'nothing was sent over the draft');

    await chat.page.keyboard.press('Enter');
    const wakes = await waitForWakes(stack, chat, 1).catch(async (e) => {
      const s = await continuityState(stack);
      e.message += `; pending ${JSON.stringify(s.pending)}; deliveries ${JSON.stringify(s.deliveries)}`;
      throw e;
    });
    assert.match(wakes[0], /marker-c3/);
    assert.deepEqual(userTurns(stack, chat).map((t) => (t === draft ? 'draft' : 'wake')), ['draft', 'wake'], 'the user\'s message went first, then the wake');
    await until(async () => (await continuityState(stack)).pending.every((w) => w.conv_key !== chat.convKey), { what: 'the pending wake to be gone' });
    await staysAt(stack, chat, 1);
  });

  test('(d) working → done back to back: each round wakes exactly once', async () => {
    await sim.addAgent({ workspace: 'wd', label: 'delta', pane: 'wd-p1', cwd: stack.project, status: 'idle', name: 'claude-delta' });
    const chat = await openChatGpt(stack);
    await workspaceOffered(stack, chat, 'delta');
    await bindInPopup(stack, chat, 'delta', { auto: true });
    await streamConnected(stack);
    const rounds = 5;
    for (let i = 1; i <= rounds; i++) {
      // No wait between the two: the settle may reach the extension before it saw the agent work.
      await Promise.all([sim.setStatus('wd-p1', 'working'), sim.setStatus('wd-p1', 'done', `round ${i} finished (marker-d${i})`)]);
      const wakes = await waitForWakes(stack, chat, i);
      assert.match(wakes[i - 1], new RegExp(`marker-d${i}\\b`), `round ${i} carries its own output`);
      await until(async () => {
        const s = await continuityState(stack);
        return s.bindings.find((v) => v.binding.conv_key === chat.convKey)?.binding.status === 'idle';
      }, { what: `the binding to be idle after round ${i}` });
    }
    await staysAt(stack, chat, rounds);
  });
});
