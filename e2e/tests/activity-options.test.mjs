// Issue 27 item 4: the options page shows the runtime's activity log for this browser. A bridged
// call on z.ai runs through the real host and runtime; the options page (through the host's
// read-only GET /activity) then lists it with its tool, root and outcome, while a call another
// local client made is not listed. File contents never show.

import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { modelReply } from '../lib/fixture-sites.mjs';
import { startStack, stopStack, openChat, userSends, extensionPage, socketRequest } from '../lib/harness.mjs';
import { SITE_INFO, MARKER, nextUserMessage, isToolResult } from '../lib/bridge-steps.mjs';

describe('activity log on the options page', () => {
  let stack;
  before(async () => {
    stack = await startStack('activity-options', { sites: ['zai'] });
  });
  after(async () => stopStack(stack));

  test('a bridged call is listed for this browser; another client\'s call is not', async () => {
    const info = SITE_INFO.zai;
    const name = `act-${randomBytes(4).toString('hex')}.txt`;
    const content = `CONTENT-${randomBytes(8).toString('hex')}`;
    writeFileSync(join(stack.project, name), `${content}\n`);
    // Another local client (no extension client name) calls first.
    const other = await socketRequest(stack.socket, {
      method: 'POST', path: '/mcp',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'herdr_fs_list', arguments: {} } }),
    });
    assert.equal(other.status, 200);

    const page = await openChat(stack, info.root);
    const since = stack.store.log.length;
    await userSends(page, 'Read the file.');
    await nextUserMessage(stack.store, info.site, (t) => t.includes(MARKER), { sinceIndex: since, what: 'the bridged task' });
    const mark = stack.store.log.length;
    await modelReply(page, `{"tool":"herdr_fs_read","args":{"path":"${name}"}}`);
    await nextUserMessage(stack.store, info.site, isToolResult, { sinceIndex: mark, what: 'the TOOL_RESULT' });

    const options = await extensionPage(stack);
    // The writer records off the hot path: refresh until the call is there.
    const deadline = Date.now() + 15_000;
    let rows = [];
    for (;;) {
      await options.$eval('#activity-result', (el) => { el.dataset.state = 'loading'; });
      await options.click('#activity-refresh');
      await options.waitForFunction(() => document.querySelector('#activity-result').dataset.state !== 'loading');
      rows = await options.$$eval('#activity tbody tr', (trs) => trs.map((tr) => [...tr.cells].map((c) => c.textContent)));
      if (rows.some((r) => r[1] === 'herdr_fs_read')) break;
      assert.ok(Date.now() < deadline, `no herdr_fs_read row: ${JSON.stringify(rows)}`);
    }
    const read = rows.find((r) => r[1] === 'herdr_fs_read');
    assert.equal(read[3], 'ok');
    assert.match(read[5], new RegExp(name.replace('.', '\\.')));
    assert.ok(read[2].length > 0, 'the root is shown');
    assert.ok(!rows.some((r) => r[1] === 'herdr_fs_list'), `another client's call is listed: ${JSON.stringify(rows)}`);
    assert.ok(!(await options.content()).includes(content), 'no file content on the page');
    await options.screenshot({ path: `${stack.logs}/activity-options.png`, fullPage: true });
  });
});
