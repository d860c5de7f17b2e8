// Launches Debian's Chromium (never a downloaded browser) with a fresh profile,
// optionally with the unpacked extension loaded. Flags as verified in TESTING.md.

import { chromium } from 'playwright-core';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const CHROMIUM = process.env.HERDR_E2E_CHROMIUM || '/usr/bin/chromium';

export async function launch({ extensionDir = null, userDataDir = mkdtempSync(join(tmpdir(), 'herdr-e2e-profile-')), env = undefined, lang = null } = {}) {
  const args = [
    '--no-sandbox',
    '--disable-gpu',
    '--no-first-run',
    '--disable-sync',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-quic',
  ];
  // The browser's UI language (chrome.i18n): `--lang` plus LANGUAGE in `env`, which Linux builds read.
  if (lang) args.push(`--lang=${lang}`);
  if (extensionDir) {
    args.push(`--disable-extensions-except=${extensionDir}`, `--load-extension=${extensionDir}`);
  }
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args,
    viewport: { width: 1100, height: 800 },
    ...(env ? { env } : {}),
  });
  return { context, userDataDir };
}

/// The extension's service worker (waits for it to start).
export async function serviceWorker(context, timeoutMs = 15_000) {
  const [existing] = context.serviceWorkers();
  if (existing) return existing;
  return context.waitForEvent('serviceworker', { timeout: timeoutMs });
}
