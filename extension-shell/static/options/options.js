// Options / popup page: shows what the service worker reports and sends the user's switch
// clicks to it. The service worker (Rust) owns the state; this page only renders it.

const $ = (id) => document.getElementById(id);

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
  row(table, [name, ok ? 'ok' : 'not working', detail, ok ? '' : fix], ['', ok ? 'ok' : 'bad', '', 'fix']);
}

async function render() {
  const status = await chrome.runtime.sendMessage({ type: 'h2w_status' });
  const layers = $('layers');
  layers.tBodies[0].replaceChildren();
  if (!status?.ok) {
    layer(layers, 'Service worker', false, status?.error ?? 'no answer', 'Reload the extension on chrome://extensions');
    return status;
  }
  layer(layers, 'Native host', status.nativeHost.ok, status.nativeHost.detail ?? status.nativeHost.error, status.nativeHost.fix);
  layer(layers, 'Runtime', status.runtime.ok, status.runtime.ok ? `herdr-mcp ${status.runtime.version ?? ''}` : '', status.runtime.fix);
  const contract = status.runtime.contract;
  row(layers, ['Contract', contract ? `epoch ${contract.epoch}` : '—', contract?.hash ?? '']);
  row(layers, ['Tools', status.tools == null ? '—' : String(status.tools), '']);
  layer(layers, 'Herdr', status.herdr.ok, status.herdr.detail ?? '', status.herdr.fix);
  for (const box of document.querySelectorAll('input[data-site]')) box.checked = !!status.sites[box.dataset.site];
  const convs = $('conversations');
  convs.tBodies[0].replaceChildren();
  if (!status.conversations.length) row(convs, ['No bridged conversation open.']);
  for (const c of status.conversations) row(convs, [c.key, c.state]);
  document.body.dataset.ready = '1';
  return status;
}

for (const box of document.querySelectorAll('input[data-site]')) {
  box.addEventListener('change', async () => {
    const answer = await chrome.runtime.sendMessage({ type: 'h2w_set_site', site: box.dataset.site, enabled: box.checked });
    $('site-result').textContent = answer?.ok
      ? `${answer.site} is now ${answer.enabled ? 'on — reload its open tabs' : 'off'}.`
      : `Could not change the site: ${answer?.error ?? 'no answer'}`;
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
    result.textContent = `Saved: progress tick ${answer.settings.progressTickSec} s, cooldown ${answer.settings.progressFallbackSec} s.`;
    result.dataset.state = 'saved';
  } else {
    settingInputs[answer?.field]?.setAttribute('aria-invalid', 'true');
    result.textContent = `Not saved: ${answer?.detail ?? answer?.error ?? 'no answer from the service worker'}`;
    result.dataset.state = 'error';
  }
});

$('refresh').addEventListener('click', render);
render();
loadContinuitySettings();
