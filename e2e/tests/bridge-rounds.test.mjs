// Round behaviour on z.ai: independent calls of one reply run at the same time while a
// dependent reply waits for the previous results; malformed tool JSON gets one repair round
// and then succeeds.

import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync, existsSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { modelReply } from '../lib/fixture-sites.mjs';
import { startStack, stopStack, openChat, userSends, conversationState, swState, until, hostPids, stopRuntime, restartRuntime } from '../lib/harness.mjs';
import { MARKER, nextUserMessage, toolResultRows, isToolResult, convKeyOf, payloadOf } from '../lib/bridge-steps.mjs';

describe('tool rounds on z.ai', () => {
  let stack;
  before(async () => {
    stack = await startStack('rounds', { sites: ['zai'] });
  });
  after(async () => stopStack(stack));

  test('independent calls overlap; a dependent reply runs after them', async () => {
    const ws = basename(stack.project);
    const page = await openChat(stack, 'https://chat.z.ai/');
    const since = stack.store.log.length;
    await userSends(page, 'Run the two slow checks.');
    await nextUserMessage(stack.store, 'zai', (t) => t.includes(MARKER), { sinceIndex: since, what: 'the bridged task' });
    // One task at a time (spec §1.10): Enter while the task runs is refused and says so; the
    // text stays in the composer, also after the next TOOL_RESULT went out through it.
    const draft = 'Never mind, do something else.';
    const key = await convKeyOf(page);
    await until(async () => (await conversationState(stack, key))?.state === 'waiting for reply', { what: 'the task to be sent' });
    await userSends(page, draft);
    await until(async () => /still working/.test((await page.locator('#h2w-indicator').textContent().catch(() => '')) ?? ''), {
      what: 'the busy notice',
    });
    const slow = (name) => JSON.stringify({ tool: 'herdr_exec', args: { workspace: ws, command: `sleep 1; echo ${name}` } });
    let mark = stack.store.log.length;
    await modelReply(page, `${slow('first')}\n${slow('second')}`);
    const first = await nextUserMessage(stack.store, 'zai', isToolResult, { sinceIndex: mark, what: 'the parallel TOOL_RESULT' });
    const rows = toolResultRows(first.text);
    assert.deepEqual(rows.map((r) => [r.index, r.ok, payloadOf(r)?.ok, payloadOf(r)?.exit_code]), [[1, true, true, 0], [2, true, true, 0]], JSON.stringify(rows));
    assert.match(JSON.stringify(rows[0].result), /first/);
    assert.match(JSON.stringify(rows[1].result), /second/);
    await until(async () => (await page.locator('textarea').first().inputValue()) === draft, { what: 'the draft back in the composer' });
    mark = stack.store.log.length;
    await modelReply(page, JSON.stringify({ tool: 'herdr_exec', args: { workspace: ws, command: 'echo after' } }));
    await nextUserMessage(stack.store, 'zai', isToolResult, { sinceIndex: mark, what: 'the dependent TOOL_RESULT' });
    await modelReply(page, 'Both checks ran.');
    await until(async () => (await conversationState(stack, await convKeyOf(page)))?.running === false, { what: 'the task to end' });

    const calls = (await swState(stack)).calls.filter((c) => c.tool === 'herdr_exec');
    assert.equal(calls.length, 3);
    const [a, b, c] = calls;
    assert.ok(a.endedAt - a.startedAt >= 900 && b.endedAt - b.startedAt >= 900, 'each slow call really took a second');
    assert.ok(a.startedAt < b.endedAt && b.startedAt < a.endedAt, `the two slow calls overlap: ${JSON.stringify([a, b])}`);
    // Run one after the other they could not share any time; concurrently they share most of their second.
    assert.ok(Math.min(a.endedAt, b.endedAt) - Math.max(a.startedAt, b.startedAt) >= 800, 'they ran at the same time for most of their second');
    assert.ok(c.startedAt >= Math.max(a.endedAt, b.endedAt), 'the dependent call started after both finished');
    assert.ok(!stack.store.log.slice(since).some((m) => m.role === 'user' && m.text.includes(draft)), 'the refused text was never sent');
  });

  test('a reply that stops for 1.5 s after its first call is still read whole', async () => {
    writeFileSync(join(stack.project, 'pause-a.txt'), 'a\n');
    writeFileSync(join(stack.project, 'pause-b.txt'), 'b\n');
    const page = await openChat(stack, 'https://chat.z.ai/');
    const since = stack.store.log.length;
    await userSends(page, 'Read both pause files.');
    await nextUserMessage(stack.store, 'zai', (t) => t.includes(MARKER), { sinceIndex: since, what: 'the bridged task' });
    const first = JSON.stringify({ tool: 'herdr_fs_read', args: { path: 'pause-a.txt' } });
    const second = JSON.stringify({ tool: 'herdr_fs_read', args: { path: 'pause-b.txt' } });
    const mark = stack.store.log.length;
    // Spec §1.10: a reply counts as done only after 2 s without change (4 polls 500 ms apart).
    await modelReply(page, `${first}\n${second}`, { chunk: first.length + 1, pauseAt: first.length + 1, pauseMs: 1500 });
    const result = await nextUserMessage(stack.store, 'zai', isToolResult, { sinceIndex: mark, what: 'the TOOL_RESULT' });
    const rows = toolResultRows(result.text);
    assert.deepEqual(rows.map((r) => [r.tool, r.ok]), [['herdr_fs_read', true], ['herdr_fs_read', true]], JSON.stringify(rows));
    await modelReply(page, 'Both read.');
    await until(async () => (await conversationState(stack, await convKeyOf(page)))?.running === false, { what: 'the task to end' });
  });

  test('malformed tool JSON: one repair round, then the call runs', async () => {
    writeFileSync(join(stack.project, 'repair.txt'), 'repaired-content-7731\n');
    const page = await openChat(stack, 'https://chat.z.ai/');
    const since = stack.store.log.length;
    await userSends(page, 'Read repair.txt.');
    await nextUserMessage(stack.store, 'zai', (t) => t.includes(MARKER), { sinceIndex: since, what: 'the bridged task' });
    let mark = stack.store.log.length;
    await modelReply(page, '{"tool":"herdr_fs_read","args":{"path":"repair.txt"}');
    const repair = await nextUserMessage(stack.store, 'zai', isToolResult, { sinceIndex: mark, what: 'the repair message' });
    const [row] = toolResultRows(repair.text);
    assert.equal(row.tool, 'bridge_protocol');
    assert.equal(row.ok, false);
    assert.match(row.error, /^(incomplete|malformed)-tool-json$/);
    mark = stack.store.log.length;
    await modelReply(page, '{"tool":"herdr_fs_read","args":{"path":"repair.txt"}}');
    const result = await nextUserMessage(stack.store, 'zai', isToolResult, { sinceIndex: mark, what: 'the TOOL_RESULT after repair' });
    assert.match(JSON.stringify(toolResultRows(result.text)[0].result), /repaired-content-7731/);
    await modelReply(page, 'It says repaired-content-7731.');
    await until(async () => (await conversationState(stack, await convKeyOf(page)))?.running === false, { what: 'the task to end' });
    const key = await convKeyOf(page);
    assert.equal((await swState(stack)).calls.filter((c) => c.tool === 'herdr_fs_read' && c.conv === key).length, 1, 'the malformed reply ran nothing');
  });

  test('a dropped port: the in-flight call becomes delivery_unknown, is not re-sent, and the port comes back', async () => {
    const ws = basename(stack.project);
    const file = join(stack.project, 'dropped.txt');
    const page = await openChat(stack, 'https://chat.z.ai/');
    const since = stack.store.log.length;
    await userSends(page, 'Run the slow append.');
    await nextUserMessage(stack.store, 'zai', (t) => t.includes(MARKER), { sinceIndex: since, what: 'the bridged task' });
    const connectsBefore = (await swState(stack)).port.connects;
    const mark = stack.store.log.length;
    await modelReply(page, JSON.stringify({ tool: 'herdr_exec', args: { workspace: ws, command: 'sleep 2; echo ran >> dropped.txt' } }));
    const key = await convKeyOf(page);
    await until(async () => /^running 1 tool$/.test((await conversationState(stack, key))?.state ?? ''), { what: 'the call to be in flight' });
    const [pid] = hostPids(stack).slice(-1);
    process.kill(pid, 'SIGKILL');
    const result = await nextUserMessage(stack.store, 'zai', isToolResult, { sinceIndex: mark, what: 'the TOOL_RESULT after the drop' });
    const [row] = toolResultRows(result.text);
    assert.deepEqual([row.ok, row.error], [false, 'delivery_unknown'], JSON.stringify(row));
    // The command was handed over once; it finishes on the runtime and is never sent again.
    await until(() => existsSync(file), { timeoutMs: 10_000, what: 'the handed-over command to finish' });
    const mark2 = stack.store.log.length;
    await modelReply(page, JSON.stringify({ tool: 'herdr_fs_read', args: { path: 'dropped.txt' } }));
    const after = await nextUserMessage(stack.store, 'zai', isToolResult, { sinceIndex: mark2, what: 'a call after reconnecting' });
    assert.equal(toolResultRows(after.text)[0].ok, true);
    assert.ok((await swState(stack)).port.connects > connectsBefore, 'the port reconnected');
    await modelReply(page, 'The append ran once.');
    await until(async () => (await conversationState(stack, key))?.running === false, { what: 'the task to end' });
    assert.equal(readFileSync(file, 'utf8'), 'ran\n', 'exactly one append');
    assert.equal((await swState(stack)).calls.filter((c) => c.tool === 'herdr_exec' && c.conv === key).length, 1);
  });

  test('the catalog: cached for checks, reloaded for each task; none → the text goes out unbridged', async () => {
    const page = await openChat(stack, 'https://chat.z.ai/');
    // A page's direct call, through the real routing (as the content script's message arrives).
    const check = () =>
      stack.sw.evaluate(() =>
        globalThis.herdr.shell.handle_message(
          { type: 'h2w_call', site: 'z.ai', convKey: 'https://chat.z.ai/c/catalog-check', tool: 'herdr_not_a_tool', args: {} },
          { tab: { id: 1, url: 'https://chat.z.ai/c/catalog-check' }, frameId: 0 },
        ),
      );
    const loads = async () => (await swState(stack)).catalog.loads;
    const task = async (text) => {
      const since = stack.store.log.length;
      await userSends(page, text);
      await nextUserMessage(stack.store, 'zai', (t) => t.includes(MARKER) && t.includes(text), { sinceIndex: since, what: `the bridged task "${text}"` });
      await modelReply(page, 'Done.');
      await until(async () => (await conversationState(stack, await convKeyOf(page)))?.running === false, { what: 'the task to end' });
    };

    // Spec §1.2: checks use the catalog in memory; a new task loads it again.
    assert.equal((await check()).error, 'unknown-tool');
    const cached = await loads();
    assert.equal((await check()).error, 'unknown-tool');
    assert.equal((await check()).error, 'unknown-tool');
    assert.equal(await loads(), cached, 'checks did not ask the runtime for the catalog');
    await task('First task.');
    assert.equal(await loads(), cached + 1, 'the task reloaded the catalog once');

    await stopRuntime(stack);
    try {
      const since = stack.store.log.length;
      const text = 'A plain question while the runtime is down.';
      await userSends(page, text);
      // Spec §1.2: no catalog when the user submits → the text is sent unbridged.
      const sent = await nextUserMessage(stack.store, 'zai', (t) => t.includes('plain question'), { sinceIndex: since, what: 'the unbridged message' });
      assert.equal(sent.text, text);
      const key = await convKeyOf(page);
      await until(async () => /catalog unavailable/.test((await conversationState(stack, key))?.state ?? ''), { what: 'the unbridged status' });
      assert.equal((await conversationState(stack, key)).running, false);
      // After a failed load the catalog is not asked for again for 5 s: the second check,
      // right after the first, answers the same failure without a load.
      const first = await check();
      const afterFirst = await loads();
      const second = await check();
      assert.notEqual(first.error, 'unknown-tool', JSON.stringify(first));
      assert.equal(second.error, first.error);
      assert.match(second.detail, /not asked for again for \d+ ms/);
      assert.equal(await loads(), afterFirst, 'no load during the quiet time');
    } finally {
      await restartRuntime(stack);
    }
    // The runtime is back: the next task reloads the catalog at once, quiet time or not.
    await task('Second task.');
  });
});
