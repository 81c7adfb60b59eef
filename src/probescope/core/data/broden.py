"""Reader for Broden-format probing datasets (Network Dissection's Broden, its ADE20K part, and the demo world).

Layout (see the reference notes): `index.csv` lists images with one column per category; a category cell holds
`;`-separated entries, each a label PNG (pixel-level, label = R + 256·G) or a label number (image-level, covers every
pixel). `label.csv` names the labels and their categories. Label maps are decoded lazily, one image at a time, so
memory stays bounded at ADE20K scale (22,210 images); whoever needs them all (the dissection engine) reads them once
into its own compact store.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from probescope.core.data.images import LABEL_FORMATS, read_rgb
from probescope.core.errors import InputError
from probescope.core.files import NOT_FOUND, folder_problem, readable_file, stat_problem

KNOWN_CATEGORIES = ("color", "object", "part", "material", "scene", "texture")
REQUIRED_INDEX_COLUMNS = ("image", "ih", "iw", "sh", "sw")
REQUIRED_LABEL_COLUMNS = ("number", "name")
_CATEGORY_COUNT = re.compile(r"\s*([A-Za-z_]+)\s*(?:\((\d+)\))?\s*")


@dataclass(frozen=True)
class Label:
    """A concept: its Broden number, name (`red-c`, `tree`, `street-s`) and primary category."""

    number: int
    name: str
    category: str


@dataclass(frozen=True)
class _Row:
    image: str
    split: str
    image_shape: tuple[int, int]
    seg_shape: tuple[int, int]
    cells: tuple[tuple[str, tuple[str, ...]], ...]  # (category, entries)


def primary_category(field: str) -> str:
    """`material(36);object(3)` -> `material`: the category with the largest count (the first on ties)."""
    best, best_count = "", -1
    for part in field.split(";"):
        m = _CATEGORY_COUNT.fullmatch(part)
        if not m:
            continue
        count = int(m.group(2)) if m.group(2) else 0
        if count > best_count:
            best, best_count = m.group(1), count
    return best


def _read_csv(path: Path, required: tuple[str, ...]) -> list[dict[str, str]]:
    readable_file(path)
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            header = reader.fieldnames or []
            missing = [c for c in required if c not in header]
            if missing:
                raise InputError(f"missing column(s) {', '.join(missing)} (header: {','.join(header)})", path)
            return list(reader)
    except UnicodeDecodeError as exc:
        raise InputError(f"not a UTF-8 text file ({exc.reason})", path) from exc
    except csv.Error as exc:
        raise InputError(f"malformed CSV ({exc})", path) from exc
    except OSError as exc:  # changed since it was checked
        raise InputError(stat_problem(exc, path), path) from None


def _int(value: str | None, path: Path, line: int, column: str) -> int:
    try:
        return int(value or "")
    except ValueError:
        raise InputError(f"line {line}: column {column!r} is {value!r}, not an integer", path) from None


class BrodenDataset:
    """A Broden-format dataset opened from its folder; validates the tables up front, the label maps when read."""

    def __init__(self, root: Path, index_path: Path, rows: list[_Row], labels: dict[int, Label],
                 categories: tuple[str, ...], source: str = ""):
        self.root = root
        self.index_path = index_path
        self.source = source  # the image-path prefix the rows were filtered by ('' = all rows)
        self._rows = rows
        self.labels = labels
        self.categories = categories
        self._known = np.zeros(max(labels, default=0) + 1, dtype=bool)
        self._known[list(labels)] = True
        self._known[0] = True
        pixel, image = set(), set()
        for row in rows:
            for category, entries in row.cells:
                for entry in entries:
                    (image if entry.isdigit() else pixel).add(category)
        self.pixel_categories = tuple(c for c in categories if c in pixel)
        self.image_categories = tuple(c for c in categories if c in image)

    @classmethod
    def open(cls, root: str | Path, index: str | Path = "index.csv", only_source: str | None = None) -> BrodenDataset:
        """Open `root` with the given index file (e.g. `index_ade20k.csv`).

        `only_source` keeps the rows whose image path starts with it (`'ade20k/'` selects the ADE20K part of the
        full index, as the compositional-explanation papers do).
        """
        root = Path(root)
        problem = folder_problem(root)
        if problem == NOT_FOUND:
            problem = "not a folder"
        if problem is not None:
            raise InputError(f"{problem} (expected a Broden dataset with index.csv and label.csv)", root)
        index_path = root / index if not Path(index).is_absolute() else Path(index)
        labels = cls._read_labels(root / "label.csv")
        table = _read_csv(index_path, REQUIRED_INDEX_COLUMNS)
        with open(index_path, newline="", encoding="utf-8") as fh:
            header = next(csv.reader(fh))
        categories = tuple(c for c in header if c in KNOWN_CATEGORIES)
        if not categories:
            raise InputError(f"no category columns (expected some of {', '.join(KNOWN_CATEGORIES)})", index_path)
        rows = []
        for line, rec in enumerate(table, start=2):
            if only_source and not rec["image"].startswith(only_source):
                continue
            cells = []
            for category in categories:
                entries = tuple(e for e in (rec.get(category) or "").split(";") if e)
                for entry in entries:
                    if entry.isdigit() and int(entry) not in labels and int(entry) != 0:
                        raise InputError(f"line {line}: {category} label {entry} is not in label.csv", index_path)
                cells.append((category, tuple(e for e in entries if e != "0")))
            rows.append(_Row(
                image=rec["image"],
                split=rec.get("split") or "",
                image_shape=(_int(rec["ih"], index_path, line, "ih"), _int(rec["iw"], index_path, line, "iw")),
                seg_shape=(_int(rec["sh"], index_path, line, "sh"), _int(rec["sw"], index_path, line, "sw")),
                cells=tuple(cells),
            ))
        if not rows:
            raise InputError("no images" + (f" whose path starts with {only_source!r}" if only_source else ""),
                             index_path)
        return cls(root, index_path, rows, labels, categories, only_source or "")

    @staticmethod
    def _read_labels(path: Path) -> dict[int, Label]:
        labels = {}
        for line, rec in enumerate(_read_csv(path, REQUIRED_LABEL_COLUMNS), start=2):
            number = _int(rec["number"], path, line, "number")
            if number == 0:
                continue  # some releases list 0 = unlabelled
            labels[number] = Label(number, rec["name"], primary_category(rec.get("category") or ""))
        if not labels:
            raise InputError("no labels", path)
        return labels

    # ---- per image ---------------------------------------------------------------------------------------------

    @property
    def n_images(self) -> int:
        return len(self._rows)

    def __len__(self) -> int:
        return len(self._rows)

    def image_path(self, i: int) -> Path:
        return self.root / "images" / self._rows[i].image

    def image_shape(self, i: int) -> tuple[int, int]:
        return self._rows[i].image_shape

    def seg_shape(self, i: int) -> tuple[int, int]:
        return self._rows[i].seg_shape

    def split(self, i: int) -> str:
        return self._rows[i].split

    def load_image(self, i: int) -> np.ndarray:
        """The image as uint8 RGB (ih, iw, 3)."""
        return read_rgb(self.image_path(i))

    def pixel_layers(self, i: int) -> list[tuple[str, np.ndarray]]:
        """Every pixel-level label map of image i as (category, int32 (sh, sw)); several `part` layers may come."""
        row = self._rows[i]
        out = []
        for category, entries in row.cells:
            for entry in entries:
                if not entry.isdigit():
                    out.append((category, self._decode_label_png(self.root / "images" / entry, row.seg_shape)))
        return out

    def image_labels(self, i: int) -> list[tuple[str, int]]:
        """Image-level labels of image i (scene, texture) as (category, label number)."""
        return [(category, int(e)) for category, entries in self._rows[i].cells for e in entries if e.isdigit()]

    def _decode_label_png(self, path: Path, shape: tuple[int, int]) -> np.ndarray:
        rgb = read_rgb(path, LABEL_FORMATS, exact=True, what="label image")
        if rgb.shape[:2] != shape:
            raise InputError(f"label image is {rgb.shape[0]}x{rgb.shape[1]}, index.csv says {shape[0]}x{shape[1]}",
                             path)
        labels = rgb[..., 0].astype(np.int32) + 256 * rgb[..., 1].astype(np.int32)
        if labels.max(initial=0) >= len(self._known) or not self._known[labels].all():
            bad = sorted(set(np.unique(labels).tolist()) - set(self.labels) - {0})
            raise InputError(f"label number(s) {', '.join(map(str, bad[:5]))} not in label.csv", path)
        return labels
