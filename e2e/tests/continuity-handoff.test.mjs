// Handoff of a bound z.ai conversation to a new chat (spec/extension.md §7.7), end to end:
// the packet request goes into the source unwrapped, the model's packet comes back, a new
// z.ai tab is opened and seeded (unwrapped, once), the new chat lands on its own /c/<id>,
// and only then does the binding move there.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startStack, stopStack, openChat, userSends, until } from '../lib/harness.mjs';
import { modelReply } from '../lib/fixture-sites.mjs';
import { popupMessage, tabIdOf } from '../lib/continuity.mjs';

const ZAI = 'https://chat.z.ai';
const BRIDGE_MARKER = '[HERDR_JSON_BRIDGE_V1]';
const STATUS_ORDER = ['summary_requested', 'summary_ready', 'target_opening', 'seed_submitting', 'seed_uncertain', 'committed'];

let stack;

before(async () => {
  stack = await startStack('continuity-handoff', { sites: ['zai'], herdr: true });
  await stack.herdrSim.addAgent({ workspace: 'w1', label: 'repo', pane: 'w1:p1', cwd: stack.project, status: 'idle' });
});

after(async () => {
  await stopStack(stack);
});

/// The binding of workspace w1 first, then the transfer: a commit moves the binding and
/// marks the transfer in one step, so a binding seen on the target implies a committed
/// transfer in the read that follows.
async function sample(transferId) {
  const bindings = (await popupMessage(stack, { type: 'h2w_continuity_state' })).bindings;
  const binding = bindings.find((v) => v.binding.workspace?.id === 'w1')?.binding ?? null;
  const transfers = (await popupMessage(stack, { type: 'h2w_handoff_state' })).transfers;
  return { bindingConv: binding?.conv_key ?? null, transfer: transfers.find((t) => t.id === transferId) ?? null };
}

test('z.ai handoff: the seed arrives unwrapped in a new /c/<id> chat, and the binding moves only after it is confirmed', async () => {
  const { store } = stack;
  const page = await openChat(stack, `${ZAI}/`);
  await userSends(page, 'let us work on the parser');
  const first = await store.waitFor((m) => m.site === 'zai' && m.role === 'user', { what: 'the first user message' });
  // Typed text is wrapped as a bridged task (the contrast to the control messages below).
  assert.ok(first.text.includes(BRIDGE_MARKER), 'a typed message is bridged');
  await modelReply(page, 'Understood. I will start with the tokenizer.');
  const sourceKey = `${ZAI}/c/${first.chatId}`;
  await page.waitForURL(sourceKey);
  const tabId = await tabIdOf(stack, sourceKey);

  // Without a binding there is nothing to hand over.
  const unbound = await popupMessage(stack, { type: 'h2w_handoff_start', tabId });
  assert.equal(unbound.ok, false);
  assert.equal(unbound.error, 'binding_required');

  const bound = await popupMessage(stack, { type: 'h2w_bind', tabId, workspace: { kind: 'herdr', id: 'w1' }, label: 'repo' });
  assert.equal(bound.ok, true, JSON.stringify(bound));
  assert.equal((await popupMessage(stack, { type: 'h2w_set_auto', convKey: sourceKey, enabled: true })).ok, true);

  const started = await popupMessage(stack, { type: 'h2w_handoff_start', tabId });
  assert.equal(started.ok, true, JSON.stringify(started));
  const id = started.transferId;
  assert.match(id, /^ht:[0-9a-z]+:[0-9a-z]+$/);
  // A second handoff of the same conversation is refused while this one runs.
  const again = await popupMessage(stack, { type: 'h2w_handoff_start', tabId });
  assert.equal(again.error, 'handoff_active');

  const samples = [];
  let sampling = true;
  let targetKey = null;
  const sampler = (async () => {
    while (sampling) {
      samples.push(await sample(id));
      await new Promise((r) => setTimeout(r, 40));
    }
  })();

  try {
    // The packet request reaches the source as written, not wrapped as a task.
    const request = await store.waitFor(
      (m) => m.site === 'zai' && m.role === 'user' && m.chatId === first.chatId && m.text.includes('<<<HERDR_HANDOFF_V1'),
      { what: 'the packet request in the source' },
    );
    assert.ok(request.text.includes(`<<<HERDR_HANDOFF_V1 id=${id}>>>`), request.text);
    assert.ok(request.text.includes('<<<END_HERDR_HANDOFF_V1>>>'));
    assert.ok(!request.text.includes(BRIDGE_MARKER), `the request was wrapped: ${request.text.slice(0, 200)}`);

    // The model answers with the packet; the extension opens a new chat and seeds it.
    const packet = 'Goal: finish the parser.\nDone: tokenizer.\nNext: error recovery tests.';
    await modelReply(page, `Here is the handoff.\n<<<HERDR_HANDOFF_V1 id=${id}>>>\n${packet}\n<<<END_HERDR_HANDOFF_V1>>>`);
    const seed = await store.waitFor(
      (m) => m.site === 'zai' && m.role === 'user' && m.text.includes(`[HERDR_CONTINUITY_TRANSFER id=${id}]`),
      { what: 'the seed in the new chat' },
    );
    assert.notEqual(seed.chatId, first.chatId);
    assert.match(new URL(seed.href).pathname, /^\/c\/[0-9a-f-]{36}$/);
    assert.ok(seed.text.includes(packet), seed.text);
    assert.ok(seed.text.trimEnd().endsWith('[/HERDR_CONTINUITY_TRANSFER]'));
    assert.ok(!seed.text.includes(BRIDGE_MARKER), `the seed was wrapped: ${seed.text.slice(0, 200)}`);
    targetKey = `${ZAI}/c/${seed.chatId}`;

    const done = await until(async () => {
      const s = await sample(id);
      return s.bindingConv === targetKey && s.transfer?.status === 'committed' ? s : null;
    }, { timeoutMs: 20_000, what: 'the binding to move to the new chat' });
    assert.equal(done.transfer.target_conv_key, targetKey);
  } finally {
    sampling = false;
    await sampler;
  }

  // Nothing moved before the commit, and the transfer only went forward.
  let highest = 0;
  for (const s of samples) {
    const rank = STATUS_ORDER.indexOf(s.transfer?.status);
    assert.ok(rank >= highest, `status went back: ${JSON.stringify(samples.map((x) => x.transfer?.status))}`);
    highest = rank;
    if (s.bindingConv !== sourceKey) {
      assert.equal(s.transfer.status, 'committed', `the binding moved before the commit: ${JSON.stringify(s)}`);
    }
  }
  assert.ok(samples.some((s) => s.bindingConv === sourceKey && s.transfer?.status !== 'committed'), 'the binding was seen on the source during the transfer');

  // Each control message went out exactly once; the binding keeps Auto in its new home.
  const sent = store.userMessages('zai');
  assert.equal(sent.filter((m) => m.text.includes(`<<<HERDR_HANDOFF_V1 id=${id}>>>`)).length, 1);
  assert.equal(sent.filter((m) => m.text.includes(`[HERDR_CONTINUITY_TRANSFER id=${id}]`)).length, 1);
  const state = await popupMessage(stack, { type: 'h2w_continuity_state' });
  const moved = state.bindings.filter((v) => v.binding.workspace?.id === 'w1');
  assert.equal(moved.length, 1);
  assert.equal(moved[0].binding.conv_key, targetKey);
  assert.equal(moved[0].auto, true);
  // The source's wakes are no longer paused once the transfer is over.
  assert.ok(!(await popupMessage(stack, { type: 'h2w_handoff_state' })).transfers.some((t) => !['committed', 'failed'].includes(t.status)));
});
