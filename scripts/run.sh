#!/usr/bin/env bash
# The main job: checks what the build needs, builds the runtime, the native host and the browser
# extension, installs them into a prefix (default ~/.local), registers the native host with the
# Chrome-family browsers installed here, then serves the git project of the current directory.
# Extra arguments go to `herdr-mcp serve`; `run.sh --help` explains.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
target="${CARGO_TARGET_DIR:-$here/target}"
# cargo reads a relative CARGO_TARGET_DIR from its working directory, and build-extension.sh
# works from the checkout: one absolute folder keeps every build in one place.
case "$target" in /*) ;; *) target="$PWD/$target" ;; esac
export CARGO_TARGET_DIR="$target"
steps=5

usage() {
  cat <<EOF
Usage: $0 [--prefix DIR] [SERVE OPTIONS]

Start it from the git project the chats should work on (or name one with --root DIR). It
  1. checks, before building anything, what the build needs: Rust installed with rustup at
     version $(rust_version || echo '?') or newer (the workspace's rust-version), a C compiler
     (cc, gcc or clang) and the wasm32-unknown-unknown target (added with rustup if missing);
  2. builds herdr-mcp and herdr-nmhost (release, into $target/release) and the browser
     extension (into $here/dist/extension), installing wasm-bindgen-cli at the Cargo.lock
     version first if it is missing (a few minutes, once);
  3. installs them into the prefix, default ~/.local: PREFIX/bin/herdr-mcp,
     PREFIX/bin/herdr-nmhost and PREFIX/share/herdr-mcp/extension, so that \`cargo clean\` or
     moving this checkout breaks nothing;
  4. registers the installed native host with each Chrome, Chromium, Brave or Edge installed
     here (\`herdr-nmhost status\` shows where) and prints how to load the extension;
  5. serves that project on the Unix socket \$XDG_CONFIG_HOME/herdr-mcp/extension.sock (else
     ~/.config/herdr-mcp/extension.sock) until Ctrl-C, which stops it and removes the socket.
Running it again rebuilds only what changed, installs and registers again; it refuses to start
while another runtime serves the same socket.

  --prefix DIR   install into DIR/bin and DIR/share/herdr-mcp (default: ~/.local)

SERVE OPTIONS go to \`herdr-mcp serve\`, e.g. --root DIR (repeatable), --socket PATH,
--listen 127.0.0.1:8772 (with HERDR_MCP_TOKEN set).
EOF
  local bin=""
  if [ -x "$prefix/bin/herdr-mcp" ]; then bin="$prefix/bin/herdr-mcp"
  elif [ -x "$target/release/herdr-mcp" ]; then bin="$target/release/herdr-mcp"
  fi
  if [ -n "$bin" ]; then
    printf '\n%s\n\n' "--- herdr-mcp serve --help:"
    "$bin" serve --help
  else
    echo
    echo "After the first run, \`$prefix/bin/herdr-mcp serve --help\` lists every option."
  fi
}

step_no=0
step() {
  step_no=$((step_no + 1))
  echo "run.sh: step $step_no/$steps: $*"
}
refuse() {
  echo "run.sh: $1" >&2
  shift
  local line
  for line in "$@"; do echo "  $line" >&2; done
  exit 2
}

# The workspace's minimum Rust (rust-version in the root Cargo.toml).
rust_version() {
  sed -n 's/^rust-version *= *"\([0-9.]*\)".*/\1/p' "$here/Cargo.toml" 2>/dev/null | head -1 | grep .
}
# Whether version $1 >= version $2 (dotted numbers; missing parts are 0).
version_at_least() {
  local IFS=. i
  local -a have=($1) want=($2)
  for i in 0 1 2; do
    [ "${have[i]:-0}" -gt "${want[i]:-0}" ] && return 0
    [ "${have[i]:-0}" -lt "${want[i]:-0}" ] && return 1
  done
  return 0
}

prefix="${HOME:-}/.local"
default_root=yes
serve_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix)
      [ $# -ge 2 ] && [ -n "$2" ] || refuse "--prefix needs a folder (e.g. --prefix ~/.local)"
      prefix="$2"; shift 2; continue ;;
    --prefix=*) prefix="${1#--prefix=}"; [ -n "$prefix" ] || refuse "--prefix needs a folder"; shift; continue ;;
  esac
  case "$1" in
    -h | --help) help=yes ;;
    --root | --root=*) default_root=no ;;
  esac
  serve_args+=("$1")
  shift
done
case "$prefix" in /*) ;; *) prefix="$PWD/$prefix" ;; esac
if [ "${help:-}" = yes ]; then usage; exit 0; fi
[ -n "${HOME:-}" ] || [ "$prefix" != /.local ] || refuse "HOME is not set: name the install folder with --prefix DIR"
roots_env="${HERDR_MCP_ROOTS:-}"
[ -n "${roots_env//[[:space:],:]/}" ] && default_root=no

# Everything that can stop the run is checked before the build, which takes many minutes the
# first time, so that a missing piece fails at once and says how to get it.
step "checking what the build needs (git project, Rust, C compiler, wasm32 target)"
# Without --root the runtime serves the git project it starts in.
if [ "$default_root" = yes ]; then
  command -v git >/dev/null \
    || refuse "git is not installed; the runtime serves the git project it starts in (or pass --root DIR)."
  if ! project="$(git rev-parse --show-toplevel 2>/dev/null)"; then
    refuse "$PWD is not inside a git project, and the runtime serves the git project it starts in." \
      "Start it from your project:  cd ~/your-project && $here/scripts/run.sh" \
      "or name the project:         $0 --root ~/your-project"
  fi
  if [ -n "${HOME:-}" ] && [ "$(cd "$project" && pwd -P)" = "$(cd "$HOME" 2>/dev/null && pwd -P)" ]; then
    refuse "the git project here is your home directory ($project), which is never served." \
      "Start it from a project inside it (cd ~/your-project), or name one with --root DIR."
  fi
fi
want_rust="$(rust_version)" || refuse "cannot read rust-version from $here/Cargo.toml"
rustup_hint="install Rust with rustup (https://rustup.rs): curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh"
command -v rustup >/dev/null && command -v cargo >/dev/null && command -v rustc >/dev/null \
  || refuse "Rust installed with rustup is needed (rustup, cargo and rustc on PATH; found:$(for p in rustup cargo rustc; do command -v "$p" >/dev/null && printf ' %s' "$p"; done))." \
    "$rustup_hint" "then open a new shell (or: . \"\$HOME/.cargo/env\") and run this again."
have_rust="$(rustc --version 2>/dev/null | awk '{print $2}')" || true
have_rust="${have_rust%%-*}"
[ -n "$have_rust" ] || refuse "\`rustc --version\` does not answer (is a default toolchain set?)." \
  "rustup default stable"
version_at_least "$have_rust" "$want_rust" \
  || refuse "Rust $have_rust is older than the $want_rust this workspace needs (rust-version in $here/Cargo.toml)." \
    "rustup update stable && rustup default stable"
cc_found=""
for c in ${CC:+"${CC%% *}"} cc gcc clang; do
  if command -v "$c" >/dev/null; then cc_found="$(command -v "$c")"; break; fi
done
[ -n "$cc_found" ] || refuse "no C compiler (cc, gcc or clang) on PATH; the build compiles SQLite, ring and mimalloc from C." \
  "Debian/Ubuntu: sudo apt-get install build-essential    Fedora: sudo dnf install gcc    Arch: sudo pacman -S base-devel"
if rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown; then
  wasm_note="installed"
else
  wasm_note="missing, added in step 2 (rustup target add wasm32-unknown-unknown)"
fi
echo "  Rust $have_rust (>= $want_rust), C compiler $cc_found, wasm32 target $wasm_note"

step "building herdr-mcp and herdr-nmhost (release) and the browser extension"
cargo build --release --manifest-path "$here/Cargo.toml" -p herdr-mcp -p herdr-nmhost
# The extension needs wasm32 + wasm-bindgen-cli (installed here if missing); without
# them the runtime still starts.
extension=no
if "$here/scripts/wasm-toolchain.sh" && "$here/scripts/build-extension.sh"; then
  extension=yes
else
  echo "run.sh: the extension was not built (see above); serving the runtime anyway." >&2
fi

step "installing into $prefix"
# Copied (not linked) under a temporary name, then renamed: a running herdr-mcp keeps its old
# file, and the browser never starts a half-written host.
mkdir -p "$prefix/bin"
for bin in herdr-mcp herdr-nmhost; do
  cp "$target/release/$bin" "$prefix/bin/.$bin.new.$$"
  chmod 755 "$prefix/bin/.$bin.new.$$"
  mv -f "$prefix/bin/.$bin.new.$$" "$prefix/bin/$bin"
  echo "  $prefix/bin/$bin"
done
ext_dir="$prefix/share/herdr-mcp/extension"
if [ "$extension" = yes ]; then
  mkdir -p "$prefix/share/herdr-mcp"
  rm -rf "$ext_dir.new.$$"
  cp -R "$here/dist/extension" "$ext_dir.new.$$"
  rm -rf "$ext_dir"
  mv "$ext_dir.new.$$" "$ext_dir"
  echo "  $ext_dir"
fi
nmhost="$prefix/bin/herdr-nmhost"
herdr_mcp="$prefix/bin/herdr-mcp"
case ":${PATH:-}:" in
  *":$prefix/bin:"*)
    found="$(command -v herdr-mcp || true)"
    if [ -n "$found" ] && [ "$found" != "$herdr_mcp" ]; then
      echo "run.sh: note: PATH finds $found before $herdr_mcp; remove the old one so that \`herdr-mcp\` is this one." >&2
    fi ;;
  *)
    echo "run.sh: note: $prefix/bin is not on your PATH, and the options page and \`herdr-mcp doctor\` name herdr-mcp and herdr-nmhost by name." >&2
    echo "  Add it (e.g. to ~/.profile, then log in again):  export PATH=\"$prefix/bin:\$PATH\"" >&2 ;;
esac

step "registering the native host $nmhost"
# No Chrome-family browser on this machine must not stop the runtime from serving.
if ! "$nmhost" install --binary "$nmhost"; then
  echo "run.sh: the native host is not registered (see above); once the browser is installed, run:" >&2
  echo "  $nmhost install" >&2
fi
if [ -d "$ext_dir" ]; then
  echo
  echo "Browser extension: open chrome://extensions, switch on Developer mode, click \"Load unpacked\""
  echo "and choose $ext_dir (id $(grep -o '[a-p]\{32\}' "$here/extension-shell/EXTENSION_ID.md" | head -1))."
  echo "Then switch on z.ai or DeepSeek in the extension's options page. \`$herdr_mcp doctor\` checks every layer."
  echo
fi

step "serving"
echo "Starting the runtime: $herdr_mcp serve${serve_args[*]:+ ${serve_args[*]}} (Ctrl-C stops it)"
exec "$herdr_mcp" serve ${serve_args[@]+"${serve_args[@]}"}
