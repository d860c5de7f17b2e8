#!/usr/bin/env bash
# The main job: builds the runtime, the native host and the browser extension, registers the
# native host with the Chrome-family browsers installed here, then serves the git project of the
# current directory. Extra arguments go to `herdr-mcp serve`; `run.sh --help` explains.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
target="${CARGO_TARGET_DIR:-$here/target}"
# cargo reads a relative CARGO_TARGET_DIR from its working directory, and build-extension.sh
# works from the checkout: one absolute folder keeps every build and the binaries run here in one place.
case "$target" in /*) ;; *) target="$PWD/$target" ;; esac
export CARGO_TARGET_DIR="$target"

usage() {
  cat <<EOF
Usage: $0 [SERVE OPTIONS]

Start it from the git project the chats should work on (or name one with --root DIR). It
  1. installs what the extension's build needs if missing: the wasm32-unknown-unknown target
     and wasm-bindgen-cli at the Cargo.lock version (a few minutes, once);
  2. builds herdr-mcp and herdr-nmhost (release, into $target/release)
     and the browser extension (into $here/dist/extension);
  3. registers the native host with each Chrome, Chromium, Brave or Edge installed here
     (\`herdr-nmhost status\` shows where);
  4. prints how to load the extension ("Load unpacked");
  5. serves that project on the Unix socket \$XDG_CONFIG_HOME/herdr-mcp/extension.sock (else
     ~/.config/herdr-mcp/extension.sock) until Ctrl-C, which stops it and removes the socket.
Running it again rebuilds only what changed and registers again; it refuses to start while
another runtime serves the same socket.

SERVE OPTIONS go to \`herdr-mcp serve\`, e.g. --root DIR (repeatable), --socket PATH,
--listen 127.0.0.1:8772 (with HERDR_MCP_TOKEN set).
EOF
  if [ -x "$target/release/herdr-mcp" ]; then
    printf '\n%s\n\n' "--- herdr-mcp serve --help:"
    "$target/release/herdr-mcp" serve --help
  else
    echo
    echo "After the first run, \`$target/release/herdr-mcp serve --help\` lists every option."
  fi
}

default_root=yes
for arg in "$@"; do
  case "$arg" in
    -h | --help) usage; exit 0 ;;
    --root | --root=*) default_root=no ;;
  esac
done
roots_env="${HERDR_MCP_ROOTS:-}"
[ -n "${roots_env//[[:space:],:]/}" ] && default_root=no

# Without --root the runtime serves the git project it starts in. Checked before building, which
# takes minutes the first time, so that a start from the wrong folder fails at once.
if [ "$default_root" = yes ]; then
  if ! command -v git >/dev/null; then
    echo "run.sh: git is not installed; the runtime serves the git project it starts in (or pass --root DIR)." >&2
    exit 2
  fi
  if ! project="$(git rev-parse --show-toplevel 2>/dev/null)"; then
    echo "run.sh: $PWD is not inside a git project, and the runtime serves the git project it starts in." >&2
    echo "  Start it from your project:  cd ~/your-project && $here/scripts/run.sh" >&2
    echo "  or name the project:         $0 --root ~/your-project" >&2
    exit 2
  fi
  if [ -n "${HOME:-}" ] && [ "$(cd "$project" && pwd -P)" = "$(cd "$HOME" 2>/dev/null && pwd -P)" ]; then
    echo "run.sh: the git project here is your home directory ($project), which is never served." >&2
    echo "  Start it from a project inside it (cd ~/your-project), or name one with --root DIR." >&2
    exit 2
  fi
fi

cargo build --release --manifest-path "$here/Cargo.toml" -p herdr-mcp -p herdr-nmhost

# The extension needs wasm32 + wasm-bindgen-cli (installed here if missing); without
# them the runtime still starts.
if "$here/scripts/wasm-toolchain.sh" && "$here/scripts/build-extension.sh"; then
  # No Chrome-family browser on this machine must not stop the runtime from serving.
  if ! "$target/release/herdr-nmhost" install; then
    echo "run.sh: the native host is not registered (see above); once the browser is installed, run:" >&2
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
echo "Starting the runtime: $target/release/herdr-mcp serve${*:+ $*} (Ctrl-C stops it)"
exec "$target/release/herdr-mcp" serve "$@"
