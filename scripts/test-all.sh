#!/usr/bin/env bash
# Runs every test of herdr-mcp on a fresh machine. Installs what it needs first,
# idempotently (a second run skips what is already there).
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "toolchain: wasm32-unknown-unknown target"
if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  rustup target add wasm32-unknown-unknown
fi

step "cargo test (workspace)"
cargo test --workspace --no-fail-fast

step "wasm32 build of ext-core and ext-adapters"
cargo build --target wasm32-unknown-unknown -p ext-core -p ext-adapters

step "all tests passed"
