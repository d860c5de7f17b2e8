#!/usr/bin/env bash
# Runs every test of herdr-mcp on a fresh machine. Installs what it needs first,
# idempotently (a second run skips what is already there).
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "prerequisites: Node.js 20 or newer with npm (only the tests need them)"
node_major="$(node --version 2>/dev/null | sed -n 's/^v\([0-9]*\)\..*/\1/p')" || true
if [ -z "$node_major" ] || [ "$node_major" -lt 20 ] || ! command -v npm >/dev/null; then
  echo "test-all: the tests need Node.js 20 or newer with npm (found: $(node --version 2>/dev/null || echo no node))" >&2
  echo "  Debian/Ubuntu: https://github.com/nodesource/distributions, or a node from https://nodejs.org" >&2
  exit 2
fi

step "toolchain: wasm32 target and wasm-bindgen-cli matching Cargo.lock"
./scripts/wasm-toolchain.sh

step "toolchain: Chromium and its language packs from Debian (for the e2e tests)"
# chromium-l10n: Chromium runs in a UI language only with its locale pak (the zh-CN pages test).
if [ ! -x /usr/bin/chromium ] || ! dpkg -s chromium-l10n >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq chromium chromium-l10n >/dev/null
fi

step "e2e: node packages (npm ci from the committed lock file)"
if [ ! -d e2e/node_modules/playwright-core ] || [ e2e/package-lock.json -nt e2e/node_modules/.package-lock.json ]; then
  (cd e2e && npm ci --no-audit --no-fund)
fi

step "cargo test (workspace)"
cargo test --workspace --no-fail-fast

step "wasm32 build of ext-core and ext-adapters"
cargo build --target wasm32-unknown-unknown -p ext-core -p ext-adapters

step "build: the extension (dist/extension); the e2e uses the binaries cargo test built"
# `cargo test --workspace` already built target/debug/herdr-mcp and herdr-nmhost for their
# integration tests; a separate `cargo build` would compile rmcp/axum again with other features.
bin_dir="${CARGO_TARGET_DIR:-target}/debug"
for bin in herdr-mcp herdr-nmhost; do
  [ -x "$bin_dir/$bin" ] || cargo build -p "$bin"
done
scripts/build-extension.sh
# The Herdr simulator process the continuity e2e tests start (built by `cargo test` above;
# this only checks it is there, e2e/lib/herdr-sim.mjs asks cargo for its path the same way).
cargo test -p herdr-mcp --test herdr_sim_server --no-run

step "scripts/run.sh with the debug binaries in place of its release build (too slow for this command)"
scripts/test-run-sh.sh "$bin_dir"

step "scripts/package.sh: the tarball of the debug binaries, installed into a temp prefix, doctor --json from there"
scripts/test-package.sh "$bin_dir" dist/extension

step "e2e tests (real headless Chromium)"
(cd e2e && node --test --test-concurrency=1 tests/*.test.mjs)

step "all tests passed"
