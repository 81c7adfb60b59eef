"""Writer for Broden-format datasets: the demo world and the tests produce real Broden folders with it."""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image

from probescope.core.atomic import write_bytes, write_text
from probescope.core.data.broden import KNOWN_CATEGORIES, Label
from probescope.core.errors import InputError


@dataclass
class BrodenImage:
    """One image to write: its pixels, its pixel-level layers per category, its image-level labels per category."""

    name: str  # path under images/, without extension, e.g. 'demo/000001'
    image: np.ndarray  # uint8 (ih, iw, 3)
    layers: dict[str, list[np.ndarray]] = field(default_factory=dict)  # category -> int label maps (sh, sw)
    image_labels: dict[str, list[int]] = field(default_factory=dict)  # category -> label numbers
    split: str = "train"


def encode_label_png(labels: np.ndarray) -> bytes:
    """Label numbers as an RGB PNG with number = R + 256·G (Broden's encoding)."""
    labels = np.asarray(labels, dtype=np.int64)
    if labels.min(initial=0) < 0 or labels.max(initial=0) >= 65536:
        raise ValueError("label numbers must lie in [0, 65535]")
    rgb = np.zeros(labels.shape + (3,), np.uint8)
    rgb[..., 0] = labels % 256
    rgb[..., 1] = labels // 256
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, format="PNG")
    return buf.getvalue()


def _csv(rows: Iterable[Sequence[object]]) -> str:
    return "".join(",".join(str(v) for v in row) + "\n" for row in rows)


@dataclass(frozen=True)
class WrittenImage:
    """What one written image adds to the tables: its index.csv row and, per label map or image-level label, the
    label number, its category and the share of the image it covers. Plain values, so a long writer can keep them
    (as JSON) and finish the tables later."""

    row: tuple[str | int, ...]
    occurrences: tuple[tuple[int, str, float], ...]

    def to_json(self) -> list:
        return [list(self.row), [list(o) for o in self.occurrences]]

    def files(self) -> list[str]:
        """The files it wrote, relative to the dataset's images/ folder: the image, then its label PNGs."""
        cells = self.row[6:]  # one per category after (image, split, ih, iw, sh, sw); label numbers are image-level
        return [str(self.row[0])] + [e for cell in cells for e in str(cell).split(";") if e and not e.isdigit()]

    @staticmethod
    def from_json(value: list) -> WrittenImage:
        row, occurrences = value
        return WrittenImage(tuple(row), tuple((int(n), str(c), float(s)) for n, c, s in occurrences))


def write_broden(root: str | Path, images: Iterable[BrodenImage], labels: Sequence[Label],
                 image_format: str = "jpg") -> Path:
    """Write a Broden dataset: images, label PNGs, index.csv, label.csv, category.csv and c_<category>.csv.

    Label frequencies (images containing the label) and coverage (mean share of pixels, per image) are computed
    from what is written, as in the released tables.
    """
    root = Path(root)
    written = [write_image(root, item, image_format) for item in images]
    write_tables(root, written, labels)
    return root


def write_image(root: str | Path, item: BrodenImage, image_format: str = "jpg", atomic: bool = True) -> WrittenImage:
    """Write one image and its label PNGs under root/images; what it adds to the tables comes back.

    `atomic=False` writes each file plainly, without its own temporary file and sync: for a folder that is marked
    complete as a whole (a manifest written last, after one sync of everything), where a sync per file would
    dominate the cost (the demo dataset's 6,295 files: 24 s of 30 on a shared disk).
    """
    root = Path(root)
    put = write_bytes if atomic else _write_plain
    ih, iw = item.image.shape[:2]
    seg = next((m.shape for maps in item.layers.values() for m in maps), (ih // 2, iw // 2))
    image_rel = f"{item.name}.{image_format}"
    buf = io.BytesIO()
    Image.fromarray(item.image).save(buf, format="JPEG" if image_format == "jpg" else "PNG", quality=95)
    put(root / "images" / image_rel, buf.getvalue())
    cells = {}
    occurrences = []
    for category in KNOWN_CATEGORIES:
        entries = []
        for k, label_map in enumerate(item.layers.get(category, [])):
            present, counts = np.unique(label_map[label_map > 0], return_counts=True)
            if not len(present):
                continue
            rel = f"{item.name}_{category}" + (f"_{k + 1}" if category == "part" else "") + ".png"
            put(root / "images" / rel, encode_label_png(label_map))
            entries.append(rel)
            occurrences += [(number, category, count / label_map.size)
                            for number, count in zip(present.tolist(), counts.tolist())]
        for number in item.image_labels.get(category, []):
            entries.append(str(number))
            occurrences.append((int(number), category, 1.0))
        cells[category] = ";".join(entries)
    row = (image_rel, item.split, ih, iw, seg[0], seg[1], *(cells[c] for c in KNOWN_CATEGORIES))
    return WrittenImage(row, tuple(occurrences))


def _write_plain(path: Path, data: bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    except OSError as exc:
        raise InputError(f"could not write ({exc.strerror or exc})", path) from None


def write_tables(root: str | Path, written: Iterable[WrittenImage], labels: Sequence[Label],
                 index: str = "index.csv") -> None:
    """index.csv (or `index`; rows in the given order), label.csv, category.csv and c_<category>.csv of written
    images."""
    root = Path(root)
    index_rows = []
    frequency: Counter[int] = Counter()
    coverage: Counter[int] = Counter()
    in_category: dict[int, Counter[str]] = {label.number: Counter() for label in labels}
    for image in written:
        index_rows.append(list(image.row))
        for number, category, share in image.occurrences:
            coverage[number] += share
            in_category[number][category] += 1
        frequency.update({number for number, _, _ in image.occurrences})
    write_text(root / index, _csv([["image", "split", "ih", "iw", "sh", "sw", *KNOWN_CATEGORIES]] + index_rows))
    label_rows = [["number", "name", "category", "frequency", "coverage", "syns"]]
    for label in labels:
        counts = in_category[label.number] or Counter({label.category: 0})
        cat_field = ";".join(f"{c}({n})" for c, n in counts.most_common())
        label_rows.append([label.number, label.name, cat_field, frequency[label.number],
                           f"{coverage[label.number]:.4f}", label.name])
    write_text(root / "label.csv", _csv(label_rows))
    _write_category_tables(root, labels, frequency, coverage)


def _write_category_tables(root: Path, labels: Sequence[Label], frequency: Counter, coverage: Counter) -> None:
    rows = [["name", "first", "last", "count", "frequency"]]
    for category in KNOWN_CATEGORIES:
        members = [label for label in labels if label.category == category]
        if not members:
            continue
        rows.append([category, members[0].number, members[-1].number, len(members),
                     sum(frequency[m.number] for m in members)])
        table = [["code", "number", "name", "frequency", "coverage"]]
        table += [[code, m.number, m.name, frequency[m.number], f"{coverage[m.number]:.4f}"]
                  for code, m in enumerate(members, start=1)]
        write_text(root / f"c_{category}.csv", _csv(table))
    write_text(root / "category.csv", _csv(rows))
