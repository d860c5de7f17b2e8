// Popup: bind the current tab's conversation to a workspace, Auto, bindings, waiting wakes.
// The service worker (Rust) owns the state and every rule; this page renders what it answers
// and sends the user's clicks. Opened as `popup.html?tab=<id>` it shows that tab (tests).

import { t, localize } from '../i18n.js';

const $ = (id) => document.getElementById(id);
localize();
const tabParam = Number(new URLSearchParams(location.search).get('tab')) || undefined;
const send = (message) => chrome.runtime.sendMessage(message).catch((e) => ({ ok: false, error: 'service-worker-unavailable', detail: String(e) }));
let page = null;

function el(tag, attrs = {}, text = '') {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text) node.textContent = text;
  return node;
}

function workspaceName(w) {
  return w.kind === 'herdr' ? w.id : w.path;
}

function say(text, state = '') {
  $('result').textContent = text;
  $('result').dataset.state = state;
}

function bindingItem(view, { withUnbind }) {
  const b = view.binding;
  const li = el('li', { 'data-binding': b.key });
  li.appendChild(el('span', { class: 'what' }, `${b.workspace_label || workspaceName(b.workspace)} ← ${b.active_conv_key || b.conv_key}`));
  li.appendChild(el('span', { class: `state ${b.status}` }, `${b.status}${view.auto ? ' · auto' : ''}${b.scope === 'pending' ? ' · pending' : ''}`));
  if (withUnbind) {
    const button = el('button', { type: 'button', 'data-unbind': b.key }, t('unbind'));
    button.addEventListener('click', async () => {
      const answer = await send({ type: 'h2w_unbind', convKey: b.conv_key, workspace: b.workspace });
      await render();
      say(answer.ok ? t('unbound') : t('notUnbound', answer.error), answer.ok ? 'unbound' : 'error');
    });
    li.appendChild(button);
  }
  return li;
}

function pendingItem(wake) {
  const li = el('li', { 'data-pending': wake.id });
  li.appendChild(el('span', { class: 'what' }, `${wake.kind} → ${wake.conv_key}`));
  // Uncertain: the chat may already show it; sending it again is the user's call.
  li.appendChild(el('span', { class: 'state', 'data-uncertain': String(!!wake.uncertain) }, wake.uncertain ? `${wake.reason} · ${t('mayAlreadyBeInChat')}` : wake.reason));
  const now = el('button', { type: 'button', 'data-send': wake.id }, t('sendNow'));
  now.addEventListener('click', async () => {
    now.disabled = true;
    const answer = await send({ type: 'h2w_send_pending', id: wake.id });
    await render();
    say(answer.ok ? t('sent') : t('notSent', answer.result?.error ?? answer.error), answer.ok ? 'sent' : 'error');
  });
  const drop = el('button', { type: 'button', 'data-dismiss': wake.id }, t('dismiss'));
  drop.addEventListener('click', async () => {
    await send({ type: 'h2w_dismiss_pending', id: wake.id });
    await render();
  });
  li.append(now, drop);
  li.appendChild(el('pre', {}, wake.text));
  return li;
}

async function render() {
  const answer = await send({ type: 'h2w_continuity_page', tabId: tabParam });
  if (!answer?.ok) {
    say(t('extensionNoAnswer', answer?.error ?? t('noAnswer')), 'error');
    return;
  }
  page = answer.page;
  $('page-key').textContent = page ? page.convKey : '';
  $('page-error').hidden = !!page;
  $('page-error').textContent = page ? '' : t('noBindablePage');
  for (const id of ['bind-row', 'auto-row']) $(id).hidden = !page;
  const select = $('workspace');
  select.replaceChildren();
  for (const choice of answer.workspaces) {
    const option = el('option', { value: JSON.stringify(choice.workspace) }, `${choice.label}${choice.workspace.kind === 'root' ? t('rootSuffix') : ''}`);
    select.appendChild(option);
  }
  if (!answer.workspaces.length) select.appendChild(el('option', { value: '' }, t('noWorkspace')));
  $('auto').checked = !!page?.auto;
  const list = (id, items, make) => {
    $(id).replaceChildren(...items.map(make));
    if (!items.length) $(id).appendChild(el('li', { class: 'note' }, t('none')));
  };
  list('page-bindings', answer.bindings, (v) => bindingItem(v, { withUnbind: true }));
  list('pending', answer.pending, pendingItem);
  list('all-bindings', answer.all, (v) => bindingItem(v, { withUnbind: false }));
  document.body.dataset.ready = '1';
  document.body.dataset.bindings = String(answer.bindings.length);
  document.body.dataset.pending = String(answer.pending.length);
}

$('bind').addEventListener('click', async () => {
  const raw = $('workspace').value;
  if (!raw || !page) return;
  const workspace = JSON.parse(raw);
  const label = $('workspace').selectedOptions[0]?.textContent.replace(t('rootSuffix'), '');
  const answer = await send({ type: 'h2w_bind', tabId: page.tabId, workspace, label });
  await render();
  say(answer.ok ? t('boundTo', label) : t('notBound', answer.error), answer.ok ? 'bound' : 'error');
});

$('auto').addEventListener('change', async () => {
  if (!page) return;
  const answer = await send({ type: 'h2w_set_auto', convKey: page.convKey, enabled: $('auto').checked });
  await render();
  say(answer.ok ? t(answer.auto ? 'autoOn' : 'autoOff') : t('autoNotChanged', answer.error), answer.ok ? `auto:${answer.auto ? 'on' : 'off'}` : 'error');
});

render();
