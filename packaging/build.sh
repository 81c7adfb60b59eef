#!/usr/bin/env bash
# Build the one-folder bundle dist/probescope/ with PyInstaller, then smoke-test it.
# Usage: packaging/build.sh            (from any directory; uses $PYTHON, default: python)
# Needs PyInstaller 6 in that environment (pip install 'pyinstaller>=6,<7'). Prints the build time and the bundle
# size, then runs the bundle twice: `--version`, and `gui --screenshot` on the demo world (offscreen, a throwaway
# cache folder), which must write a non-empty PNG. Exit status non-zero when the build or the smoke test fails.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-python}"
build="$root/build/pyinstaller"
dist="$root/dist"
bundle="$dist/probescope"

rm -rf "$build" "$bundle"
mkdir -p "$build"
start=$(date +%s)
"$python" "$root/packaging/stage.py" "$build/stage" >/dev/null  # the package and its guide
PROBESCOPE_STAGE="$build/stage" "$python" -m PyInstaller --noconfirm --log-level WARN \
    --workpath "$build/work" --distpath "$dist" "$root/packaging/probescope.spec"
end=$(date +%s)
echo "build: $((end - start)) s; bundle: $(du -sh "$bundle" | cut -f1) in $bundle" >&2

"$root/packaging/smoke_test.sh" "$bundle"
