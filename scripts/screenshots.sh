#!/usr/bin/env bash
# The user guide's screenshots (docs/*.md): each workspace on the demo world (PNG, and SVG/PDF vector exports),
# and the Dissection workspace's Batch
# tab on a small batch, rendered offscreen at a fixed size.
# Usage: scripts/screenshots.sh [OUT_DIR (default docs/screenshots)] [WxH (default 1600x1000)]
# Runs `probescope gui --screenshot`, which waits until the workspace has finished its first work, so the images
# show real content. The first run generates the demo data into the cache folder (a minute or so).
set -euo pipefail
out="${1:-docs/screenshots}"
size="${2:-1600x1000}"
python="${PYTHON:-python}"
mkdir -p "$out"
for workspace in dissection gallery similarity; do
    for format in png svg pdf; do  # the vector exports are checked against the PNG by tests/test_app_export_vector.py
        QT_QPA_PLATFORM="${QT_QPA_PLATFORM:-offscreen}" "$python" -m probescope gui \
            --workspace "$workspace" --size "$size" --theme light --screenshot "$out/$workspace.$format"
    done
done
for format in png svg pdf; do  # the unit card: the figure researchers put in papers
    QT_QPA_PLATFORM="${QT_QPA_PLATFORM:-offscreen}" "$python" -m probescope gui \
        --workspace dissection --view "Unit card" --size "$size" --theme light --screenshot "$out/unit_card.$format"
done
for spec in "gallery real real_data Real data panel" "gallery detail gallery_realism Detail panel" \
    "dissection role role Role (ablation)" "dissection image image_view Image"; do  # one panel each
    read -r workspace panel name view <<<"$spec"
    unit=(); [ "$workspace" = dissection ] && unit=(--unit 93)  # (house AND village-s): what removing it costs
    QT_QPA_PLATFORM="${QT_QPA_PLATFORM:-offscreen}" "$python" -m probescope gui --workspace "$workspace" \
        --panel "$panel" "${unit[@]}" --view "$view" --size "$size" --theme light --screenshot "$out/$name.png"
done

# The Batch tab (docs/cluster.md): a small batch of the demo model's layer3 and layer4 and a random-activations
# baseline over 300 demo images, run here, then browsed.
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$python" -m probescope demo-data "$work/data" --images 300 2>/dev/null
"$python" -c "import numpy as np; np.save('$work/random.npy', np.random.default_rng(0).gamma(2.0, size=(300, 32, 4, 4)).astype(np.float32))"
cat > "$work/zoo.toml" <<'TOML'
[dataset]
path = "data"

[settings]
max_length = 2
searches = ["iou", "da-select", "da-stop"]
sweep_length = 3

[[models]]
spec = "demo"
layers = ["layer3", "layer4"]

[[models]]
name = "random"
activations = "random.npy"
TOML
"$python" -m probescope batch "$work/zoo.toml" --out "$work/zoo" 2>/dev/null
QT_QPA_PLATFORM="${QT_QPA_PLATFORM:-offscreen}" "$python" -m probescope gui \
    --batch "$work/zoo" --size "$size" --theme light --screenshot "$out/batch.png"
