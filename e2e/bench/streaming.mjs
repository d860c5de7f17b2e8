// Streaming figures (run on demand, not a test): `node bench/streaming.mjs [kib] [chunkBytes]`
// A z.ai page in real Chromium with the real extension; a bridged task's reply grows to
// `kib` KiB (default 1024) in `chunkBytes` (default 1024) steps, one report per step, through
// the real content script -> service worker -> WASM path. Time is measured in the worker
// (from the message's arrival in WASM to its answer, `report_times`):
//  - delta: the content script sends what was appended (issue 26 item 1);
//  - whole: the same run's baseline, every report with the whole reply (the development
//    switch `herdrDevWholeSnapshots`, honoured only by an unpacked install);
//  - one-shot: the whole 1 MB reply in one report, and the report that takes it as finished
//    (parsed and its call run inside WASM; issue 26 item 2), three times.
// Per-poll time is printed at 10%, 50% and 100% of the reply (median of the polls near it).

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startStack, stopStack, openChat, userSends, until } from '../lib/harness.mjs';
import { MARKER, nextUserMessage } from '../lib/bridge-steps.mjs';
import { saveLog } from '../lib/artifacts.mjs';

const KIB = Number(process.argv[2] || 1024);
const CHUNK = Number(process.argv[3] || 1024);
const TOTAL = KIB * 1024;

// A reply as models write them: prose with a fenced example, ending with one call.
function replyText() {
  const call = '\n{"tool":"herdr_fs_read","args":{"path":"bench.txt"}}\n';
  const para = 'The build step compiles the worker, then the options page loads the catalog and shows it. ';
  const fence = '```json\n{"example": [1, 2, 3], "note": "not a call"}\n```\n';
  let text = '';
  while (text.length < TOTAL - call.length) text += (text.length % 8192 < 100 ? fence : '') + para + '\n';
  return text.slice(0, TOTAL - call.length) + call;
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor(s.length / 2)] : NaN;
};
const at = (times, fraction) => {
  const near = times.filter(([, len]) => Math.abs(len - fraction * TOTAL) <= 0.025 * TOTAL).map(([ms]) => ms);
  return +median(near).toFixed(4);
};

async function newTask(stack) {
  const page = await openChat(stack, 'https://chat.z.ai/');
  const since = stack.store.log.length;
  await userSends(page, 'Read bench.txt.');
  await nextUserMessage(stack.store, 'zai', (t) => t.includes(MARKER), { sinceIndex: since, what: 'the bridged task' });
  return page;
}

const reportTimes = (stack, clear = false) => stack.sw.evaluate((c) => globalThis.herdr.shell.report_times(c), clear);

// Asks the page's content script for a report and waits until the worker took one that
// holds `len` bytes of the reply.
async function pollUntil(stack, len) {
  await stack.sw.evaluate(
    async ({ len }) => {
      const [tab] = await chrome.tabs.query({ url: 'https://chat.z.ai/*', active: true });
      const tabs = tab ? [tab] : await chrome.tabs.query({ url: 'https://chat.z.ai/*' });
      const deadline = Date.now() + 15_000;
      let asked = 0;
      for (;;) {
        if (globalThis.herdr.shell.last_report_len() >= len) return;
        if (Date.now() > deadline) throw new Error(`no report of ${len} bytes`);
        if (asked++ % 20 === 0) for (const t of tabs) await chrome.tabs.sendMessage(t.id, { type: 'h2w_fold_now' }).catch(() => {});
        await new Promise((r) => setTimeout(r, 2));
      }
    },
    { len },
  );
}

async function grow(stack, text) {
  const page = await newTask(stack);
  await page.evaluate(() => window.__fixture.openReply());
  await reportTimes(stack, true);
  for (let i = 0; i < text.length; i += CHUNK) {
    const len = await page.evaluate((t) => window.__fixture.growReply(t), text.slice(i, i + CHUNK));
    await pollUntil(stack, len);
  }
  const times = (await reportTimes(stack, true)).filter(([, len]) => len > 0);
  await page.evaluate(() => window.__fixture.closeReply());
  await page.close();
  const total = times.reduce((a, [ms]) => a + ms, 0);
  return { polls: times.length, total_ms: +total.toFixed(2), per_poll_ms: { at_10: at(times, 0.1), at_50: at(times, 0.5), at_100: at(times, 1) } };
}

async function oneShot(stack, text) {
  const page = await newTask(stack);
  await reportTimes(stack, true);
  const len = await page.evaluate((t) => {
    window.__fixture.openReply();
    return window.__fixture.growReply(t);
  }, text);
  await pollUntil(stack, len);
  const [whole] = (await reportTimes(stack, false)).filter(([, l]) => l >= len);
  // Finished and settled (replyStableMs): the report that runs the call.
  const mark = stack.store.log.length;
  await page.evaluate(() => window.__fixture.closeReply());
  await until(() => stack.store.log.slice(mark).find((m) => m.role === 'user' && /TOOL_RESULT:/.test(m.text)), { timeoutMs: 20_000, what: 'the TOOL_RESULT of the one-shot reply' });
  const times = (await reportTimes(stack, true)).filter(([, l]) => l >= len);
  await page.close();
  return { report_with_1mb_ms: +whole[0].toFixed(3), slowest_report_ms: +Math.max(...times.map(([ms]) => ms)).toFixed(3), reports: times.length };
}

const stack = await startStack('bench-streaming', { sites: ['zai'] });
let figures;
try {
  writeFileSync(join(stack.project, 'bench.txt'), 'bench\n');
  const setStorage = (items) => stack.sw.evaluate((i) => chrome.storage.local.set(i), items);
  const text = replyText();
  const delta = await grow(stack, text);
  // The one-shot reply is taken as finished 300 ms after its last change.
  await setStorage({ herdrBridgeConfig: { replyStableMs: 300 } });
  const shots = [];
  for (let i = 0; i < 3; i++) shots.push(await oneShot(stack, text));
  const shot = {
    report_with_1mb_ms_median: median(shots.map((x) => x.report_with_1mb_ms)),
    report_with_1mb_ms_each: shots.map((x) => x.report_with_1mb_ms),
    slowest_report_ms_each: shots.map((x) => x.slowest_report_ms),
  };
  await setStorage({ herdrBridgeConfig: {} });
  await setStorage({ herdrDevWholeSnapshots: true });
  const whole = await grow(stack, text);
  await setStorage({ herdrDevWholeSnapshots: false });
  figures = {
    reply_bytes: text.length,
    chunk_bytes: CHUNK,
    delta,
    whole_snapshot_baseline: whole,
    total_ratio: +(whole.total_ms / delta.total_ms).toFixed(1),
    one_shot_1mb: shot,
  };
} finally {
  await stopStack(stack);
}
const out = JSON.stringify(figures, null, 2);
saveLog('bench-streaming', out);
console.log(out);
