#!/usr/bin/env bash
# Checks scripts/run.sh (the main job) as a user meets it, without its release build, which the
# test command cannot afford: the real run.sh runs in a scratch checkout where stand-ins take the
# place of `cargo`, scripts/wasm-toolchain.sh and scripts/build-extension.sh (test-all.sh runs those
# two for real), and the debug binaries of `cargo test` take the place of the release ones. It
# runs with a fresh HOME and a browser "installed" on PATH but never started.
# Checked: --help and the refusals that come before any build (not a git project, the home
# directory, and the prerequisites: no C compiler, no rustup, a Rust older than the workspace's
# rust-version), the steps numbered 1/5 to 5/5, the binaries and the extension installed into
# ~/.local (copies, not links), the native host registered with the pinned origin and the
# installed binary, the extension folder and id printed, the runtime answering /health and a
# tools/call on the default socket, `doctor --json` of the installed binary finding the runtime
# and the host round trip healthy after the build output is removed and the checkout moved, a
# second start refused while the first serves, SIGTERM and SIGINT stopping it with its socket
# removed, a re-run after a stop into --prefix DIR (registered anew with that binary), and the
# runtime served even when the extension cannot be built.
#   scripts/test-run-sh.sh [BIN_DIR]   (BIN_DIR holds herdr-mcp and herdr-nmhost;
#                                       default ${CARGO_TARGET_DIR:-target}/debug)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
bin_dir="${1:-${CARGO_TARGET_DIR:-$repo/target}/debug}"
for bin in herdr-mcp herdr-nmhost; do
  if [ ! -x "$bin_dir/$bin" ]; then
    echo "test-run-sh: $bin_dir/$bin is missing; build it first (cargo build -p $bin)" >&2
    exit 1
  fi
done
bin_dir="$(cd "$bin_dir" && pwd)"
command -v node >/dev/null || { echo "test-run-sh: needs node (Node.js 20 or newer)" >&2; exit 1; }

id="$(grep -o '[a-p]\{32\}' "$repo/extension-shell/EXTENSION_ID.md" | head -1)"
t="$(mktemp -d /tmp/run-sh.XXXXXX)"
servers=()
cleanup() {
  local pid
  for pid in "${servers[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$t"
}
trap cleanup EXIT

fail() {
  echo "test-run-sh: FAIL: $*" >&2
  for f in "$t"/out* "$t"/err* "$t/calls"; do [ -f "$f" ] && { echo "--- $f"; cat "$f"; } >&2; done
  exit 1
}
ok() { echo "test-run-sh: ok: $*"; }

# The scratch checkout: the real run.sh and extension id, stand-ins for the builds.
mkdir -p "$t/repo/scripts" "$t/repo/extension-shell" "$t/bin" "$t/target/release" "$t/home" "$t/proj" "$t/plain"
cp "$repo/scripts/run.sh" "$t/repo/scripts/"
cp "$repo/Cargo.toml" "$t/repo/"
cp "$repo/extension-shell/EXTENSION_ID.md" "$t/repo/extension-shell/"
want_rust="$(sed -n 's/^rust-version *= *"\([0-9.]*\)".*/\1/p' "$repo/Cargo.toml")"
[ -n "$want_rust" ] || { echo "test-run-sh: no rust-version in $repo/Cargo.toml" >&2; exit 1; }
# cargo "builds" the release binaries as links to the debug ones: the build output that
# `cargo clean` removes.
cat > "$t/bin/cargo" <<EOF
#!/bin/sh
echo "cargo \$*" >> "$t/calls"
mkdir -p "\$CARGO_TARGET_DIR/release"
ln -sf "$bin_dir/herdr-mcp" "$bin_dir/herdr-nmhost" "\$CARGO_TARGET_DIR/release/"
EOF
# rustc and rustup as a rustup install shows them (the real ones need the caller's ~/.rustup);
# rustc's version is read from a file a test can change; no wasm32 target yet.
echo "1.95.0" > "$t/rustc-version"
printf '#!/bin/sh\necho "rustc $(cat "%s/rustc-version") (stand-in 2026-01-01)"\n' "$t" > "$t/bin/rustc"
printf '#!/bin/sh\n[ "$*" = "target list --installed" ] && echo x86_64-unknown-linux-gnu\nexit 0\n' > "$t/bin/rustup"
printf '#!/bin/sh\necho wasm-toolchain >> "%s/calls"\n' "$t" > "$t/repo/scripts/wasm-toolchain.sh"
cat > "$t/repo/scripts/build-extension.sh" <<EOF
#!/bin/sh
echo build-extension >> "$t/calls"
[ -z "\$EXTENSION_FAILS" ] || exit 1
mkdir -p "$t/repo/dist/extension"
EOF
# A browser installed but never started: no profile folder yet.
printf '#!/bin/sh\nexit 0\n' > "$t/bin/chromium"
chmod +x "$t/bin/"* "$t/repo/scripts/"*.sh
ln -s "$bin_dir/herdr-mcp" "$t/target/release/herdr-mcp"
ln -s "$bin_dir/herdr-nmhost" "$t/target/release/herdr-nmhost"
git -C "$t/proj" init -q
project="$(cd "$t/proj" && pwd -P)"
if git -C "$t/plain" rev-parse 2>/dev/null; then
  echo "test-run-sh: $t is inside a git project; cannot test outside one" >&2
  exit 1
fi

sock="$t/home/.config/herdr-mcp/extension.sock"
# A user's environment, fresh: none of the caller's herdr settings, XDG folders or cargo paths.
user_env=(env -i HOME="$t/home" PATH="$t/bin:$PATH" CARGO_TARGET_DIR="$t/target" NO_COLOR=1)
run_sh() {
  "${user_env[@]}" ${TEST_HOME:+HOME="$TEST_HOME"} ${TEST_PATH:+PATH="$TEST_PATH"} ${EXTENSION_FAILS:+EXTENSION_FAILS=1} \
    "$t/repo/scripts/run.sh" "$@"
}
# Starts run.sh from the project in the background; its pid is the runtime's (run.sh execs it).
start() {
  local n="$1"
  shift
  (cd "$t/proj" && exec "${user_env[@]}" ${EXTENSION_FAILS:+EXTENSION_FAILS=1} "$t/repo/scripts/run.sh" "$@" \
    >"$t/out$n" 2>"$t/err$n") &
  server=$!
  servers+=("$server")
}
# GET /health or a stateless tools/call herdr_inspect over the socket; exits 1 unless it answers ok.
cat > "$t/ask.cjs" <<'EOF'
const http = require('http');
const [what, socketPath, project] = process.argv.slice(2);
const body = what === 'inspect'
  ? JSON.stringify({jsonrpc: '2.0', id: 1, method: 'tools/call', params: {name: 'herdr_inspect', arguments: {}}})
  : undefined;
const headers = body ? {'content-type': 'application/json', accept: 'application/json, text/event-stream'} : {};
const target = {socketPath, path: body ? '/mcp' : '/health', method: body ? 'POST' : 'GET', headers};
const req = http.request(target, res => {
  let text = '';
  res.on('data', c => text += c);
  res.on('end', () => {
    try {
      const answer = JSON.parse(text);
      const payload = body ? answer.result.structuredContent : answer;
      if (payload.ok !== true) throw new Error('not ok');
      if (body && !payload.workstation_info.managed_git_roots.includes(project)) throw new Error('project not served');
      process.exit(0);
    } catch (e) {
      console.error(`${what}: ${e.message}: ${res.statusCode} ${text.slice(0, 400)}`);
      process.exit(1);
    }
  });
});
req.on('error', e => { console.error(`${what}: ${e.message}`); process.exit(1); });
req.end(body);
EOF
ask() { node "$t/ask.cjs" "$@"; }
# An ended child stays a zombie until waited for, and `kill -0` still finds it.
running() { [ -e "/proc/$1" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null; }
wait_serving() {
  local i
  for i in $(seq 1 300); do
    [ -S "$sock" ] && ask health "$sock" 2>/dev/null && return 0
    running "$server" || fail "run.sh ended instead of serving"
    sleep 0.1
  done
  fail "nothing answered on $sock within 30 s"
}
stop_with() {
  local signal="$1" code=0
  kill -s "$signal" "$server"
  wait "$server" || code=$?
  [ "$code" = 0 ] || fail "SIG$signal: the runtime exited with $code, not 0"
  [ ! -e "$sock" ] || fail "SIG$signal: the socket $sock is still there"
}

# --help explains without building anything, and lists serve's own options once they are built.
out="$(cd "$t/proj" && run_sh --help)" || fail "--help exited with $?"
grep -q "^Usage: " <<<"$out" && grep -q -- "--root DIR" <<<"$out" && grep -q "Stops cleanly on SIGINT/SIGTERM" <<<"$out" \
  || fail "--help lacks its usage or serve's options: $out"
[ ! -e "$t/calls" ] || fail "--help built something"
ok "--help"

# Outside a git project, and in a home directory, it refuses before building and says what to do.
code=0
(cd "$t/plain" && run_sh) >"$t/out-plain" 2>"$t/err-plain" || code=$?
[ "$code" = 2 ] && grep -q "is not inside a git project" "$t/err-plain" && grep -q -- "--root" "$t/err-plain" \
  || fail "outside a git project: exit $code, $(cat "$t/err-plain")"
code=0
(cd "$t/home" && run_sh) >"$t/out-home" 2>"$t/err-home" || code=$?
[ "$code" = 2 ] && grep -q "is not inside a git project" "$t/err-home" || fail "from HOME: exit $code, $(cat "$t/err-home")"
mkdir "$t/githome" && git -C "$t/githome" init -q
code=0
(cd "$t/githome" && TEST_HOME="$t/githome" run_sh) >"$t/out-githome" 2>"$t/err-githome" || code=$?
[ "$code" = 2 ] && grep -q "is your home directory" "$t/err-githome" && grep -q -- "--root DIR" "$t/err-githome" \
  || fail "from a home that is a git project: exit $code, $(cat "$t/err-githome")"
[ ! -e "$t/calls" ] || fail "a refused start built something"
ok "refusals outside a project and in the home directory, before any build"

# A folder of links to every program the stand-ins and the caller's PATH offer (the first of a
# name wins, as on PATH), without the named ones: a machine where those are not installed.
path_without() {
  local dir="$1" d n
  shift
  local skip=()
  for n in "$@"; do skip+=(! -name "$n"); done
  mkdir -p "$dir"
  for d in "$t/bin" $(tr ':' ' ' <<<"$PATH"); do
    [ -d "$d" ] || continue
    find "$d" -maxdepth 1 \( -type f -o -type l \) "${skip[@]}" -exec ln -s -t "$dir" {} + 2>/dev/null || true
  done
  for n in "$@"; do [ ! -e "$dir/$n" ] || fail "path_without: $dir/$n is still there"; done
}
# A prerequisite missing: refused in step 1 with what to do, exit 2, nothing built.
refused_before_build() {
  local what="$1" expect="$2" code=0
  shift 2
  # A run.sh that went on would serve until stopped: 20 s is far more than a refusal takes.
  (cd "$t/proj" && timeout 20 "${user_env[@]}" ${TEST_PATH:+PATH="$TEST_PATH"} "$t/repo/scripts/run.sh" "$@") \
    >"$t/out-$what" 2>"$t/err-$what" || code=$?
  [ "$code" = 2 ] || fail "$what: exit $code, not 2"
  grep -qF "$expect" "$t/err-$what" || fail "$what: no '$expect' in: $(cat "$t/err-$what")"
  grep -q "^run.sh: step 1/5: checking what the build needs" "$t/out-$what" || fail "$what: no step 1/5"
  ! grep -q "step 2/5" "$t/out-$what" || fail "$what: went on to step 2"
  [ ! -e "$t/calls" ] || fail "$what: built something: $(cat "$t/calls")"
}
path_without "$t/no-cc" cc gcc clang
TEST_PATH="$t/no-cc" refused_before_build no-cc "no C compiler (cc, gcc or clang) on PATH"
grep -q "apt-get install build-essential" "$t/err-no-cc" || fail "no-cc: no install hint: $(cat "$t/err-no-cc")"
path_without "$t/no-rustup" rustup
TEST_PATH="$t/no-rustup" refused_before_build no-rustup "Rust installed with rustup is needed"
grep -q "https://rustup.rs" "$t/err-no-rustup" || fail "no-rustup: no hint: $(cat "$t/err-no-rustup")"
echo "1.80.0" > "$t/rustc-version"
refused_before_build old-rust "Rust 1.80.0 is older than the $want_rust this workspace needs"
grep -q "rustup update stable" "$t/err-old-rust" || fail "old-rust: no hint: $(cat "$t/err-old-rust")"
echo "$want_rust.0" > "$t/rustc-version"
ok "prerequisites refused in step 1/5, before any build: no C compiler, no rustup, Rust 1.80.0 < $want_rust"

# The first run: builds, registers, prints, serves.
start 1
wait_serving
grep -qx "cargo build --release --manifest-path $t/repo/Cargo.toml -p herdr-mcp -p herdr-nmhost" "$t/calls" \
  && grep -qx wasm-toolchain "$t/calls" && grep -qx build-extension "$t/calls" || fail "the builds: $(cat "$t/calls")"
# The steps, numbered and in order.
steps="$(grep -o '^run.sh: step [0-9]*/[0-9]*' "$t/out1" | tr '\n' ' ')"
[ "$steps" = "run.sh: step 1/5 run.sh: step 2/5 run.sh: step 3/5 run.sh: step 4/5 run.sh: step 5/5 " ] \
  || fail "the steps are not 1/5 to 5/5 in order: $steps"
grep -q "Rust $want_rust.0 (>= $want_rust), C compiler /.*, wasm32 target missing, added in step 2" "$t/out1" \
  || fail "step 1 does not say what it found"
# Installed into ~/.local: copies of the built binaries (a link would die with the build output).
installed="$t/home/.local/bin"
for bin in herdr-mcp herdr-nmhost; do
  [ -f "$installed/$bin" ] && [ ! -L "$installed/$bin" ] && [ -x "$installed/$bin" ] \
    || fail "$installed/$bin is not an installed executable file"
  cmp -s "$installed/$bin" "$bin_dir/$bin" || fail "$installed/$bin is not the built $bin"
done
[ -d "$t/home/.local/share/herdr-mcp/extension" ] || fail "the extension is not installed in ~/.local/share/herdr-mcp/extension"
grep -q "is not on your PATH" "$t/err1" && grep -qF "export PATH=\"$installed:" "$t/err1" \
  || fail "no word that $installed is not on PATH"
manifest="$t/home/.config/chromium/NativeMessagingHosts/dev.herdr.mcp.json"
[ "$(stat -c %a "$manifest" 2>/dev/null)" = 600 ] || fail "no 0600 manifest at $manifest"
node -e '
  const m = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  const origin = `chrome-extension://${process.argv[3]}/`;
  const want = {name: "dev.herdr.mcp", type: "stdio", path: process.argv[2], allowed_origins: [origin]};
  for (const [k, v] of Object.entries(want)) {
    if (JSON.stringify(m[k]) !== JSON.stringify(v)) { console.error(k, m[k]); process.exit(1); }
  }
' "$manifest" "$installed/herdr-nmhost" "$id" || fail "the manifest: $(cat "$manifest")"
grep -q "^chromium: installed $manifest" "$t/out1" || fail "registration not reported"
grep -q "Load unpacked" "$t/out1" && grep -q "choose $t/home/.local/share/herdr-mcp/extension (id $id)" "$t/out1" \
  || fail "the extension folder and id are not printed"
ask inspect "$sock" "$project" || fail "tools/call herdr_inspect"
[ "$(stat -c %a "$sock")" = 600 ] || fail "the socket is not 0600"
grep -q "Ctrl-C stops it" "$t/out1" || fail "no word on how to stop it"
grep -q "herdr-mcp serving socket=$sock roots=$project " "$t/err1" || fail "the log does not say what it serves"
ok "first run: steps 1/5-5/5, installed into $installed, native host registered with it, extension printed, serving $project on $sock"

# The build output removed (`cargo clean`) and the checkout moved: the installed doctor finds
# the runtime and the native host round trip (through the installed herdr-nmhost) working.
rm -rf "$t/target"
mv "$t/repo" "$t/repo-moved"
code=0
(cd "$t/proj" && "${user_env[@]}" "$installed/herdr-mcp" doctor --json) >"$t/out-doctor" 2>"$t/err-doctor" || code=$?
mv "$t/repo-moved" "$t/repo"
node -e '
  const [file, bin, code] = process.argv.slice(1);
  const r = JSON.parse(require("fs").readFileSync(file, "utf8"));
  const row = n => r.checks.find(c => c.layer === n) || {};
  const host = row("native host (chromium)");
  const problems = [];
  if (code !== "0" || r.ok !== true) problems.push(`exit ${code}, ok ${r.ok}`);
  if (row("runtime").status !== "ok") problems.push("runtime not ok");
  if (host.status !== "ok") problems.push(`host ${host.status}: ${host.message}`);
  if ((host.details || {}).binary !== bin) problems.push(`host binary ${(host.details || {}).binary}`);
  if (problems.length) { console.error(problems.join("; ")); process.exit(1); }
' "$t/out-doctor" "$installed/herdr-nmhost" "$code" || fail "doctor --json after removing the build output: $(cat "$t/out-doctor" "$t/err-doctor")"
ok "build output removed and checkout moved: the installed doctor --json sees the runtime and the host round trip ok"

# A second start while the first serves: refused, clearly; the first keeps serving.
code=0
(cd "$t/proj" && run_sh) >"$t/out2" 2>"$t/err2" || code=$?
[ "$code" != 0 ] && grep -q "already accepting connections on $sock" "$t/err2" || fail "second start: exit $code"
ask health "$sock" || fail "the first runtime stopped serving after a second start"
ok "second start refused: $(grep 'already accepting' "$t/err2")"

stop_with TERM
ok "SIGTERM stops it and removes the socket"

# Again after the stop, into another prefix and with an extension that cannot be built: built
# again, installed there, registered anew with that binary, still served.
EXTENSION_FAILS=1 start 3 --prefix "$t/opt"
wait_serving
grep -q "the extension was not built" "$t/err3" || fail "no word that the extension was not built"
[ -x "$t/opt/bin/herdr-mcp" ] && [ -x "$t/opt/bin/herdr-nmhost" ] || fail "nothing installed into --prefix $t/opt"
grep -qF "\"path\": \"$t/opt/bin/herdr-nmhost\"" "$manifest" || fail "the manifest does not name $t/opt/bin/herdr-nmhost: $(cat "$manifest")"
grep -qF "Starting the runtime: $t/opt/bin/herdr-mcp serve (Ctrl-C" "$t/out3" || fail "not started from $t/opt/bin"
ask inspect "$sock" "$project" || fail "tools/call herdr_inspect after a re-run"
stop_with INT
ok "re-run with --prefix installs and registers there and serves (without the extension too); SIGINT stops it and removes the socket"
echo "test-run-sh: all passed"
