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
from probescope.core.demo.painters import SCENE_PAINTERS, intrude

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


class Canvas:
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


def render_sample(rng: np.random.Generator, scene: str, fidelity: float = 1.0) -> DemoSample:
    """Render one image of `scene`.

    `fidelity` in [0, 1]: 1 draws the scene as defined; lower values blur and add noise, let colours stray from the
    scene's palette and paint objects of other scenes over it, so the image becomes harder to recognise.
    """
    if scene not in SCENE_PAINTERS:
        raise ValueError(f"unknown demo scene {scene!r}")
    fidelity = float(np.clip(fidelity, 0.0, 1.0))
    canvas = Canvas(rng, fidelity)
    SCENE_PAINTERS[scene](canvas, rng.uniform(0.3, 0.55))
    intruders = rng.binomial(4, 1.0 - fidelity)
    for other in rng.choice(SCENES, size=intruders):
        intrude(canvas, str(other))
    return canvas.finish(scene)


def render_batch(seed: int, n: int, scenes: Sequence[str] | None = None, fidelity: float = 1.0) -> list[DemoSample]:
    """`n` samples from one seed; sample k's scene is drawn uniformly from `scenes` (default: all)."""
    rng = np.random.default_rng(seed)
    pool = tuple(scenes) if scenes else SCENES
    return [render_sample(rng, pool[int(rng.integers(len(pool)))], fidelity) for _ in range(n)]
