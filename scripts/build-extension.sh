#!/usr/bin/env bash
# Builds the unpacked extension into dist/extension/ (load it with "Load unpacked").
#   scripts/build-extension.sh [--dev]   (--dev: debug WASM, faster to build)
# Needs the wasm32-unknown-unknown target and wasm-bindgen-cli at the Cargo.lock version;
# wasm-opt (binaryen) is used when present. Fails if the WASM exceeds the size budget.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

# Service-worker WASM, raw, without wasm-opt (optional). It was 1,677,531 bytes with the
# release profile and its function-name section; with the wasm-release profile (fat LTO, one
# codegen unit) and without the name section it is ~1.14 MB, so the budget leaves ~290 KB.
BUDGET_BYTES=$((1408 * 1024))
profile=wasm-release
[ "${1:-}" = "--dev" ] && profile=dev
target_dir="${CARGO_TARGET_DIR:-$root/target}"
# HERDR_EXTENSION_OUT: another output folder (the e2e harness takes it as HERDR_E2E_EXTENSION).
out="${HERDR_EXTENSION_OUT:-$root/dist/extension}"

want="$(awk '/^name = "wasm-bindgen"$/{getline; gsub(/version = |"/, ""); print; exit}' Cargo.lock)"
have="$(wasm-bindgen --version 2>/dev/null | awk '{print $2}')" || true
if [ "$have" != "$want" ]; then
  echo "build-extension: wasm-bindgen $want is needed (found '${have:-none}'): cargo install wasm-bindgen-cli --version $want" >&2
  exit 1
fi

# Optimised for size, every crate of the WASM (opt-level z, set here so the runtime's release
# profile in Cargo.toml is untouched): with wasm-opt -Oz, 1,122,945 -> 941,991 bytes
# (2026-12-02); the streaming and one-shot figures (e2e/bench/streaming.mjs) stay in budget.
size=()
if [ "$profile" != dev ]; then
  for key in 'opt-level' 'package."*".opt-level' 'package.extension-shell.opt-level' 'package.ext-core.opt-level' 'package.ext-adapters.opt-level'; do
    size+=(--config "profile.wasm-release.$key=\"z\"")
  done
fi
cargo build -p extension-shell --target wasm32-unknown-unknown --profile "$profile" "${size[@]}"
dir="$profile"; [ "$profile" = dev ] && dir=debug
wasm="$target_dir/wasm32-unknown-unknown/$dir/extension_shell.wasm"

rm -rf "$out"
mkdir -p "$out"
cp -R extension-shell/static/. "$out/"
# The function-name section is a quarter of the file and only names functions in a
# debugger's stack trace (panic messages keep their text and file:line); --dev keeps it.
names=(--remove-name-section); [ "$profile" = dev ] && names=()
wasm-bindgen "${names[@]}" --target web --no-typescript --out-dir "$out/wasm" "$wasm"
bg="$out/wasm/extension_shell_bg.wasm"
# wasm-opt from PATH, else the one e2e's npm install brings (binaryen in e2e/package.json).
wasm_opt="$(command -v wasm-opt || true)"
[ -z "$wasm_opt" ] && [ -x "$root/e2e/node_modules/.bin/wasm-opt" ] && wasm_opt="$root/e2e/node_modules/.bin/wasm-opt"
if [ "$profile" != dev ] && [ -n "$wasm_opt" ]; then
  "$wasm_opt" -Oz --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext --enable-mutable-globals -o "$bg.opt" "$bg" && mv "$bg.opt" "$bg"
  echo "  wasm-opt -Oz: $wasm_opt"
elif [ "$profile" != dev ]; then
  echo "  wasm-opt not found (npm install in e2e/ brings it): the WASM is not size-optimised"
fi

raw=$(wc -c < "$bg" | tr -d " ")  # wc, not GNU stat -c: also works on macOS and BSD
gz=$(gzip -9 -c "$bg" | wc -c)
printf 'build-extension: %s\n  service-worker WASM: %d bytes raw, %d bytes gzip (budget %d raw)\n' "$out" "$raw" "$gz" "$BUDGET_BYTES"
if [ "$profile" != dev ] && [ "$raw" -gt "$BUDGET_BYTES" ]; then
  echo "build-extension: the WASM is over its size budget" >&2
  exit 1
fi
echo "  extension id: $(grep -o '[a-p]\{32\}' extension-shell/EXTENSION_ID.md | head -1)"
