// Every e2e test leaves a screenshot (and the logs it collected) under e2e/artifacts/.

import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const ARTIFACTS = new URL('../artifacts/', import.meta.url).pathname;

export function artifactPath(name) {
  mkdirSync(ARTIFACTS, { recursive: true });
  return join(ARTIFACTS, name.replace(/[^A-Za-z0-9._-]+/g, '_'));
}

export async function screenshot(page, name) {
  await page.screenshot({ path: artifactPath(`${name}.png`), fullPage: true });
}

export function saveLog(name, text) {
  writeFileSync(artifactPath(`${name}.log`), text);
}
