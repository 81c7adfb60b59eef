"""SVG post-processing for renderers without `vector-effect="non-scaling-stroke"` (librsvg, Inkscape-based pipelines,
ImageMagick). No Qt here.

pyqtgraph draws curves in data coordinates under a scaling transform (x by 12, y by -339, ...) with cosmetic pens, and
Qt's SVG generator writes that as a transformed group whose strokes are marked non-scaling. A renderer that ignores
the mark scales the stroke too: a 2 px line becomes a band hundreds of units wide. Here every such element's geometry
is mapped into page coordinates and given the inverse of its ancestors' transform, so the net transform is the
identity: the picture is the same in every renderer, and strokes are as wide as drawn.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Callable

SVG_NS = "http://www.w3.org/2000/svg"
XLINK_NS = "http://www.w3.org/1999/xlink"
_MATRIX = re.compile(r"matrix\(\s*([^)]*)\)")
_PATH_TOKEN = re.compile(r"[MLCQZmlcqzHVhvSsTtAa]|[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
Matrix = tuple[float, float, float, float, float, float]  # SVG's matrix(a, b, c, d, e, f)
IDENTITY: Matrix = (1.0, 0.0, 0.0, 1.0, 0.0, 0.0)


def parse_matrix(text: str | None) -> Matrix:
    if not text:
        return IDENTITY
    m = _MATRIX.fullmatch(text.strip())
    if m is None:
        raise ValueError(f"unsupported transform {text!r}")
    values = [float(v) for v in re.split(r"[\s,]+", m.group(1).strip())]
    if len(values) != 6:
        raise ValueError(f"unsupported transform {text!r}")
    return tuple(values)  # type: ignore[return-value]


def compose(outer: Matrix, inner: Matrix) -> Matrix:
    """outer ∘ inner (inner applied first)."""
    a1, b1, c1, d1, e1, f1 = outer
    a2, b2, c2, d2, e2, f2 = inner
    return (a1 * a2 + c1 * b2, b1 * a2 + d1 * b2, a1 * c2 + c1 * d2, b1 * c2 + d1 * d2,
            a1 * e2 + c1 * f2 + e1, b1 * e2 + d1 * f2 + f1)


def invert(m: Matrix) -> Matrix | None:
    a, b, c, d, e, f = m
    det = a * d - b * c
    if abs(det) < 1e-12:
        return None
    return (d / det, -b / det, -c / det, a / det, (c * f - d * e) / det, (b * e - a * f) / det)


def apply(m: Matrix, x: float, y: float) -> tuple[float, float]:
    a, b, c, d, e, f = m
    return a * x + c * y + e, b * x + d * y + f


def _fmt(v: float) -> str:
    return f"{v:.3f}".rstrip("0").rstrip(".") if v else "0"


def map_points(points: str, m: Matrix) -> str:
    values = [float(v) for v in re.split(r"[\s,]+", points.strip()) if v]
    pairs = [apply(m, values[k], values[k + 1]) for k in range(0, len(values) - 1, 2)]
    return " ".join(f"{_fmt(x)},{_fmt(y)}" for x, y in pairs)


def map_path(d: str, m: Matrix) -> str | None:
    """Path data with absolute M, L, C, Q, Z commands mapped through `m`; None for anything else."""
    out: list[str] = []
    numbers: list[float] = []
    command = ""

    def flush() -> bool:
        if len(numbers) % 2:
            return False
        pairs = [apply(m, numbers[k], numbers[k + 1]) for k in range(0, len(numbers), 2)]
        out.append(command + " ".join(f"{_fmt(x)},{_fmt(y)}" for x, y in pairs))
        return True

    for token in _PATH_TOKEN.findall(d):
        if token.isalpha():
            if command and not flush():
                return None
            if token not in "MLCQZ":
                return None
            command, numbers = token, []
        else:
            numbers.append(float(token))
    if command and not flush():
        return None
    return " ".join(out)


def _map_element(element: ET.Element, m: Matrix) -> bool:
    tag = element.tag.rsplit("}", 1)[-1]
    if tag in ("polyline", "polygon"):
        element.set("points", map_points(element.get("points", ""), m))
    elif tag == "path":
        d = map_path(element.get("d", ""), m)
        if d is None:
            return False
        element.set("d", d)
    elif tag == "line":
        x1, y1 = apply(m, float(element.get("x1", 0)), float(element.get("y1", 0)))
        x2, y2 = apply(m, float(element.get("x2", 0)), float(element.get("y2", 0)))
        for key, value in (("x1", x1), ("y1", y1), ("x2", x2), ("y2", y2)):
            element.set(key, _fmt(value))
    elif tag == "rect":
        x, y = float(element.get("x", 0)), float(element.get("y", 0))
        w, h = float(element.get("width", 0)), float(element.get("height", 0))
        corners = [apply(m, px, py) for px, py in ((x, y), (x + w, y), (x + w, y + h), (x, y + h))]
        element.tag = element.tag.replace("rect", "path")
        for key in ("x", "y", "width", "height"):
            element.attrib.pop(key, None)
        element.set("d", "M" + " L".join(f"{_fmt(px)},{_fmt(py)}" for px, py in corners) + " Z")
    else:
        return False
    return True


def flatten_scaled_strokes(svg: bytes) -> bytes:
    """Every non-scaling-stroke element of `svg` with its geometry in page coordinates (see the module text)."""
    ET.register_namespace("", SVG_NS)
    ET.register_namespace("xlink", XLINK_NS)
    root = ET.fromstring(svg)
    changed = False

    def walk(element: ET.Element, outer: Matrix) -> None:
        nonlocal changed
        own = compose(outer, parse_matrix(element.get("transform")))
        for child in list(element):
            if child.get("vector-effect") == "non-scaling-stroke":
                total = compose(own, parse_matrix(child.get("transform")))
                inverse = invert(own)
                if total == IDENTITY:  # already in page coordinates: the mark does nothing
                    del child.attrib["vector-effect"]
                    changed = True
                elif inverse is not None and _map_element(child, total):
                    if own == IDENTITY:
                        child.attrib.pop("transform", None)
                    else:
                        child.set("transform", "matrix({})".format(",".join(f"{v:.9g}" for v in inverse)))
                    del child.attrib["vector-effect"]
                    changed = True
                continue
            walk(child, own)

    walk(root, IDENTITY)
    if not changed:
        return svg
    return ('<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n' + ET.tostring(root, encoding="unicode")).encode()


_ID_REF = re.compile(r"url\(#([^)]+)\)")


def _rename_ids(element: ET.Element, prefix: str) -> None:
    """Prefix every id in `element`'s tree and every url(#id) / xlink:href="#id" reference to it."""
    for node in element.iter():
        if "id" in node.attrib:
            node.set("id", prefix + node.get("id"))
        for key, value in list(node.attrib.items()):
            if "url(#" in value:
                node.set(key, _ID_REF.sub(lambda m: f"url(#{prefix}{m.group(1)})", value))
            elif key == f"{{{XLINK_NS}}}href" and value.startswith("#"):
                node.set(key, "#" + prefix + value[1:])


def font_families(family: str, resolved: str) -> str:
    """An SVG font-family list for a Qt family: the font Qt drew with (`resolved`: Qt's own names such as
    'Sans Serif' are aliases no SVG renderer knows, which substitute a font of other widths and clip the text),
    then the family as written, then the generic family a renderer has in any case."""
    lowered = family.lower()
    generic = "monospace" if "mono" in lowered or "courier" in lowered else (
        "serif" if "serif" in lowered and "sans" not in lowered else "sans-serif")
    names = [name for name in dict.fromkeys((resolved, family)) if name and name.lower() != generic]
    return ", ".join([*(f"'{name}'" if " " in name else name for name in names), generic])


def compose_svg(pieces: list[tuple[str, tuple[float, float], tuple[float, float, float, float], bytes]],
                size: tuple[float, float], title: str, dpi: float = 96.0,
                fonts: Callable[[str], str] | None = None) -> bytes:
    """One SVG of `size` (user units: pixels at `dpi`, so its width and height are given in inches) from SVG
    pieces, each (name, origin, shown rectangle x, y, w, h, document): a piece's drawing is moved to its origin and
    clipped to its rectangle, in a group of class `name` (what drew it); ids are made unique per piece. `fonts`
    maps a font-family as Qt wrote it to the list the SVG names (`font_families`)."""
    ET.register_namespace("", SVG_NS)
    ET.register_namespace("xlink", XLINK_NS)
    width, height = size
    root = ET.Element(f"{{{SVG_NS}}}svg", {"version": "1.1", "width": f"{width / dpi:.4f}in",
                                            "height": f"{height / dpi:.4f}in",
                                            "viewBox": f"0 0 {_fmt(width)} {_fmt(height)}"})
    ET.SubElement(root, f"{{{SVG_NS}}}title").text = title
    defs = ET.SubElement(root, f"{{{SVG_NS}}}defs")
    for k, (name, (ox, oy), (x, y, w, h), document) in enumerate(pieces):
        piece = ET.fromstring(document)
        _rename_ids(piece, f"p{k}_")
        if fonts is not None:
            for node in piece.iter():
                if "font-family" in node.attrib:
                    node.set("font-family", fonts(node.get("font-family")))
        clip = ET.SubElement(defs, f"{{{SVG_NS}}}clipPath", {"id": f"piece{k}"})
        ET.SubElement(clip, f"{{{SVG_NS}}}rect", {"x": _fmt(x), "y": _fmt(y), "width": _fmt(w), "height": _fmt(h)})
        clipped = ET.SubElement(root, f"{{{SVG_NS}}}g", {"clip-path": f"url(#piece{k})", "class": name})
        moved = ET.SubElement(clipped, f"{{{SVG_NS}}}g", {"transform": f"translate({_fmt(ox)},{_fmt(oy)})"})
        for child in piece:
            if child.tag.rsplit("}", 1)[-1] not in ("title", "desc"):
                moved.append(child)
    return ('<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n' + ET.tostring(root, encoding="unicode")).encode()
