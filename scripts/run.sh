#!/usr/bin/env bash
# The main job: builds the runtime, the native host and the browser extension, registers the
# native host with Chrome/Chromium, then serves the git project of the current directory.
# Extra arguments go to `herdr-mcp serve` (try `--help`).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cargo build --release --manifest-path "$here/Cargo.toml" -p herdr-mcp -p herdr-nmhost
target="${CARGO_TARGET_DIR:-$here/target}"

# The extension needs wasm32 + wasm-bindgen-cli (installed here if missing); without
# them the runtime still starts.
if "$here/scripts/wasm-toolchain.sh" && "$here/scripts/build-extension.sh"; then
  # A browser never started yet has no profile folder to register with; that must not
  # stop the runtime from serving.
  if ! "$target/release/herdr-nmhost" install; then
    echo "run.sh: the native host is not registered yet; start the browser once, then run:" >&2
    echo "  $target/release/herdr-nmhost install" >&2
  fi
  echo
  echo "Browser extension: open chrome://extensions, switch on Developer mode, click \"Load unpacked\""
  echo "and choose $here/dist/extension (id $(grep -o '[a-p]\{32\}' "$here/extension-shell/EXTENSION_ID.md" | head -1))."
  echo "Then switch on z.ai or DeepSeek in the extension's options page."
  echo
else
  echo "run.sh: the extension was not built (see above); serving the runtime anyway." >&2
fi
exec "$target/release/herdr-mcp" serve "$@"
