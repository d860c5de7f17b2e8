// The options page reports every layer with a one-line fix when it fails: native host,
// runtime (contract epoch/hash, tool count), Herdr; and the per-site switches' state.

import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startStack, stopStack, extensionPage, socketRequest, runtimeToolNames } from '../lib/harness.mjs';

const layerRows = (page) =>
  page.$$eval('#layers tr', (rows) => Object.fromEntries(rows.map((r) => [r.cells[0].textContent, [...r.cells].slice(1).map((c) => c.textContent)])));

describe('options page status', () => {
  let stack;
  before(async () => {
    stack = await startStack('options-status', { sites: ['deepseek'] });
  });
  after(async () => stopStack(stack));

  test('all layers up, then the runtime down with its fix', async () => {
    const health = JSON.parse((await socketRequest(stack.socket)).body);
    const served = await runtimeToolNames(stack.socket);
    const page = await extensionPage(stack);
    const up = await layerRows(page);
    assert.equal(up['Native host'][0], 'ok');
    assert.equal(up.Runtime[0], 'ok');
    assert.deepEqual(up.Contract, [`epoch ${health.contract.epoch}`, health.contract.hash]);
    assert.equal(up.Tools[0], String(served.length));
    assert.ok(up.Herdr, 'Herdr availability is shown');
    assert.equal(await page.isChecked('#site-deepseek'), true);
    assert.equal(await page.isChecked('#site-zai'), false);
    await page.screenshot({ path: `${stack.logs}/options-up.png` });

    stack.runtime.kill('SIGTERM');
    await new Promise((r) => (stack.runtime.exitCode !== null ? r() : stack.runtime.once('exit', r)));
    await page.click('#refresh');
    await page.waitForFunction(() => [...document.querySelectorAll('#layers tr')].some((r) => r.cells[0].textContent === 'Runtime' && r.cells[1].textContent !== 'ok'));
    const down = await layerRows(page);
    assert.equal(down['Native host'][0], 'ok', 'the host still answers');
    assert.equal(down.Runtime[0], 'not working');
    assert.match(down.Runtime[2], /herdr-mcp serve/);
    await page.screenshot({ path: `${stack.logs}/options-runtime-down.png` });
  });
});
