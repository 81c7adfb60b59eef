"""The accuracy-correlation experiment of seed 002: do explanation scores track the model's accuracy?

For each unit and explanation the engine records the model's top-1 accuracy on four image sets: where the unit fires,
where the explanation is present, their union and their intersection (UnitResult.accuracy). Here: the Pearson
correlation, across units, of the explanations' IoU and DA with each of those accuracies, per explanation method.

True labels of a Broden dataset come from its scene labels, matched to the model's class names by name (`street-s`
matches `street`, `/s/street`, `Street`), with an override file for the rest.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from probescope.core.atomic import write_text
from probescope.core.data.broden import BrodenDataset
from probescope.core.dissection.labels import LabelStore
from probescope.core.dissection.results import DissectionResult
from probescope.core.errors import InputError
from probescope.core.files import readable_file, stat_problem

SETS = ("fired", "explanation", "union", "intersection")


def _norm(name: str) -> str:
    name = name.strip().lower()
    name = re.sub(r"-s$", "", name)
    name = re.sub(r"^/?[a-z]/", "", name)  # Places365 style '/a/airfield'
    return re.sub(r"[\s/_-]+", "_", name).strip("_")


def read_label_map(path: str | Path) -> dict[str, str]:
    """Override file: CSV with columns `label,class` (dataset label name -> model class name)."""
    path = readable_file(path)
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
    except OSError as exc:
        raise InputError(stat_problem(exc, path), path) from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"not a readable CSV ({exc})", path) from None
    if rows and not {"label", "class"} <= set(rows[0]):
        raise InputError("needs the columns label,class", path)
    return {r["label"]: r["class"] for r in rows}


def scene_truth(labels: LabelStore | BrodenDataset, class_names: Sequence[str],
                overrides: dict[str, str] | None = None, category: str = "scene",
                overrides_source: Path | None = None) -> np.ndarray:
    """Per image the model class of its scene label (int64, -1 where no scene label maps to a class). `labels` is
    the dissection's LabelStore or the dataset itself (then only index.csv is read, no label maps);
    `overrides_source` is the label map file the overrides come from (named when one names no class)."""
    by_name = {_norm(c): k for k, c in enumerate(class_names)}
    exact = {c: k for k, c in enumerate(class_names)}
    overrides = overrides or {}
    if isinstance(labels, LabelStore):
        names, categories, n_images = labels.names, labels.categories, labels.n_images
        m = labels.image_labels.tocsr()
        image_labels = [m.indices[m.indptr[i]:m.indptr[i + 1]] for i in range(n_images)]
    else:
        names = {k: v.name for k, v in labels.labels.items()}
        categories = {k: v.category for k, v in labels.labels.items()}
        n_images = labels.n_images
        image_labels = [sorted({n for _, n in labels.image_labels(i) if n > 0}) for i in range(n_images)]
    label_class: dict[int, int] = {}
    for number, name in names.items():
        if categories.get(number) != category:
            continue
        if name in overrides:
            if overrides[name] not in exact:
                raise InputError(f"label map: class {overrides[name]!r} is not one of the model's classes",
                                 overrides_source)
            label_class[number] = exact[overrides[name]]
        elif _norm(name) in by_name:
            label_class[number] = by_name[_norm(name)]
    truth = np.full(n_images, -1, np.int64)
    for i, numbers in enumerate(image_labels):
        for number in numbers:
            if int(number) in label_class:
                truth[i] = label_class[int(number)]
                break
    return truth


def correct_predictions(predictions: np.ndarray, truth: np.ndarray, source: Path | None = None) -> np.ndarray:
    """int8 per image: 1 right, 0 wrong, -1 no true label. `predictions` are class indices or (images, classes)
    scores (from the file `source`, when they come from one)."""
    predictions = np.asarray(predictions)
    if predictions.ndim == 2:
        predictions = predictions.argmax(axis=1)
    if predictions.shape != truth.shape:
        raise InputError(f"predictions hold {len(predictions)} images, the dataset has {len(truth)}", source)
    out = (predictions == truth).astype(np.int8)
    out[truth < 0] = -1
    return out


def _pearson(x: np.ndarray, y: np.ndarray) -> float | None:
    if len(x) < 3 or np.std(x) == 0 or np.std(y) == 0:
        return None
    return float(np.corrcoef(x, y)[0, 1])


def accuracy_correlation(result: DissectionResult) -> list[dict]:
    """Rows (method, set, pearson_iou, pearson_da, units, mean_accuracy) over units with recorded accuracies."""
    methods: list[str] = []
    for r in result.units.values():
        for m in r.accuracy or {}:
            if m not in methods:
                methods.append(m)
    rows = []
    for method in methods:
        for name in SETS:
            iou, da, acc = [], [], []
            for r in result.units.values():
                e = r.netdissect if method == "netdissect" else (
                    r.sweep[int(method.split("-")[1]) - 1] if method.startswith("length-")
                    else r.explanations.get(method))
                entry = (r.accuracy or {}).get(method, {}).get(name)
                if e is None or entry is None or entry[0] is None:
                    continue
                iou.append(e.iou)
                da.append(e.da)
                acc.append(entry[0])
            x_iou, x_da, y = np.array(iou), np.array(da), np.array(acc)
            rows.append({"method": method, "set": name, "pearson_iou": _pearson(x_iou, y),
                         "pearson_da": _pearson(x_da, y), "units": len(y),
                         "mean_accuracy": float(y.mean()) if len(y) else None})
    return rows


def write_correlation_csv(path: str | Path, rows: list[dict]) -> None:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=["method", "set", "pearson_iou", "pearson_da", "units", "mean_accuracy"],
                       lineterminator="\n")
    w.writeheader()
    for row in rows:
        w.writerow({k: ("" if v is None else v) for k, v in row.items()})
    write_text(path, buf.getvalue())
