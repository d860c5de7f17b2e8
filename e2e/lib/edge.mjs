// The edge as an operator runs it on one machine: `herdr-mcp edge init` + `edge serve`
// on a loopback port (http is allowed for a loopback issuer), and `herdr-mcp connector
// approve` typed on a real terminal. approve reads the code from /dev/tty only, so it
// runs under util-linux `script`, which gives it a pseudo-terminal fed from our pipe.

import { spawn, execFileSync } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { BIN_DIR, until } from './harness.mjs';

const BIN = join(BIN_DIR, 'herdr-mcp');

/// A loopback port free right now (the edge's issuer must name its port before it listens).
export function freePort() {
  return new Promise((resolvePromise, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolvePromise(port));
    });
  });
}

/// `edge init` + `edge serve` with state in `<stack.tmp>/edge`; resolves once /health answers.
export async function startEdge(stack) {
  const dir = join(stack.tmp, 'edge');
  const port = await freePort();
  const issuer = `http://127.0.0.1:${port}`;
  execFileSync(BIN, ['edge', 'init', '--edge-dir', dir]);
  const log = createWriteStream(join(stack.logs, 'edge.log'));
  const child = spawn(BIN, ['edge', 'serve', '--issuer', issuer, '--listen', `127.0.0.1:${port}`, '--edge-dir', dir], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout.pipe(log);
  child.stderr.pipe(log);
  const exited = new Promise((r) => child.once('exit', r));
  const edge = {
    issuer,
    dir,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
  try {
    await until(async () => child.exitCode === null && (await fetch(`${issuer}/health`)).ok, { what: `the edge's /health on ${issuer}` });
  } catch (error) {
    await edge.stop();
    throw error;
  }
  return edge;
}

const shellQuote = (s) => `'${String(s).replaceAll("'", `'\\''`)}'`;

/// Runs `herdr-mcp connector approve <requestId>` on a pseudo-terminal and types `code`
/// once it asks; resolves with everything it printed, rejects if it fails.
export function approveOnTerminal({ edge, socket, requestId, code, timeoutMs = 30_000 }) {
  const command = [BIN, 'connector', 'approve', requestId, '--socket', socket, '--edge-dir', edge.dir].map(shellQuote).join(' ');
  const child = spawn('script', ['--quiet', '--return', '--command', command, '/dev/null'], { stdio: ['pipe', 'pipe', 'pipe'] });
  let output = '';
  let typed = false;
  return new Promise((resolvePromise, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`connector approve did not finish in ${timeoutMs} ms:\n${output}`));
    }, timeoutMs);
    const collect = (chunk) => {
      output += chunk;
      if (!typed && output.includes('Enter the 6-digit code')) {
        typed = true;
        child.stdin.write(`${code}\n`);
      }
    };
    child.stdout.setEncoding('utf8').on('data', collect);
    child.stderr.setEncoding('utf8').on('data', collect);
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.once('exit', (status) => {
      clearTimeout(timer);
      child.stdin.destroy();
      if (status === 0) resolvePromise(output);
      else reject(new Error(`connector approve exited with ${status}:\n${output}`));
    });
  });
}
