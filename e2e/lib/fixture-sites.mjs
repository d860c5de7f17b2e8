// Offline fixture sites at the real chat origins. `installFixtureSites(context)` routes
// https://chat.z.ai, https://chat.deepseek.com and https://chatgpt.com to pages built here,
// served with a strict CSP (no 'wasm-unsafe-eval', no inline script), and keeps every
// conversation in an in-memory store so that a reload shows the history, as on the real
// sites. The store is also how the test (the "model") sees what the page sent.

import { EventEmitter } from 'node:events';
import { readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';

const appJs = readFileSync(new URL('../fixtures/app.js', import.meta.url), 'utf8');

export const SITES = {
  zai: { origin: 'https://chat.z.ai', title: 'Z.ai Chat' },
  deepseek: { origin: 'https://chat.deepseek.com', title: 'DeepSeek' },
  chatgpt: { origin: 'https://chatgpt.com', title: 'ChatGPT' },
};

function composerHtml(site) {
  if (site === 'zai') {
    return `<form id="chat-form" class="composer">
  <textarea id="chat-input" placeholder="Send a Message" rows="3"></textarea>
  <button id="send-message-button" type="submit" disabled>Send</button>
</form>`;
  }
  if (site === 'deepseek') {
    // As on the real page: the toggles and Send are all div[role=button]; Send is the icon
    // button with the arrow, disabled (aria-disabled) while the composer is empty, and a
    // click on it sends.
    return `<div class="composer"><textarea id="chat-input" name="search" placeholder="Message DeepSeek" rows="3"></textarea>
  <div class="ec4f5d61">
    <div id="deepthink-toggle" role="button" class="ds-button ds-toggle-button">DeepThink</div>
    <div class="bf38813a"><div id="send-button-slot" role="button" aria-disabled="true" class="_f3a9c21 ds-icon-button">
      <svg width="14" height="16" viewBox="0 0 14 16"><path d="M8.3125 0.981648C8.66767 1.05456 8.97902 1.20565 9.2627 1.4338L13.3 5.5" fill="currentColor"></path></svg>
    </div></div>
  </div></div>`;
  }
  return `<form class="composer" data-type="unified-composer">
  <div id="prompt-textarea" contenteditable="true" class="ProseMirror" translate="no" role="textbox"></div>
  <span id="send-button-slot"></span>
</form>`;
}

function pageHtml(site, nonce) {
  return `<!doctype html>
<html lang="en" data-site="${site}">
<head>
<meta charset="utf-8">
<title>${SITES[site].title}</title>
<style nonce="${nonce}">
  body { font: 14px/1.4 sans-serif; margin: 0; display: flex; flex-direction: column; height: 100vh; }
  #messages { flex: 1; overflow: auto; padding: 12px; }
  #messages > * { margin: 6px 0; }
  .cm-content { white-space: pre; font-family: monospace; }
  #send-button-slot[role=button] { display: inline-block; width: 32px; height: 32px; cursor: pointer; }
  .user-message, .fbb737a4, [data-message-author-role="user"] { background: #eef; padding: 6px; }
  .composer { display: flex; gap: 6px; padding: 8px; border-top: 1px solid #ccc; }
  textarea, #prompt-textarea { flex: 1; min-height: 48px; border: 1px solid #999; padding: 4px; }
  .whitespace-pre-wrap { white-space: pre-wrap; }
</style>
</head>
<body>
<main><div id="messages" role="presentation"></div></main>
${composerHtml(site)}
<script src="/__fixture/app.js" nonce="${nonce}"></script>
</body>
</html>`;
}

/// The conversation store shared by all fixture sites of one browser context.
export class ConversationStore extends EventEmitter {
  constructor() {
    super();
    this.chats = new Map(); // `${site}:${chatId}` -> [{id, role, text, href, at}]
    this.log = [];
    /// Sites whose pages loaded from now on hang on send: nothing is taken, the composer
    /// stays full (a page in trouble, for tests of uncertain delivery).
    this.holdSends = new Set();
    /// Sites whose pages loaded from now on keep Send disabled (z.ai): the page then sends
    /// only through its form or Enter.
    this.sendButtonOff = new Set();
    /// Per site, for pages loaded from now on: how a slow ChatGPT page behaves
    /// (`{sendButtonDelayMs, enterSends, loseClicks}`, see fixtures/app.js).
    this.slowPage = {};
  }

  add(site, chatId, message) {
    const key = `${site}:${chatId}`;
    if (!this.chats.has(key)) this.chats.set(key, []);
    const entry = { site, chatId, ...message, at: Date.now() };
    this.chats.get(key).push(entry);
    this.log.push(entry);
    this.emit('message', entry);
  }

  messages(site, chatId) {
    return this.chats.get(`${site}:${chatId}`) || [];
  }

  /// Every user message the pages of `site` sent, in order (`href` = the page's URL then).
  userMessages(site) {
    return this.log.filter((m) => m.site === site && m.role === 'user');
  }

  /// Resolves with the first message (already stored after `sinceIndex`, or arriving
  /// later) that satisfies `predicate`; rejects after `timeoutMs`.
  waitFor(predicate, { timeoutMs = 30_000, sinceIndex = 0, what = 'message' } = {}) {
    const found = this.log.slice(sinceIndex).find(predicate);
    if (found) return Promise.resolve(found);
    return new Promise((resolve, reject) => {
      const onMessage = (entry) => {
        if (predicate(entry)) {
          clearTimeout(timer);
          this.off('message', onMessage);
          resolve(entry);
        }
      };
      const timer = setTimeout(() => {
        this.off('message', onMessage);
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`));
      }, timeoutMs);
      this.on('message', onMessage);
    });
  }
}

function siteOf(url) {
  const origin = new URL(url).origin.replace('://www.', '://');
  return Object.keys(SITES).find((s) => SITES[s].origin === origin);
}

/// Routes the three chat origins of `context` to the fixture sites; returns the store.
export async function installFixtureSites(context, store = new ConversationStore()) {
  const handler = async (route) => {
    const request = route.request();
    const url = new URL(request.url());
    const site = siteOf(request.url());
    if (url.pathname === '/__fixture/app.js') {
      return route.fulfill({ status: 200, contentType: 'text/javascript', body: appJs });
    }
    if (url.pathname === '/__fixture/api/config') {
      return route.fulfill({
        status: 200,
        contentType: 'application/json',
        body: JSON.stringify({ holdSends: store.holdSends.has(site), sendButtonOff: store.sendButtonOff.has(site), slowPage: store.slowPage[site] ?? {} }),
      });
    }
    const apiMatch = url.pathname.match(/^\/__fixture\/api\/chat\/([^/]+)(\/messages)?$/);
    if (apiMatch) {
      const chatId = apiMatch[1];
      if (request.method() === 'POST' && apiMatch[2]) {
        const message = JSON.parse(request.postData() || '{}');
        const { id, role, text, href, via, sinceInputMs } = message;
        store.add(site, chatId, { id, role, text, href, via, sinceInputMs });
        return route.fulfill({ status: 200, contentType: 'application/json', body: '{"ok":true}' });
      }
      const messages = store.messages(site, chatId).map(({ id, role, text }) => ({ id, role, text }));
      return route.fulfill({ status: 200, contentType: 'application/json', body: JSON.stringify({ messages }) });
    }
    if (request.resourceType() !== 'document') {
      return route.fulfill({ status: 404, body: 'not found' });
    }
    const nonce = randomBytes(12).toString('base64');
    return route.fulfill({
      status: 200,
      contentType: 'text/html; charset=utf-8',
      headers: {
        'content-security-policy': `default-src 'self'; script-src 'self' 'nonce-${nonce}'; style-src 'self' 'nonce-${nonce}'; connect-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'`,
      },
      body: pageHtml(site, nonce),
    });
  };
  for (const { origin } of Object.values(SITES)) {
    await context.route(`${origin}/**`, handler);
  }
  await context.route('https://www.chatgpt.com/**', handler);
  return store;
}

/// The test's hands as the model: stream a reply into `page` and wait until it is stored.
export async function modelReply(page, text, options = {}) {
  await page.waitForFunction(() => window.__fixture && document.documentElement.dataset.fixtureReady === '1');
  return page.evaluate(([t, o]) => window.__fixture.stream(t, o), [text, options]);
}

/// Runs `expression` in a fresh isolated world of `page`'s main frame — where a content
/// script runs: same DOM, its own JavaScript globals. Resolves with the value.
export async function evaluateInIsolatedWorld(page, expression) {
  const cdp = await page.context().newCDPSession(page);
  try {
    const { frameTree } = await cdp.send('Page.getFrameTree');
    const { executionContextId } = await cdp.send('Page.createIsolatedWorld', { frameId: frameTree.frame.id, worldName: 'herdr-e2e-isolated' });
    const { result, exceptionDetails } = await cdp.send('Runtime.evaluate', {
      expression,
      contextId: executionContextId,
      awaitPromise: true,
      returnByValue: true,
    });
    if (exceptionDetails) throw new Error(`isolated-world script failed: ${exceptionDetails.exception?.description || exceptionDetails.text}`);
    return result.value;
  } finally {
    await cdp.detach().catch(() => {});
  }
}
