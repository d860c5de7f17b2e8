// Bridge content script: the page's hands. It reports the messages it sees, intercepts the
// user's submit, inserts and sends the text the service worker gives it, folds the messages
// the service worker names and shows its status. It decides nothing: selectors come from the
// service worker (Rust site adapters), and every answer to "what now" comes back from it.
(() => {
  if (window.__herdrBridge) return;
  const pageId = crypto.randomUUID();
  const SITE_BY_ORIGIN = { 'https://chat.z.ai': 'z.ai', 'https://chat.deepseek.com': 'deepseek' };
  const site = SITE_BY_ORIGIN[location.origin];
  const WATCH_INTERVAL_MS = 400;
  const ROUTE_POLL_MS = 1000;
  const SELF_SEND_WINDOW_MS = 3000;
  let sel = null;
  // How to insert and send (ext-adapters' ComposerStrategy for this site).
  let strategy = null;
  let watching = false;
  let selfSendingUntil = 0;
  let reportTimer = null;
  let reporting = false;
  let reportAgain = false;
  let indicatorTimer = null;
  // The page's last message as the worker holds it ({key, rev, text}), so a report carries
  // only what was appended since (ext-adapters' `reply_text`); null: send it whole.
  let held = null;
  let nextRev = 0;
  // The older messages' texts the worker holds, by root: sent as `held`, without the text.
  let heldHistory = new Map();
  // Development baseline (the worker's word, unpacked installs only): always whole.
  let wholeSnapshots = false;
  window.__herdrBridge = { pageId };

  const convKey = () => location.origin + location.pathname.replace(/\/+$/, '');
  const ask = (message) =>
    chrome.runtime.sendMessage({ site, convKey: convKey(), pageId, ...message }).catch((error) => ({ ok: false, error: 'background-unavailable', detail: String(error) }));

  // ---- reading the page (the snapshot rules are ext-adapters' `selectors` module) ------------
  let seq = 0;
  const allRoots = () => [...document.querySelectorAll(sel.message_root)];
  function lastOutermost(root) {
    const matches = [...root.querySelectorAll(sel.content)];
    const outer = matches.filter((m) => !matches.some((o) => o !== m && o.contains(m)));
    return outer.length ? outer[outer.length - 1] : root;
  }
  function firstMatch(list) {
    for (let i = 0; i < list.length; i++) {
      const node = document.querySelector(list[i]);
      if (node) return { node, candidate: i };
    }
    return null;
  }
  // The element's text with its line breaks (ext-adapters' `selectors`, "Line text"): <br>
  // and the boundaries of the adapter's block tags are line breaks; white space holding a
  // line break is markup indentation unless its parent lays text out as written.
  const SKIPPED = new Set(['SCRIPT', 'STYLE', 'TEMPLATE', 'NOSCRIPT']);
  const laidOutAsWritten = (parent) => !!parent && /^(pre|break-spaces)/.test(getComputedStyle(parent).whiteSpace);
  function lineText(element) {
    const blocks = new Set(sel.line_break_tags);
    let out = '';
    let pending = false;
    const lineBreak = () => {
      if (pending && out && !out.endsWith('\n')) out += '\n';
      pending = false;
    };
    const walk = (node) => {
      for (let child = node.firstChild; child; child = child.nextSibling) {
        if (child.nodeType === Node.TEXT_NODE) {
          const data = child.data;
          if (!data || (data.includes('\n') && !data.trim() && !laidOutAsWritten(child.parentElement))) continue;
          lineBreak();
          out += data;
        } else if (child.nodeType === Node.ELEMENT_NODE) {
          const tag = child.tagName;
          if (tag === 'BR') {
            lineBreak();
            out += '\n';
          } else if (!SKIPPED.has(tag)) {
            const block = blocks.has(tag);
            pending ||= block;
            walk(child);
            pending ||= block;
          }
        }
      }
    };
    walk(element);
    return out;
  }
  function visible(node) {
    if (node.offsetParent) return true;
    const r = node.getBoundingClientRect();
    const cs = getComputedStyle(node);
    return r.width > 0 && r.height > 0 && cs.visibility !== 'hidden' && cs.display !== 'none' && cs.opacity !== '0';
  }
  let composingNow = false;
  document.addEventListener('compositionstart', () => (composingNow = true), true);
  document.addEventListener('compositionend', () => (composingNow = false), true);
  // `stream`: a report's snapshot, whose last message may be sent as a delta of `held`;
  // it receives what the worker will hold once it took the report.
  function snapshot(stream = null) {
    const roots = allRoots();
    const from = Math.max(0, roots.length - sel.max_roots);
    const picked = roots.slice(from).map((root, i) => {
      const index = from + i;
      const last = index === roots.length - 1;
      const full = lineText(lastOutermost(root)).trim();
      let text = last ? full : full.slice(0, sel.history_text_chars);
      let rev;
      let delta;
      let kept = false;
      const key = `${index}|${root.id || ''}`;
      const text_truncated = text.length < full.length;
      if (!last && stream && !wholeSnapshots) {
        kept = heldHistory.get(key) === text;
        stream.history.set(key, text);
        if (kept) text = '';
      }
      if (last && stream && !wholeSnapshots) {
        if (held && held.key === key && full.startsWith(held.text)) {
          rev = full.length === held.text.length ? held.rev : ++nextRev;
          delta = { base_rev: held.rev, base_len: held.text.length, append: full.slice(held.text.length) };
          text = '';
        } else {
          rev = ++nextRev;
        }
        stream.next = { key, rev, text: full };
        // The new text travels beside the JSON, as one plain string (no escaping either way).
        if (delta) {
          stream.lastText = delta.append;
          delta.append = '';
        } else {
          stream.lastText = text;
          text = '';
        }
      }
      return {
        index,
        dom_id: root.id || undefined,
        probes: sel.probes.filter((p) => root.matches(p.selector) || root.querySelector(p.selector)).map((p) => p.name),
        text,
        text_truncated,
        rev,
        delta,
        held: kept || undefined,
        head: (root.textContent || '').trimStart().slice(0, sel.head_chars),
        folded: root.dataset.h2wFoldKey || undefined,
      };
    });
    const c = firstMatch(sel.composer)?.node;
    const button = firstMatch(sel.send_buttons);
    return {
      seq: ++seq,
      url: location.href,
      visible: document.visibilityState === 'visible',
      total_roots: roots.length,
      roots: picked,
      composer: c
        ? { present: true, kind: c.tagName === 'TEXTAREA' ? 'textarea' : c.isContentEditable ? 'content_editable' : 'other', text: composerText(), composing: composingNow, disabled: !!c.disabled }
        : { present: false },
      send_button: button ? { candidate: button.candidate, enabled: !button.node.disabled, visible: visible(button.node) } : undefined,
    };
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
      const stream = { next: null, history: new Map() };
      // As JSON text: one string for the worker to take in, not an object to walk.
      const shot = snapshot(stream);
      const answer = await ask(wholeSnapshots ? { type: 'h2w_report', snapshot: shot } : { type: 'h2w_report', snapshot_json: JSON.stringify(shot), last_text: stream.lastText });
      // The worker holds this text now; after a refusal or a resync it holds none we know.
      const taken = answer?.ok && !answer.resync;
      held = taken ? stream.next : null;
      heldHistory = taken ? stream.history : new Map();
      if (answer?.resync) reportAgain = true;
      if (answer?.ok) {
        for (const f of answer.fold || []) fold(allRoots()[f.index], f.key, f.label);
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
  // Each bar and the message it folds know each other, so a page that re-renders its list can
  // neither leave a bar behind for a message that is gone nor hide a message without its bar.
  const barOf = new WeakMap();
  const rootOf = new WeakMap();
  function fold(root, key, label) {
    if (!root || root.dataset.h2wJsonFolded === '1' || !root.parentNode) return;
    root.dataset.h2wJsonFolded = '1';
    root.dataset.h2wFoldKey = key;
    const bar = document.createElement('div');
    bar.className = 'h2w-json-fold';
    bar.setAttribute('role', 'button');
    bar.dataset.h2wLabel = label;
    const shownDisplay = root.style.display;
    root.dataset.h2wShownDisplay = shownDisplay;
    const render = (expanded) => {
      bar.textContent = `${expanded ? '▾' : '▸'} ${label}`;
      root.style.display = expanded ? shownDisplay : 'none';
      if (expanded) root.dataset.h2wJsonExpanded = '1';
      else delete root.dataset.h2wJsonExpanded;
    };
    bar.addEventListener('click', () => render(root.dataset.h2wJsonExpanded !== '1'));
    barOf.set(root, bar);
    rootOf.set(bar, root);
    root.parentNode.insertBefore(bar, root);
    render(false);
  }
  // Bars whose message left the page go; a bar the page moved or dropped goes back right
  // before its message. A message folded by an earlier copy of this script (the extension
  // was reloaded) has no bar of ours: it is shown again and the next report folds it anew.
  function cleanupFoldArtifacts() {
    for (const bar of document.querySelectorAll('.h2w-json-fold')) {
      const root = rootOf.get(bar);
      if (!root || !root.isConnected || barOf.get(root) !== bar || root.dataset.h2wJsonFolded !== '1') bar.remove();
    }
    let unfolded = false;
    for (const root of document.querySelectorAll('[data-h2w-json-folded="1"]')) {
      const bar = barOf.get(root);
      if (!bar) {
        root.style.display = root.dataset.h2wShownDisplay ?? '';
        for (const k of ['h2wJsonFolded', 'h2wFoldKey', 'h2wJsonExpanded', 'h2wShownDisplay']) delete root.dataset[k];
        unfolded = true;
      } else if (root.previousSibling !== bar && root.parentNode) {
        root.parentNode.insertBefore(bar, root);
      }
    }
    if (unfolded) scheduleReport(0);
  }
  let cleanupQueued = false;
  function scheduleCleanup() {
    if (cleanupQueued) return;
    cleanupQueued = true;
    queueMicrotask(() => {
      cleanupQueued = false;
      cleanupFoldArtifacts();
    });
  }

  // ---- the composer ------------------------------------------------------------------------------
  function composer() {
    return firstMatch(sel.composer)?.node ?? null;
  }
  function composerText() {
    const c = composer();
    if (!c) return '';
    return (c.value ?? c.innerText ?? '').replace(/\u200b/g, '').trim();
  }
  function fill(text) {
    const c = composer();
    if (!c) return false;
    // The prototype's own setter, so a framework that wraps `value` still sees the change.
    const proto = { TEXTAREA: HTMLTextAreaElement.prototype, INPUT: HTMLInputElement.prototype }[c.tagName];
    const setter = proto && Object.getOwnPropertyDescriptor(proto, 'value')?.set;
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
  async function pressEnter(c) {
    c.focus();
    // Sites drop an Enter that lands before their editor has taken the focus.
    await delay(strategy.focus_before_enter_ms);
    selfSendingUntil = Date.now() + SELF_SEND_WINDOW_MS;
    for (const type of ['keydown', 'keypress']) {
      c.dispatchEvent(new KeyboardEvent(type, { key: 'Enter', code: 'Enter', keyCode: 13, which: 13, bubbles: true, cancelable: true }));
    }
  }
  // One way of sending; false when this page offers no such way right now.
  async function trySubmit(method, c) {
    selfSendingUntil = Date.now() + SELF_SEND_WINDOW_MS;
    if (method === 'click_send_button') {
      const button = sel.send_buttons.flatMap((b) => [...document.querySelectorAll(b)]).find((b) => !b.disabled && visible(b));
      if (!button) return false;
      button.click();
      return true;
    }
    if (method === 'request_submit') {
      const form = c.closest('form');
      if (!form) return false;
      form.requestSubmit();
      return true;
    }
    if (method === 'press_enter') {
      await pressEnter(c);
      return true;
    }
    return false;
  }
  // `kind` is the engine's message kind. Results and repairs go out while the user may have
  // typed a draft (or pressed Enter while the task ran, which is refused): the draft is put
  // back once the protocol message has left, instead of being overwritten and lost.
  async function sendText(text, kind) {
    const c = composer();
    if (!c) return { ok: false, detail: 'composer not found' };
    const draft = kind === 'tool_result' || kind === 'repair' ? composerText() : '';
    c.style.opacity = '0';
    try {
      fill(text);
      await delay(strategy.settle_after_insert_ms);
      // The site's ways of sending in its order; the next one only when the composer kept the text.
      for (const method of strategy.submit) {
        if (!(await trySubmit(method, c))) continue;
        if (await waitEmpty(strategy.clear_timeout_ms)) {
          if (draft) fill(draft);
          return { ok: true };
        }
      }
      return { ok: false, detail: 'the page did not take the message (composer still full)' };
    } finally {
      // Our own Enter, click and submit events were dispatched by now; from here on an Enter
      // is the user's again and must reach the bridge, not slip past it to the page.
      selfSendingUntil = 0;
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
    ask({ type: 'h2w_submit', text, snapshot: snapshot() }).then((answer) => {
      if (answer?.ok) return;
      // Every refusal is said on the page, in the service worker's words.
      indicate(answer?.notice || `Herdr: sent without tools: the extension did not answer (${answer?.error || 'no answer'}).`, true);
      // One task at a time: the text stays in the composer (and survives the next result).
      if (answer?.blocked) return;
      // Refused (e.g. the site was switched off meanwhile): the user's message still goes out, as typed.
      console.warn('herdr: the bridge refused this message; sending it unbridged', answer);
      sendText(text);
    });
  }
  document.addEventListener(
    'keydown',
    (event) => {
      if (event.key !== 'Enter' || event.shiftKey || event.isComposing || event.keyCode === 229) return;
      if (!sel || !strategy.intercept?.enter_key || !sel.composer.some((c) => event.target?.closest?.(c))) return;
      intercept(event);
    },
    true,
  );
  document.addEventListener(
    'click',
    (event) => {
      // The target may be the icon inside the button (DeepSeek's Send is a div with an svg).
      if (sel && strategy.intercept?.send_button_click && sel.send_buttons.some((b) => event.target?.closest?.(b))) intercept(event);
    },
    true,
  );
  document.addEventListener(
    'submit',
    (event) => {
      if (sel && strategy.intercept?.form_submit && sel.composer.some((c) => event.target?.querySelector?.(c))) intercept(event);
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
      sendText(String(message.text ?? ''), message.kind).then(sendResponse);
      return true;
    }
    // The page as the adapter reads it, for the handoff (packet, seed confirmation).
    if (message?.type === 'h2w_snapshot') {
      sendResponse({ ok: true, snapshot: snapshot() });
      return false;
    }
    if (message?.type === 'h2w_indicator') indicate(message.text, message.final);
    if (message?.type === 'h2w_fold_now') scheduleReport(0);
    sendResponse({ ok: true });
    return false;
  });

  // ---- start: only when the service worker accepts this site --------------------------------
  ask({ type: 'h2w_hello', url: location.href }).then((answer) => {
    if (!answer?.ok || !answer.selectors || !answer.composer) {
      window.__herdrBridge.refused = answer?.error || 'no-answer';
      return;
    }
    sel = answer.selectors;
    strategy = answer.composer;
    wholeSnapshots = answer.whole_snapshots === true;
    window.__herdrBridge.ready = true;
    document.documentElement.dataset.herdrBridge = 'ready';
    new MutationObserver(() => {
      scheduleCleanup();
      scheduleReport();
    }).observe(document.body, { childList: true, subtree: true, characterData: true });
    cleanupFoldArtifacts();
    // A report is also the page's registration (spec §5.2): bindings follow the tab, and
    // the worker learns the tab's conversation. Sent when the key changes (polled while the
    // page is visible), on history and hash navigation, and whenever the page is shown again.
    let lastKey = convKey();
    setInterval(() => {
      if (document.visibilityState === 'visible' && convKey() !== lastKey) {
        lastKey = convKey();
        scheduleReport(0);
      }
    }, ROUTE_POLL_MS);
    const registerNow = () => {
      lastKey = convKey();
      scheduleReport(0);
    };
    addEventListener('popstate', registerNow);
    addEventListener('hashchange', registerNow);
    document.addEventListener('visibilitychange', () => {
      if (document.visibilityState === 'visible') registerNow();
    });
    scheduleReport(0);
  });
})();
