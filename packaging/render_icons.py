"""Render assets/icons/probescope.svg to the PNG sizes desktops ask for (16..512), with Qt's SVG renderer.

Run after editing the SVG: `python packaging/render_icons.py` (offscreen; writes assets/icons/probescope-N.png).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ICONS = Path(__file__).resolve().parent.parent / "src" / "probescope" / "assets" / "icons"
SIZES = (16, 24, 32, 48, 64, 128, 256, 512)


def render(svg: Path, out_dir: Path, sizes: tuple[int, ...] = SIZES) -> list[Path]:
    """Write out_dir/probescope-N.png for each size; returns the paths."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QGuiApplication, QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    app = QGuiApplication.instance() or QGuiApplication([sys.argv[0]])  # noqa: F841 (Qt needs one for fonts/paint)
    renderer = QSvgRenderer(str(svg))
    if not renderer.isValid():
        raise SystemExit(f"{svg}: not a valid SVG")
    written = []
    for size in sizes:
        image = QImage(size, size, QImage.Format.Format_ARGB32)
        image.fill(Qt.GlobalColor.transparent)
        painter = QPainter(image)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        renderer.render(painter)
        painter.end()
        path = out_dir / f"probescope-{size}.png"
        if not image.save(str(path)):
            raise SystemExit(f"{path}: could not write")
        written.append(path)
    return written


if __name__ == "__main__":
    for path in render(ICONS / "probescope.svg", ICONS):
        print(path)
