// The fixture sites behave like the real ones where the extension depends on it:
// strict CSP, the site's DOM markers, URL changes after the first send, and history
// that survives a reload. (No extension here: this checks the test bed itself.)

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch } from '../lib/chromium.mjs';
import { installFixtureSites, modelReply } from '../lib/fixture-sites.mjs';
import { screenshot } from '../lib/artifacts.mjs';

let browser;
let store;

before(async () => {
  browser = await launch();
  store = await installFixtureSites(browser.context);
});

after(async () => {
  await browser?.context.close();
});

const cases = [
  {
    site: 'zai',
    url: 'https://chat.z.ai/',
    chatPath: /^\/c\/[0-9a-f-]{36}$/,
    type: async (page, text) => {
      await page.fill('textarea', text);
      await page.click('#send-message-button');
    },
    userSel: '[id^="message-"] .user-message',
    replySel: '.markdown-prose',
  },
  {
    site: 'deepseek',
    url: 'https://chat.deepseek.com/',
    chatPath: /^\/a\/chat\/s\/[0-9a-f-]{36}$/,
    type: async (page, text) => {
      await page.fill('textarea[name=search]', text);
      await page.press('textarea[name=search]', 'Enter');
    },
    userSel: '.ds-message:not(:has(.ds-assistant-message-main-content))',
    replySel: '.ds-message .ds-assistant-message-main-content',
  },
  {
    site: 'chatgpt',
    url: 'https://chatgpt.com/',
    chatPath: /^\/c\/[0-9a-f-]{36}$/,
    type: async (page, text) => {
      await page.click('#prompt-textarea');
      await page.keyboard.type(text);
      await page.click('button[data-testid="send-button"]');
    },
    userSel: '[data-message-author-role="user"]',
    replySel: '[data-message-author-role="assistant"]',
  },
];

for (const c of cases) {
  test(`${c.site} fixture: send, stream, URL change, reload keeps history, CSP blocks WASM`, async () => {
    const page = await browser.context.newPage();
    await page.goto(c.url);
    const since = store.log.length;
    await c.type(page, 'hello fixture');
    const user = await store.waitFor((m) => m.site === c.site && m.role === 'user', { sinceIndex: since });
    assert.equal(user.text, 'hello fixture');
    assert.match(new URL(page.url()).pathname, c.chatPath);
    assert.equal(await page.locator(c.userSel).count(), 1);

    await modelReply(page, '{"tool":"herdr_inspect","args":{}}\nand some prose');
    const reply = await page.locator(c.replySel).last().textContent();
    assert.equal(reply.trim(), '{"tool":"herdr_inspect","args":{}}\nand some prose');
    if (c.site === 'chatgpt') {
      assert.equal(await page.locator('[data-is-streaming="true"]').count(), 0);
    }

    // The page's CSP forbids compiling WASM in page context, as on the real sites.
    const wasmBlocked = await page.evaluate(() => {
      try {
        new WebAssembly.Module(new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0]));
        return false;
      } catch {
        return true;
      }
    });
    assert.equal(wasmBlocked, true);

    await page.reload();
    await page.waitForFunction(() => document.documentElement.dataset.fixtureReady === '1');
    assert.equal(await page.locator(c.userSel).count(), 1);
    assert.equal((await page.locator(c.replySel).last().textContent()).trim().split('\n')[1], 'and some prose');
    await screenshot(page, `fixture-${c.site}`);
    await page.close();
  });
}
