#!/usr/bin/env bash
# The user guide's screenshots (docs/*.md): each workspace on the demo world, rendered offscreen at a fixed size.
# Usage: scripts/screenshots.sh [OUT_DIR (default docs/screenshots)] [WxH (default 1600x1000)]
# Runs `probescope gui --screenshot`, which waits until the workspace has finished its first work, so the images
# show real content. The first run generates the demo data into the cache folder (a minute or so).
set -euo pipefail
out="${1:-docs/screenshots}"
size="${2:-1600x1000}"
python="${PYTHON:-python}"
mkdir -p "$out"
for workspace in dissection gallery similarity; do
    QT_QPA_PLATFORM="${QT_QPA_PLATFORM:-offscreen}" "$python" -m probescope gui \
        --workspace "$workspace" --size "$size" --theme light --screenshot "$out/$workspace.png"
done
