"""What an exported figure shows, read back from the file (for tests of exports): the texts and images an SVG draws,
each with the box its ink covers and the clip it is drawn under, in page units; the SVG's size; a PNG's recorded
resolution.

Texts are measured with Qt's font metrics from the font each <text> element names (the ink's tight box, not the
line's), so a formula cut by its cell, a column pushed past the card's edge or an elided "sno…t-s" all show up as
marks that are not whole.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from PySide6.QtGui import QColor, QFont, QFontMetricsF, QImage

from probescope.app.figures.svg_geometry import IDENTITY, Matrix, apply, compose

SVG = "{http://www.w3.org/2000/svg}"
TOLERANCE = 1.0  # page units (pixels at the screen's resolution) a mark may stick out of its clip
_TRANSFORM = re.compile(r"(matrix|translate|scale)\(([^)]*)\)")
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_TOKEN = re.compile(r"\w+|[^\w\s]")
Box = tuple[float, float, float, float]  # x0, y0, x1, y1


@dataclass(frozen=True)
class Mark:
    """A text or an image the figure draws: `box` is what it covers, `clip` what it is drawn under (the page, its
    widget, its parents, its cell), `piece` the class of the widget or plot item that drew it."""

    kind: str  # "text" | "image"
    text: str
    box: Box
    clip: Box
    piece: str
    fill: str = ""  # a text's colour

    @property
    def whole(self) -> bool:
        (x0, y0, x1, y1), (c0, d0, c1, d1) = self.box, self.clip
        return x0 >= c0 - TOLERANCE and y0 >= d0 - TOLERANCE and x1 <= c1 + TOLERANCE and y1 <= d1 + TOLERANCE


def parse_transform(text: str | None) -> Matrix:
    m = IDENTITY
    for kind, args in _TRANSFORM.findall(text or ""):
        v = [float(x) for x in _NUMBER.findall(args)]
        if kind == "matrix":
            step = tuple(v)
        elif kind == "translate":
            step = (1.0, 0.0, 0.0, 1.0, v[0], v[1] if len(v) > 1 else 0.0)
        else:
            step = (v[0], 0.0, 0.0, v[1] if len(v) > 1 else v[0], 0.0, 0.0)
        m = compose(m, step)
    return m


def _box(m: Matrix, x0: float, y0: float, x1: float, y1: float) -> Box:
    corners = [apply(m, x, y) for x, y in ((x0, y0), (x1, y0), (x1, y1), (x0, y1))]
    xs, ys = [c[0] for c in corners], [c[1] for c in corners]
    return min(xs), min(ys), max(xs), max(ys)


def _meet(a: Box, b: Box) -> Box:
    return max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])


@lru_cache(maxsize=256)
def _metrics(family: str, size: float, weight: int, italic: bool) -> QFontMetricsF:
    font = QFont(family)
    font.setPointSizeF(size * 72 / 96)  # the generator writes pixels at 96 dpi
    font.setWeight(QFont.Weight(weight))
    font.setItalic(italic)
    return QFontMetricsF(font)


def _text_box(element: ET.Element, style: dict[str, str]) -> tuple[float, float, float, float] | None:
    text = element.text or ""
    if not text.strip():
        return None
    fm = _metrics(style.get("font-family", "Sans Serif"), float(style.get("font-size", "12")),
                  int(float(style.get("font-weight", "400"))), style.get("font-style") == "italic")
    ink = fm.tightBoundingRect(text)
    x, y = float(element.get("x", 0)), float(element.get("y", 0))
    return x + ink.left(), y + ink.top(), x + ink.right(), y + ink.bottom()


def _clip_box(clip_path: ET.Element) -> tuple[float, float, float, float] | None:
    numbers: list[float] = []
    for child in clip_path:
        tag = child.tag.removeprefix(SVG)
        if tag == "rect":
            x, y = float(child.get("x", 0)), float(child.get("y", 0))
            numbers += [x, y, x + float(child.get("width", 0)), y + float(child.get("height", 0))]
        elif tag == "path":
            numbers += [float(v) for v in _NUMBER.findall(child.get("d", ""))]
    if not numbers:
        return None
    xs, ys = numbers[0::2], numbers[1::2]
    return min(xs), min(ys), max(xs), max(ys)


def svg_marks(data: bytes) -> list[Mark]:
    """Every text and image `data` (an SVG export) draws, in page units (the viewBox's)."""
    root = ET.fromstring(data)
    clips = {c.get("id"): c for c in root.iter(f"{SVG}clipPath")}
    view = [float(v) for v in root.get("viewBox", "0 0 0 0").split()]
    page: Box = (view[0], view[1], view[0] + view[2], view[1] + view[3])
    marks: list[Mark] = []
    font_keys = ("font-family", "font-size", "font-weight", "font-style", "fill")

    def walk(element: ET.Element, m: Matrix, clip: Box, style: dict[str, str], piece: str) -> None:
        tag = element.tag.removeprefix(SVG)
        if tag in ("defs", "clipPath", "title", "desc"):
            return
        m = compose(m, parse_transform(element.get("transform")))
        style = {**style, **{k: element.get(k) for k in font_keys if element.get(k)}}
        piece = element.get("class") or piece
        ref = re.fullmatch(r"url\(#([^)]+)\)", element.get("clip-path", ""))
        if ref and ref.group(1) in clips:
            box = _clip_box(clips[ref.group(1)])
            if box is not None:
                clip = _meet(clip, _box(m, *box))
        if tag == "text":
            box = _text_box(element, style)
            if box is not None:
                marks.append(Mark("text", element.text or "", _box(m, *box), clip, piece, style.get("fill", "")))
        elif tag == "image":
            x, y = float(element.get("x", 0)), float(element.get("y", 0))
            box = _box(m, x, y, x + float(element.get("width", 0)), y + float(element.get("height", 0)))
            if box[2] - box[0] > 0.5 and box[3] - box[1] > 0.5:
                marks.append(Mark("image", "", box, clip, piece))
        for child in element:
            walk(child, m, clip, style, piece)

    walk(root, IDENTITY, page, {}, "")
    return marks


def tokens(text: str) -> list[str]:
    """The runs of letters and digits of `text` and its other characters one by one: the same in a text however
    it wraps (a label breaks a path after a '/', a formula after a '-'); a word cut by an ellipsis is not there."""
    return _TOKEN.findall(text)


def whole_words(marks: list[Mark], skip_pieces: tuple[str, ...] = ()) -> Counter:
    """The tokens of the texts drawn whole, counted; those of `skip_pieces` (tick labels, which a plot picks anew at
    each size) left out. A cut text's tokens are missing, an elided one's are partly ("sno", "…", "t", "-", "s")."""
    return Counter(token for m in marks if m.kind == "text" and m.whole and m.piece not in skip_pieces
                   for token in tokens(m.text))


def whole_images(marks: list[Mark]) -> int:
    return sum(1 for m in marks if m.kind == "image" and m.whole)


def text_lightness(marks: list[Mark]) -> float:
    """The median lightness (0 black to 1 white) of the texts' colours: dark text on a light figure."""
    values = sorted(QColor(m.fill).lightnessF() for m in marks if m.kind == "text" and m.fill.startswith("#"))
    return values[len(values) // 2] if values else 0.0


def png_dpi(png: str | Path | QImage) -> tuple[float, float]:
    """The resolution a PNG records (its pHYs chunk), in dots per inch (Qt reads 96 where it records none): of the
    file at a path, or of the QImage read from it (not decoded again)."""
    image = png if isinstance(png, QImage) else QImage(str(png))
    return image.dotsPerMeterX() * 0.0254, image.dotsPerMeterY() * 0.0254


def svg_inches(data: bytes) -> tuple[float, float]:
    root = ET.fromstring(data)
    return float(root.get("width").removesuffix("in")), float(root.get("height").removesuffix("in"))
