// The runtime's Herdr protocol simulator (runtime/tests/herdr_sim) as a process for the
// browser e2e: `herdr_sim_server --serve <socket>` serves the Herdr API on a temp socket
// and takes one JSON command per stdin line, answering each with one JSON ack line.
// The binary is the `herdr_sim_server` test target; cargo tells where it is
// (`HERDR_E2E_HERDR_SIM` overrides, e.g. for a prebuilt copy).

import { spawn, execFileSync } from 'node:child_process';
import { createInterface } from 'node:readline';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const REPO = resolve(new URL('../..', import.meta.url).pathname);
const READY_TIMEOUT_MS = 10_000;
const ACK_TIMEOUT_MS = 10_000;

let cachedBinary = null;

/// Path of the simulator binary. `cargo test --no-run` builds it if needed (test-all.sh
/// has already built it, so this is a no-op there) and honours CARGO_TARGET_DIR.
export function herdrSimBinary() {
  if (process.env.HERDR_E2E_HERDR_SIM) return process.env.HERDR_E2E_HERDR_SIM;
  if (cachedBinary) return cachedBinary;
  const out = execFileSync(
    'cargo',
    ['test', '-p', 'herdr-mcp', '--test', 'herdr_sim_server', '--no-run', '--message-format=json'],
    { cwd: REPO, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 * 1024 * 1024 },
  );
  for (const line of out.split('\n')) {
    if (!line.startsWith('{')) continue;
    const msg = JSON.parse(line);
    if (msg.reason === 'compiler-artifact' && msg.target?.name === 'herdr_sim_server' && msg.executable) {
      cachedBinary = msg.executable;
    }
  }
  if (!cachedBinary || !existsSync(cachedBinary)) throw new Error('cargo did not report the herdr_sim_server test binary');
  return cachedBinary;
}

/// A running simulator. Commands are answered in order, so acks are matched FIFO.
export class HerdrSim {
  constructor(child, socket, dir) {
    this.child = child;
    this.socket = socket;
    this.dir = dir;
    this.pending = [];
    this.workspaces = new Set();
    this.stderr = '';
    this.exited = new Promise((r) => child.once('exit', (code, signal) => r({ code, signal })));
    child.stderr.on('data', (c) => (this.stderr += c));
    child.once('exit', () => {
      for (const p of this.pending.splice(0)) p.reject(new Error(`herdr simulator exited (stderr: ${this.stderr.slice(0, 500)})`));
    });
  }

  onLine(line) {
    const waiter = this.pending.shift();
    if (!waiter) return;
    clearTimeout(waiter.timer);
    let ack;
    try {
      ack = JSON.parse(line);
    } catch {
      return waiter.reject(new Error(`herdr simulator printed a non-JSON line: ${line}`));
    }
    if (ack.ok) waiter.resolve(ack);
    else waiter.reject(new Error(`herdr simulator refused ${waiter.what}: ${ack.error}`));
  }

  /// Sends one command object; resolves with its ack, rejects on an error ack.
  command(cmd) {
    if (this.child.exitCode !== null) return Promise.reject(new Error('herdr simulator is not running'));
    return new Promise((resolvePromise, reject) => {
      const what = JSON.stringify(cmd).slice(0, 200);
      const timer = setTimeout(() => {
        const i = this.pending.findIndex((p) => p.timer === timer);
        if (i >= 0) this.pending.splice(i, 1);
        reject(new Error(`no ack from the herdr simulator within ${ACK_TIMEOUT_MS} ms for ${what}`));
      }, ACK_TIMEOUT_MS);
      this.pending.push({ resolve: resolvePromise, reject, timer, what });
      this.child.stdin.write(`${JSON.stringify(cmd)}\n`);
    });
  }

  addWorkspace(id, label = id) {
    return this.command({ cmd: 'add_workspace', id, label });
  }

  addPane(workspace, pane, cwd) {
    return this.command({ cmd: 'add_pane', workspace, pane, cwd });
  }

  /// Workspace (created on first use), pane and agent in one go.
  async addAgent({ workspace = 'w1', label = workspace, pane, cwd, kind = 'claude', status = 'idle', name } = {}) {
    if (!this.workspaces.has(workspace)) {
      await this.addWorkspace(workspace, label);
      this.workspaces.add(workspace);
    }
    await this.addPane(workspace, pane, cwd);
    return this.command({ cmd: 'add_agent', pane, kind, status, ...(name ? { name } : {}) });
  }

  /// `output` becomes the pane's text before the status changes (what the runtime reads
  /// and pushes as `agent_output` after a settle).
  setStatus(pane, status, output) {
    return this.command({ cmd: 'set_status', pane, status, ...(output === undefined ? {} : { output }) });
  }

  /// The pane's terminal title (a working agent shows its current task there; the runtime's
  /// picture carries it, and progress ticks report it).
  setTitle(pane, title) {
    return this.command({ cmd: 'set_title', pane, title });
  }

  removeAgent(pane) {
    return this.command({ cmd: 'remove_agent', pane });
  }

  removePane(pane) {
    return this.command({ cmd: 'remove_pane', pane });
  }

  /// Open `events.subscribe` streams (the runtime holds some while it is live).
  async subscribers() {
    return (await this.command({ cmd: 'subscribers' })).count;
  }

  async stop() {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      await this.command({ cmd: 'stop' }).catch(() => {});
      const timer = setTimeout(() => this.child.kill('SIGKILL'), 5_000);
      await this.exited;
      clearTimeout(timer);
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/// Starts the simulator on a fresh temp socket; resolves once it listens.
export async function startHerdrSim() {
  const binary = herdrSimBinary();
  const dir = mkdtempSync(join(tmpdir(), 'herdr-sim-'));
  const socket = join(dir, 'herdr.sock');
  const child = spawn(binary, ['--serve', socket], { stdio: ['pipe', 'pipe', 'pipe'] });
  const sim = new HerdrSim(child, socket, dir);
  const lines = createInterface({ input: child.stdout });
  await new Promise((resolvePromise, reject) => {
    const timer = setTimeout(() => reject(new Error(`herdr simulator not ready within ${READY_TIMEOUT_MS} ms (stderr: ${sim.stderr})`)), READY_TIMEOUT_MS);
    child.once('error', (e) => {
      clearTimeout(timer);
      reject(new Error(`cannot start ${binary}: ${e.message}`));
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`herdr simulator exited with ${code} before it was ready (stderr: ${sim.stderr})`));
    });
    lines.once('line', (line) => {
      clearTimeout(timer);
      try {
        const ready = JSON.parse(line);
        if (ready.ready) resolvePromise();
        else reject(new Error(`unexpected first line from the herdr simulator: ${line}`));
      } catch {
        reject(new Error(`unexpected first line from the herdr simulator: ${line}`));
      }
    });
  });
  lines.on('line', (line) => sim.onLine(line));
  return sim;
}
