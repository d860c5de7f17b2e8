// The fixture sites behave like the real ones where the extension depends on it:
// strict CSP, the site's DOM markers, URL changes after the first send, and history
// that survives a reload. (No extension here: this checks the test bed itself.)

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch } from '../lib/chromium.mjs';
import { installFixtureSites, modelReply, evaluateInIsolatedWorld } from '../lib/fixture-sites.mjs';
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

const PROJECT = 'g-p-0123456789abcdef0123456789abcdef';

test('chatgpt fixture: only real input reaches the composer model; Send and Stop buttons; Project routes', async () => {
  const page = await browser.context.newPage();
  await page.goto(`https://chatgpt.com/g/${PROJECT}-demo/project`);
  await page.waitForFunction(() => document.documentElement.dataset.fixtureReady === '1');
  const model = () => page.evaluate(() => window.__fixture.composerModel());
  const sendButtons = page.locator('button[data-testid="send-button"]');
  const stopButtons = page.locator('button[data-testid="stop-button"]');
  const since = store.userMessages('chatgpt').length;
  const logSince = store.log.length;

  // A content script writing markup (and faking input and Enter) changes nothing the editor sends.
  const written = await evaluateInIsolatedWorld(
    page,
    `(() => {
      const c = document.querySelector('#prompt-textarea');
      c.textContent = 'written by a script';
      c.dispatchEvent(new InputEvent('input', { bubbles: true, inputType: 'insertText', data: 'written by a script' }));
      c.dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter', code: 'Enter', keyCode: 13, bubbles: true }));
      return c.textContent;
    })()`,
  );
  assert.equal(written, 'written by a script');
  assert.equal(await model(), '');
  assert.equal(await sendButtons.count(), 0);
  await page.waitForFunction(() => document.querySelector('#prompt-textarea').textContent === '');

  // The MAIN-world insert the extension uses (select all + execCommand) is real input.
  await page.evaluate(() => {
    const c = document.querySelector('#prompt-textarea');
    c.focus();
    document.getSelection().selectAllChildren(c);
    document.execCommand('insertText', false, 'first line\nsecond line');
  });
  assert.equal(await model(), 'first line\nsecond line');
  await sendButtons.waitFor({ state: 'visible' });
  await sendButtons.click();
  const first = await store.waitFor((m) => m.site === 'chatgpt' && m.role === 'user', { sinceIndex: logSince });
  assert.equal(first.text, 'first line\nsecond line');
  const chatPath = new RegExp(`^/g/${PROJECT}-demo/c/[0-9a-f-]{36}$`);
  assert.match(new URL(first.href).pathname, chatPath);
  assert.match(new URL(page.url()).pathname, chatPath);
  assert.equal(await model(), '');
  assert.equal(await sendButtons.count(), 0);

  // While the reply streams: Stop instead of Send, and Enter sends nothing.
  const reply = modelReply(page, 'x'.repeat(200), { chunk: 4, intervalMs: 20 });
  await stopButtons.waitFor({ state: 'visible' });
  await page.click('#prompt-textarea');
  await page.keyboard.type('typed while it answers');
  assert.equal(await model(), 'typed while it answers');
  assert.equal(await sendButtons.count(), 0);
  await page.keyboard.press('Enter');
  assert.equal(await model(), 'typed while it answers');
  await reply;
  assert.equal(await stopButtons.count(), 0);
  await sendButtons.click();
  const second = await store.waitFor((m) => m.site === 'chatgpt' && m.role === 'user', {
    sinceIndex: store.log.indexOf(first) + 1,
    what: 'the second user message',
  });
  assert.equal(second.text, 'typed while it answers');
  const chatLog = store.messages('chatgpt', first.chatId);
  assert.deepEqual(chatLog.map((m) => m.role), ['user', 'assistant', 'user']);
  assert.deepEqual(store.userMessages('chatgpt').slice(since).map((m) => m.text), ['first line\nsecond line', 'typed while it answers']);

  await page.reload();
  await page.waitForFunction(() => document.documentElement.dataset.fixtureReady === '1');
  assert.equal(await page.locator('[data-message-author-role="user"]').count(), 2);
  await screenshot(page, 'fixture-chatgpt-composer');
  await page.close();
});
