#!/usr/bin/env bash
# Smoke test of a built bundle: it starts, knows its version, and renders a workspace on the demo world.
# Usage: packaging/smoke_test.sh [BUNDLE_DIR (default dist/probescope)] [WORKSPACE (default gallery)]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bundle="${1:-$root/dist/probescope}"
workspace="${2:-gallery}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$bundle/probescope" --version
start=$(date +%s)
PROBESCOPE_CACHE="$tmp/cache" XDG_CONFIG_HOME="$tmp/config" QT_QPA_PLATFORM=offscreen \
    "$bundle/probescope" gui --workspace "$workspace" --size 1200x800 --screenshot "$tmp/smoke.png"
[ -s "$tmp/smoke.png" ] || { echo "smoke test: no screenshot written" >&2; exit 1; }
mkdir -p "$root/build"
cp "$tmp/smoke.png" "$root/build/smoke-$workspace.png"
echo "smoke test: passed in $(( $(date +%s) - start )) s; screenshot kept as build/smoke-$workspace.png" >&2
