// Issue 27 item 3, on z.ai and DeepSeek: the user sets the round limit on the options page (3
// here; 24 by default); a model that keeps asking for tools gets exactly 3 rounds of real results,
// then one last TOOL_RESULT saying the limit was reached, with the extra reply's calls not run
// (a counter file on disk proves it), and the page says the loop stopped.

import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { modelReply } from '../lib/fixture-sites.mjs';
import { startStack, stopStack, openChat, userSends, extensionPage, conversationState, until } from '../lib/harness.mjs';
import { SITE_INFO, MARKER, nextUserMessage, toolResultRows, isToolResult, convKeyOf } from '../lib/bridge-steps.mjs';

async function setRounds(stack, value) {
  const page = await extensionPage(stack);
  await page.waitForSelector('#loop-form[data-ready="1"]');
  assert.equal(await page.inputValue('#max-rounds'), '24', 'the default limit');
  await page.fill('#max-rounds', '0');
  await page.click('#loop-save');
  await page.waitForSelector('#loop-result[data-state="error"]');
  assert.match(await page.textContent('#loop-result'), /out of range/);
  await page.fill('#max-rounds', String(value));
  await page.click('#loop-save');
  await page.waitForSelector('#loop-result[data-state="saved"]');
  await page.close();
}

for (const info of Object.values(SITE_INFO)) {
  describe(`round limit on ${info.name}`, () => {
    let stack;
    before(async () => {
      stack = await startStack(`round-limit-${info.slug}`, { sites: [info.slug] });
    });
    after(async () => stopStack(stack));

    test('a looping model gets 3 rounds, then one final TOOL_RESULT, and the loop stops', async () => {
      await setRounds(stack, 3);
      const page = await openChat(stack, info.root);
      const since = stack.store.log.length;
      await userSends(page, 'Keep writing files forever.');
      await nextUserMessage(stack.store, info.site, (t) => t.includes(MARKER), { sinceIndex: since, what: 'the bridged task' });
      for (let round = 1; round <= 4; round++) {
        const mark = stack.store.log.length;
        await modelReply(page, JSON.stringify({ tool: 'herdr_fs_write', args: { path: `loop-${round}.txt`, content: `round ${round}\n` } }));
        const result = await nextUserMessage(stack.store, info.site, isToolResult, { sinceIndex: mark, what: `TOOL_RESULT ${round}` });
        const rows = toolResultRows(result.text);
        if (round <= 3) {
          assert.equal(rows[0].ok, true, JSON.stringify(rows));
        } else {
          assert.equal(rows[0].ok, false);
          assert.equal(rows[0].error, 'round_limit', JSON.stringify(rows));
          assert.match(JSON.stringify(rows[0]), /limit of 3 tool rounds/);
        }
      }
      const key = await convKeyOf(page);
      await until(async () => (await conversationState(stack, key))?.running === false, { what: 'the loop to stop' });
      await until(async () => /round limit|limit of 3 tool rounds/.test((await page.locator('#h2w-indicator').textContent().catch(() => '')) ?? ''), {
        what: 'the page to say the limit stopped the loop',
      });
      // The model asks again: nothing more is sent or run.
      const mark = stack.store.log.length;
      await modelReply(page, JSON.stringify({ tool: 'herdr_fs_write', args: { path: 'loop-5.txt', content: 'x\n' } }));
      // Absence needs a window: the worker would answer within the 650 ms send delay.
      await new Promise((r) => setTimeout(r, 1500));
      assert.equal(stack.store.log.slice(mark).filter((m) => m.site === info.site && m.role === 'user').length, 0, 'no message after the stop');
      const written = readdirSync(stack.project).filter((n) => /^loop-\d+\.txt$/.test(n)).sort();
      assert.deepEqual(written, ['loop-1.txt', 'loop-2.txt', 'loop-3.txt'], 'only the three rounds within the limit wrote');
      await page.screenshot({ path: join(stack.logs, 'round-limit.png') });
    });
  });
}
