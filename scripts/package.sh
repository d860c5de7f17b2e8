#!/usr/bin/env bash
# Builds a relocatable tarball of herdr-mcp for Linux: both binaries, the unpacked browser
# extension and a zip of it, and an install.sh that installs them into a prefix (default
# ~/.local) and registers the native host with the installed binary. Unpack it anywhere.
#   scripts/package.sh [--binaries DIR] [--extension DIR] [--out DIR] [--fast]
#     --binaries DIR   take herdr-mcp and herdr-nmhost from DIR instead of a release build
#                      (the test command packs its debug binaries: target/debug)
#     --extension DIR  take the unpacked extension from DIR (default: dist/extension, built
#                      with scripts/build-extension.sh when it is missing)
#     --out DIR        where the tarball goes (default: dist); its path is the last line printed
#     --fast           compress quickly (gzip -1 instead of -9), for tests
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin_dir="" ext_dir="" out="$root/dist" level=9
while [ $# -gt 0 ]; do
  case "$1" in
    --binaries) bin_dir="${2:?--binaries needs a folder}"; shift 2 ;;
    --extension) ext_dir="${2:?--extension needs a folder}"; shift 2 ;;
    --out) out="${2:?--out needs a folder}"; shift 2 ;;
    --fast) level=1; shift ;;
    -h | --help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "package: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

if [ -z "$bin_dir" ]; then
  cargo build --release --manifest-path "$root/Cargo.toml" -p herdr-mcp -p herdr-nmhost
  bin_dir="${CARGO_TARGET_DIR:-$root/target}/release"
fi
for bin in herdr-mcp herdr-nmhost; do
  [ -x "$bin_dir/$bin" ] || { echo "package: $bin_dir/$bin is missing (build it, or name the folder with --binaries)" >&2; exit 1; }
done
if [ -z "$ext_dir" ]; then
  ext_dir="$root/dist/extension"
  [ -f "$ext_dir/manifest.json" ] || { "$root/scripts/wasm-toolchain.sh" && "$root/scripts/build-extension.sh"; }
fi
[ -f "$ext_dir/manifest.json" ] || { echo "package: $ext_dir holds no extension (no manifest.json)" >&2; exit 1; }

version="$("$bin_dir/herdr-mcp" --version | awk '{print $2}')"
[ -n "$version" ] || { echo "package: $bin_dir/herdr-mcp --version said nothing" >&2; exit 1; }
name="herdr-mcp-$version-linux-$(uname -m)"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
stage="$(mktemp -d "$out/.package.XXXXXX")"
trap 'rm -rf "$stage"' EXIT
pkg="$stage/$name"
mkdir -p "$pkg/bin" "$pkg/share/herdr-mcp"
for bin in herdr-mcp herdr-nmhost; do
  cp "$bin_dir/$bin" "$pkg/bin/$bin"
  chmod 755 "$pkg/bin/$bin"
done
cp -R "$ext_dir" "$pkg/share/herdr-mcp/extension"
zip_file="$pkg/share/herdr-mcp/herdr-mcp-extension-$version.zip"
# zip, else python3, else node (scripts/package/zipdir.cjs); HERDR_PACKAGE_ZIP names one.
zipper="${HERDR_PACKAGE_ZIP:-}"
if [ -z "$zipper" ]; then
  for z in zip python3 node; do command -v "$z" >/dev/null && { zipper="$z"; break; }; done
fi
case "$zipper" in
  zip) (cd "$pkg/share/herdr-mcp/extension" && zip -qrX "$zip_file" .) ;;
  python3) (cd "$pkg/share/herdr-mcp/extension" && python3 -m zipfile -c "$zip_file" $(ls -A)) ;;
  node) node "$root/scripts/package/zipdir.cjs" "$pkg/share/herdr-mcp/extension" "$zip_file" ;;
  *) echo "package: the extension's zip needs zip, python3 or node, and none is installed${zipper:+ (HERDR_PACKAGE_ZIP=$zipper)}" >&2; exit 1 ;;
esac
cp "$root/scripts/package/install.sh" "$pkg/install.sh"
chmod 755 "$pkg/install.sh"
grep -o '[a-p]\{32\}' "$root/extension-shell/EXTENSION_ID.md" | head -1 > "$pkg/share/herdr-mcp/EXTENSION_ID"
cp "$root/LICENSE" "$pkg/LICENSE" 2>/dev/null || true
cat > "$pkg/README.txt" <<EOF
herdr-mcp $version for Linux ($(uname -m)).

  ./install.sh                 installs into ~/.local (bin/, share/herdr-mcp/) and registers
                               the native host with each Chrome, Chromium, Brave or Edge here
  ./install.sh --prefix DIR    installs into DIR/bin and DIR/share/herdr-mcp instead

Then load the extension (chrome://extensions, Developer mode, "Load unpacked":
PREFIX/share/herdr-mcp/extension), start the runtime in your project
(herdr-mcp serve --root ~/your-project) and check every layer with herdr-mcp doctor.
EOF
tarball="$out/$name.tar.gz"
tar -C "$stage" -cf - "$name" | gzip "-$level" >"$tarball.tmp"
mv -f "$tarball.tmp" "$tarball"
echo "package: $(du -h "$tarball" | cut -f1) $name (herdr-mcp, herdr-nmhost, the extension and its zip, install.sh)"
echo "$tarball"
