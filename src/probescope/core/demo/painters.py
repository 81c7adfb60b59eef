"""The demo world's painters: each object (a house with its parts, a tree, a boat...) and each scene class (which
objects, in which palettes) as calls on a canvas that paints pixels and labels at once (probescope.core.demo.world
holds the canvas and the vocabulary). A painter draws from the canvas's random generator only, so a seed gives the same
images.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from probescope.core.demo.world import Canvas


# ---- objects -------------------------------------------------------------------------------------------------


def _band(c: Canvas, obj: str, palette: Sequence[str], top: float, bottom: float) -> None:
    """A background region (sky, water, ground) spanning the width, with a few darker texture strokes."""
    color = c.color(palette)
    c.paint("rect", (0, top, 1, bottom), color, obj)
    for _ in range(int(c.rng.integers(2, 6))):
        y = c.rng.uniform(top, bottom)
        x = c.rng.uniform(-0.2, 0.8)
        h = c.rng.uniform(0.005, 0.02)
        c.paint("rect", (x, y, x + c.rng.uniform(0.2, 0.5), y + h), color, obj, shade=c.rng.uniform(0.8, 0.95))


def _house(c: Canvas, x: float, ground: float, w: float, roof: Sequence[str], windows: Sequence[str]) -> None:
    h = w * c.rng.uniform(0.7, 1.0)
    top = ground - h
    c.paint("rect", (x, top, x + w, ground), c.color(("white-c", "grey-c", "pink-c", "yellow-c", "brown-c")),
            "house", "facade")
    if c.rng.random() < 0.5:
        c.paint("rect", (x + 0.7 * w, top - 0.35 * w, x + 0.82 * w, top), c.color(("brown-c", "grey-c", "red-c")),
                "house", "chimney")
    c.paint("polygon", (x - 0.1 * w, top, x + 0.5 * w, top - 0.45 * w, x + 1.1 * w, top), c.color(roof),
            "house", "roof")
    door_x = x + c.rng.uniform(0.15, 0.55) * w
    c.paint("rect", (door_x, ground - 0.45 * h, door_x + 0.22 * w, ground), c.color(("brown-c", "black-c")),
            "house", "door")
    c.paint("ellipse", (door_x + 0.15 * w, ground - 0.25 * h, door_x + 0.2 * w, ground - 0.2 * h),
            c.color(("yellow-c", "grey-c")), "house", "door", "handle")
    window = c.color(windows)
    for wx in (0.1, 0.62):
        if c.rng.random() < 0.85:
            c.paint("rect", (x + wx * w, top + 0.15 * h, x + (wx + 0.25) * w, top + 0.4 * h), window,
                    "house", "window")


def _tree(c: Canvas, x: float, ground: float, size: float, crown: Sequence[str]) -> None:
    c.paint("rect", (x - 0.08 * size, ground - 0.5 * size, x + 0.08 * size, ground), c.color(("brown-c", "black-c")),
            "tree", "trunk")
    color = c.color(crown)
    top = ground - 1.25 * size
    if c.rng.random() < 0.5:
        c.paint("ellipse", (x - 0.42 * size, top, x + 0.42 * size, ground - 0.4 * size), color, "tree", "crown")
    else:
        c.paint("polygon", (x - 0.45 * size, ground - 0.4 * size, x, top, x + 0.45 * size, ground - 0.4 * size),
                color, "tree", "crown")


def _car(c: Canvas, x: float, ground: float, w: float) -> None:
    h = 0.38 * w
    body = c.color(("red-c", "blue-c", "yellow-c", "white-c", "grey-c", "green-c"))
    c.paint("polygon", (x + 0.2 * w, ground - 0.55 * h, x + 0.3 * w, ground - h, x + 0.7 * w, ground - h,
                        x + 0.8 * w, ground - 0.55 * h), body, "car")
    c.paint("polygon", (x + 0.3 * w, ground - 0.6 * h, x + 0.36 * w, ground - 0.9 * h, x + 0.64 * w,
                        ground - 0.9 * h, x + 0.7 * w, ground - 0.6 * h), c.color(("blue-c", "grey-c", "white-c")),
            "car", "window")
    c.paint("rect", (x, ground - 0.6 * h, x + w, ground - 0.2 * h), body, "car")
    for wx in (0.22, 0.78):
        r = 0.12 * w
        c.paint("ellipse", (x + wx * w - r, ground - 0.2 * h - r, x + wx * w + r, ground - 0.2 * h + r), "black-c",
                "car", "wheel")
        c.paint("ellipse", (x + wx * w - r / 2.5, ground - 0.2 * h - r / 2.5, x + wx * w + r / 2.5,
                            ground - 0.2 * h + r / 2.5), "grey-c", "car", "wheel", "hubcap")


def _boat(c: Canvas, x: float, water: float, w: float, hull: Sequence[str], sail: Sequence[str]) -> None:
    c.paint("rect", (x + 0.47 * w, water - 1.0 * w, x + 0.52 * w, water), c.color(("brown-c", "black-c")),
            "boat", "mast")
    c.paint("polygon", (x + 0.55 * w, water - 0.95 * w, x + 0.55 * w, water - 0.3 * w, x + 0.95 * w,
                        water - 0.3 * w), c.color(sail), "boat", "sail")
    c.paint("polygon", (x, water - 0.25 * w, x + w, water - 0.25 * w, x + 0.85 * w, water + 0.05 * w,
                        x + 0.15 * w, water + 0.05 * w), c.color(hull), "boat", "hull")


def _disc(c: Canvas, obj: str, palette: Sequence[str], x: float, y: float, r: float) -> None:
    c.paint("ellipse", (x - r, y - r, x + r, y + r), c.color(palette), obj)


def _cloud(c: Canvas, x: float, y: float, w: float, palette: Sequence[str]) -> None:
    color = c.color(palette)
    for dx, dy, s in ((0.0, 0.0, 0.5), (0.3, -0.12, 0.45), (0.55, 0.02, 0.4)):
        c.paint("ellipse", (x + dx * w, y + dy * w, x + (dx + s) * w, y + (dy + 0.5 * s) * w), color, "cloud")


def _fish(c: Canvas, x: float, y: float, w: float) -> None:
    color = c.color(("orange-c", "yellow-c", "red-c", "purple-c"))
    flip = 1 if c.rng.random() < 0.5 else -1
    tail_x = x - flip * 0.5 * w
    c.paint("polygon", (x - flip * 0.3 * w, y, tail_x, y - 0.25 * w, tail_x, y + 0.25 * w), color, "fish", "tail")
    c.paint("ellipse", (x - 0.35 * w, y - 0.2 * w, x + 0.35 * w, y + 0.2 * w), color, "fish")
    c.paint("polygon", (x - 0.1 * w, y - 0.15 * w, x + 0.05 * w, y - 0.35 * w, x + 0.15 * w, y - 0.15 * w),
            c.color(("orange-c", "yellow-c", "red-c")), "fish", "fin")


def _flower(c: Canvas, x: float, ground: float, size: float) -> None:
    c.paint("rect", (x - 0.04 * size, ground - size, x + 0.04 * size, ground), "green-c", "flower", "stem")
    y = ground - size
    c.paint("ellipse", (x - 0.35 * size, y - 0.35 * size, x + 0.35 * size, y + 0.35 * size),
            c.color(("pink-c", "red-c", "purple-c", "white-c", "yellow-c")), "flower", "petal")
    c.paint("ellipse", (x - 0.12 * size, y - 0.12 * size, x + 0.12 * size, y + 0.12 * size),
            c.color(("yellow-c", "orange-c", "brown-c")), "flower", "petal", "pistil")


def _spread(c: Canvas, n: int, lo: float = 0.05, hi: float = 0.95) -> np.ndarray:
    """n positions across the width, jittered, in random order of drawing depth."""
    slots = np.linspace(lo, hi, n + 1)
    xs = slots[:-1] + c.rng.uniform(0.1, 0.9, n) * np.diff(slots)
    return c.rng.permutation(xs)


# ---- scenes --------------------------------------------------------------------------------------------------


def _sky(c: Canvas, horizon: float, palette: Sequence[str] = ("blue-c",), clouds: bool = True) -> None:
    _band(c, "sky", palette, 0.0, horizon)
    if clouds:
        for _ in range(int(c.rng.integers(0, 3))):
            _cloud(c, c.rng.uniform(-0.1, 0.8), c.rng.uniform(0.03, max(0.05, horizon - 0.2)),
                   c.rng.uniform(0.15, 0.3), ("white-c", "grey-c"))


def _harbor(c: Canvas, h: float) -> None:
    _sky(c, h)
    _band(c, "water", ("blue-c",), h, 1.0)
    for x in _spread(c, int(c.rng.integers(1, 4)), 0.0, 0.75):
        _boat(c, x, c.rng.uniform(h + 0.1, 0.9), c.rng.uniform(0.18, 0.3), ("red-c", "brown-c", "white-c"),
              ("white-c", "yellow-c"))


def _beach(c: Canvas, h: float) -> None:
    _sky(c, h)
    shore = c.rng.uniform(h + 0.12, h + 0.25)
    _band(c, "water", ("blue-c",), h, shore)
    _band(c, "sand", ("yellow-c", "white-c"), shore, 1.0)
    _disc(c, "sun", ("yellow-c",), c.rng.uniform(0.1, 0.9), c.rng.uniform(0.08, h - 0.08), c.rng.uniform(0.05, 0.1))


def _forest_like(crowns: Sequence[str], ground: Sequence[str], ground_obj: str, sky: Sequence[str]):
    def scene(c: Canvas, h: float) -> None:
        _sky(c, h, sky)
        _band(c, ground_obj, ground, h, 1.0)
        for x in _spread(c, int(c.rng.integers(4, 8)), 0.02, 0.98):
            base = c.rng.uniform(h + 0.05, 1.0)
            _tree(c, x, base, c.rng.uniform(0.15, 0.3) * (0.6 + base), crowns)
    return scene


def _street_like(night: bool):
    def scene(c: Canvas, h: float) -> None:
        h = min(h, 0.45)
        if night:
            _sky(c, h, ("black-c",), clouds=False)
            _disc(c, "moon", ("white-c", "yellow-c"), c.rng.uniform(0.1, 0.9), c.rng.uniform(0.07, 0.2), 0.05)
        else:
            _sky(c, h)
        road_top = c.rng.uniform(0.72, 0.8)
        _band(c, "grass" if not night else "road", ("green-c",) if not night else ("black-c", "grey-c"), h, road_top)
        for x in _spread(c, int(c.rng.integers(2, 4)), 0.0, 0.8):
            _house(c, x, road_top, c.rng.uniform(0.18, 0.26), ("red-c", "brown-c", "black-c", "grey-c"),
                   ("yellow-c",) if night else ("blue-c", "white-c", "grey-c"))
        _band(c, "road", ("black-c", "grey-c") if night else ("grey-c",), road_top, 1.0)
        for x in _spread(c, int(c.rng.integers(1, 3)), 0.0, 0.7):
            _car(c, x, c.rng.uniform(0.9, 0.98), c.rng.uniform(0.2, 0.3))
    return scene


def _village(c: Canvas, h: float) -> None:
    _sky(c, h)
    _band(c, "grass", ("green-c",), h, 1.0)
    things = ["house"] * int(c.rng.integers(2, 4)) + ["tree"] * int(c.rng.integers(1, 4))
    for x, what in zip(_spread(c, len(things), 0.0, 0.85), c.rng.permutation(things)):
        base = c.rng.uniform(h + 0.15, 0.97)
        if what == "house":
            _house(c, x, base, c.rng.uniform(0.15, 0.24), ("red-c",), ("blue-c", "white-c"))
        else:
            _tree(c, x, base, c.rng.uniform(0.12, 0.22), ("green-c",))


def _parking_lot(c: Canvas, h: float) -> None:
    h = min(h, 0.3)
    _sky(c, h, ("blue-c", "grey-c"))
    _band(c, "road", ("grey-c",), h, 1.0)
    for row in (0.55, 0.8, 1.02):
        for x in _spread(c, int(c.rng.integers(2, 4)), 0.0, 0.75):
            _car(c, x, row - c.rng.uniform(0.0, 0.04), c.rng.uniform(0.2, 0.26))


def _garden(c: Canvas, h: float) -> None:
    _sky(c, h)
    _band(c, "grass", ("green-c",), h, 1.0)
    if c.rng.random() < 0.7:
        _tree(c, c.rng.uniform(0.1, 0.9), h + 0.15, c.rng.uniform(0.15, 0.22), ("green-c",))
    for x in _spread(c, int(c.rng.integers(4, 9)), 0.03, 0.97):
        _flower(c, x, c.rng.uniform(h + 0.2, 1.0), c.rng.uniform(0.12, 0.22))


def _aquarium(c: Canvas, h: float) -> None:
    _band(c, "water", ("blue-c", "green-c"), 0.0, 0.88)
    _band(c, "sand", ("yellow-c", "brown-c"), 0.88, 1.0)
    for x in _spread(c, int(c.rng.integers(2, 6)), 0.1, 0.9):
        _fish(c, x, c.rng.uniform(0.15, 0.8), c.rng.uniform(0.15, 0.28))


def _lake(c: Canvas, h: float) -> None:
    _sky(c, h)
    shore = c.rng.uniform(h + 0.08, h + 0.18)
    _band(c, "grass", ("green-c",), h, shore)
    for x in _spread(c, int(c.rng.integers(3, 6)), 0.0, 1.0):
        _tree(c, x, shore, c.rng.uniform(0.1, 0.16), ("green-c",))
    _band(c, "water", ("blue-c",), shore, 1.0)


def _desert(c: Canvas, h: float) -> None:
    _sky(c, h, ("blue-c", "orange-c"), clouds=False)
    _band(c, "sand", ("orange-c", "yellow-c", "brown-c"), h, 1.0)
    _disc(c, "sun", ("yellow-c", "white-c"), c.rng.uniform(0.1, 0.9), c.rng.uniform(0.08, max(0.1, h - 0.1)),
          c.rng.uniform(0.05, 0.1))


def _sunset_sea(c: Canvas, h: float) -> None:
    _sky(c, h, ("orange-c", "pink-c", "red-c"), clouds=False)
    _disc(c, "sun", ("orange-c", "red-c", "yellow-c"), c.rng.uniform(0.2, 0.8), h - 0.02, c.rng.uniform(0.07, 0.13))
    _band(c, "water", ("purple-c", "blue-c"), h, 1.0)
    for x in _spread(c, int(c.rng.integers(0, 3)), 0.0, 0.75):
        _boat(c, x, c.rng.uniform(h + 0.15, 0.9), c.rng.uniform(0.15, 0.25), ("black-c",), ("black-c",))


SCENE_PAINTERS: dict[str, Callable[[Canvas, float], None]] = {
    "harbor-s": _harbor,
    "beach-s": _beach,
    "forest-s": _forest_like(("green-c",), ("green-c",), "grass", ("blue-c",)),
    "autumn_forest-s": _forest_like(("orange-c", "red-c", "yellow-c"), ("green-c", "brown-c"), "grass", ("blue-c",)),
    "snowy_forest-s": _forest_like(("white-c", "green-c"), ("white-c",), "snow", ("grey-c", "white-c")),
    "street-s": _street_like(night=False),
    "night_street-s": _street_like(night=True),
    "village-s": _village,
    "parking_lot-s": _parking_lot,
    "garden-s": _garden,
    "aquarium-s": _aquarium,
    "lake-s": _lake,
    "desert-s": _desert,
    "sunset_sea-s": _sunset_sea,
}


def intrude(c: Canvas, scene: str) -> None:
    """Paint one foreground object typical of another scene at a random place (low-fidelity confusion)."""
    x, y, s = c.rng.uniform(0.0, 0.8), c.rng.uniform(0.3, 1.0), c.rng.uniform(0.15, 0.3)
    if "forest" in scene or scene in ("lake-s",):
        _tree(c, x, y, s, ("green-c", "orange-c", "white-c"))
    elif "street" in scene or scene == "village-s":
        _house(c, x, y, s, ("red-c", "brown-c"), ("yellow-c", "blue-c"))
    elif scene == "parking_lot-s":
        _car(c, x, y, s)
    elif scene in ("harbor-s", "sunset_sea-s"):
        _boat(c, x, y, s, ("red-c", "black-c"), ("white-c",))
    elif scene == "aquarium-s":
        _fish(c, x, y, s)
    elif scene == "garden-s":
        _flower(c, x, y, s)
    else:
        _disc(c, "sun", ("yellow-c", "orange-c"), x, y * 0.5, s * 0.4)
