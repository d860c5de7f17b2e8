// What reaches the model and what reaches the disk is exactly what was meant (issue 26):
// each tool result travels once, so a 40 KB file read arrives whole under the 60,000
// character cap (item 3); and a reply's line breaks are content — z.ai draws a fenced block
// one element per line and prose one paragraph per line, and a pretty-printed write whose
// content has raw line breaks either lands byte-exact or is refused with a request to use \n
// escapes, never written with its line breaks lost (item 6).

import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync, existsSync, readFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { modelReply } from '../lib/fixture-sites.mjs';
import { startStack, stopStack, openChat, userSends, conversationState } from '../lib/harness.mjs';
import { MARKER, nextUserMessage, toolResultRows, isToolResult, convKeyOf, waitIdle, payloadOf } from '../lib/bridge-steps.mjs';

describe('bridge: results once, line breaks kept', () => {
  let stack;
  before(async () => {
    stack = await startStack('payloads', { sites: ['zai', 'deepseek'] });
  });
  after(async () => stopStack(stack));

  const startTask = async (site, url, text) => {
    const page = await openChat(stack, url);
    const since = stack.store.log.length;
    await userSends(page, text);
    await nextUserMessage(stack.store, site, (t) => t.includes(MARKER), { sinceIndex: since, what: `the bridged task on ${site}` });
    return page;
  };

  test('a 40 KB file read arrives whole, once, in a TOOL_RESULT under the cap', async () => {
    const file = Array.from({ length: 800 }, (_, i) => `line ${String(i).padStart(4, '0')}: ${'x'.repeat(38)}\n`).join('');
    assert.ok(file.length >= 40_000);
    writeFileSync(join(stack.project, 'big.txt'), file);
    const page = await startTask('zai', 'https://chat.z.ai/', 'Read big.txt.');
    const mark = stack.store.log.length;
    await modelReply(page, JSON.stringify({ tool: 'herdr_fs_read', args: { path: 'big.txt', end_line: 1000, max_bytes: 60000 } }), { chunk: 200 });
    const result = await nextUserMessage(stack.store, 'zai', isToolResult, { sinceIndex: mark, what: 'the TOOL_RESULT of the read' });
    assert.ok(result.text.length <= 60_000, `${result.text.length} characters`);
    assert.equal(result.text.split('line 0799').length - 1, 1, 'the file is in the message exactly once');
    const [row] = toolResultRows(result.text);
    assert.equal(row.ok, true, JSON.stringify(row).slice(0, 300));
    assert.equal(payloadOf(row)?.content, file, 'the whole file, byte for byte');
    await modelReply(page, 'Read it.');
    await waitIdle((k) => conversationState(stack, k), await convKeyOf(page));
  });

  // A pretty-printed call as models write it: the file content with raw line breaks inside
  // the JSON string (invalid JSON that the parser repairs), in a ```json fence.
  const content = 'first line\n  indented second line\n\nfourth line after a blank one\nlast line\n';
  const prettyWrite = (path, escaped) =>
    [
      '```json',
      '{',
      '  "tool": "herdr_fs_write",',
      '  "args": {',
      `    "path": "${path}",`,
      `    "content": "${escaped ? content.replace(/\n/g, '\\n') : content}"`,
      '  }',
      '}',
      '```',
    ].join('\n');

  for (const [site, url, render] of [
    ['zai', 'https://chat.z.ai/', 'blocks'],
    ['deepseek', 'https://chat.deepseek.com/', 'text'],
  ]) {
    test(`${site}: a write with raw line breaks lands byte-exact or is refused with a repair request, never flattened`, async () => {
      mkdirSync(join(stack.project, 'notes'), { recursive: true });
      const path = `notes/lines-${site}.txt`;
      const target = join(stack.project, path);
      const page = await startTask(site, url, 'Write the file.');
      let mark = stack.store.log.length;
      await modelReply(page, prettyWrite(path, false), { render, chunk: 24 });
      const first = await nextUserMessage(stack.store, site, isToolResult, { sinceIndex: mark, what: 'the TOOL_RESULT of the raw write' });
      const [row] = toolResultRows(first.text);
      if (existsSync(target)) {
        assert.equal(readFileSync(target, 'utf8'), content, 'written: then byte-exact');
      } else {
        assert.equal(row.ok, false, JSON.stringify(row));
        assert.match(row.detail ?? '', /\\n/, `the repair request asks for \\n escapes: ${JSON.stringify(row)}`);
        // The model follows it: the same write with escapes lands byte-exact.
        mark = stack.store.log.length;
        await modelReply(page, prettyWrite(path, true), { render, chunk: 24 });
        const second = await nextUserMessage(stack.store, site, isToolResult, { sinceIndex: mark, what: 'the TOOL_RESULT of the escaped write' });
        assert.equal(toolResultRows(second.text)[0].ok, true, second.text.slice(0, 400));
        assert.equal(readFileSync(target, 'utf8'), content, 'the escaped write is byte-exact');
      }
      await modelReply(page, 'Written.', { render });
      await waitIdle((k) => conversationState(stack, k), await convKeyOf(page));
    });
  }
});
