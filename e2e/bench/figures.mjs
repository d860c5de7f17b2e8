// Figures (run on demand, not a test): `node bench/figures.mjs [calls] [coldStarts]`
//  - round trip of a herdr_fs_read (4 KiB) from the service worker through the persistent
//    native port, herdr-nmhost and the runtime and back: p50/p99 over N calls;
//  - the same call through one-shot sendNativeMessage (a new host process each time);
//  - service-worker cold start to catalog ready (fresh browser launches).
// Uses the same built binaries and dist/extension as the e2e tests.

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startStack, stopStack } from '../lib/harness.mjs';
import { saveLog } from '../lib/artifacts.mjs';

const CALLS = Number(process.argv[2] || 200);
const COLD_STARTS = Number(process.argv[3] || 5);

const pct = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
const summary = (ms) => {
  const s = [...ms].sort((a, b) => a - b);
  return { n: s.length, p50: +pct(s, 50).toFixed(3), p99: +pct(s, 99).toFixed(3), min: +s[0].toFixed(3), max: +s.at(-1).toFixed(3) };
};

async function roundTrips() {
  const stack = await startStack('bench-roundtrip');
  try {
    writeFileSync(join(stack.project, 'bench.txt'), `${'x'.repeat(63)}\n`.repeat(64)); // 4 KiB
    return await stack.sw.evaluate(async (n) => {
      const { shell } = globalThis.herdr;
      const args = { path: 'bench.txt' };
      const run = async (fn, check) => {
        const times = [];
        for (let i = 0; i < n; i++) {
          const t0 = performance.now();
          const r = await fn();
          times.push(performance.now() - t0);
          if (!check(r)) throw new Error(`call ${i} failed: ${JSON.stringify(r).slice(0, 300)}`);
        }
        return times;
      };
      await shell.call_tool('herdr_fs_read', args); // warm the port and the runtime
      const persistent = await run(() => shell.call_tool('herdr_fs_read', args), (r) => r.kind === 'ok' && JSON.stringify(r.result).includes('xxxx'));
      const oneshot = await run(() => shell.call_tool_oneshot('herdr_fs_read', args), (r) => r.ok === true && r.status === 200 && r.body.includes('xxxx'));
      return { persistent, oneshot };
    }, CALLS);
  } finally {
    await stopStack(stack);
  }
}

async function coldStarts() {
  const times = [];
  for (let i = 0; i < COLD_STARTS; i++) {
    const stack = await startStack(`bench-cold-${i}`);
    try {
      // performance.now() in the worker counts from the worker's own start.
      times.push(await stack.sw.evaluate(async () => {
        await globalThis.herdr.ready;
        const r = await globalThis.herdr.shell.catalog_ready();
        if (!r.ok) throw new Error(JSON.stringify(r));
        return performance.now();
      }));
    } finally {
      await stopStack(stack);
    }
  }
  return times;
}

const { persistent, oneshot } = await roundTrips();
const cold = await coldStarts();
const figures = {
  persistent_port_ms: summary(persistent),
  oneshot_sendNativeMessage_ms: summary(oneshot),
  p50_speedup: +(summary(oneshot).p50 / summary(persistent).p50).toFixed(1),
  sw_cold_start_to_catalog_ms: summary(cold),
};
const text = JSON.stringify(figures, null, 2);
saveLog('bench-figures', text);
console.log(text);
