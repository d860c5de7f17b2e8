// The options page edits the continuity progress settings (tick, cooldown): valid values are
// stored in `herdrContinuitySettings` and reach the service worker's wake logic; an invalid
// value is refused with a visible message naming the field, and nothing is stored.

import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startStack, stopStack, extensionPage } from '../lib/harness.mjs';
import { continuityState } from '../lib/continuity.mjs';

const storedSettings = (stack) =>
  stack.sw.evaluate(async () => (await chrome.storage.local.get('herdrContinuitySettings')).herdrContinuitySettings ?? null);

async function submit(page, tick, cooldown) {
  await page.fill('#progress-tick', tick);
  await page.fill('#progress-cooldown', cooldown);
  // A marker the answer replaces, so the wait below sees this submit's result, not the last.
  await page.$eval('#continuity-result', (el) => { el.dataset.state = 'sending'; });
  await page.click('#continuity-save');
  await page.waitForFunction(() => document.querySelector('#continuity-result').dataset.state !== 'sending');
  return page.$eval('#continuity-result', (el) => ({ state: el.dataset.state, text: el.textContent, visible: el.offsetParent !== null }));
}

const invalidFields = (page) => page.$$eval('input[aria-invalid="true"]', (els) => els.map((e) => e.id));

describe('continuity options', () => {
  let stack;
  before(async () => {
    stack = await startStack('continuity-options');
  });
  after(async () => stopStack(stack));

  test('defaults shown, edge values saved and applied, invalid values refused visibly', async () => {
    let page = await extensionPage(stack);
    await page.waitForSelector('#continuity-form[data-ready="1"]');
    assert.equal(await page.inputValue('#progress-tick'), '60');
    assert.equal(await page.inputValue('#progress-cooldown'), '1200');
    assert.equal(await storedSettings(stack), null, 'nothing stored before the user saves');

    // The upper edge (one day) and tick 0 (off) are both accepted.
    let result = await submit(page, '0', '86400');
    assert.equal(result.state, 'saved', result.text);
    assert.deepEqual(await storedSettings(stack), { progressTickSec: 0, progressFallbackSec: 86400 });
    assert.deepEqual((await continuityState(stack)).progress, { tick_sec: 0, cooldown_sec: 86400 });

    result = await submit(page, '90', '600');
    assert.equal(result.state, 'saved', result.text);
    assert.match(result.text, /90 s.*600 s/);
    assert.deepEqual(await storedSettings(stack), { progressTickSec: 90, progressFallbackSec: 600 });
    assert.deepEqual((await continuityState(stack)).progress, { tick_sec: 90, cooldown_sec: 600 });

    // One past the edge: refused, the field marked, the message visible, nothing changed.
    result = await submit(page, '86401', '600');
    assert.equal(result.state, 'error');
    assert.ok(result.visible, 'the refusal is visible');
    assert.match(result.text, /progressTickSec = 86401 is out of range \(0\.\.=86400 seconds\)/);
    assert.deepEqual(await invalidFields(page), ['progress-tick']);

    for (const bad of ['1.5', '-1', '', 'soon']) {
      result = await submit(page, '90', bad);
      assert.equal(result.state, 'error', `cooldown ${JSON.stringify(bad)}`);
      assert.match(result.text, /progressFallbackSec = .* is not a whole number of seconds/);
      assert.deepEqual(await invalidFields(page), ['progress-cooldown']);
    }
    assert.deepEqual(await storedSettings(stack), { progressTickSec: 90, progressFallbackSec: 600 }, 'refusals store nothing');
    assert.deepEqual((await continuityState(stack)).progress, { tick_sec: 90, cooldown_sec: 600 });
    await page.screenshot({ path: `${stack.logs}/continuity-options-refused.png` });

    // A fresh page shows what is stored.
    await page.close();
    page = await extensionPage(stack);
    await page.waitForSelector('#continuity-form[data-ready="1"]');
    assert.equal(await page.inputValue('#progress-tick'), '90');
    assert.equal(await page.inputValue('#progress-cooldown'), '600');
  });
});
