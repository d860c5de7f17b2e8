// Inserting a wake into a ChatGPT composer that does not take it (spec §7.5 "Verify with
// normalized includes, 3 attempts × 10 × 200 ms, else strip and insert-failed"). The fixture's
// editor drops inserts (`dropInserts`) or keeps only half of each (`halveInserts`), as a
// ProseMirror busy re-rendering can. A dropped insert is tried again; a wake that never takes
// is reported as insert-failed and its remains are taken out of the composer, so the user never
// finds half a wake there (nor sends it by accident).

import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startStack, stopStack, until } from '../lib/harness.mjs';
import { openChatGpt, bindInPopup, streamConnected, callTool, waitForWakes, staysAt, continuityState, wakesIn } from '../lib/continuity.mjs';

describe('continuity: a ChatGPT composer that does not take the inserted wake', () => {
  let stack;
  let root;
  before(async () => {
    stack = await startStack('continuity-insert');
    const inspect = await callTool(stack, 'herdr_inspect', {});
    [root] = inspect.workstation_info.managed_git_roots;
    assert.ok(root, 'the runtime serves one managed root');
  });
  after(async () => stopStack(stack));

  test('two dropped inserts: the third insert takes and the wake is sent once', async () => {
    stack.store.slowPage.chatgpt = { dropInserts: 2 };
    const chat = await openChatGpt(stack);
    await bindInPopup(stack, chat, root, { auto: true });
    await streamConnected(stack);

    const started = await callTool(stack, 'herdr_exec_start', { root, command: 'echo dropped-insert-marker' });
    assert.ok(started.session_id, `exec started: ${JSON.stringify(started)}`);
    const [wake] = await waitForWakes(stack, chat, 1, { timeoutMs: 40_000 });
    assert.match(wake, new RegExp(started.session_id));
    assert.equal(await chat.page.evaluate(() => window.__fixture.droppedInserts()), 2, 'the editor dropped two inserts');
    await staysAt(stack, chat, 1);

    const state = await continuityState(stack);
    const deliveries = state.deliveries.filter((d) => d.conv === chat.convKey);
    assert.equal(deliveries.length, 1, JSON.stringify(deliveries));
    assert.equal(deliveries[0].ok, true, JSON.stringify(deliveries[0]));
    assert.equal(state.pending.filter((p) => p.conv_key === chat.convKey).length, 0, 'nothing is left undelivered');
    await chat.page.close();
  });

  test('an editor that keeps half of every insert: insert-failed after 3 attempts, and the composer is emptied', async () => {
    stack.store.slowPage.chatgpt = { halveInserts: true };
    const chat = await openChatGpt(stack);
    await bindInPopup(stack, chat, root, { auto: true });
    await streamConnected(stack);

    const started = await callTool(stack, 'herdr_exec_start', { root, command: 'echo halved-insert-marker' });
    assert.ok(started.session_id, `exec started: ${JSON.stringify(started)}`);
    const delivery = await until(async () => {
      const s = await continuityState(stack);
      return s.deliveries.find((d) => d.conv === chat.convKey) ?? null;
    }, { timeoutMs: 40_000, what: `a delivery attempt into ${chat.convKey}` });
    assert.equal(delivery.ok, false, JSON.stringify(delivery));
    assert.equal(delivery.result.error, 'insert-failed', JSON.stringify(delivery));
    assert.equal(delivery.result.insert_attempts, 3, JSON.stringify(delivery));
    assert.equal(delivery.result.strip?.stripped, true, JSON.stringify(delivery));
    // What the editor would send now: nothing of the wake is left in it.
    assert.equal(await chat.page.evaluate(() => window.__fixture.composerModel()), '');
    assert.equal(await chat.page.evaluate(() => document.querySelector('#prompt-textarea').innerText.trim()), '');
    assert.deepEqual(wakesIn(stack, chat), [], 'no wake reached the chat');

    const state = await continuityState(stack);
    const pending = state.pending.filter((p) => p.conv_key === chat.convKey);
    assert.equal(pending.length, 1, JSON.stringify(state.pending));
    assert.equal(pending[0].reason, 'insert-failed');
  });
});
