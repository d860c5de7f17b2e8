// The real stack for one e2e test: the built runtime (`herdr-mcp serve`) on a temp Unix socket
// with a temp git repo as its root, the native host registered in a fresh Chromium profile by
// `herdr-nmhost install --user-data-dir`, and Chromium with the unpacked extension from
// dist/extension/. Logs of every process end up in e2e/artifacts/<test>/.

import { spawn, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync, chmodSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { launch, serviceWorker } from './chromium.mjs';
import { installFixtureSites } from './fixture-sites.mjs';
import { artifactPath } from './artifacts.mjs';
import { startHerdrSim } from './herdr-sim.mjs';

export const REPO = resolve(new URL('../..', import.meta.url).pathname);
export const EXTENSION_DIR = process.env.HERDR_E2E_EXTENSION || join(REPO, 'dist/extension');
export const BIN_DIR = process.env.HERDR_E2E_BIN_DIR || join(process.env.CARGO_TARGET_DIR || join(REPO, 'target'), 'debug');
export const EXTENSION_ID = readFileSync(join(REPO, 'extension-shell/EXTENSION_ID.md'), 'utf8').match(/\b[a-p]{32}\b/)[0];

/// Polls `probe` until it returns a truthy value; throws with `what` after `timeoutMs`.
export async function until(probe, { timeoutMs = 15_000, intervalMs = 50, what = 'condition' } = {}) {
  const end = Date.now() + timeoutMs;
  let last;
  while (Date.now() < end) {
    try {
      last = await probe();
      if (last) return last;
    } catch (error) {
      last = error;
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${last instanceof Error ? last.message : JSON.stringify(last)})`);
}

function checkBuilt({ extension = true } = {}) {
  for (const bin of ['herdr-mcp', 'herdr-nmhost']) {
    if (!existsSync(join(BIN_DIR, bin))) throw new Error(`${join(BIN_DIR, bin)} is missing: run cargo build -p herdr-mcp -p herdr-nmhost`);
  }
  if (extension && (!existsSync(join(EXTENSION_DIR, 'manifest.json')) || !existsSync(join(EXTENSION_DIR, 'wasm/extension_shell_bg.wasm')))) {
    throw new Error(`${EXTENSION_DIR} is not built: run scripts/build-extension.sh`);
  }
}

/// A git repo with files the scripted model asks about.
function makeProject(dir) {
  mkdirSync(dir, { recursive: true });
  execFileSync('git', ['init', '-q', dir]);
  return dir;
}

/// One HTTP request to the runtime over its Unix socket.
export function socketRequest(socketPath, { method = 'GET', path = '/health', body = null, headers = {} } = {}) {
  return new Promise((resolvePromise, reject) => {
    const req = request({ socketPath, method, path, headers: { host: 'localhost', ...headers } }, (res) => {
      let data = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (data += c));
      res.on('end', () => resolvePromise({ status: res.statusCode, body: data }));
    });
    req.on('error', reject);
    if (body) req.write(body);
    req.end();
  });
}

/// tools/list straight from the runtime (what the preamble must show).
export async function runtimeToolNames(socketPath) {
  const res = await socketRequest(socketPath, {
    method: 'POST',
    path: '/mcp',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-11-25' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
  });
  const payload = res.body.includes('data:')
    ? JSON.parse(res.body.split('\n').filter((l) => l.startsWith('data:')).pop().slice(5))
    : JSON.parse(res.body);
  return payload.result.tools.map((t) => t.name);
}

/// Starts (again, after `restartRuntime`) `herdr-mcp serve` for `stack` on its socket,
/// root and state dir; with a Herdr simulator, the runtime talks to it instead of any
/// Herdr of the machine.
async function spawnRuntime(stack) {
  const { tmp, project, socket, logs } = stack;
  const herdrEnv = stack.herdrSim ? { HERDR_SOCKET_PATH: stack.herdrSim.socket, HERDR_MCP_AGENT_ALLOW: 'all' } : {};
  const runtime = spawn(join(BIN_DIR, 'herdr-mcp'), ['serve', '--socket', socket, '--root', project, '--log-file', join(logs, 'runtime.log')], {
    cwd: project,
    env: { ...process.env, HERDR_MCP_LOG: 'debug', HERDR_MCP_STATE_DIR: join(tmp, 'state'), XDG_STATE_HOME: join(tmp, 'state'), XDG_CONFIG_HOME: join(tmp, 'config'), ...herdrEnv },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let runtimeStderr = '';
  runtime.stderr.on('data', (c) => (runtimeStderr += c));
  stack.runtime = runtime;
  await until(async () => (await socketRequest(socket)).status === 200, {
    timeoutMs: 15_000,
    what: `the runtime's /health on ${socket} (stderr: ${runtimeStderr.slice(0, 500)})`,
  });
}

async function endRuntime(stack) {
  const { runtime } = stack;
  if (!runtime || runtime.exitCode !== null || runtime.signalCode !== null) return;
  const exited = new Promise((r) => runtime.once('exit', r));
  runtime.kill('SIGTERM');
  await exited;
}

/// Stops the runtime (what a runtime that is not running looks like to the extension);
/// `restartRuntime` brings it back.
export async function stopRuntime(stack) {
  await endRuntime(stack);
}

/// Kills the runtime and starts it again on the same socket and state dir (what a
/// crash or an upgrade looks like to the native host and the extension).
export async function restartRuntime(stack) {
  await endRuntime(stack);
  await spawnRuntime(stack);
}

/// The runtime alone (no browser), optionally with a Herdr simulator (`herdr: true`):
/// for tests of the runtime's side of an e2e flow. Stop with `stopStack`.
export async function startRuntime(name, { herdr = false, extension = false } = {}) {
  checkBuilt({ extension });
  const logs = artifactPath(name);
  rmSync(logs, { recursive: true, force: true });
  mkdirSync(logs, { recursive: true });
  const tmp = mkdtempSync(join(tmpdir(), 'herdr-e2e-'));
  const project = makeProject(join(tmp, 'project'));
  const socket = join(tmp, 'runtime.sock');
  const stack = { name, tmp, project, socket, logs, runtime: null, herdrSim: null, pages: [], consoleLines: [] };
  try {
    if (herdr) stack.herdrSim = await startHerdrSim();
    await spawnRuntime(stack);
  } catch (error) {
    await stopStack(stack);
    throw error;
  }
  return stack;
}

/// Starts runtime + Chromium (+ host registration) for test `name`; `herdr: true` puts
/// a Herdr simulator (`stack.herdrSim`) behind the runtime.
/// `lang` (e.g. 'zh-CN') starts Chromium with that UI language.
export async function startStack(name, { sites = [], herdr = false, lang = null } = {}) {
  const stack = await startRuntime(name, { herdr, extension: true });
  const { tmp, logs, socket } = stack;
  try {
    const profile = join(tmp, 'profile');
    mkdirSync(profile);
    // The host's stderr (its log) goes to the artifacts through a wrapper the manifest points at.
    const wrapper = join(tmp, 'herdr-nmhost-logged');
    // Its pid is recorded so a test can cut the port by ending exactly that process.
    writeFileSync(wrapper, `#!/bin/sh\necho $$ >> "${join(tmp, 'host.pids')}"\nexec "${join(BIN_DIR, 'herdr-nmhost')}" "$@" 2>>"${join(logs, 'nmhost.log')}"\n`);
    chmodSync(wrapper, 0o755);
    execFileSync(join(BIN_DIR, 'herdr-nmhost'), ['install', '--user-data-dir', profile, '--binary', wrapper], { stdio: 'pipe' });

    const env = { ...process.env, HERDR_EXTENSION_IPC_SOCKET: socket, HERDR_NMHOST_LOG: 'debug' };
    if (lang) Object.assign(env, { LANGUAGE: lang.replace('-', '_'), LANG: `${lang.replace('-', '_')}.UTF-8` });
    const { context } = await launch({ extensionDir: EXTENSION_DIR, userDataDir: profile, env, lang });
    stack.context = context;
    stack.store = await installFixtureSites(context);
    const sw = await serviceWorker(context);
    stack.sw = sw;
    sw.on('console', (m) => stack.consoleLines.push(`[sw ${m.type()}] ${m.text()}`));
    await sw.evaluate(() => globalThis.herdr.ready);
    for (const site of sites) await enableSite(stack, site);
  } catch (error) {
    await stopStack(stack);
    throw error;
  }
  return stack;
}

/// Clicks the site's switch on the options page, as a user would.
export async function enableSite(stack, slug, on = true) {
  const page = await stack.context.newPage();
  await page.goto(`chrome-extension://${EXTENSION_ID}/options/options.html`);
  await page.waitForSelector('body[data-ready="1"]', { timeout: 15_000 });
  const box = page.locator(`#site-${slug}`);
  if ((await box.isChecked()) !== on) await box.click();
  await page.waitForSelector(`#site-result[data-state="${slug}:${on ? 'on' : 'off'}"]`, { timeout: 10_000 });
  await page.close();
}

/// Opens an extension page (options) for settings and checks made from an extension context.
export async function extensionPage(stack) {
  const page = await stack.context.newPage();
  await page.goto(`chrome-extension://${EXTENSION_ID}/options/options.html`);
  await page.waitForSelector('body[data-ready="1"]', { timeout: 15_000 });
  return page;
}

/// Opens a chat page and waits for the fixture and (unless `bridged` is false) the bridge.
export async function openChat(stack, url, { bridged = true } = {}) {
  const page = await stack.context.newPage();
  page.on('console', (m) => stack.consoleLines.push(`[page ${m.type()}] ${m.text()}`));
  stack.pages.push(page);
  await page.goto(url);
  await page.waitForFunction(() => document.documentElement.dataset.fixtureReady === '1');
  if (bridged) await page.waitForFunction(() => document.documentElement.dataset.herdrBridge === 'ready', null, { timeout: 15_000 });
  return page;
}

/// The user types `text` and presses Enter.
export async function userSends(page, text) {
  const composer = page.locator('textarea').first();
  await composer.fill(text);
  await composer.press('Enter');
}

export async function swState(stack) {
  return stack.sw.evaluate(() => globalThis.herdr.shell.debug_state());
}

export async function conversationState(stack, key) {
  const state = await swState(stack);
  return state.conversations.find((c) => c.key === key) || null;
}

/// Saves screenshots of every open chat page and the collected logs, then stops everything.
export async function stopStack(stack) {
  if (!stack) return;
  try {
    if (stack.context) {
      let i = 0;
      for (const page of stack.pages) {
        if (!page.isClosed()) await page.screenshot({ path: join(stack.logs, `page-${i++}.png`), fullPage: true }).catch(() => {});
      }
      const state = await swState(stack).catch((e) => ({ error: String(e) }));
      writeFileSync(join(stack.logs, 'sw-state.json'), JSON.stringify(state, null, 2));
      writeFileSync(join(stack.logs, 'console.log'), stack.consoleLines.join('\n'));
      writeFileSync(join(stack.logs, 'conversations.json'), JSON.stringify(stack.store?.log ?? [], null, 2));
    }
  } finally {
    await stack.context?.close().catch(() => {});
    await endRuntime(stack);
    if (stack.herdrSim) {
      writeFileSync(join(stack.logs, 'herdr-sim.stderr.log'), stack.herdrSim.stderr);
      await stack.herdrSim.stop();
    }
    rmSync(stack.tmp, { recursive: true, force: true });
  }
}

/// Pids of the native host processes Chromium started for this stack, oldest first.
export function hostPids(stack) {
  const file = join(stack.tmp, 'host.pids');
  return existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean).map(Number) : [];
}
