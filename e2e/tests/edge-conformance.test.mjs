// The official MCP conformance suite's authorization-server scenarios against the edge
// (`herdr-mcp edge serve` on a loopback issuer): the metadata document, then a full
// authorization-code grant. The suite prints an authorize URL for "a browser" and waits
// on its own callback port; here headless Chromium opens it, so the edge's real
// approval page runs its own polling script, and the operator's step is the real
// `herdr-mcp connector approve` typed on a terminal with the code the page shows.
// No test-only switch on the edge is involved. Results: e2e/CONFORMANCE.md.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import { startRuntime, stopStack, until } from '../lib/harness.mjs';
import { launch } from '../lib/chromium.mjs';
import { startEdge, freePort, approveOnTerminal } from '../lib/edge.mjs';
import { runConformance, savedChecks } from '../lib/conformance.mjs';

/// The checks the two scenarios emit; each must be there and pass.
const EXPECTED_CHECKS = ['authorization-server-metadata', 'authorization-server-metadata-cimd', 'authorization-code-grant'];

test('the conformance suite\'s authorization-server scenarios pass against the edge', { timeout: 240_000 }, async () => {
  // connector approve first checks that the workstation's runtime answers.
  const stack = await startRuntime('edge-conformance');
  let edge;
  let browser;
  let suite;
  try {
    edge = await startEdge(stack);
    const callbackPort = await freePort();
    const redirectUri = `http://127.0.0.1:${callbackPort}/callback`;
    const registered = await fetch(`${edge.issuer}/oauth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ redirect_uris: [redirectUri], client_name: 'MCP conformance suite' }),
    });
    assert.equal(registered.status, 201);
    const client = await registered.json();

    const results = join(stack.logs, 'conformance');
    suite = runConformance([
      'authorization',
      '--url', edge.issuer,
      '--client-id', client.client_id,
      '--resource', `${edge.issuer}/mcp`,
      '--port', String(callbackPort),
      '--output-dir', results,
    ]);
    const authorizeUrl = await until(
      () => suite.output().match(/^(http:\/\/127\.0\.0\.1:\d+\/oauth\/authorize\?\S+)$/m)?.[1],
      { timeoutMs: 60_000, what: 'the authorize URL from the conformance suite' },
    );

    ({ context: browser } = await launch());
    const page = await browser.newPage();
    await page.goto(authorizeUrl);
    // An authorize error redirects straight to the callback; the suite reports it below.
    if (!page.url().startsWith(`${redirectUri}?`)) {
      const code = (await page.textContent('#code')).trim();
      const requestId = (await page.textContent('#request-id code')).trim();
      assert.match(code, /^\d{6}$/);
      const approval = await approveOnTerminal({ edge, socket: stack.socket, requestId, code });
      assert.match(approval, /Approved: connector conn_/);
      // The page's own poll sees the approval and goes to the suite's callback.
      await page.waitForURL((url) => url.href.startsWith(`${redirectUri}?`), { timeout: 30_000 });
    }
    await page.screenshot({ path: join(stack.logs, 'callback.png') });

    const exitCode = await Promise.race([
      suite.exited,
      new Promise((_, reject) => setTimeout(() => reject(new Error('the conformance suite did not exit')), 60_000).unref()),
    ]);
    const checks = savedChecks(results);
    const summary = checks.map((c) => `${c.id}: ${c.status}${c.errorMessage ? ` (${c.errorMessage})` : ''}`);
    assert.deepEqual([...new Set(checks.map((c) => c.id))].sort(), [...EXPECTED_CHECKS].sort(), summary.join('\n'));
    assert.deepEqual(checks.filter((c) => c.status !== 'SUCCESS'), [], summary.join('\n'));
    assert.equal(exitCode, 0, suite.output());
  } finally {
    if (suite) {
      writeFileSync(join(stack.logs, 'conformance.out'), suite.output());
      if (suite.child.exitCode === null) suite.child.kill('SIGTERM');
    }
    await browser?.close().catch(() => {});
    await edge?.stop();
    await stopStack(stack);
  }
});
