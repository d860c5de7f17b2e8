#!/usr/bin/env bash
# Server-side instructions per `tools/call`, ours (herdr_fs_read of 4 KiB) against
# the bare rmcp server's echo (the baseline) and its `fixed_reply` (the floor: a
# reply of ours' shape and size, built once), counted by valgrind's callgrind. Instruction counts do
# not depend on how busy the machine is, unlike the wall-clock bench, so this is the
# figure to compare changes by on a shared machine.
#
#   cargo bench -p herdr-mcp --bench fs_read_latency --no-run   # builds both servers
#   runtime/benches/instructions_per_call.sh [CALLS]            # default 500
#
# Each server runs under callgrind; after a warm-up of 200 calls the counters are
# zeroed, CALLS sequential calls go over one keep-alive connection, and the counters
# are dumped. The client (python3) is not measured. The bare server uses mimalloc,
# the allocator herdr-mcp ships with, unless BARE_ALLOC=system. With KEEP_PROFILES=DIR the
# callgrind dumps are kept there (ours/bare/floor.callgrind) for callgrind_annotate.
set -euo pipefail

calls=${1:-500}
repo_root=$(cd "$(dirname "$0")/../.." && pwd)
target=${CARGO_TARGET_DIR:-$repo_root/target}/release
ours_bin=$target/herdr-mcp
bare_bin=$(ls -t "$target"/deps/fs_read_latency-* 2>/dev/null | grep -v '\.d$' | head -n1 || true)
for tool in valgrind callgrind_control python3 git; do
  command -v "$tool" >/dev/null || { echo "needs $tool" >&2; exit 1; }
done
[[ -x $ours_bin && -n $bare_bin ]] || { echo "build first: cargo bench -p herdr-mcp --bench fs_read_latency --no-run" >&2; exit 1; }

work=$(mktemp -d /tmp/hmi.XXXXXX)
server_pid=
cleanup() {
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/repo" "$work/state" "$work/config"
git -C "$work/repo" init -q
python3 -c "import sys; sys.stdout.write(''.join(chr(97 + i % 26) for i in range(4096)))" >"$work/repo/four_k.txt"

# Sends N stateless tools/call POSTs over one keep-alive connection; fails on any
# non-200 answer.
cat >"$work/client.py" <<'EOF'
import http.client, json, socket, sys
class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost")
        self.unix_path = path
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.unix_path)
sock, tool, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
args = {"herdr_fs_read": {"path": "four_k.txt"}, "echo": {"text": "x"}, "fixed_reply": {}}[tool]
body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": args}}).encode()
headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
conn = UnixConnection(sock)
for _ in range(n):
    conn.request("POST", "/mcp", body, headers)
    reply = conn.getresponse()
    data = reply.read()
    if reply.status != 200 or b'"isError":true' in data:
        sys.exit(f"{tool}: HTTP {reply.status}: {data[:300]!r}")
print(len(data))
EOF

start_server() {
  local name=$1 sock=$2 out=$3
  case $name in
    ours)
      HERDR_MCP_LOG=warn XDG_STATE_HOME=$work/state XDG_CONFIG_HOME=$work/config \
        valgrind --tool=callgrind --callgrind-out-file="$out" \
        "$ours_bin" serve --socket "$sock" --root "$work/repo" 2>"$work/$name.valgrind" &
      ;;
    bare|floor)
      # The same allocator as herdr-mcp (mimalloc) unless BARE_ALLOC=system.
      HERDR_BENCH_ALLOC=${BARE_ALLOC:-mimalloc} \
        valgrind --tool=callgrind --callgrind-out-file="$out" "$bare_bin" --bare-server "$sock" "$work/repo/four_k.txt" \
        2>"$work/$name.valgrind" &
      ;;
  esac
  server_pid=$!
}

# measure NAME TOOL → sets `result` to the server's instructions per call and
# `reply_bytes` to the length of its reply (no subshell, so the EXIT trap still
# stops a server left running by a failure)
measure() {
  local name=$1 tool=$2
  local sock=$work/$name.sock out=$work/$name.callgrind
  start_server "$name" "$sock" "$out"
  local deadline=$((SECONDS + 120))
  until [[ -S $sock ]] && python3 "$work/client.py" "$sock" "$tool" 1 >/dev/null 2>&1; do
    (( SECONDS < deadline )) || { echo "$name did not come up; see $work/$name.valgrind" >&2; exit 1; }
    sleep 0.2
  done
  reply_bytes=$(python3 "$work/client.py" "$sock" "$tool" 200)
  callgrind_control -z "$server_pid" >/dev/null 2>&1
  python3 "$work/client.py" "$sock" "$tool" "$calls" >/dev/null
  callgrind_control -d "$server_pid" >/dev/null 2>&1
  kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=
  local dump total
  dump=$(ls -t "$out".* | head -n1)
  total=$(awk '/^(summary|totals):/ {print $2; exit}' "$dump")
  result=$((total / calls))
  if [[ -n ${KEEP_PROFILES:-} ]]; then
    mkdir -p "$KEEP_PROFILES" && cp "$dump" "$KEEP_PROFILES/$name.callgrind"
  fi
}

measure ours herdr_fs_read; ours=$result; ours_bytes=$reply_bytes
measure bare echo; bare=$result
measure floor fixed_reply; floor=$result; floor_bytes=$reply_bytes
# The floor means something only while its reply matches ours in size (3 %).
if (( floor_bytes * 100 < ours_bytes * 97 || floor_bytes * 100 > ours_bytes * 103 )); then
  echo "fixed_reply answers $floor_bytes bytes, herdr_fs_read $ours_bytes: the floor no longer matches ours" >&2
  exit 1
fi
echo "instructions per call, server side, $calls sequential calls after a 200-call warm-up"
echo "  herdr_fs_read (ours):   $ours   ($ours_bytes reply bytes)"
echo "  echo (bare rmcp):       $bare"
echo "  fixed_reply (floor):    $floor   ($floor_bytes reply bytes)"
awk -v o="$ours" -v b="$bare" -v f="$floor" 'BEGIN {
  printf "  ratio ours/bare:        %.2fx\n", o / b
  printf "  ratio ours/floor:       %.2fx\n", o / f
  printf "  ratio floor/bare:       %.2fx\n", f / b
}'
# A valgrind that does not know openat2 (x86-64 syscall 437; 3.19 does not) answers
# ENOSYS, so ours then opens files by its fallback route (realpath, then open) and
# these counts include that route, not the one ours takes natively.
if grep -q "unhandled amd64-linux syscall: 437" "$work/ours.valgrind"; then
  echo "  note: this valgrind does not run openat2, so ours took its fallback route for opening files"
fi
