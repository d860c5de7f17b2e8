// The extension's service worker stopped the way Chrome stops an idle MV3 worker (or kills it
// at any moment), and started again by the next extension event.
// A stopped worker loses everything in memory, its native port included, so the native host
// it had started exits too.
//
// Playwright keeps its handle of the worker across the stop (the DevTools target outlives the
// running instance) and touching it could start the worker again, so the worker's state is
// followed through the DevTools `ServiceWorker` domain instead, and a marker left in the old
// instance's memory proves the instance after the wake is a new one.

import { EXTENSION_ID, until, hostPids } from './harness.mjs';

const SCRIPT_URL = `chrome-extension://${EXTENSION_ID}/sw.js`;
const STATUS_TIMEOUT_MS = 15_000;
const MARKER = '__herdrE2eInstanceBeforeStop';

/// Follows the running status of the extension's worker (`running`, `stopping`, `stopped`, …).
async function watchWorker(stack) {
  // The ServiceWorker domain covers the whole profile; any page can host the session.
  const page = await stack.context.newPage();
  const cdp = await stack.context.newCDPSession(page);
  const watch = { page, cdp, status: null };
  cdp.on('ServiceWorker.workerVersionUpdated', ({ versions }) => {
    const ours = versions.filter((v) => v.scriptURL === SCRIPT_URL);
    if (ours.length) watch.status = ours[ours.length - 1].runningStatus;
  });
  await cdp.send('ServiceWorker.enable');
  return watch;
}

const statusIs = (watch, status) =>
  until(() => watch.status === status, { timeoutMs: STATUS_TIMEOUT_MS, what: `the service worker to be ${status} (last: ${watch.status})` });

/// Stops every service worker of the profile (`ServiceWorker.stopAllWorkers`) and waits until
/// the extension's is stopped. Hand the result to `wakeServiceWorker`.
export async function stopServiceWorker(stack) {
  await stack.sw.evaluate((marker) => {
    globalThis[marker] = true;
  }, MARKER);
  const watch = await watchWorker(stack);
  await statusIs(watch, 'running');
  await watch.cdp.send('ServiceWorker.stopAllWorkers');
  await statusIs(watch, 'stopped');
  return watch;
}

/// Runs `wake` (something that sends the extension an event: the popup opening, a content
/// script's message), waits until Chrome has started the worker for it and the new instance
/// has finished its start-up (storage restored, port and push stream opened). Resolves to
/// what `wake` returned.
export async function wakeServiceWorker(stack, watch, wake) {
  try {
    const woken = await wake();
    await statusIs(watch, 'running');
    const sw = stack.context.serviceWorkers().find((w) => w.url() === SCRIPT_URL);
    if (!sw) throw new Error(`no service worker ${SCRIPT_URL} after the wake`);
    await sw.evaluate(() => globalThis.herdr.ready);
    const same = await sw.evaluate((marker) => globalThis[marker] === true, MARKER);
    if (same) throw new Error('the service worker after the wake is the instance from before the stop');
    stack.sw = sw;
    return woken;
  } finally {
    await watch.cdp.detach().catch(() => {});
    await watch.page.close().catch(() => {});
  }
}

/// True while process `pid` exists.
export function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return error.code === 'EPERM';
  }
}

/// Stops the worker and waits until the native host it had started is gone (the push stream
/// is really down, not just unobserved). Hand `watch` to `wakeServiceWorker`.
export async function stopWorkerAndHost(stack) {
  const hosts = hostPids(stack);
  if (!hosts.length) throw new Error('no native host was running before the stop');
  const watch = await stopServiceWorker(stack);
  await until(() => hosts.every((pid) => !alive(pid)), { timeoutMs: 10_000, what: `the native host(s) ${hosts} to exit with the worker` });
  return { hosts, watch };
}
