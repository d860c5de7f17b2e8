// The official MCP conformance suite's *server* scenarios against the real runtime
// binary (loopback TCP with a bearer) and the real edge `/mcp` (a bearer from a real
// approval), for both wire revisions, 2025-11-25 and 2026-07-28. Every generic scenario
// must pass; the ones that cannot apply to a server with a fixed tool catalog are listed
// with their reason in e2e/CONFORMANCE.md (NOT_APPLICABLE below) and are not run.
//
// The suite has no option for a bearer, so a loopback proxy in this test adds
// `Authorization: Bearer …` to every request and passes everything else (Host, Origin,
// the MCP headers, streamed bodies) through unchanged.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createWriteStream, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { join } from 'node:path';
import { BIN_DIR, startRuntime, stopStack, until } from '../lib/harness.mjs';
import { launch } from '../lib/chromium.mjs';
import { startEdge, freePort, approveOnTerminal } from '../lib/edge.mjs';
import { runConformance, savedChecks } from '../lib/conformance.mjs';

const VERSIONS = ['2025-11-25', '2026-07-28'];

/// Scenarios of `conformance list` that need the suite's reference fixtures (tools such
/// as `test_simple_text`, resources, prompts, logging, completion, sampling, elicitation,
/// tasks): a server with herdr-mcp's fixed catalog has none of them. Reasons in
/// e2e/CONFORMANCE.md.
const NOT_APPLICABLE = new Set([
  'logging-set-level', 'completion-complete', 'tools-call-simple-text', 'tools-call-image', 'tools-call-audio',
  'tools-call-embedded-resource', 'tools-call-mixed-content', 'tools-call-with-logging', 'tools-call-error',
  'tools-call-with-progress', 'tools-call-sampling', 'tools-call-elicitation', 'json-schema-2020-12',
  'elicitation-sep1034-defaults', 'server-sse-polling', 'elicitation-sep1330-enums', 'resources-list',
  'resources-read-text', 'resources-read-binary', 'resources-templates-read', 'resources-subscribe',
  'resources-unsubscribe', 'sep-2164-resource-not-found', 'prompts-list', 'prompts-get-simple',
  'prompts-get-with-args', 'prompts-get-embedded-resource', 'prompts-get-with-image',
  'http-custom-header-server-validation',
]);

/// Checks inside generic scenarios that need what this server does not have: the
/// suite's diagnostic tools, prompts and resources (-32601 is MCP's answer for a
/// capability not advertised), or a `subscriptions/listen` stream. Each is listed with
/// its reason in e2e/CONFORMANCE.md; every other check must be SUCCESS.
const NOT_APPLICABLE_CHECKS = new Set([
  'sep-2575-server-rejects-undeclared-capability', 'sep-2575-missing-capability-http-400',
  'sep-2575-http-server-no-independent-requests-on-stream', 'sep-2575-server-no-log-without-loglevel',
  'sep-2575-server-sends-subscription-ack', 'sep-2575-server-tags-subscription-id',
  'sep-2575-server-honors-notification-filter', 'sep-2549-prompts-list-caching-hints',
  'sep-2549-resources-list-caching-hints', 'sep-2549-resources-templates-list-caching-hints',
]);

/// The generic scenarios, by the version they apply to (from `conformance list`).
const GENERIC = {
  '2025-11-25': ['server-initialize', 'server-session-lifecycle', 'ping', 'tools-list', 'server-sse-multiple-streams', 'dns-rebinding-protection'],
  '2026-07-28': [
    'server-stateless', 'tools-list', 'server-sse-multiple-streams', 'dns-rebinding-protection', 'caching',
    'http-header-validation',
  ],
};

/// A loopback proxy to `target` that adds the bearer to every request.
async function bearerProxy(target, token) {
  const upstream = new URL(target);
  const server = http.createServer((req, res) => {
    const headers = { ...req.headers, authorization: `Bearer ${token}` };
    const out = http.request(
      { hostname: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers },
      (answer) => {
        res.writeHead(answer.statusCode, answer.headers);
        answer.pipe(res);
      },
    );
    out.on('error', (e) => {
      res.writeHead(502, { 'content-type': 'text/plain' });
      res.end(String(e));
    });
    req.pipe(out);
    res.on('close', () => out.destroy());
  });
  const port = await freePort();
  await new Promise((r) => server.listen(port, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise((r) => { server.closeAllConnections(); server.close(r); }) };
}

/// Runs one scenario at one version; returns its checks and the summary line.
async function scenario(url, name, version, dir) {
  const suite = runConformance(['server', '--url', url, '--scenario', name, '--spec-version', version, '--output-dir', dir]);
  const code = await Promise.race([
    suite.exited,
    new Promise((_, reject) => setTimeout(() => reject(new Error(`${name} did not finish`)), 90_000).unref()),
  ]);
  const checks = savedChecks(dir);
  return { code, checks, output: suite.output() };
}

/// Every generic scenario at both versions against `url`; a summary per version.
async function runAll(target, url, logs) {
  const summaries = [];
  const failures = [];
  for (const version of VERSIONS) {
    let passed = 0;
    let failed = 0;
    let notApplicable = 0;
    for (const name of GENERIC[version]) {
      assert.ok(!NOT_APPLICABLE.has(name), name);
      const dir = join(logs, `conformance-${target}-${version}-${name}`);
      const { checks, output } = await scenario(url, name, version, dir);
      writeFileSync(join(logs, `conformance-${target}-${version}-${name}.out`), output);
      assert.ok(checks.length > 0, `${target} ${version} ${name}: no checks saved\n${output}`);
      for (const c of checks) {
        if (c.status === 'SUCCESS') passed++;
        else if (c.status === 'FAILURE' && NOT_APPLICABLE_CHECKS.has(c.id)) notApplicable++;
        else if (c.status === 'FAILURE') {
          failed++;
          failures.push(`${target} ${version} ${name}: ${c.id}: ${c.errorMessage ?? ''}`);
        }
      }
    }
    summaries.push(`${target} ${version}: ${passed} passed, ${failed} failed (${notApplicable} checks not applicable, see CONFORMANCE.md)`);
  }
  return { summaries, failures };
}

test('the conformance suite\'s server scenarios pass against the runtime over TCP with a bearer', { timeout: 600_000 }, async () => {
  const stack = await startRuntime('mcp-conformance-runtime');
  const token = randomBytes(32).toString('hex');
  const port = await freePort();
  const log = createWriteStream(join(stack.logs, 'runtime-tcp.log'));
  const runtime = spawn(join(BIN_DIR, 'herdr-mcp'), ['serve', '--socket', join(stack.tmp, 'tcp.sock'), '--listen', `127.0.0.1:${port}`, '--root', stack.project], {
    cwd: stack.project,
    env: { ...process.env, HERDR_MCP_TOKEN: token, HERDR_MCP_STATE_DIR: join(stack.tmp, 'state-tcp'), XDG_STATE_HOME: join(stack.tmp, 'state-tcp'), XDG_CONFIG_HOME: join(stack.tmp, 'config-tcp') },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  runtime.stdout.pipe(log);
  runtime.stderr.pipe(log);
  const exited = new Promise((r) => runtime.once('exit', r));
  let proxy;
  try {
    const base = `http://127.0.0.1:${port}`;
    await until(async () => runtime.exitCode === null && (await fetch(`${base}/health`).catch(() => null))?.ok, { what: `the runtime's /health on ${base}` });
    // Without the bearer the runtime refuses; the proxy adds it.
    assert.equal((await fetch(`${base}/mcp`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).status, 401);
    proxy = await bearerProxy(base, token);
    const { summaries, failures } = await runAll('runtime', `${proxy.url}/mcp`, stack.logs);
    writeFileSync(join(stack.logs, 'summary.txt'), summaries.join('\n') + '\n');
    console.log(summaries.join('\n'));
    assert.deepEqual(failures, []);
  } finally {
    await proxy?.close();
    if (runtime.exitCode === null) runtime.kill('SIGTERM');
    await exited;
    await stopStack(stack);
  }
});

test('the conformance suite\'s server scenarios pass against the edge /mcp with a bearer from a real approval', { timeout: 600_000 }, async () => {
  const stack = await startRuntime('mcp-conformance-edge');
  let edge;
  let browser;
  let proxy;
  // The scenario `dns-rebinding-protection` sends its valid request with a loopback
  // Origin: the edge's allow-list (configurable) holds ChatGPT's origins and, here, the
  // loopback ones; the evil Origin of the scenario stays refused (403).
  const origins = process.env.HERDR_EDGE_MCP_ALLOWED_ORIGINS;
  process.env.HERDR_EDGE_MCP_ALLOWED_ORIGINS = 'https://chatgpt.com,https://chat.openai.com,http://localhost:*,http://127.0.0.1:*';
  try {
    edge = await startEdge(stack);
    if (origins === undefined) delete process.env.HERDR_EDGE_MCP_ALLOWED_ORIGINS;
    else process.env.HERDR_EDGE_MCP_ALLOWED_ORIGINS = origins;
    const callback = await freePort();
    const redirectUri = `http://127.0.0.1:${callback}/callback`;
    const registered = await fetch(`${edge.issuer}/oauth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ redirect_uris: [redirectUri], client_name: 'MCP conformance suite', token_endpoint_auth_method: 'none' }),
    });
    assert.equal(registered.status, 201);
    const client = await registered.json();
    const verifier = randomBytes(32).toString('base64url');
    const { createHash } = await import('node:crypto');
    const challenge = createHash('sha256').update(verifier).digest('base64url');
    const authorize = new URL(`${edge.issuer}/oauth/authorize`);
    for (const [k, v] of Object.entries({
      response_type: 'code', client_id: client.client_id, redirect_uri: redirectUri, code_challenge: challenge,
      code_challenge_method: 'S256', state: 'conformance', resource: `${edge.issuer}/mcp`,
    })) authorize.searchParams.set(k, v);

    // The suite's callback is not running here: a tiny one catches the code.
    let code;
    const catcher = http.createServer((req, res) => {
      code = new URL(req.url, redirectUri).searchParams.get('code');
      res.end('ok');
    });
    await new Promise((r) => catcher.listen(callback, '127.0.0.1', r));
    try {
      ({ context: browser } = await launch());
      const page = await browser.newPage();
      await page.goto(authorize.href);
      const shown = (await page.textContent('#code')).trim();
      const requestId = (await page.textContent('#request-id code')).trim();
      const approval = await approveOnTerminal({ edge, socket: stack.socket, requestId, code: shown });
      assert.match(approval, /Approved: connector conn_/);
      await until(() => code, { timeoutMs: 30_000, what: 'the authorization code at the callback' });
    } finally {
      catcher.close();
    }
    const tokenResponse = await fetch(`${edge.issuer}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'authorization_code', code, redirect_uri: redirectUri, client_id: client.client_id, code_verifier: verifier, resource: `${edge.issuer}/mcp` }),
    });
    assert.equal(tokenResponse.status, 200);
    const { access_token: accessToken } = await tokenResponse.json();
    assert.ok(accessToken);

    proxy = await bearerProxy(edge.issuer, accessToken);
    const { summaries, failures } = await runAll('edge', `${proxy.url}/mcp`, stack.logs);
    writeFileSync(join(stack.logs, 'summary.txt'), summaries.join('\n') + '\n');
    console.log(summaries.join('\n'));
    assert.deepEqual(failures, []);
  } finally {
    await proxy?.close();
    await browser?.close();
    await edge?.stop();
    await stopStack(stack);
  }
});
