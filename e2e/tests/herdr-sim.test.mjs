// The Herdr simulator process behind the real runtime: the runtime sees the simulated
// agents (`/push/state`), streams their status changes and settled output
// (`/push/events`), and picks the same state up again after a restart. No browser:
// this checks the test bed the continuity tests stand on.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { startRuntime, stopStack, restartRuntime, socketRequest, until } from '../lib/harness.mjs';

let stack;

before(async () => {
  stack = await startRuntime('herdr-sim', { herdr: true });
});

after(async () => {
  await stopStack(stack);
});

async function pushState() {
  const res = await socketRequest(stack.socket, { path: '/push/state' });
  assert.equal(res.status, 200, res.body);
  return JSON.parse(res.body);
}

function agentOf(state, pane) {
  return state.agents.find((a) => a.pane === pane);
}

/// An open `/push/events` stream: parsed `{event, data}` blocks as they arrive.
function openPushEvents(socketPath) {
  const events = [];
  const waiters = [];
  let buffer = '';
  const req = request({ socketPath, path: '/push/events', headers: { host: 'localhost', accept: 'text/event-stream' } });
  const opened = new Promise((resolvePromise, reject) => {
    req.on('error', reject);
    req.on('response', (res) => {
      if (res.statusCode !== 200) return reject(new Error(`/push/events answered ${res.statusCode}`));
      res.setEncoding('utf8');
      res.on('data', (chunk) => {
        buffer += chunk;
        let end;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const event = block.match(/^event: ?(.*)$/m)?.[1];
          const data = block.match(/^data: ?(.*)$/m)?.[1];
          if (!event || data === undefined) continue;
          events.push({ event, data: JSON.parse(data) });
          for (const w of waiters.splice(0)) w();
        }
      });
      resolvePromise();
    });
  });
  req.end();
  return {
    opened,
    events,
    close: () => req.destroy(),
    /// The first event (at or after `from`) matching `pred`, waiting event-driven up to `timeoutMs`.
    async next(pred, { from = 0, timeoutMs = 15_000, what = 'push event' } = {}) {
      const end = Date.now() + timeoutMs;
      for (;;) {
        const found = events.slice(from).find(pred);
        if (found) return found;
        const left = end - Date.now();
        if (left <= 0) throw new Error(`timed out waiting for ${what}; got ${JSON.stringify(events.map((e) => e.event))}`);
        await new Promise((r) => {
          const timer = setTimeout(r, left);
          waiters.push(() => {
            clearTimeout(timer);
            r();
          });
        });
      }
    },
  };
}

test('the runtime sees simulated agents, streams their settle with output, and again after a restart', async () => {
  const sim = stack.herdrSim;
  await sim.addAgent({ workspace: 'w1', label: 'repo', pane: 'w1:p1', cwd: stack.project, name: 'builder', status: 'idle' });
  let state = await until(async () => {
    const s = await pushState();
    return s.herdr_live === true && agentOf(s, 'w1:p1')?.status === 'idle' ? s : null;
  }, { what: 'w1:p1 idle in /push/state' });
  assert.equal(agentOf(state, 'w1:p1').name, 'builder');
  assert.deepEqual(state.workspaces.map((w) => [w.id, w.label]), [['w1', 'repo']]);
  // The runtime follows the simulator's events (its subscription is open).
  await until(async () => (await sim.subscribers()) > 0, { what: "the runtime's Herdr subscription" });

  const stream = openPushEvents(stack.socket);
  await stream.opened;
  const hello = await stream.next((e) => e.event === 'hello', { what: 'hello' });
  assert.equal(hello.data.agents.find((a) => a.pane === 'w1:p1')?.status, 'idle');

  await sim.setStatus('w1:p1', 'working');
  const working = await stream.next((e) => e.event === 'agent_working' && e.data.pane === 'w1:p1', { what: 'agent_working' });
  assert.equal(working.data.workspace, 'w1');

  await sim.setStatus('w1:p1', 'done', 'built 3 crates\nall 12 tests passed');
  const settled = await stream.next((e) => e.event === 'agent_settled' && e.data.pane === 'w1:p1', { what: 'agent_settled' });
  assert.equal(settled.data.status, 'done');
  const output = await stream.next((e) => e.event === 'agent_output' && e.data.pane === 'w1:p1', { what: 'agent_output' });
  assert.match(output.data.output, /all 12 tests passed$/);
  stream.close();

  // A restarted runtime finds the same agent, in its settled state, on the same socket.
  await restartRuntime(stack);
  state = await until(async () => {
    const s = await pushState();
    return s.herdr_live === true && agentOf(s, 'w1:p1') ? s : null;
  }, { what: 'w1:p1 after the restart' });
  assert.equal(agentOf(state, 'w1:p1').status, 'done');
  // Herdr's state_change_seq: 1 when detected, +1 for working, +1 for done.
  assert.equal(agentOf(state, 'w1:p1').seq, 3);

  await sim.removePane('w1:p1');
  await until(async () => !agentOf(await pushState(), 'w1:p1'), { what: 'w1:p1 gone from /push/state' });
});

test('the simulator refuses a mistaken command with a clear error and keeps serving', async () => {
  const sim = stack.herdrSim;
  await assert.rejects(sim.setStatus('nope:p9', 'done'), /no agent on pane "nope:p9"/);
  await assert.rejects(sim.command({ cmd: 'set_status', pane: 'w1:p1', status: 'sleeping' }), /unknown status "sleeping"|no agent/);
  await assert.rejects(sim.command({ cmd: 'fly' }), /bad command/);
  assert.equal(typeof (await sim.subscribers()), 'number');
});
