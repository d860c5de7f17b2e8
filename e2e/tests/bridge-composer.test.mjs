// The bridge drives each site's page the way its adapter says (spec §4, ext-adapters'
// ComposerStrategy): z.ai clicks Send, else submits its form, else presses Enter; DeepSeek
// presses Enter, only after the inserted text settled and the composer had the focus for a
// moment. And a chat page (the bridge's and ChatGPT's) registers again on hash navigation and
// whenever it is shown (§5.2), so a binding sees its tab even when nothing on the page changes.
// A reply rewritten in place is resumed from like a new one (§5.4). Auto is refused for a key
// that is no conversation (§8).

import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { basename } from 'node:path';
import { startStack, stopStack, openChat, userSends, conversationState, until } from '../lib/harness.mjs';
import { modelReply } from '../lib/fixture-sites.mjs';
import { MARKER, nextUserMessage, convKeyOf, waitIdle, isToolResult, toolResultRows, payloadOf } from '../lib/bridge-steps.mjs';
import { tabIdOf, popupMessage, continuityState, openChatGpt } from '../lib/continuity.mjs';

describe('bridge: sending and registering as the site adapter says', () => {
  let stack;
  before(async () => {
    stack = await startStack('composer', { sites: ['zai', 'deepseek'] });
  });
  after(async () => stopStack(stack));

  const bridgedTask = async (site, page, text) => {
    const since = stack.store.log.length;
    await userSends(page, text);
    return nextUserMessage(stack.store, site, (t) => t.includes(MARKER), { sinceIndex: since, what: `the bridged task on ${site}` });
  };

  test('DeepSeek: Enter, 420 ms after the insert and 400 ms after focusing the composer', async () => {
    const page = await openChat(stack, 'https://chat.deepseek.com/');
    const sent = await bridgedTask('deepseek', page, 'What is in the repo?');
    assert.equal(sent.via, 'enter');
    assert.ok(sent.sinceInputMs >= 820, `Enter came ${sent.sinceInputMs} ms after the text was inserted`);
  });

  test('z.ai: Send when it can be clicked, else the form is submitted before Enter is tried', async () => {
    const withButton = await openChat(stack, 'https://chat.z.ai/');
    assert.equal((await bridgedTask('zai', withButton, 'First question.')).via, 'button');

    stack.store.sendButtonOff.add('zai');
    try {
      const withoutButton = await openChat(stack, 'https://chat.z.ai/');
      assert.equal(await withoutButton.evaluate(() => document.getElementById('send-message-button').disabled), true);
      assert.equal((await bridgedTask('zai', withoutButton, 'Second question.')).via, 'submit');
    } finally {
      stack.store.sendButtonOff.delete('zai');
    }
  });

  // The user's own send, by Enter or by clicking the site's Send (DeepSeek's is a
  // div[role=button] whose click sends), always becomes a bridged task: never the bare text.
  for (const site of ['zai', 'deepseek']) {
    for (const how of ['enter', 'click']) {
      test(`${site}: the user's ${how === 'enter' ? 'Enter' : 'click on Send'} starts a bridged task`, async () => {
        const page = await openChat(stack, site === 'zai' ? 'https://chat.z.ai/' : 'https://chat.deepseek.com/');
        const text = `Question sent by ${how} on ${site}.`;
        const since = stack.store.log.length;
        await page.locator('textarea').first().fill(text);
        if (how === 'enter') await page.locator('textarea').first().press('Enter');
        // The icon inside the button, where a user's click lands.
        else await page.locator(site === 'zai' ? '#send-message-button' : '#send-button-slot svg path').click();
        const sent = await nextUserMessage(stack.store, site, () => true, { sinceIndex: since, what: `the message sent by ${how} on ${site}` });
        assert.ok(sent.text.startsWith(MARKER), `the first message is the bridged task, not the bare text: ${sent.text.slice(0, 80)}`);
        assert.ok(sent.text.endsWith(`USER_TASK:\n${text}`), sent.text.slice(-120));
        await modelReply(page, 'Answered.');
        await waitIdle((k) => conversationState(stack, k), await convKeyOf(page));
        assert.equal(stack.store.userMessages(site).filter((m) => m.text === text).length, 0, 'the bare text never went out');
      });
    }
  }

  const registersAgain = async (url, page) => {
    const tabId = await tabIdOf(stack, url);
    const bound = await popupMessage(stack, { type: 'h2w_bind', tabId, workspace: { kind: 'herdr', id: 'w-registration' } });
    assert.equal(bound.ok, true, JSON.stringify(bound));
    const lastSeen = async () => (await continuityState(stack)).bindings.find((v) => v.binding.key === bound.binding.binding.key).binding.last_seen_at_ms;
    const seenAfter = (previous, what) => until(async () => ((await lastSeen()) > previous ? lastSeen() : null), { timeoutMs: 5_000, what });

    const atBind = await lastSeen();
    await until(() => Date.now() > atBind + 5, { what: 'the clock to move on' });
    // Neither changes the conversation key or the page's DOM: only the events can tell.
    await page.evaluate(() => (location.hash = 'section-2'));
    const afterHash = await seenAfter(atBind, 'a registration after hashchange');
    await until(() => Date.now() > afterHash + 5, { what: 'the clock to move on' });
    await page.evaluate(() => document.dispatchEvent(new Event('visibilitychange')));
    await seenAfter(afterHash, 'a registration after the page was shown again');
  };

  test('a z.ai page registers again on hash navigation and when it is shown again', async () => {
    const url = `https://chat.z.ai/c/${randomUUID()}`;
    await registersAgain(url, await openChat(stack, url));
  });

  test('so does a ChatGPT page, whose key stays the same', async () => {
    const chat = await openChatGpt(stack);
    await registersAgain(chat.convKey, chat.page);
  });

  test('DeepSeek: a reply regenerated in place with a tool call is resumed from (spec §5.4 fingerprint: id and text)', async () => {
    const page = await openChat(stack, 'https://chat.deepseek.com/');
    await bridgedTask('deepseek', page, 'Say hello, then run something.');
    await modelReply(page, 'Hello.');
    const key = await convKeyOf(page);
    await waitIdle((k) => conversationState(stack, k), key);
    const mark = stack.store.log.length;
    const call = { tool: 'herdr_exec', args: { workspace: basename(stack.project), command: 'echo regenerated-reply' } };
    await page.evaluate((text) => window.__fixture.regenerate(text), JSON.stringify(call));
    const result = await nextUserMessage(stack.store, 'deepseek', isToolResult, { sinceIndex: mark, what: 'the TOOL_RESULT of the regenerated reply' });
    const [row] = toolResultRows(result.text);
    assert.equal(row.tool, 'herdr_exec');
    assert.match(JSON.stringify(payloadOf(row)), /regenerated-reply/);
  });

  test('Auto is refused for a key that is no conversation of a supported site', async () => {
    for (const convKey of ['', 'https://evil.example/c/1', 'https://chat.deepseek.com', 'https://chat.z.ai/c/1/']) {
      const answer = await popupMessage(stack, { type: 'h2w_set_auto', convKey, enabled: true });
      assert.equal(answer.error, 'conversation-unavailable', `${JSON.stringify(convKey)}: ${JSON.stringify(answer)}`);
    }
    const key = `https://chat.z.ai/c/${randomUUID()}`;
    assert.deepEqual(await popupMessage(stack, { type: 'h2w_set_auto', convKey: key, enabled: true }), { ok: true, convKey: key, auto: true });
  });
});
