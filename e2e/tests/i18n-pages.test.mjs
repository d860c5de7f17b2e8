// Issue 27 item 5: the extension's own pages speak the browser's language through chrome.i18n
// (_locales). A Chromium started with --lang=zh-CN (and LANGUAGE=zh_CN) shows the options page
// and the popup in Chinese; English stays the default for the other tests' browsers.

import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startStack, stopStack, extensionPage, openChat, userSends, until, EXTENSION_ID, EXTENSION_DIR } from '../lib/harness.mjs';
import { modelReply } from '../lib/fixture-sites.mjs';
import { MARKER, nextUserMessage, isToolResult } from '../lib/bridge-steps.mjs';

const zh = JSON.parse(readFileSync(join(EXTENSION_DIR, '_locales/zh_CN/messages.json'), 'utf8'));
const en = JSON.parse(readFileSync(join(EXTENSION_DIR, '_locales/en/messages.json'), 'utf8'));
const ja = JSON.parse(readFileSync(join(EXTENSION_DIR, '_locales/ja/messages.json'), 'utf8'));

describe('pages in the browser language', () => {
  let stack;
  before(async () => {
    stack = await startStack('i18n-zh', { lang: 'zh-CN', sites: ['zai'] });
  });
  after(async () => stopStack(stack));

  test('every English text has a Chinese and a Japanese translation', () => {
    for (const [name, other] of [['zh_CN', zh], ['ja', ja]]) {
      assert.deepEqual(Object.keys(other).sort(), Object.keys(en).sort(), `${name} has the same keys`);
      for (const key of Object.keys(en)) {
        const subs = (m) => (m.match(/\$\d/g) ?? []).sort().join();
        assert.equal(subs(other[key].message), subs(en[key].message), `${name}.${key} keeps its substitutions`);
      }
    }
  });

  test('a zh-CN browser shows the options page and the popup in Chinese', async () => {
    const page = await extensionPage(stack);
    // Chromium only takes a UI language it has a locale pak for (Debian: chromium-l10n).
    assert.match(await stack.sw.evaluate(() => chrome.i18n.getUILanguage()), /^zh/, 'the browser runs in Chinese (apt-get install chromium-l10n)');
    assert.equal(await page.textContent('h2[data-i18n="statusHeading"]'), zh.statusHeading.message);
    assert.equal(await page.textContent('#refresh'), zh.checkAgain.message);
    assert.equal(await page.textContent('#continuity-save'), zh.save.message);
    assert.equal(await page.textContent('h2[data-i18n="activityHeading"]'), zh.activityHeading.message);
    // Texts the script writes come from the same catalog: a saved setting answers in Chinese.
    await page.waitForSelector('#continuity-form[data-ready="1"]');
    await page.fill('#progress-tick', '90');
    await page.fill('#progress-cooldown', '600');
    await page.click('#continuity-save');
    await page.waitForSelector('#continuity-result[data-state="saved"]');
    assert.equal(await page.textContent('#continuity-result'), zh.saved.message.replace('$1', '90').replace('$2', '600'));
    assert.match(await page.evaluate(() => document.documentElement.lang), /^zh/);
    await page.screenshot({ path: `${stack.logs}/options-zh.png`, fullPage: true });

    const popup = await stack.context.newPage();
    await popup.goto(`chrome-extension://${EXTENSION_ID}/popup/popup.html`);
    await popup.waitForSelector('body[data-ready="1"]');
    assert.equal(await popup.textContent('h1'), zh.thisConversation.message);
    assert.equal(await popup.textContent('#bind'), zh.bind.message);
    assert.equal(await popup.textContent('#page-error'), zh.noBindablePage.message);
    assert.equal(await popup.title(), zh.popupTitle.message);
    await popup.screenshot({ path: `${stack.logs}/popup-zh.png` });
  });

  test('the in-page badge and notices speak Chinese too', async () => {
    const page = await openChat(stack, 'https://chat.z.ai/');
    const badge = () => page.locator('#h2w-indicator').textContent({ timeout: 1_000 }).catch(() => '');
    const since = stack.store.log.length;
    await userSends(page, '读取文件。');
    await nextUserMessage(stack.store, 'zai', (t) => t.includes(MARKER), { sinceIndex: since, what: 'the bridged task' });
    await until(async () => (await badge()) === 'Herdr: 等待回复', { what: 'the Chinese waiting badge' });
    // Enter while the task runs: the busy notice, in Chinese.
    await userSends(page, '再来一个');
    await until(async () => /仍在处理上一个请求/.test(await badge()), { what: 'the Chinese busy notice' });
    const mark = stack.store.log.length;
    await modelReply(page, '{"tool":"herdr_fs_list","args":{}}');
    await nextUserMessage(stack.store, 'zai', isToolResult, { sinceIndex: mark, what: 'the TOOL_RESULT' });
    // The folded protocol messages are captioned in Chinese.
    await until(async () => {
      const labels = await page.$$eval('.h2w-json-fold', (bars) => bars.map((b) => b.textContent.slice(2)));
      return labels.includes('Herdr JSON 工具') && labels.includes('Herdr 工具调用') && labels.includes('Herdr 工具结果');
    }, { what: 'Chinese fold captions' });
    await page.screenshot({ path: `${stack.logs}/badge-zh.png` });
  });
});
