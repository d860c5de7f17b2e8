#!/usr/bin/env bash
# Installs this herdr-mcp package (made by scripts/package.sh) and registers its native host.
#   ./install.sh [--prefix DIR] [-- HERDR-NMHOST INSTALL OPTIONS]
# Copies bin/herdr-mcp and bin/herdr-nmhost into PREFIX/bin and the extension into
# PREFIX/share/herdr-mcp (PREFIX: ~/.local unless --prefix DIR), then runs
# `PREFIX/bin/herdr-nmhost install --binary PREFIX/bin/herdr-nmhost` (options after `--` go to
# it, e.g. -- --browser brave, or -- --user-data-dir DIR). The unpacked package can be removed
# afterwards: nothing refers to it.
set -euo pipefail
pkg="$(cd "$(dirname "$0")" && pwd)"
prefix="${HOME:+$HOME/.local}"
host_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix="${2:?--prefix needs a folder}"; shift 2 ;;
    --prefix=*) prefix="${1#--prefix=}"; shift ;;
    --) shift; host_args=("$@"); break ;;
    -h | --help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [ "$(uname -s)" != Linux ]; then
  echo "install.sh: this package is for Linux; $(uname -s) is not supported yet" >&2
  exit 2
fi
[ -n "$prefix" ] || { echo "install.sh: HOME is not set: name the install folder with --prefix DIR" >&2; exit 2; }
case "$prefix" in /*) ;; *) prefix="$PWD/$prefix" ;; esac
for f in bin/herdr-mcp bin/herdr-nmhost share/herdr-mcp/extension/manifest.json; do
  [ -e "$pkg/$f" ] || { echo "install.sh: $pkg/$f is missing: unpack the whole package again" >&2; exit 1; }
done

echo "install.sh: installing into $prefix"
mkdir -p "$prefix/bin" "$prefix/share/herdr-mcp"
# Under a temporary name, then renamed: a running herdr-mcp keeps its old file, and a browser
# never starts a half-written host.
for bin in herdr-mcp herdr-nmhost; do
  cp "$pkg/bin/$bin" "$prefix/bin/.$bin.new.$$"
  chmod 755 "$prefix/bin/.$bin.new.$$"
  mv -f "$prefix/bin/.$bin.new.$$" "$prefix/bin/$bin"
  echo "  $prefix/bin/$bin"
done
share="$prefix/share/herdr-mcp"
rm -rf "$share/extension.new.$$"
cp -R "$pkg/share/herdr-mcp/extension" "$share/extension.new.$$"
rm -rf "$share/extension"
mv "$share/extension.new.$$" "$share/extension"
echo "  $share/extension"
for zip in "$pkg"/share/herdr-mcp/*.zip; do
  [ -e "$zip" ] || continue
  cp "$zip" "$share/"
  echo "  $share/$(basename "$zip")"
done

nmhost="$prefix/bin/herdr-nmhost"
registered=yes
"$nmhost" install --binary "$nmhost" ${host_args[@]+"${host_args[@]}"} || registered=no
if [ "$registered" = no ]; then
  echo "install.sh: the native host is not registered (see above); once the browser is installed, run:" >&2
  echo "  $nmhost install" >&2
fi
case ":${PATH:-}:" in
  *":$prefix/bin:"*) ;;
  *)
    echo "install.sh: note: $prefix/bin is not on your PATH; the options page and \`herdr-mcp doctor\` name herdr-mcp and herdr-nmhost." >&2
    echo "  Add it (e.g. to ~/.profile, then log in again):  export PATH=\"$prefix/bin:\$PATH\"" >&2 ;;
esac
id="$(cat "$pkg/share/herdr-mcp/EXTENSION_ID" 2>/dev/null || true)"
cat <<EOF

Browser extension: open chrome://extensions, switch on Developer mode, click "Load unpacked"
and choose $share/extension${id:+ (id $id)}.
Start the runtime in your project:  $prefix/bin/herdr-mcp serve --root ~/your-project
Check every layer:                  $prefix/bin/herdr-mcp doctor
EOF
[ "$registered" = yes ]
