// Acceptance 6, for z.ai and DeepSeek: a mutation that already ran is never run again when the
// page reloads between its execution and the TOOL_RESULT send, nor when it reloads afterwards.
// The result sent after the first reload is the one recorded before it (journal replay).

import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { modelReply } from '../lib/fixture-sites.mjs';
import { startStack, stopStack, openChat, userSends, conversationState, swState, extensionPage, until } from '../lib/harness.mjs';
import { SITE_INFO, MARKER, nextUserMessage, toolResultRows, isToolResult, convKeyOf, payloadOf } from '../lib/bridge-steps.mjs';

// Long enough that the test can reload inside the window between execution and the send.
const RESULT_SEND_DELAY_MS = 4000;

const counterLines = (file) => (existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean).length : 0);

for (const info of Object.values(SITE_INFO)) {
  describe(`reload safety on ${info.name}`, () => {
    let stack;
    before(async () => {
      stack = await startStack(`reload-${info.slug}`, { sites: [info.slug] });
      const options = await extensionPage(stack);
      await options.evaluate((ms) => chrome.storage.local.set({ herdrBridgeConfig: { resultSendDelayMs: ms } }), RESULT_SEND_DELAY_MS);
      await options.close();
    });
    after(async () => stopStack(stack));

    test('a completed append is not repeated across two reloads', async () => {
      const counter = join(stack.project, 'counter.txt');
      const page = await openChat(stack, info.root);
      const since = stack.store.log.length;
      await userSends(page, 'Append one line to counter.txt.');
      const task = await nextUserMessage(stack.store, info.site, (t) => t.includes(MARKER), { sinceIndex: since, what: 'the bridged task' });
      const call = { tool: 'herdr_exec', args: { workspace: basename(stack.project), command: 'echo appended >> counter.txt' } };
      const mark = stack.store.log.length;
      await modelReply(page, JSON.stringify(call));

      // Executed, result recorded, TOOL_RESULT not yet sent: reload now.
      const key = await convKeyOf(page);
      await until(async () => counterLines(counter) === 1 && (await conversationState(stack, key))?.state === 'sending results', {
        what: 'the append to run and its result to wait for sending',
      });
      assert.equal(stack.store.log.slice(mark).some((m) => m.role === 'user'), false, 'no TOOL_RESULT before the reload');
      await page.reload();
      await page.waitForFunction(() => document.documentElement.dataset.herdrBridge === 'ready');

      const result = await nextUserMessage(stack.store, info.site, isToolResult, { sinceIndex: mark, timeoutMs: 30_000, what: 'the TOOL_RESULT after the reload' });
      assert.equal(result.chatId, task.chatId);
      const [row] = toolResultRows(result.text);
      assert.equal(row.tool, 'herdr_exec');
      assert.equal(row.ok, true, `the recorded result is replayed, not delivery_unknown: ${JSON.stringify(row)}`);
      assert.equal(payloadOf(row)?.ok, true, `the append itself succeeded: ${JSON.stringify(row)}`);

      // Reload again after the send, then the model finishes.
      await page.reload();
      await page.waitForFunction(() => document.documentElement.dataset.herdrBridge === 'ready');
      await modelReply(page, 'Appended one line.');
      await until(async () => {
        const c = await conversationState(stack, key);
        return c && !c.running && c.state === 'idle';
      }, { what: 'the conversation to be idle after the answer' });
      const calls = (await swState(stack)).calls.filter((c) => c.tool === 'herdr_exec');
      assert.equal(calls.length, 1, `one herdr_exec call in total: ${JSON.stringify(calls)}`);
      assert.equal(counterLines(counter), 1, 'counter.txt holds exactly one append');
    });
  });
}
