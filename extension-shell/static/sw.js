// Service worker bootstrap. Every listener is registered synchronously here, at top level, so
// Chrome can wake the worker for any event; each one waits for the WASM module and then hands
// the event to Rust (extension_shell.js, wasm-bindgen --target web). No decisions are made here.

import init, * as shell from './wasm/extension_shell.js';

const ready = init()
  .then(() => shell.start())
  .catch((error) => {
    console.error('herdr: the service worker failed to start', error);
    throw error;
  });

// The first event this worker instance received: which one made Chrome start it (diagnostics;
// the e2e test of the keep-alive alarm checks that the alarm did).
let wokenBy = null;
const received = (event) => {
  wokenBy ??= event;
};

chrome.runtime.onMessage.addListener((message, sender, sendResponse) => {
  received('message');
  ready
    .then(() => shell.handle_message(message, sender))
    .then(sendResponse, (error) => sendResponse({ ok: false, error: 'service-worker-failed', detail: String(error) }));
  return true; // the answer comes asynchronously
});

chrome.storage.onChanged.addListener((changes, area) => {
  received('storage');
  if (area === 'local') ready.then(() => shell.on_storage_changed(changes));
});

// The keep-alive alarm reopens the push stream after the worker slept.
chrome.alarms.onAlarm.addListener((alarm) => {
  received(`alarm:${alarm.name}`);
  ready.then(() => shell.on_alarm(alarm.name));
});

// Waking on install/startup is enough: start() (run by `ready`) restores everything.
chrome.runtime.onInstalled.addListener(() => {
  received('installed');
  return ready;
});
chrome.runtime.onStartup.addListener(() => {
  received('startup');
  return ready;
});

// For the status page's diagnostics and the on-demand figures script (e2e/bench).
globalThis.herdr = {
  ready,
  shell,
  get wokenBy() {
    return wokenBy;
  },
};
