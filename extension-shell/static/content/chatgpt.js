// ChatGPT content script (continuity only; ChatGPT speaks MCP itself, so nothing here touches
// its tool loop). It is the page's eyes and one hand for wakes:
//   - registers the conversation the tab shows (at start, on every URL change), so bindings
//     follow the tab (pending root → /c/<id>, Project → its active conversation);
//   - answers composer probes (text, generating, user turns) for the service worker;
//   - clicks Send (or presses Enter) for a wake the service worker inserted in the MAIN world,
//     and reports whether the page accepted it;
//   - tells the service worker when the composer becomes free again (empty, not generating),
//     so a wake held back because the user was typing can go out.
// Every decision (whether to send, what, when) is the service worker's.
(() => {
  if (window.__herdrContinuity) return;
  window.__herdrContinuity = true;
  const POLL_MS = 1000;
  const ACK_TIMEOUT_MS = 8000;
  const ACK_POLL_MS = 100;
  const ENTER_ACK_TIMEOUT_MS = 3000;
  let sel = null; // {composer:[...], send_buttons:[...], stop_buttons:[...], streaming, user_turn}
  let lastKey = null;
  let wasFree = null;

  const convKey = () => location.origin + location.pathname.replace(/\/+$/, '');
  const ask = (message) =>
    chrome.runtime.sendMessage({ site: 'chatgpt', convKey: convKey(), url: location.href, ...message }).catch((error) => ({ ok: false, error: 'background-unavailable', detail: String(error) }));

  function visible(node) {
    if (!node || !node.isConnected) return false;
    if (node.offsetParent) return true;
    const r = node.getBoundingClientRect();
    const cs = getComputedStyle(node);
    return r.width > 0 && r.height > 0 && cs.visibility !== 'hidden' && cs.display !== 'none' && cs.opacity !== '0';
  }
  function lastVisible(selectors) {
    for (const s of selectors || []) {
      const all = [...document.querySelectorAll(s)].filter(visible);
      if (all.length) return all[all.length - 1];
    }
    return null;
  }
  const composer = () => lastVisible(sel.composer);
  const composerText = () => (composer()?.innerText || '').replace(/\u200b/g, '').trim();
  function sendButton() {
    const b = lastVisible(sel.send_buttons);
    return b && !b.disabled && b.getAttribute('aria-disabled') !== 'true' ? b : null;
  }
  function generating() {
    if (lastVisible(sel.stop_buttons)) return true;
    const assistants = document.querySelectorAll(sel.assistant_turn);
    const last = assistants[assistants.length - 1];
    return !!last && (last.matches(sel.streaming) || !!last.querySelector(sel.streaming));
  }
  function userTurns() {
    const turns = document.querySelectorAll(sel.user_turn);
    const last = turns[turns.length - 1];
    return { count: turns.length, last: (last?.innerText || '').trim() };
  }
  function probe() {
    const c = composer();
    const turns = userTurns();
    return { ok: true, convKey: convKey(), composer: !!c, text: composerText(), generating: generating(), sendReady: !!sendButton(), userTurns: turns.count, lastUserText: turns.last };
  }

  const norm = (t) => (t || '').replace(/\s+/g, ' ').trim();
  // Accepted = the composer emptied, or a new user turn starts like the wake.
  function accepted(text, turnsBefore) {
    const turns = userTurns();
    const head = norm(text).slice(0, 120);
    if (turns.count > turnsBefore && norm(turns.last).startsWith(head.slice(0, Math.min(head.length, 60)))) return 'user-turn';
    if (composerText() === '') return 'composer-cleared';
    return null;
  }
  async function waitAck(text, turnsBefore, timeoutMs) {
    const end = Date.now() + timeoutMs;
    while (Date.now() < end) {
      const ack = accepted(text, turnsBefore);
      if (ack) return ack;
      await new Promise((r) => setTimeout(r, ACK_POLL_MS));
    }
    return null;
  }
  async function submit(text) {
    if (!norm(composerText()).includes(norm(text))) return { ok: false, error: 'insert-missing' };
    const before = userTurns().count;
    const button = sendButton();
    if (button) {
      button.click();
      const ack = await waitAck(text, before, ACK_TIMEOUT_MS);
      if (ack) return { ok: true, ack, via: 'send-button' };
    }
    const c = composer();
    if (c && norm(composerText()).includes(norm(text))) {
      c.focus();
      for (const type of ['keydown', 'keypress', 'keyup']) {
        c.dispatchEvent(new KeyboardEvent(type, { key: 'Enter', code: 'Enter', keyCode: 13, which: 13, bubbles: true, cancelable: true }));
      }
      const ack = await waitAck(text, before, ENTER_ACK_TIMEOUT_MS);
      if (ack) return { ok: true, ack, via: 'enter' };
    }
    return { ok: false, error: 'submit-unconfirmed' };
  }

  chrome.runtime.onMessage.addListener((message, _sender, reply) => {
    if (!sel) {
      reply({ ok: false, error: 'not-ready' });
      return false;
    }
    if (message?.type === 'h2w_composer_probe') {
      const answer = probe();
      // A busy composer may make the worker hold a wake back, and the user can empty it
      // again within one debounce of the observer, which then sees no busy-to-free change
      // and never sends the cue. What the probe saw counts as a look.
      if (answer.text !== '' || answer.generating) wasFree = false;
      reply(answer);
      return false;
    }
    // The conversation's turns, for the handoff (the packet in a reply, the seed's arrival).
    if (message?.type === 'h2w_turns') {
      const nodes = [...document.querySelectorAll(`${sel.user_turn}, ${sel.assistant_turn}`)].slice(-40);
      const turns = nodes.map((n) => ({ role: n.matches(sel.user_turn) ? 'user' : 'assistant', text: (n.innerText || '').trim() }));
      reply({ ok: true, url: location.href, generating: generating(), composer: !!composer(), turns });
      return false;
    }
    if (message?.type === 'h2w_wake_submit') {
      submit(String(message.text || '')).then(reply, (e) => reply({ ok: false, error: 'submit-failed', detail: String(e) }));
      return true;
    }
    return false;
  });

  async function register() {
    const key = convKey();
    if (key === lastKey) return;
    lastKey = key;
    const answer = await ask({ type: 'h2w_register' });
    if (answer?.ok && answer.selectors) {
      sel = answer.selectors;
      document.documentElement.dataset.herdrContinuity = 'ready';
    } else if (!sel) {
      lastKey = null; // retried on the next tick
    }
  }
  // The composer became free (empty and not generating): held-back wakes may go out now.
  function watchComposer() {
    if (!sel) return;
    const free = composerText() === '' && !generating();
    if (free && wasFree === false) void ask({ type: 'h2w_composer_free' });
    wasFree = free;
  }
  let watchTimer = null;
  const observer = new MutationObserver(() => {
    if (watchTimer) return;
    watchTimer = setTimeout(() => {
      watchTimer = null;
      watchComposer();
    }, 150);
  });
  observer.observe(document.documentElement, { subtree: true, childList: true, characterData: true, attributes: true, attributeFilter: ['data-is-streaming', 'data-testid', 'disabled'] });
  setInterval(() => {
    if (document.visibilityState === 'visible') void register();
    watchComposer();
  }, POLL_MS);
  // Registered again even when the key stayed the same (spec §5.2): the tab's binding rows
  // learn it is still there.
  const registerAgain = () => {
    lastKey = null;
    void register();
  };
  addEventListener('popstate', registerAgain);
  addEventListener('hashchange', registerAgain);
  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'visible') registerAgain();
  });
  void register();
})();
