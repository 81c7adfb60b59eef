"""The demo world: procedural scenes whose classes are compositions of objects, parts and colours.

Every workspace runs on it by default. A scene class is defined by which objects appear, in which colours and with
which parts (an autumn forest is a forest whose tree crowns are orange, red or yellow; a night street is a street
under a black sky with yellow windows), so a network trained to tell the scenes apart grows units for atoms
(`tree`, `orange-c`) and for compositions (`crown AND orange-c`): the dissection workspace has something real to
find. Each sample comes with Broden-style label layers (colour, object, two part layers) at half resolution and an
attribute vector (scene, object areas, colour areas) that the simulated similarity judgments are built on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

from probescope.core.data.broden import Label

IMAGE_SIZE = 128
SEG_SIZE = IMAGE_SIZE // 2

# The 11 Broden colour names and the RGB each is painted with (before shading and noise).
COLOR_RGB: dict[str, tuple[int, int, int]] = {
    "black-c": (22, 22, 26),
    "blue-c": (45, 85, 205),
    "brown-c": (122, 74, 34),
    "green-c": (46, 150, 58),
    "grey-c": (128, 128, 132),
    "orange-c": (238, 134, 24),
    "pink-c": (240, 150, 192),
    "purple-c": (128, 52, 160),
    "red-c": (206, 32, 30),
    "white-c": (238, 238, 236),
    "yellow-c": (238, 214, 44),
}
COLORS: tuple[str, ...] = tuple(COLOR_RGB)
OBJECTS: tuple[str, ...] = (
    "sky", "water", "grass", "sand", "road", "snow",
    "house", "tree", "car", "boat", "sun", "moon", "cloud", "fish", "flower",
)
PARTS_1: tuple[str, ...] = (
    "facade", "roof", "door", "window", "chimney", "trunk", "crown", "wheel",
    "hull", "sail", "mast", "tail", "fin", "petal", "stem",
)
PARTS_2: tuple[str, ...] = ("handle", "hubcap", "pistil")  # sub-parts drawn over a first-layer part
PARTS: tuple[str, ...] = PARTS_1 + PARTS_2
SCENES: tuple[str, ...] = (
    "harbor-s", "beach-s", "forest-s", "autumn_forest-s", "snowy_forest-s", "street-s", "night_street-s",
    "village-s", "parking_lot-s", "garden-s", "aquarium-s", "lake-s", "desert-s", "sunset_sea-s",
)
LAYERS: tuple[str, ...] = ("color", "object", "part_1", "part_2")


def _label_table() -> tuple[Label, ...]:
    """The label table: Broden numbering starts at 1, 0 means unlabelled."""
    rows = [(n, "color") for n in COLORS] + [(n, "object") for n in OBJECTS]
    rows += [(n, "part") for n in PARTS] + [(n, "scene") for n in SCENES]
    return tuple(Label(i + 1, name, cat) for i, (name, cat) in enumerate(rows))


LABELS: tuple[Label, ...] = _label_table()
_NUMBER = {label.name: label.number for label in LABELS}
ATTRIBUTE_NAMES: tuple[str, ...] = SCENES + OBJECTS + COLORS


def label_number(name: str) -> int:
    """The label number of a concept name (`'red-c'`, `'tree'`, `'street-s'`)."""
    return _NUMBER[name]


@dataclass(frozen=True)
class DemoSample:
    """One rendered image with its ground truth."""

    image: np.ndarray  # uint8 (IMAGE_SIZE, IMAGE_SIZE, 3)
    scene: str
    layers: dict[str, np.ndarray]  # LAYERS -> int32 (SEG_SIZE, SEG_SIZE) label numbers, 0 = none
    attributes: np.ndarray  # float32 (len(ATTRIBUTE_NAMES),)


class _Canvas:
    """Paints each primitive into the RGB image and the label layers at once, so labels match pixels exactly."""

    def __init__(self, rng: np.random.Generator, fidelity: float):
        self.rng = rng
        self.fidelity = fidelity
        self.image = Image.new("RGB", (IMAGE_SIZE, IMAGE_SIZE))
        self.layers = {name: Image.new("I", (IMAGE_SIZE, IMAGE_SIZE), 0) for name in LAYERS}
        self._draw = ImageDraw.Draw(self.image)
        self._label_draw = {name: ImageDraw.Draw(img) for name, img in self.layers.items()}

    def color(self, options: Sequence[str]) -> str:
        """Pick a colour from the scene's palette; at low fidelity any colour may stand in."""
        if self.rng.random() > self.fidelity:
            return COLORS[self.rng.integers(len(COLORS))]
        return options[self.rng.integers(len(options))]

    def paint(
        self,
        shape: str,
        coords: Sequence[float],
        color: str,
        obj: str | None = None,
        part: str | None = None,
        subpart: str | None = None,
        shade: float = 1.0,
    ) -> None:
        base = np.array(COLOR_RGB[color], dtype=float) * shade + self.rng.normal(0, 6, 3)
        rgb = tuple(int(v) for v in np.clip(base, 0, 255))
        values = {"color": label_number(color), "object": _opt(obj), "part_1": _opt(part), "part_2": _opt(subpart)}
        xy = [float(c) * IMAGE_SIZE for c in coords]
        _DRAW[shape](self._draw, xy, rgb)
        for layer, value in values.items():
            # Every layer is painted, 0 included: whatever is in front hides the labels behind it.
            _DRAW[shape](self._label_draw[layer], xy, value)

    def finish(self, scene: str) -> DemoSample:
        image = self.image
        blur = 0.4 + 2.6 * (1.0 - self.fidelity)
        image = image.filter(ImageFilter.GaussianBlur(blur))
        pixels = np.asarray(image, dtype=np.float32)
        pixels += self.rng.normal(0, 4 + 30 * (1.0 - self.fidelity), pixels.shape)
        pixels *= self.rng.uniform(0.85, 1.1)  # lighting
        rgb = np.clip(pixels, 0, 255).astype(np.uint8)
        layers = {name: np.asarray(img, dtype=np.int32)[::2, ::2].copy() for name, img in self.layers.items()}
        return DemoSample(rgb, scene, layers, _attributes(scene, layers))


def _opt(name: str | None) -> int:
    return label_number(name) if name else 0


def _polygon(draw: ImageDraw.ImageDraw, xy: list[float], fill) -> None:
    draw.polygon(xy, fill=fill)


def _ellipse(draw: ImageDraw.ImageDraw, xy: list[float], fill) -> None:
    x0, y0, x1, y1 = xy
    draw.ellipse([min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1)], fill=fill)


def _rect(draw: ImageDraw.ImageDraw, xy: list[float], fill) -> None:
    x0, y0, x1, y1 = xy
    draw.rectangle([min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1)], fill=fill)


_DRAW: dict[str, Callable] = {"polygon": _polygon, "ellipse": _ellipse, "rect": _rect}


def _attributes(scene: str, layers: dict[str, np.ndarray]) -> np.ndarray:
    """Scene one-hot, then the area fraction of every object and every colour."""
    out = np.zeros(len(ATTRIBUTE_NAMES), np.float32)
    out[SCENES.index(scene)] = 1.0
    area = float(SEG_SIZE * SEG_SIZE)
    for offset, names, layer in ((len(SCENES), OBJECTS, "object"), (len(SCENES) + len(OBJECTS), COLORS, "color")):
        counts = np.bincount(layers[layer].ravel(), minlength=len(LABELS) + 1)
        for k, name in enumerate(names):
            out[offset + k] = counts[label_number(name)] / area
    return out


# ---- objects -------------------------------------------------------------------------------------------------


def _band(c: _Canvas, obj: str, palette: Sequence[str], top: float, bottom: float) -> None:
    """A background region (sky, water, ground) spanning the width, with a few darker texture strokes."""
    color = c.color(palette)
    c.paint("rect", (0, top, 1, bottom), color, obj)
    for _ in range(int(c.rng.integers(2, 6))):
        y = c.rng.uniform(top, bottom)
        x = c.rng.uniform(-0.2, 0.8)
        h = c.rng.uniform(0.005, 0.02)
        c.paint("rect", (x, y, x + c.rng.uniform(0.2, 0.5), y + h), color, obj, shade=c.rng.uniform(0.8, 0.95))


def _house(c: _Canvas, x: float, ground: float, w: float, roof: Sequence[str], windows: Sequence[str]) -> None:
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


def _tree(c: _Canvas, x: float, ground: float, size: float, crown: Sequence[str]) -> None:
    c.paint("rect", (x - 0.08 * size, ground - 0.5 * size, x + 0.08 * size, ground), c.color(("brown-c", "black-c")),
            "tree", "trunk")
    color = c.color(crown)
    top = ground - 1.25 * size
    if c.rng.random() < 0.5:
        c.paint("ellipse", (x - 0.42 * size, top, x + 0.42 * size, ground - 0.4 * size), color, "tree", "crown")
    else:
        c.paint("polygon", (x - 0.45 * size, ground - 0.4 * size, x, top, x + 0.45 * size, ground - 0.4 * size),
                color, "tree", "crown")


def _car(c: _Canvas, x: float, ground: float, w: float) -> None:
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


def _boat(c: _Canvas, x: float, water: float, w: float, hull: Sequence[str], sail: Sequence[str]) -> None:
    c.paint("rect", (x + 0.47 * w, water - 1.0 * w, x + 0.52 * w, water), c.color(("brown-c", "black-c")),
            "boat", "mast")
    c.paint("polygon", (x + 0.55 * w, water - 0.95 * w, x + 0.55 * w, water - 0.3 * w, x + 0.95 * w,
                        water - 0.3 * w), c.color(sail), "boat", "sail")
    c.paint("polygon", (x, water - 0.25 * w, x + w, water - 0.25 * w, x + 0.85 * w, water + 0.05 * w,
                        x + 0.15 * w, water + 0.05 * w), c.color(hull), "boat", "hull")


def _disc(c: _Canvas, obj: str, palette: Sequence[str], x: float, y: float, r: float) -> None:
    c.paint("ellipse", (x - r, y - r, x + r, y + r), c.color(palette), obj)


def _cloud(c: _Canvas, x: float, y: float, w: float, palette: Sequence[str]) -> None:
    color = c.color(palette)
    for dx, dy, s in ((0.0, 0.0, 0.5), (0.3, -0.12, 0.45), (0.55, 0.02, 0.4)):
        c.paint("ellipse", (x + dx * w, y + dy * w, x + (dx + s) * w, y + (dy + 0.5 * s) * w), color, "cloud")


def _fish(c: _Canvas, x: float, y: float, w: float) -> None:
    color = c.color(("orange-c", "yellow-c", "red-c", "purple-c"))
    flip = 1 if c.rng.random() < 0.5 else -1
    tail_x = x - flip * 0.5 * w
    c.paint("polygon", (x - flip * 0.3 * w, y, tail_x, y - 0.25 * w, tail_x, y + 0.25 * w), color, "fish", "tail")
    c.paint("ellipse", (x - 0.35 * w, y - 0.2 * w, x + 0.35 * w, y + 0.2 * w), color, "fish")
    c.paint("polygon", (x - 0.1 * w, y - 0.15 * w, x + 0.05 * w, y - 0.35 * w, x + 0.15 * w, y - 0.15 * w),
            c.color(("orange-c", "yellow-c", "red-c")), "fish", "fin")


def _flower(c: _Canvas, x: float, ground: float, size: float) -> None:
    c.paint("rect", (x - 0.04 * size, ground - size, x + 0.04 * size, ground), "green-c", "flower", "stem")
    y = ground - size
    c.paint("ellipse", (x - 0.35 * size, y - 0.35 * size, x + 0.35 * size, y + 0.35 * size),
            c.color(("pink-c", "red-c", "purple-c", "white-c", "yellow-c")), "flower", "petal")
    c.paint("ellipse", (x - 0.12 * size, y - 0.12 * size, x + 0.12 * size, y + 0.12 * size),
            c.color(("yellow-c", "orange-c", "brown-c")), "flower", "petal", "pistil")


def _spread(c: _Canvas, n: int, lo: float = 0.05, hi: float = 0.95) -> np.ndarray:
    """n positions across the width, jittered, in random order of drawing depth."""
    slots = np.linspace(lo, hi, n + 1)
    xs = slots[:-1] + c.rng.uniform(0.1, 0.9, n) * np.diff(slots)
    return c.rng.permutation(xs)


# ---- scenes --------------------------------------------------------------------------------------------------


def _sky(c: _Canvas, horizon: float, palette: Sequence[str] = ("blue-c",), clouds: bool = True) -> None:
    _band(c, "sky", palette, 0.0, horizon)
    if clouds:
        for _ in range(int(c.rng.integers(0, 3))):
            _cloud(c, c.rng.uniform(-0.1, 0.8), c.rng.uniform(0.03, max(0.05, horizon - 0.2)),
                   c.rng.uniform(0.15, 0.3), ("white-c", "grey-c"))


def _harbor(c: _Canvas, h: float) -> None:
    _sky(c, h)
    _band(c, "water", ("blue-c",), h, 1.0)
    for x in _spread(c, int(c.rng.integers(1, 4)), 0.0, 0.75):
        _boat(c, x, c.rng.uniform(h + 0.1, 0.9), c.rng.uniform(0.18, 0.3), ("red-c", "brown-c", "white-c"),
              ("white-c", "yellow-c"))


def _beach(c: _Canvas, h: float) -> None:
    _sky(c, h)
    shore = c.rng.uniform(h + 0.12, h + 0.25)
    _band(c, "water", ("blue-c",), h, shore)
    _band(c, "sand", ("yellow-c", "white-c"), shore, 1.0)
    _disc(c, "sun", ("yellow-c",), c.rng.uniform(0.1, 0.9), c.rng.uniform(0.08, h - 0.08), c.rng.uniform(0.05, 0.1))


def _forest_like(crowns: Sequence[str], ground: Sequence[str], ground_obj: str, sky: Sequence[str]):
    def scene(c: _Canvas, h: float) -> None:
        _sky(c, h, sky)
        _band(c, ground_obj, ground, h, 1.0)
        for x in _spread(c, int(c.rng.integers(4, 8)), 0.02, 0.98):
            base = c.rng.uniform(h + 0.05, 1.0)
            _tree(c, x, base, c.rng.uniform(0.15, 0.3) * (0.6 + base), crowns)
    return scene


def _street_like(night: bool):
    def scene(c: _Canvas, h: float) -> None:
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


def _village(c: _Canvas, h: float) -> None:
    _sky(c, h)
    _band(c, "grass", ("green-c",), h, 1.0)
    things = ["house"] * int(c.rng.integers(2, 4)) + ["tree"] * int(c.rng.integers(1, 4))
    for x, what in zip(_spread(c, len(things), 0.0, 0.85), c.rng.permutation(things)):
        base = c.rng.uniform(h + 0.15, 0.97)
        if what == "house":
            _house(c, x, base, c.rng.uniform(0.15, 0.24), ("red-c",), ("blue-c", "white-c"))
        else:
            _tree(c, x, base, c.rng.uniform(0.12, 0.22), ("green-c",))


def _parking_lot(c: _Canvas, h: float) -> None:
    h = min(h, 0.3)
    _sky(c, h, ("blue-c", "grey-c"))
    _band(c, "road", ("grey-c",), h, 1.0)
    for row in (0.55, 0.8, 1.02):
        for x in _spread(c, int(c.rng.integers(2, 4)), 0.0, 0.75):
            _car(c, x, row - c.rng.uniform(0.0, 0.04), c.rng.uniform(0.2, 0.26))


def _garden(c: _Canvas, h: float) -> None:
    _sky(c, h)
    _band(c, "grass", ("green-c",), h, 1.0)
    if c.rng.random() < 0.7:
        _tree(c, c.rng.uniform(0.1, 0.9), h + 0.15, c.rng.uniform(0.15, 0.22), ("green-c",))
    for x in _spread(c, int(c.rng.integers(4, 9)), 0.03, 0.97):
        _flower(c, x, c.rng.uniform(h + 0.2, 1.0), c.rng.uniform(0.12, 0.22))


def _aquarium(c: _Canvas, h: float) -> None:
    _band(c, "water", ("blue-c", "green-c"), 0.0, 0.88)
    _band(c, "sand", ("yellow-c", "brown-c"), 0.88, 1.0)
    for x in _spread(c, int(c.rng.integers(2, 6)), 0.1, 0.9):
        _fish(c, x, c.rng.uniform(0.15, 0.8), c.rng.uniform(0.15, 0.28))


def _lake(c: _Canvas, h: float) -> None:
    _sky(c, h)
    shore = c.rng.uniform(h + 0.08, h + 0.18)
    _band(c, "grass", ("green-c",), h, shore)
    for x in _spread(c, int(c.rng.integers(3, 6)), 0.0, 1.0):
        _tree(c, x, shore, c.rng.uniform(0.1, 0.16), ("green-c",))
    _band(c, "water", ("blue-c",), shore, 1.0)


def _desert(c: _Canvas, h: float) -> None:
    _sky(c, h, ("blue-c", "orange-c"), clouds=False)
    _band(c, "sand", ("orange-c", "yellow-c", "brown-c"), h, 1.0)
    _disc(c, "sun", ("yellow-c", "white-c"), c.rng.uniform(0.1, 0.9), c.rng.uniform(0.08, max(0.1, h - 0.1)),
          c.rng.uniform(0.05, 0.1))


def _sunset_sea(c: _Canvas, h: float) -> None:
    _sky(c, h, ("orange-c", "pink-c", "red-c"), clouds=False)
    _disc(c, "sun", ("orange-c", "red-c", "yellow-c"), c.rng.uniform(0.2, 0.8), h - 0.02, c.rng.uniform(0.07, 0.13))
    _band(c, "water", ("purple-c", "blue-c"), h, 1.0)
    for x in _spread(c, int(c.rng.integers(0, 3)), 0.0, 0.75):
        _boat(c, x, c.rng.uniform(h + 0.15, 0.9), c.rng.uniform(0.15, 0.25), ("black-c",), ("black-c",))


_SCENE_PAINTERS: dict[str, Callable[[_Canvas, float], None]] = {
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


def render_sample(rng: np.random.Generator, scene: str, fidelity: float = 1.0) -> DemoSample:
    """Render one image of `scene`.

    `fidelity` in [0, 1]: 1 draws the scene as defined; lower values blur and add noise, let colours stray from the
    scene's palette and paint objects of other scenes over it, so the image becomes harder to recognise.
    """
    if scene not in _SCENE_PAINTERS:
        raise ValueError(f"unknown demo scene {scene!r}")
    fidelity = float(np.clip(fidelity, 0.0, 1.0))
    canvas = _Canvas(rng, fidelity)
    _SCENE_PAINTERS[scene](canvas, rng.uniform(0.3, 0.55))
    intruders = rng.binomial(4, 1.0 - fidelity)
    for other in rng.choice(SCENES, size=intruders):
        _intrude(canvas, str(other))
    return canvas.finish(scene)


def _intrude(c: _Canvas, scene: str) -> None:
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


def render_batch(seed: int, n: int, scenes: Sequence[str] | None = None, fidelity: float = 1.0) -> list[DemoSample]:
    """`n` samples from one seed; sample k's scene is drawn uniformly from `scenes` (default: all)."""
    rng = np.random.default_rng(seed)
    pool = tuple(scenes) if scenes else SCENES
    return [render_sample(rng, pool[int(rng.integers(len(pool)))], fidelity) for _ in range(n)]
