#!/usr/bin/env bash
# Install probescope's desktop integration: the .desktop entry, the icon set and the AppStream metadata.
# Usage: packaging/linux/install.sh [PREFIX (default ~/.local)] [BUNDLE_DIR]
# With BUNDLE_DIR (a built dist/probescope), PREFIX/bin/probescope becomes a link to the bundle's program;
# without it, `probescope` must already be on PATH (a pip install provides it).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
icons="$here/../../assets/icons"
prefix="${1:-$HOME/.local}"
bundle="${2:-}"
id=io.github.probescope.Probescope

install -Dm644 "$here/$id.desktop" "$prefix/share/applications/$id.desktop"
install -Dm644 "$here/$id.metainfo.xml" "$prefix/share/metainfo/$id.metainfo.xml"
install -Dm644 "$icons/probescope.svg" "$prefix/share/icons/hicolor/scalable/apps/probescope.svg"
for png in "$icons"/probescope-*.png; do
    size="${png##*-}"; size="${size%.png}"
    install -Dm644 "$png" "$prefix/share/icons/hicolor/${size}x${size}/apps/probescope.png"
done
if [ -n "$bundle" ]; then
    mkdir -p "$prefix/bin"
    ln -sfn "$(cd "$bundle" && pwd)/probescope" "$prefix/bin/probescope"
fi
command -v update-desktop-database >/dev/null && update-desktop-database -q "$prefix/share/applications" || true
command -v gtk-update-icon-cache >/dev/null && gtk-update-icon-cache -q -t "$prefix/share/icons/hicolor" || true
echo "installed the desktop entry, icons and metadata under $prefix" >&2
