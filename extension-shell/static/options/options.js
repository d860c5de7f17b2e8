// Options / popup page: shows what the service worker reports and sends the user's switch
// clicks to it. The service worker (Rust) owns the state; this page only renders it.

import { t, localize } from '../i18n.js';

const $ = (id) => document.getElementById(id);
localize();

function row(table, cells, cls = []) {
  const tr = document.createElement('tr');
  cells.forEach((text, i) => {
    const td = document.createElement('td');
    td.textContent = text ?? '';
    if (cls[i]) td.className = cls[i];
    tr.appendChild(td);
  });
  table.tBodies[0].appendChild(tr);
}

function layer(table, name, ok, detail, fix) {
  row(table, [name, ok ? t('layerOk') : t('layerBad'), detail, ok ? '' : fix], ['', ok ? 'ok' : 'bad', '', 'fix']);
}

async function render() {
  const status = await chrome.runtime.sendMessage({ type: 'h2w_status' });
  const layers = $('layers');
  layers.tBodies[0].replaceChildren();
  if (!status?.ok) {
    layer(layers, t('layerServiceWorker'), false, status?.error ?? t('noAnswer'), t('reloadExtension'));
    return status;
  }
  layer(layers, t('layerNativeHost'), status.nativeHost.ok, status.nativeHost.detail ?? status.nativeHost.error, status.nativeHost.fix);
  layer(layers, t('layerRuntime'), status.runtime.ok, status.runtime.ok ? `herdr-mcp ${status.runtime.version ?? ''}` : '', status.runtime.fix);
  const contract = status.runtime.contract;
  row(layers, [t('layerContract'), contract ? `epoch ${contract.epoch}` : '—', contract?.hash ?? '']);
  row(layers, [t('layerTools'), status.tools == null ? '—' : String(status.tools), '']);
  layer(layers, 'Herdr', status.herdr.ok, status.herdr.detail ?? '', status.herdr.fix);
  for (const box of document.querySelectorAll('input[data-site]')) box.checked = !!status.sites[box.dataset.site];
  const convs = $('conversations');
  convs.tBodies[0].replaceChildren();
  if (!status.conversations.length) row(convs, [t('noConversation')]);
  for (const c of status.conversations) row(convs, [c.key, c.state]);
  document.body.dataset.ready = '1';
  return status;
}

for (const box of document.querySelectorAll('input[data-site]')) {
  box.addEventListener('change', async () => {
    const answer = await chrome.runtime.sendMessage({ type: 'h2w_set_site', site: box.dataset.site, enabled: box.checked });
    $('site-result').textContent = answer?.ok
      ? t(answer.enabled ? 'siteNowOn' : 'siteNowOff', answer.site)
      : t('siteNotChanged', answer?.error ?? t('noAnswer'));
    $('site-result').dataset.state = answer?.ok ? `${box.dataset.site}:${box.checked ? 'on' : 'off'}` : 'error';
  });
}
// Continuity progress settings: the service worker validates the raw texts (ext-core) and
// stores them; the page only shows the values in force or the refusal next to its field.
const settingInputs = { progressTickSec: $('progress-tick'), progressFallbackSec: $('progress-cooldown') };

async function loadContinuitySettings() {
  const answer = await chrome.runtime.sendMessage({ type: 'h2w_continuity_settings' });
  if (!answer?.ok) return;
  for (const [field, input] of Object.entries(settingInputs)) input.value = String(answer[field]);
  $('continuity-form').dataset.ready = '1';
}

$('continuity-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const message = { type: 'h2w_set_continuity_settings' };
  for (const [field, input] of Object.entries(settingInputs)) {
    message[field] = input.value;
    input.removeAttribute('aria-invalid');
  }
  const answer = await chrome.runtime.sendMessage(message);
  const result = $('continuity-result');
  if (answer?.ok) {
    result.textContent = t('saved', answer.settings.progressTickSec, answer.settings.progressFallbackSec);
    result.dataset.state = 'saved';
  } else {
    settingInputs[answer?.field]?.setAttribute('aria-invalid', 'true');
    result.textContent = t('notSaved', answer?.detail ?? answer?.error ?? t('noServiceWorker'));
    result.dataset.state = 'error';
  }
});

// Activity: the runtime's log of this browser's calls (newest first), through the worker.
async function loadActivity() {
  const table = $('activity');
  const answer = await chrome.runtime.sendMessage({ type: 'h2w_activity' });
  table.tBodies[0].replaceChildren();
  const result = $('activity-result');
  if (!answer?.ok) {
    result.textContent = t('activityFailed', answer?.detail ?? answer?.message ?? answer?.error ?? t('noAnswer'));
    result.dataset.state = 'error';
    return;
  }
  result.textContent = answer.entries.length ? '' : t('activityEmpty');
  for (const e of answer.entries) {
    const when = new Date(e.at_ms).toLocaleString();
    const outcome = e.outcome === 'ok' ? 'ok' : t('outcomeError', e.code ?? '');
    row(table, [when, e.tool, e.root ?? '', outcome, `${e.duration_ms} ms`, JSON.stringify(e.args)], ['', '', '', e.outcome === 'ok' ? 'ok' : 'bad', '', 'args']);
  }
  result.dataset.state = `entries:${answer.entries.length}`;
}

// Round limit of the tool loop: validated and stored by the service worker (ext-core rules).
async function loadLoopSettings() {
  const answer = await chrome.runtime.sendMessage({ type: 'h2w_bridge_settings' });
  if (!answer?.ok) return;
  $('max-rounds').value = String(answer.maxRounds);
  $('loop-form').dataset.ready = '1';
}

$('loop-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  $('max-rounds').removeAttribute('aria-invalid');
  const answer = await chrome.runtime.sendMessage({ type: 'h2w_set_bridge_settings', maxRounds: $('max-rounds').value });
  const result = $('loop-result');
  if (answer?.ok) {
    result.textContent = t('roundsSaved', answer.maxRounds);
    result.dataset.state = 'saved';
  } else {
    $('max-rounds').setAttribute('aria-invalid', 'true');
    result.textContent = t('notSaved', answer?.detail ?? answer?.error ?? t('noServiceWorker'));
    result.dataset.state = 'error';
  }
});

$('activity-refresh').addEventListener('click', loadActivity);
$('refresh').addEventListener('click', render);
render();
loadContinuitySettings();
loadLoopSettings();
loadActivity();
