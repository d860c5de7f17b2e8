// Handoff of a bound conversation to a new chat (spec/extension.md §7.7), end to end: the
// packet request goes into the source as written, the model's packet comes back, a new tab
// is opened and seeded (once), the new chat lands on its own /c/<id>, and only then does the
// binding move there. z.ai: the control messages bypass the bridge's task wrapper and the
// binding moves to the new chat. ChatGPT Project: the seed goes into a new chat of the same
// Project and the Project binding's active conversation moves.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startStack, stopStack, openChat, userSends, until } from '../lib/harness.mjs';
import { modelReply } from '../lib/fixture-sites.mjs';
import { popupMessage, tabIdOf, continuityState, streamConnected, bindingWorking } from '../lib/continuity.mjs';

const ZAI = 'https://chat.z.ai';
const BRIDGE_MARKER = '[HERDR_JSON_BRIDGE_V1]';
const STATUS_ORDER = ['summary_requested', 'summary_ready', 'target_opening', 'seed_submitting', 'seed_uncertain', 'committed'];

let stack;

before(async () => {
  stack = await startStack('continuity-handoff', { sites: ['zai'], herdr: true });
  await stack.herdrSim.addAgent({ workspace: 'w1', label: 'repo', pane: 'w1:p1', cwd: stack.project, status: 'idle' });
  await stack.herdrSim.addAgent({ workspace: 'w2', label: 'release', pane: 'w2:p1', cwd: stack.project, status: 'idle' });
  await stack.herdrSim.addAgent({ workspace: 'w3', label: 'lexer', pane: 'w3:p1', cwd: stack.project, status: 'idle' });
  await stack.herdrSim.addAgent({ workspace: 'w4', label: 'docs', pane: 'w4:p1', cwd: stack.project, status: 'idle' });
});

after(async () => {
  await stopStack(stack);
});

/// The binding of `workspace` first, then the transfer: a commit moves the binding and
/// marks the transfer in one step, so a binding seen moved implies a committed transfer in
/// the read that follows. `where` picks the binding's field that a handoff moves.
async function sample(transferId, workspace, where) {
  const bindings = (await popupMessage(stack, { type: 'h2w_continuity_state' })).bindings;
  const binding = bindings.find((v) => v.binding.workspace?.id === workspace)?.binding ?? null;
  const transfers = (await popupMessage(stack, { type: 'h2w_handoff_state' })).transfers;
  return { at: binding ? where(binding) : null, transfer: transfers.find((t) => t.id === transferId) ?? null };
}

/// Samples until stopped; then checks the binding stayed at `sourceAt` until the commit and
/// the transfer's status only went forward.
function watchTransfer(transferId, workspace, where) {
  const samples = [];
  let sampling = true;
  const running = (async () => {
    while (sampling) {
      samples.push(await sample(transferId, workspace, where));
      await new Promise((r) => setTimeout(r, 40));
    }
  })();
  return {
    async stop() {
      sampling = false;
      await running;
    },
    check(sourceAt) {
      let highest = 0;
      for (const s of samples) {
        const rank = STATUS_ORDER.indexOf(s.transfer?.status);
        assert.ok(rank >= highest, `status went back: ${JSON.stringify(samples.map((x) => x.transfer?.status))}`);
        highest = rank;
        if (s.at !== sourceAt) assert.equal(s.transfer.status, 'committed', `the binding moved before the commit: ${JSON.stringify(s)}`);
      }
      assert.ok(samples.some((s) => s.at === sourceAt && s.transfer?.status !== 'committed'), 'the binding was seen at the source during the transfer');
    },
  };
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

  const watch = watchTransfer(id, 'w1', (b) => b.conv_key);
  let targetKey = null;

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
      const s = await sample(id, 'w1', (b) => b.conv_key);
      return s.at === targetKey && s.transfer?.status === 'committed' ? s : null;
    }, { timeoutMs: 20_000, what: 'the binding to move to the new chat' });
    assert.equal(done.transfer.target_conv_key, targetKey);
  } finally {
    await watch.stop();
  }
  // Nothing moved before the commit, and the transfer only went forward.
  watch.check(sourceKey);

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

const PROJECT = 'g-p-0123456789abcdef0123456789abcdef';
const PROJECT_KEY = `https://chatgpt.com/g/${PROJECT}`;

test('ChatGPT Project handoff: the seed starts a new chat in the Project, and the Project binding follows it only after confirmation', async () => {
  const { store } = stack;
  const page = await stack.context.newPage();
  stack.pages.push(page);
  await page.goto(`https://chatgpt.com/g/${PROJECT}-release/project`);
  await page.waitForFunction(() => document.documentElement.dataset.herdrContinuity === 'ready', null, { timeout: 15_000 });
  await page.click('#prompt-textarea');
  await page.keyboard.type('plan the 1.2 release');
  await page.click('button[data-testid="send-button"]');
  const first = await store.waitFor((m) => m.site === 'chatgpt' && m.role === 'user', { what: 'the first ChatGPT message' });
  await modelReply(page, 'Sure: freeze on Monday, then the changelog.');
  const sourceUrl = `https://chatgpt.com/g/${PROJECT}-release/c/${first.chatId}`;
  const sourceKey = `${PROJECT_KEY}/c/${first.chatId}`;
  await page.waitForURL(sourceUrl);
  const tabId = await tabIdOf(stack, sourceUrl);

  const bound = await until(async () => {
    const b = await popupMessage(stack, { type: 'h2w_bind', tabId, workspace: { kind: 'herdr', id: 'w2' }, label: 'release' });
    return b.ok ? b : null;
  }, { timeoutMs: 10_000, what: 'the Project binding' });
  assert.equal(bound.binding.binding.conv_key, PROJECT_KEY);
  assert.equal(bound.binding.binding.active_conv_key, sourceKey);

  const started = await popupMessage(stack, { type: 'h2w_handoff_start', tabId });
  assert.equal(started.ok, true, JSON.stringify(started));
  const id = started.transferId;
  const watch = watchTransfer(id, 'w2', (b) => b.active_conv_key);
  let targetKey = null;
  try {
    const request = await store.waitFor(
      (m) => m.site === 'chatgpt' && m.role === 'user' && m.chatId === first.chatId && m.text.includes(`<<<HERDR_HANDOFF_V1 id=${id}>>>`),
      { what: 'the packet request in the Project chat' },
    );
    assert.ok(request.text.includes('<<<END_HERDR_HANDOFF_V1>>>'));
    const packet = 'Goal: ship 1.2.\nDone: freeze date.\nNext: write the changelog.';
    await modelReply(page, `<<<HERDR_HANDOFF_V1 id=${id}>>>\n${packet}\n<<<END_HERDR_HANDOFF_V1>>>`);
    const seed = await store.waitFor(
      (m) => m.site === 'chatgpt' && m.role === 'user' && m.text.includes(`[HERDR_CONTINUITY_TRANSFER id=${id}]`),
      { what: 'the seed in a new Project chat' },
    );
    assert.notEqual(seed.chatId, first.chatId);
    assert.equal(new URL(seed.href).pathname, `/g/${PROJECT}/c/${seed.chatId}`);
    assert.ok(seed.text.includes(packet), seed.text);
    targetKey = `${PROJECT_KEY}/c/${seed.chatId}`;
    await until(async () => {
      const s = await sample(id, 'w2', (b) => b.active_conv_key);
      return s.at === targetKey && s.transfer?.status === 'committed' ? s : null;
    }, { timeoutMs: 20_000, what: "the Project binding's active chat to move" });
  } finally {
    await watch.stop();
  }
  watch.check(sourceKey);
  const state = await popupMessage(stack, { type: 'h2w_continuity_state' });
  const binding = state.bindings.find((v) => v.binding.workspace?.id === 'w2').binding;
  assert.equal(binding.conv_key, PROJECT_KEY, 'a Project binding stays on its Project');
  assert.equal(binding.active_conv_key, targetKey);
  const sent = store.userMessages('chatgpt');
  assert.equal(sent.filter((m) => m.text.includes(`[HERDR_CONTINUITY_TRANSFER id=${id}]`)).length, 1);
});

test('z.ai handoff whose target never takes the seed: uncertain, never sent again, the binding stays until the user gives up', async () => {
  const { store } = stack;
  const since = store.log.length;
  const page = await openChat(stack, `${ZAI}/`);
  await userSends(page, 'refactor the lexer');
  const first = await store.waitFor((m) => m.site === 'zai' && m.role === 'user', { sinceIndex: since, what: 'the first user message' });
  await modelReply(page, 'Fine, the lexer it is.');
  const sourceKey = `${ZAI}/c/${first.chatId}`;
  await page.waitForURL(sourceKey);
  const tabId = await tabIdOf(stack, sourceKey);
  assert.equal((await popupMessage(stack, { type: 'h2w_bind', tabId, workspace: { kind: 'herdr', id: 'w3' } })).ok, true);
  assert.equal((await popupMessage(stack, { type: 'h2w_set_auto', convKey: sourceKey, enabled: true })).ok, true);
  await streamConnected(stack);
  const started = await popupMessage(stack, { type: 'h2w_handoff_start', tabId });
  assert.equal(started.ok, true, JSON.stringify(started));
  const id = started.transferId;
  await store.waitFor((m) => m.chatId === first.chatId && m.text.includes(`<<<HERDR_HANDOFF_V1 id=${id}>>>`), { what: 'the packet request' });

  // The chat page opened next hangs: the seed goes into its composer, but Send takes nothing.
  store.holdSends.add('zai');
  try {
    await modelReply(page, `<<<HERDR_HANDOFF_V1 id=${id}>>>\nGoal: a faster lexer.\n<<<END_HERDR_HANDOFF_V1>>>`);
    const uncertain = await until(async () => {
      const s = await sample(id, 'w3', (b) => b.conv_key);
      return s.transfer?.status === 'seed_uncertain' ? s : null;
    }, { timeoutMs: 30_000, what: 'the seed to be recorded as uncertain' });
    assert.equal(uncertain.at, sourceKey);
    assert.equal(uncertain.transfer.failure, 'submit-failed');
    const target = stack.context.pages().find((p) => p !== page && p.url() === `${ZAI}/`);
    assert.ok(target, 'the new chat tab is open');
    const held = await target.evaluate(() => window.__fixture.heldSends());
    assert.ok(held >= 1, 'the page was asked to send');
    const draft = await target.evaluate(() => document.querySelector('textarea').value);
    assert.equal(draft.split(`[HERDR_CONTINUITY_TRANSFER id=${id}]`).length - 1, 1, 'the seed is in the composer once');

    // Nothing is sent again, nothing moves, and wakes stay paused while the user has not decided.
    const end = Date.now() + 3_000;
    while (Date.now() < end) {
      assert.equal(await target.evaluate(() => window.__fixture.heldSends()), held, 'the seed was sent again');
      const s = await sample(id, 'w3', (b) => b.conv_key);
      assert.equal(s.at, sourceKey);
      assert.equal(s.transfer.status, 'seed_uncertain');
      await new Promise((r) => setTimeout(r, 150));
    }
    assert.equal(store.userMessages('zai').filter((m) => m.text.includes(`[HERDR_CONTINUITY_TRANSFER id=${id}]`)).length, 0);
    assert.equal((await popupMessage(stack, { type: 'h2w_handoff_start', tabId })).error, 'handoff_active');

    // The workspace's agent finishes meanwhile: its wake is held back as handoff_active, not sent.
    const sourceTurns = store.messages('zai', first.chatId).length;
    await stack.herdrSim.setStatus('w3:p1', 'working');
    await bindingWorking(stack, sourceKey);
    await stack.herdrSim.setStatus('w3:p1', 'done', 'lexer benchmarks: 2.1x faster');
    const heldWake = await until(async () => {
      const s = await continuityState(stack);
      return s.pending.find((w) => w.conv_key === sourceKey && w.reason === 'handoff_active') ?? null;
    }, { timeoutMs: 20_000, what: 'the wake to be held back by the handoff' });
    assert.match(heldWake.text, /2\.1x faster/);
    assert.equal(store.messages('zai', first.chatId).length, sourceTurns, 'nothing was sent to the source');
  } finally {
    store.holdSends.delete('zai');
  }

  // The user looked and gives up: the transfer fails, the binding never moved.
  assert.equal((await popupMessage(stack, { type: 'h2w_handoff_cancel', id })).ok, true);
  const after = await sample(id, 'w3', (b) => b.conv_key);
  assert.equal(after.transfer.status, 'failed');
  assert.equal(after.at, sourceKey);
  assert.equal((await popupMessage(stack, { type: 'h2w_handoff_cancel', id })).error, 'wrong_status');
});

const DOCS_PROJECT = 'g-p-fedcba9876543210fedcba9876543210';
const DOCS_PROJECT_KEY = `https://chatgpt.com/g/${DOCS_PROJECT}`;

test('ChatGPT Project handoff on editors that drop the first insert: the request and the seed are inserted again and each goes out once', async () => {
  const { store } = stack;
  const since = store.log.length;
  const page = await stack.context.newPage();
  stack.pages.push(page);
  await page.goto(`https://chatgpt.com/g/${DOCS_PROJECT}-docs/project`);
  await page.waitForFunction(() => document.documentElement.dataset.herdrContinuity === 'ready', null, { timeout: 15_000 });
  await page.click('#prompt-textarea');
  await page.keyboard.type('write the install guide');
  await page.click('button[data-testid="send-button"]');
  const first = await store.waitFor((m) => m.site === 'chatgpt' && m.role === 'user', { sinceIndex: since, what: 'the first docs message' });
  await modelReply(page, 'Install guide: start with the toolchain.');
  const sourceUrl = `https://chatgpt.com/g/${DOCS_PROJECT}-docs/c/${first.chatId}`;
  await page.waitForURL(sourceUrl);
  const tabId = await tabIdOf(stack, sourceUrl);
  await until(async () => {
    const b = await popupMessage(stack, { type: 'h2w_bind', tabId, workspace: { kind: 'herdr', id: 'w4' }, label: 'docs' });
    return b.ok ? b : null;
  }, { timeoutMs: 10_000, what: 'the docs Project binding' });

  // From here on the source's editor drops the next insert, and so does the new chat's.
  await page.evaluate(() => window.__fixture.setSlowPage({ dropInserts: 1 }));
  store.slowPage.chatgpt = { dropInserts: 1 };
  try {
    const started = await popupMessage(stack, { type: 'h2w_handoff_start', tabId });
    assert.equal(started.ok, true, JSON.stringify(started));
    const id = started.transferId;
    await store.waitFor(
      (m) => m.chatId === first.chatId && m.role === 'user' && m.text.includes(`<<<HERDR_HANDOFF_V1 id=${id}>>>`),
      { what: 'the packet request in the docs chat' },
    );
    assert.equal(await page.evaluate(() => window.__fixture.droppedInserts()), 1, 'the source editor dropped the first insert');
    await modelReply(page, `<<<HERDR_HANDOFF_V1 id=${id}>>>\nGoal: the install guide.\n<<<END_HERDR_HANDOFF_V1>>>`);
    const seed = await store.waitFor(
      (m) => m.site === 'chatgpt' && m.role === 'user' && m.text.includes(`[HERDR_CONTINUITY_TRANSFER id=${id}]`),
      { what: 'the seed in a new docs chat' },
    );
    const targetKey = `${DOCS_PROJECT_KEY}/c/${seed.chatId}`;
    const target = stack.context.pages().find((p) => p.url().includes(`/c/${seed.chatId}`));
    assert.ok(target, 'the new chat is open');
    assert.equal(await target.evaluate(() => window.__fixture.droppedInserts()), 1, 'the new chat dropped the first insert of the seed');
    await until(async () => {
      const s = await sample(id, 'w4', (b) => b.active_conv_key);
      return s.at === targetKey && s.transfer?.status === 'committed' ? s : null;
    }, { timeoutMs: 20_000, what: "the docs binding's active chat to move" });
    const sent = store.userMessages('chatgpt');
    assert.equal(sent.filter((m) => m.text.includes(`<<<HERDR_HANDOFF_V1 id=${id}>>>`)).length, 1);
    assert.equal(sent.filter((m) => m.text.includes(`[HERDR_CONTINUITY_TRANSFER id=${id}]`)).length, 1);
  } finally {
    store.slowPage.chatgpt = {};
  }
});
