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
out="$root/dist/extension"

want="$(awk '/^name = "wasm-bindgen"$/{getline; gsub(/version = |"/, ""); print; exit}' Cargo.lock)"
have="$(wasm-bindgen --version 2>/dev/null | awk '{print $2}')" || true
if [ "$have" != "$want" ]; then
  echo "build-extension: wasm-bindgen $want is needed (found '${have:-none}'): cargo install wasm-bindgen-cli --version $want" >&2
  exit 1
fi

cargo build -p extension-shell --target wasm32-unknown-unknown --profile "$profile"
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
if [ "$profile" != dev ] && command -v wasm-opt >/dev/null; then
  wasm-opt -Os --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext --enable-mutable-globals -o "$bg.opt" "$bg" && mv "$bg.opt" "$bg"
fi

raw=$(wc -c < "$bg" | tr -d " ")  # wc, not GNU stat -c: also works on macOS and BSD
gz=$(gzip -9 -c "$bg" | wc -c)
printf 'build-extension: %s\n  service-worker WASM: %d bytes raw, %d bytes gzip (budget %d raw)\n' "$out" "$raw" "$gz" "$BUDGET_BYTES"
if [ "$profile" != dev ] && [ "$raw" -gt "$BUDGET_BYTES" ]; then
  echo "build-extension: the WASM is over its size budget" >&2
  exit 1
fi
echo "  extension id: $(grep -o '[a-p]\{32\}' extension-shell/EXTENSION_ID.md | head -1)"
