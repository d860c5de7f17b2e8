#!/usr/bin/env bash
# Checks scripts/package.sh and the install.sh in its tarball as a user meets them, in seconds:
# the tarball is built from the debug binaries of `cargo test` (no release build) and the
# extension in dist/extension, unpacked in a scratch folder, installed with install.sh into a
# temp prefix under a fresh HOME and XDG folders with a browser "installed" on PATH, and the
# unpacked package removed. Then the installed runtime serves a project and the installed
# `herdr-mcp doctor --json` must find the runtime, and the native host registered with the
# installed herdr-nmhost answering a request through it.
#   scripts/test-package.sh [BIN_DIR] [EXTENSION_DIR]
#     (defaults: ${CARGO_TARGET_DIR:-target}/debug and dist/extension)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
bin_dir="${1:-${CARGO_TARGET_DIR:-$repo/target}/debug}"
ext_dir="${2:-$repo/dist/extension}"
for bin in herdr-mcp herdr-nmhost; do
  [ -x "$bin_dir/$bin" ] || { echo "test-package: $bin_dir/$bin is missing; build it first (cargo build -p $bin)" >&2; exit 1; }
done
[ -f "$ext_dir/manifest.json" ] || { echo "test-package: no extension in $ext_dir; build it first (scripts/build-extension.sh)" >&2; exit 1; }
command -v node >/dev/null || { echo "test-package: needs node (Node.js 20 or newer)" >&2; exit 1; }
bin_dir="$(cd "$bin_dir" && pwd)"
ext_dir="$(cd "$ext_dir" && pwd)"

t="$(mktemp -d /tmp/test-package.XXXXXX)"
server=""
cleanup() {
  [ -z "$server" ] || kill "$server" 2>/dev/null || true
  rm -rf "$t"
}
trap cleanup EXIT
fail() {
  echo "test-package: FAIL: $*" >&2
  for f in "$t"/*.out "$t"/*.err; do [ -f "$f" ] && { echo "--- $f"; tail -40 "$f"; } >&2; done
  exit 1
}
ok() { echo "test-package: ok: $*"; }

# Built from the debug binaries; the tarball's path is the last line.
"$repo/scripts/package.sh" --binaries "$bin_dir" --extension "$ext_dir" --out "$t/out" --fast >"$t/package.out" 2>"$t/package.err" \
  || fail "package.sh exited with $?"
tarball="$(tail -1 "$t/package.out")"
version="$("$bin_dir/herdr-mcp" --version | awk '{print $2}')"
name="herdr-mcp-$version-linux-$(uname -m)"
[ "$tarball" = "$t/out/$name.tar.gz" ] && [ -f "$tarball" ] || fail "no tarball $t/out/$name.tar.gz (said: $tarball)"
tar -tzf "$tarball" >"$t/list.out" || fail "the tarball does not list"
for entry in bin/herdr-mcp bin/herdr-nmhost install.sh share/herdr-mcp/extension/manifest.json \
  "share/herdr-mcp/herdr-mcp-extension-$version.zip"; do
  grep -qx "$name/$entry" "$t/list.out" || fail "the tarball lacks $name/$entry"
done
ok "package.sh --binaries: $(basename "$tarball") with both binaries, the extension, its zip and install.sh"

# Unpacked somewhere, installed into a prefix elsewhere, as a fresh user with a browser that
# was never started.
mkdir -p "$t/unpack" "$t/home" "$t/xdg-config" "$t/xdg-state" "$t/fakebin" "$t/proj"
tar -C "$t/unpack" -xzf "$tarball"
printf '#!/bin/sh\nexit 0\n' >"$t/fakebin/chromium"
chmod +x "$t/fakebin/chromium"
prefix="$t/prefix"
user_env=(env -i HOME="$t/home" XDG_CONFIG_HOME="$t/xdg-config" XDG_STATE_HOME="$t/xdg-state" PATH="$t/fakebin:$PATH" NO_COLOR=1)
"${user_env[@]}" "$t/unpack/$name/install.sh" --prefix "$prefix" >"$t/install.out" 2>"$t/install.err" \
  || fail "install.sh exited with $?"
for bin in herdr-mcp herdr-nmhost; do
  [ -f "$prefix/bin/$bin" ] && [ -x "$prefix/bin/$bin" ] && cmp -s "$prefix/bin/$bin" "$bin_dir/$bin" \
    || fail "$prefix/bin/$bin is not the packed $bin"
done
[ -f "$prefix/share/herdr-mcp/extension/manifest.json" ] || fail "the extension is not in $prefix/share/herdr-mcp/extension"
if command -v unzip >/dev/null; then
  unzip -Z1 "$prefix/share/herdr-mcp/herdr-mcp-extension-$version.zip" >"$t/zip.out" || fail "the extension's zip does not list"
  grep -qx "manifest.json" "$t/zip.out" && grep -qx "wasm/extension_shell_bg.wasm" "$t/zip.out" \
    || fail "the zip lacks manifest.json or the WASM at its top"
fi
# The zip package.sh makes without zip or python3: whole and the same files.
if command -v unzip >/dev/null; then
  node "$repo/scripts/package/zipdir.cjs" "$ext_dir" "$t/node.zip" || fail "zipdir.cjs exited with $?"
  unzip -tq "$t/node.zip" >"$t/unzip.out" 2>&1 || fail "the node zip does not test whole: $(cat "$t/unzip.out")"
  unzip -Z1 "$t/node.zip" | sort >"$t/node-zip.out"
  sort "$t/zip.out" | grep -v '/$' | cmp -s - "$t/node-zip.out" || fail "the node zip lists other files than the package's"
fi
manifest="$t/xdg-config/chromium/NativeMessagingHosts/dev.herdr.mcp.json"
grep -qF "\"path\": \"$prefix/bin/herdr-nmhost\"" "$manifest" 2>/dev/null || fail "the manifest does not name $prefix/bin/herdr-nmhost"
grep -qF "choose $prefix/share/herdr-mcp/extension (id " "$t/install.out" || fail "install.sh does not say what to load"
grep -qF "export PATH=\"$prefix/bin:" "$t/install.err" || fail "install.sh does not say $prefix/bin is not on PATH"
rm -rf "$t/unpack"
ok "install.sh --prefix: binaries and extension in $prefix, native host registered with $prefix/bin/herdr-nmhost"

# The installed runtime serves a project; the installed doctor checks every layer from there.
git -C "$t/proj" init -q
project="$(cd "$t/proj" && pwd -P)"
sock="$t/xdg-config/herdr-mcp/extension.sock"
(cd "$t/proj" && exec "${user_env[@]}" "$prefix/bin/herdr-mcp" serve --root "$project") >"$t/serve.out" 2>"$t/serve.err" &
server=$!
for _ in $(seq 1 300); do
  [ -S "$sock" ] && break
  kill -0 "$server" 2>/dev/null || fail "the installed runtime ended instead of serving"
  sleep 0.1
done
[ -S "$sock" ] || fail "the installed runtime did not open $sock within 30 s"
code=0
(cd "$t/proj" && "${user_env[@]}" "$prefix/bin/herdr-mcp" doctor --json) >"$t/doctor.out" 2>"$t/doctor.err" || code=$?
node -e '
  const [file, code, bin, project, sock] = process.argv.slice(1);
  const r = JSON.parse(require("fs").readFileSync(file, "utf8"));
  const row = n => r.checks.find(c => c.layer === n) || {};
  const runtime = row("runtime"), host = row("native host (chromium)");
  const problems = [];
  if (code !== "0" || r.ok !== true) problems.push(`exit ${code}, ok ${r.ok}`);
  if (runtime.status !== "ok" || runtime.details.socket !== sock) problems.push(`runtime ${runtime.status}: ${runtime.message}`);
  if (!(runtime.details?.roots || []).includes(project)) problems.push(`roots ${JSON.stringify(runtime.details?.roots)}`);
  if (host.status !== "ok") problems.push(`host ${host.status}: ${host.message}`);
  if (host.details?.binary !== bin) problems.push(`host binary ${host.details?.binary}, not ${bin}`);
  if (problems.length) { console.error(problems.join("; ")); process.exit(1); }
' "$t/doctor.out" "$code" "$prefix/bin/herdr-nmhost" "$project" "$sock" \
  || fail "doctor --json of the installed herdr-mcp: $(cat "$t/doctor.out" "$t/doctor.err")"
kill "$server"
wait "$server" || fail "the installed runtime exited with $? on SIGTERM"
server=""
ok "installed doctor --json: runtime serving $project, native host round trip through $prefix/bin/herdr-nmhost"
echo "test-package: all passed"
