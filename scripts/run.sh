#!/usr/bin/env bash
# Builds the runtime and serves the git project of the current directory.
# Extra arguments go to `herdr-mcp serve` (try `--help`).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cargo build --release --manifest-path "$here/Cargo.toml" -p herdr-mcp
exec "$here/target/release/herdr-mcp" serve "$@"
