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
  // ChatGPT enables Send only once its editor has taken the text in, which can lag the insert.
  const SEND_BUTTON_POLLS = 40;
  const SEND_BUTTON_POLL_MS = 150;
  // A click or key the page lost (busy re-rendering) is tried again, never over an empty composer.
  const SUBMIT_ATTEMPTS = 3;
  const BETWEEN_ATTEMPTS_MS = 800;
  const IDLE_WAIT_MS = 15000;
  // A new user turn that starts like the wake's first characters is the wake.
  const ACK_HEAD_CHARS = 120;
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
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  // Accepted = the composer emptied, or a new user turn starts like the wake.
  function accepted(text, turnsBefore) {
    const turns = userTurns();
    if (turns.count > turnsBefore && norm(turns.last).startsWith(norm(text).slice(0, ACK_HEAD_CHARS))) return 'user-turn';
    if (composerText() === '') return 'composer-cleared';
    return null;
  }
  async function waitAck(text, turnsBefore, timeoutMs) {
    const end = Date.now() + timeoutMs;
    while (Date.now() < end) {
      const ack = accepted(text, turnsBefore);
      if (ack) return ack;
      await sleep(ACK_POLL_MS);
    }
    return null;
  }
  async function waitForSendButton() {
    for (let i = 0; i < SEND_BUTTON_POLLS; i++) {
      const button = sendButton();
      if (button) return button;
      await sleep(SEND_BUTTON_POLL_MS);
    }
    return null;
  }
  async function waitForIdle() {
    const end = Date.now() + IDLE_WAIT_MS;
    while (generating()) {
      if (Date.now() >= end) return false;
      await sleep(ACK_POLL_MS);
    }
    return true;
  }
  function pressEnter() {
    const c = composer();
    if (!c) return;
    c.focus();
    for (const type of ['keydown', 'keypress', 'keyup']) {
      c.dispatchEvent(new KeyboardEvent(type, { key: 'Enter', code: 'Enter', keyCode: 13, which: 13, bubbles: true, cancelable: true }));
    }
  }
  // Send (or Enter), up to SUBMIT_ATTEMPTS times. Each try first checks that the wake is still
  // in the composer and was not taken meanwhile, so a late ack is never followed by a second send.
  async function submit(text) {
    const holds = () => norm(composerText()).includes(norm(text));
    if (!holds()) return { ok: false, error: 'insert-missing' };
    const before = userTurns().count;
    for (let attempt = 1; attempt <= SUBMIT_ATTEMPTS; attempt++) {
      if (attempt > 1) {
        await sleep(BETWEEN_ATTEMPTS_MS);
        // The page may have taken the last try after all (and started answering it).
        const late = accepted(text, before) || ((await waitForIdle()) ? accepted(text, before) : 'busy');
        if (late === 'busy') return { ok: false, error: 'submit-unconfirmed' };
        if (late) return { ok: true, ack: late, via: 'late', attempt };
        if (!holds()) return { ok: false, error: 'insert-missing' };
      }
      const button = await waitForSendButton();
      if (button && holds()) {
        button.click();
        const ack = await waitAck(text, before, ACK_TIMEOUT_MS);
        if (ack) return { ok: true, ack, via: 'send-button', attempt };
      }
      if (holds()) {
        pressEnter();
        const ack = await waitAck(text, before, ENTER_ACK_TIMEOUT_MS);
        if (ack) return { ok: true, ack, via: 'enter', attempt };
      }
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
