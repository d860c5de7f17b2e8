#!/usr/bin/env bash
# Installs what building the browser extension needs, idempotently (a second run
# only checks): the wasm32-unknown-unknown target and wasm-bindgen-cli at the
# version Cargo.lock pins. Used by run.sh (the main job) and test-all.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  rustup target add wasm32-unknown-unknown
fi

wbg_version=$(awk '/^name = "wasm-bindgen"$/{getline; gsub(/version = |"/,""); print; exit}' Cargo.lock)
if [ "$(wasm-bindgen --version 2>/dev/null | awk '{print $2}')" != "$wbg_version" ]; then
  # Unlocked on purpose: the registry mirror lacks one of its pinned transitive versions.
  cargo install wasm-bindgen-cli --version "$wbg_version"
fi
