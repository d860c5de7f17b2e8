#!/usr/bin/env bash
# Checks scripts/run.sh (the main job) as a user meets it, without its release build, which the
# test command cannot afford: the real run.sh runs in a scratch checkout where stand-ins take the
# place of `cargo`, scripts/wasm-toolchain.sh and scripts/build-extension.sh (test-all.sh runs those
# two for real), and the debug binaries of `cargo test` take the place of the release ones. It
# runs with a fresh HOME and a browser "installed" on PATH but never started.
# Checked: --help and the refusals that come before any build (not a git project, the home
# directory), the native host registered with the pinned origin, the extension folder and id
# printed, the runtime answering /health and a tools/call on the default socket, a second start
# refused while the first serves, SIGTERM and SIGINT stopping it with its socket removed, a re-run
# after a stop, and the runtime served even when the extension cannot be built.
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
cp "$repo/extension-shell/EXTENSION_ID.md" "$t/repo/extension-shell/"
printf '#!/bin/sh\necho "cargo $*" >> "%s/calls"\n' "$t" > "$t/bin/cargo"
printf '#!/bin/sh\necho wasm-toolchain >> "%s/calls"\n' "$t" > "$t/repo/scripts/wasm-toolchain.sh"
cat > "$t/repo/scripts/build-extension.sh" <<EOF
#!/bin/sh
echo build-extension >> "$t/calls"
[ -z "\$EXTENSION_FAILS" ] || exit 1
mkdir -p "$t/repo/dist/extension"
EOF
# A browser installed but never started: no profile folder yet.
printf '#!/bin/sh\nexit 0\n' > "$t/bin/chromium"
chmod +x "$t/bin/cargo" "$t/bin/chromium" "$t/repo/scripts/"*.sh
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
  "${user_env[@]}" ${TEST_HOME:+HOME="$TEST_HOME"} ${EXTENSION_FAILS:+EXTENSION_FAILS=1} "$t/repo/scripts/run.sh" "$@"
}
# Starts run.sh from the project in the background; its pid is the runtime's (run.sh execs it).
start() {
  local n="$1"
  (cd "$t/proj" && exec "${user_env[@]}" ${EXTENSION_FAILS:+EXTENSION_FAILS=1} "$t/repo/scripts/run.sh" \
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

# The first run: builds, registers, prints, serves.
start 1
wait_serving
grep -qx "cargo build --release --manifest-path $t/repo/Cargo.toml -p herdr-mcp -p herdr-nmhost" "$t/calls" \
  && grep -qx wasm-toolchain "$t/calls" && grep -qx build-extension "$t/calls" || fail "the builds: $(cat "$t/calls")"
manifest="$t/home/.config/chromium/NativeMessagingHosts/dev.herdr.mcp.json"
[ "$(stat -c %a "$manifest" 2>/dev/null)" = 600 ] || fail "no 0600 manifest at $manifest"
node -e '
  const m = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  const origin = `chrome-extension://${process.argv[3]}/`;
  const want = {name: "dev.herdr.mcp", type: "stdio", path: process.argv[2], allowed_origins: [origin]};
  for (const [k, v] of Object.entries(want)) {
    if (JSON.stringify(m[k]) !== JSON.stringify(v)) { console.error(k, m[k]); process.exit(1); }
  }
' "$manifest" "$bin_dir/herdr-nmhost" "$id" || fail "the manifest: $(cat "$manifest")"
grep -q "^chromium: installed $manifest" "$t/out1" || fail "registration not reported"
grep -q "Load unpacked" "$t/out1" && grep -q "choose $t/repo/dist/extension (id $id)" "$t/out1" \
  || fail "the extension folder and id are not printed"
ask inspect "$sock" "$project" || fail "tools/call herdr_inspect"
[ "$(stat -c %a "$sock")" = 600 ] || fail "the socket is not 0600"
grep -q "Ctrl-C stops it" "$t/out1" || fail "no word on how to stop it"
grep -q "herdr-mcp serving socket=$sock roots=$project " "$t/err1" || fail "the log does not say what it serves"
ok "first run: native host registered, extension printed, serving $project on $sock"

# A second start while the first serves: refused, clearly; the first keeps serving.
code=0
(cd "$t/proj" && run_sh) >"$t/out2" 2>"$t/err2" || code=$?
[ "$code" != 0 ] && grep -q "already accepting connections on $sock" "$t/err2" || fail "second start: exit $code"
ask health "$sock" || fail "the first runtime stopped serving after a second start"
ok "second start refused: $(grep 'already accepting' "$t/err2")"

stop_with TERM
ok "SIGTERM stops it and removes the socket"

# Again after the stop, this time with an extension that cannot be built: still served.
EXTENSION_FAILS=1 start 3
wait_serving
grep -q "the extension was not built" "$t/err3" || fail "no word that the extension was not built"
ask inspect "$sock" "$project" || fail "tools/call herdr_inspect after a re-run"
stop_with INT
ok "re-run serves (without the extension too); SIGINT stops it and removes the socket"
echo "test-run-sh: all passed"
