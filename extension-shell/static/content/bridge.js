// Bridge content script: the page's hands. It reports the messages it sees, intercepts the
// user's submit, inserts and sends the text the service worker gives it, folds the messages
// the service worker names and shows its status. It decides nothing: selectors come from the
// service worker (Rust site adapters), and every answer to "what now" comes back from it.
(() => {
  if (window.__herdrBridge) return;
  const pageId = crypto.randomUUID();
  const SITE_BY_ORIGIN = { 'https://chat.z.ai': 'z.ai', 'https://chat.deepseek.com': 'deepseek' };
  const site = SITE_BY_ORIGIN[location.origin];
  const MAX_ENTRIES = 40;
  const WATCH_INTERVAL_MS = 400;
  const SELF_SEND_WINDOW_MS = 3000;
  let sel = null;
  let watching = false;
  let selfSendingUntil = 0;
  let reportTimer = null;
  let reporting = false;
  let reportAgain = false;
  let indicatorTimer = null;
  window.__herdrBridge = { pageId };

  const convKey = () => location.origin + location.pathname.replace(/\/+$/, '');
  const ask = (message) =>
    chrome.runtime.sendMessage({ site, convKey: convKey(), pageId, ...message }).catch((error) => ({ ok: false, error: 'background-unavailable', detail: String(error) }));

  // ---- reading the page ------------------------------------------------------------------
  function roots() {
    return [...document.querySelectorAll(sel.message_root)];
  }
  function roleOf(root) {
    if (root.matches(sel.assistant_marker) || root.querySelector(sel.assistant_marker)) return 'assistant';
    if (!sel.user_marker || root.matches(sel.user_marker) || root.querySelector(sel.user_marker)) return 'user';
    return null;
  }
  function idOf(root, index) {
    return sel.message_id === 'index' ? `ds-${index}` : root.id || `idx-${index}`;
  }
  function textOf(root, role) {
    if (role === 'assistant') {
      const bodies = root.querySelectorAll(sel.reply_body);
      const body = bodies.length ? bodies[bodies.length - 1] : root;
      return (body.textContent || '').trim();
    }
    const user = sel.user_marker ? root.querySelector(sel.user_marker) || root : root;
    return (user.textContent || '').trim();
  }
  function entries() {
    const list = [];
    roots().forEach((root, index) => {
      const role = roleOf(root);
      if (!role) return;
      list.push({
        id: idOf(root, index),
        role,
        text: textOf(root, role),
        busy: !!(sel.busy_marker && root.querySelector(sel.busy_marker)),
        rootText: (root.textContent || '').slice(0, 400),
        folded: root.dataset.h2wJsonFolded === '1',
      });
    });
    return list.slice(-MAX_ENTRIES);
  }
  function rootById(id) {
    return roots().find((root, index) => idOf(root, index) === id) || null;
  }

  // ---- reporting -----------------------------------------------------------------------------
  function scheduleReport(delay = 150) {
    if (!sel) return;
    clearTimeout(reportTimer);
    reportTimer = setTimeout(report, delay);
  }
  async function report() {
    if (reporting) {
      reportAgain = true;
      return;
    }
    reporting = true;
    try {
      const answer = await ask({ type: 'h2w_report', entries: entries() });
      if (answer?.ok) {
        for (const f of answer.fold || []) fold(rootById(f.id), f.label);
        watching = !!answer.watch;
      }
    } finally {
      reporting = false;
    }
    if (reportAgain) {
      reportAgain = false;
      scheduleReport(0);
    } else if (watching) {
      scheduleReport(WATCH_INTERVAL_MS);
    }
  }

  // ---- folding (presentation only: nothing is removed) ------------------------------------
  function fold(root, label) {
    if (!root || root.dataset.h2wJsonFolded === '1' || !root.parentNode) return;
    root.dataset.h2wJsonFolded = '1';
    const bar = document.createElement('div');
    bar.className = 'h2w-json-fold';
    bar.setAttribute('role', 'button');
    bar.dataset.h2wLabel = label;
    const shownDisplay = root.style.display;
    const render = (expanded) => {
      bar.textContent = `${expanded ? '▾' : '▸'} ${label}`;
      root.style.display = expanded ? shownDisplay : 'none';
      if (expanded) root.dataset.h2wJsonExpanded = '1';
      else delete root.dataset.h2wJsonExpanded;
    };
    bar.addEventListener('click', () => render(root.dataset.h2wJsonExpanded !== '1'));
    root.parentNode.insertBefore(bar, root);
    render(false);
  }

  // ---- the composer ------------------------------------------------------------------------------
  function composer() {
    return document.querySelector(sel.composer);
  }
  function composerText() {
    const c = composer();
    if (!c) return '';
    return (c.value ?? c.innerText ?? '').replace(/\u200b/g, '').trim();
  }
  function fill(text) {
    const c = composer();
    if (!c) return false;
    const proto = c.tagName === 'TEXTAREA' ? HTMLTextAreaElement.prototype : HTMLInputElement.prototype;
    const setter = Object.getOwnPropertyDescriptor(proto, 'value')?.set;
    if (setter) setter.call(c, text);
    else c.textContent = text;
    c.dispatchEvent(new Event('input', { bubbles: true }));
    c.dispatchEvent(new Event('change', { bubbles: true }));
    return true;
  }
  const delay = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  async function waitEmpty(ms) {
    const end = Date.now() + ms;
    while (Date.now() < end) {
      if (!composerText()) return true;
      await delay(100);
    }
    return !composerText();
  }
  function pressEnter(c) {
    c.focus();
    for (const type of ['keydown', 'keypress']) {
      c.dispatchEvent(new KeyboardEvent(type, { key: 'Enter', code: 'Enter', keyCode: 13, which: 13, bubbles: true, cancelable: true }));
    }
  }
  async function sendText(text) {
    const c = composer();
    if (!c) return { ok: false, detail: 'composer not found' };
    c.style.opacity = '0';
    try {
      fill(text);
      await delay(120);
      selfSendingUntil = Date.now() + SELF_SEND_WINDOW_MS;
      const button = sel.send_button ? document.querySelector(sel.send_button) : null;
      if (button) button.click();
      else pressEnter(c);
      if (await waitEmpty(5000)) return { ok: true };
      const form = c.closest('form');
      if (form) {
        selfSendingUntil = Date.now() + SELF_SEND_WINDOW_MS;
        form.requestSubmit();
        if (await waitEmpty(2500)) return { ok: true };
      }
      return { ok: false, detail: 'the page did not take the message (composer still full)' };
    } finally {
      c.style.opacity = '';
      scheduleReport(0);
    }
  }

  // ---- submit interception (capture phase, before the page's own handlers) -----------------
  function intercept(event) {
    if (!sel || Date.now() < selfSendingUntil) return;
    const text = composerText();
    if (!text) return;
    event.preventDefault();
    event.stopImmediatePropagation();
    event.stopPropagation();
    ask({ type: 'h2w_submit', text, entries: entries() }).then((answer) => {
      if (answer?.ok) return;
      // Refused (e.g. the site was switched off meanwhile): the user's message still goes out, as typed.
      console.warn('herdr: the bridge refused this message; sending it unbridged', answer);
      sendText(text);
    });
  }
  document.addEventListener(
    'keydown',
    (event) => {
      if (event.key !== 'Enter' || event.shiftKey || event.isComposing || event.keyCode === 229) return;
      if (!sel || !event.target?.closest?.(sel.composer)) return;
      intercept(event);
    },
    true,
  );
  document.addEventListener(
    'click',
    (event) => {
      if (sel?.send_button && event.target?.closest?.(sel.send_button)) intercept(event);
    },
    true,
  );
  document.addEventListener(
    'submit',
    (event) => {
      if (sel && event.target?.querySelector?.(sel.composer)) intercept(event);
    },
    true,
  );

  // ---- status indicator ------------------------------------------------------------------------
  function indicate(text, final) {
    clearTimeout(indicatorTimer);
    let node = document.getElementById('h2w-indicator');
    if (!text) {
      node?.remove();
      return;
    }
    if (!node) {
      node = document.createElement('div');
      node.id = 'h2w-indicator';
      node.setAttribute('role', 'status');
      document.body.appendChild(node);
    }
    node.textContent = text;
    if (final) indicatorTimer = setTimeout(() => node.remove(), 8000);
  }

  chrome.runtime.onMessage.addListener((message, _sender, sendResponse) => {
    if (!sel) return false;
    if (message?.type === 'h2w_send') {
      sendText(String(message.text ?? '')).then(sendResponse);
      return true;
    }
    if (message?.type === 'h2w_indicator') indicate(message.text, message.final);
    if (message?.type === 'h2w_fold_now') scheduleReport(0);
    sendResponse({ ok: true });
    return false;
  });

  // ---- start: only when the service worker accepts this site --------------------------------
  ask({ type: 'h2w_hello', url: location.href }).then((answer) => {
    if (!answer?.ok) {
      window.__herdrBridge.refused = answer?.error || 'no-answer';
      return;
    }
    sel = answer.selectors;
    window.__herdrBridge.ready = true;
    document.documentElement.dataset.herdrBridge = 'ready';
    new MutationObserver(() => scheduleReport()).observe(document.body, { childList: true, subtree: true, characterData: true });
    let lastKey = convKey();
    setInterval(() => {
      if (convKey() !== lastKey) {
        lastKey = convKey();
        scheduleReport(0);
      }
    }, 500);
    scheduleReport(0);
  });
})();
