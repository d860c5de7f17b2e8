// Acceptance 1–5 and the in-page folding, for z.ai and DeepSeek: the live catalog reaches the
// preamble, the model's calls are parsed and run by the real runtime through the real native
// host, results return to the same conversation only, a dependent second call follows, and the
// final answer quotes a value that only the real tool result held.

import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { modelReply } from '../lib/fixture-sites.mjs';
import { startStack, stopStack, openChat, userSends, runtimeToolNames, conversationState, until } from '../lib/harness.mjs';
import { SITE_INFO, MARKER, nextUserMessage, toolResultRows, isToolResult, preambleToolNames, convKeyOf, chatIdOf } from '../lib/bridge-steps.mjs';

for (const info of Object.values(SITE_INFO)) {
  describe(`bridged tool loop on ${info.name}`, () => {
    let stack;
    before(async () => {
      stack = await startStack(`loop-${info.slug}`, { sites: [info.slug] });
    });
    after(async () => stopStack(stack));

    test('catalog, call, result in the same chat, dependent call, answer from the real result', async () => {
      const token = randomBytes(6).toString('hex');
      const value = `v-${randomBytes(8).toString('hex')}`;
      mkdirSync(join(stack.project, 'notes'), { recursive: true });
      writeFileSync(join(stack.project, 'notes/pointer.txt'), `The value is stored in notes/value-${token}.txt\n`);
      writeFileSync(join(stack.project, `notes/value-${token}.txt`), `VALUE=${value}\n`);
      const served = await runtimeToolNames(stack.socket);

      // Another conversation of the same site, open in its own tab, with a finished task.
      const other = await openChat(stack, info.root);
      await userSends(other, 'Say hello.');
      await nextUserMessage(stack.store, info.site, (t) => t.includes(MARKER) && t.includes('Say hello.'), { what: 'the other chat task' });
      await modelReply(other, 'Hello!');
      const otherChat = await chatIdOf(other);
      await until(async () => (await conversationState(stack, await convKeyOf(other)))?.running === false, { what: 'the other chat to finish' });
      const otherCount = stack.store.messages(info.site, otherChat).length;

      const page = await openChat(stack, info.root);
      const since = stack.store.log.length;
      await userSends(page, 'Which value does the pointer file lead to?');
      const task = await nextUserMessage(stack.store, info.site, (t) => t.includes(MARKER), { sinceIndex: since, what: 'the bridged task' });
      assert.match(task.text, /USER_TASK:\nWhich value does the pointer file lead to\?$/);
      // (1) the preamble lists exactly what the runtime serves right now.
      assert.deepEqual([...preambleToolNames(task.text)].sort(), [...served].sort());
      assert.ok(!preambleToolNames(task.text).includes('herdr_not_a_tool'));
      const chat = task.chatId;

      // (2)(3) the model calls tools; they run on the runtime.
      const inspect = served.includes('herdr_inspect');
      const firstCalls = [`{"tool":"herdr_fs_read","args":{"path":"notes/pointer.txt"}}`];
      if (inspect) firstCalls.push('{"tool":"herdr_inspect","args":{}}');
      let mark = stack.store.log.length;
      await modelReply(page, firstCalls.join('\n'));
      const first = await nextUserMessage(stack.store, info.site, isToolResult, { sinceIndex: mark, what: 'the first TOOL_RESULT' });
      // (4) the result went to the same conversation.
      assert.equal(first.chatId, chat);
      const rows = toolResultRows(first.text);
      assert.equal(rows[0].tool, 'herdr_fs_read');
      assert.equal(rows[0].ok, true, JSON.stringify(rows[0]));
      const pointed = JSON.stringify(rows[0].result).match(/notes\/value-[0-9a-f]+\.txt/)?.[0];
      assert.equal(pointed, `notes/value-${token}.txt`);
      if (inspect) {
        assert.equal(rows[1].tool, 'herdr_inspect');
        assert.notEqual(rows[1].error, 'unknown-tool');
      }

      // (5) a dependent call with what the first result said, then an answer quoting it.
      mark = stack.store.log.length;
      await modelReply(page, JSON.stringify({ tool: 'herdr_fs_read', args: { path: pointed } }));
      const second = await nextUserMessage(stack.store, info.site, isToolResult, { sinceIndex: mark, what: 'the second TOOL_RESULT' });
      assert.equal(second.chatId, chat);
      const quoted = JSON.stringify(toolResultRows(second.text)[0].result).match(/VALUE=(v-[0-9a-f]+)/)?.[1];
      assert.equal(quoted, value, 'the value came from the real file through the runtime');
      await modelReply(page, `The pointer leads to ${quoted}.`);
      await until(async () => (await conversationState(stack, await convKeyOf(page)))?.running === false, { what: 'the task to finish' });
      const last = stack.store.messages(info.site, chat).at(-1);
      assert.equal(last.role, 'assistant');
      assert.match(last.text, new RegExp(value));
      assert.equal(stack.store.messages(info.site, otherChat).length, otherCount, 'the other conversation received nothing');

      // Folded protocol messages: present, labelled, expandable; the answer stays visible.
      const labels = await page.locator('.h2w-json-fold').allTextContents();
      assert.deepEqual(labels.map((l) => l.slice(2)), ['Herdr JSON tools', 'Herdr tool call', 'Herdr tool result', 'Herdr tool call', 'Herdr tool result']);
      const bar = page.locator('.h2w-json-fold').nth(2);
      const hiddenBefore = await bar.evaluate((b) => getComputedStyle(b.nextElementSibling).display);
      assert.equal(hiddenBefore, 'none');
      await bar.click();
      assert.equal(await bar.evaluate((b) => getComputedStyle(b.nextElementSibling).display !== 'none'), true);
      assert.match(await bar.textContent(), /^▾ Herdr tool result/);
      assert.match(await page.locator('#messages').innerText(), new RegExp(`The pointer leads to ${value}`));

      // The page re-renders its list (spec §3, cleanupFoldArtifacts): a bar it dropped comes
      // back before its message, a bar whose message moved into a wrapper follows it, and a
      // message replaced by a fresh element leaves no orphan bar and is folded again.
      await page.evaluate(() => {
        const bars = [...document.querySelectorAll('.h2w-json-fold')];
        bars[1].remove();
        const moved = bars[3].nextElementSibling;
        const wrapper = document.createElement('div');
        moved.before(wrapper);
        wrapper.appendChild(moved);
        const old = bars[4].nextElementSibling;
        const fresh = old.cloneNode(true);
        for (const k of Object.keys(fresh.dataset)) if (k.startsWith('h2w')) delete fresh.dataset[k];
        fresh.style.display = '';
        fresh.dataset.rerendered = '1';
        old.replaceWith(fresh);
      });
      const foldsInPlace = () =>
        page.evaluate(() => {
          const bars = [...document.querySelectorAll('.h2w-json-fold')];
          const folded = [...document.querySelectorAll('[data-h2w-json-folded="1"]')];
          const fresh = document.querySelector('[data-rerendered="1"]');
          return (
            bars.length === 5 &&
            folded.length === 5 &&
            bars.every((b) => b.nextElementSibling?.dataset.h2wJsonFolded === '1') &&
            folded.every((r) => r.previousElementSibling?.classList.contains('h2w-json-fold')) &&
            fresh.dataset.h2wJsonFolded === '1' &&
            getComputedStyle(fresh).display === 'none'
          );
        });
      await until(foldsInPlace, { what: 'each folded message to have exactly its own bar right before it' });
      const relabelled = await page.locator('.h2w-json-fold').allTextContents();
      assert.deepEqual(relabelled.map((l) => l.slice(2)), labels.map((l) => l.slice(2)));
    });
  });
}
