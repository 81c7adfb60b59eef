"""Sparse, broad and dead units on a small generated Broden-format dataset, and the engine's recorded answers on them.

The engine counts a unit's mask through its smaller side (the mask, or its complement when the mask covers more than
half of the pixels). These units exercise both sides: `sparse` ones answer planted formulas (masks of a few percent),
`broad` ones sit at a tie at the top of their activations (T is their maximum, reached on most positions: masks over
half of the pixels), `dead` ones are almost always 0 (ReLU units that never fire: T = 0, so `A >= T` is every pixel)
or constant. GOLDEN holds what the engine answered on them before it learned to count through the complement (formulas,
IoU, DA, lengths, beam traces, sweeps, thresholds, mask sizes): the engine must keep answering exactly that.

    python tests/oracles/unit_kinds.py      # rewrite GOLDEN with the current engine's answers (only on purpose)
"""

from __future__ import annotations

import json
import sys
import zlib
from pathlib import Path

import numpy as np

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from oracles.synthetic_broden import (
    SyntheticBroden,
    SyntheticSpec,
    planted_formulas,
    synthetic_activations,
    write_synthetic_broden,
)
from probescope.core.dissection.settings import DissectionSettings

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "unit_kinds_golden.json"
SPEC = SyntheticSpec(n_images=160, seg_size=32, feat_size=7, n_objects=40, n_parts=10, n_scenes=8, seed=3)
KINDS = ["sparse"] * 4 + ["broad"] * 3 + ["dead"] * 4
CONFIGS = {  # name -> settings; the window's defaults first
    "window": DissectionSettings(searches=("iou", "da-select", "da-stop"), sweep_length=10),
    "quantile 0.6": DissectionSettings(quantile=0.6, searches=("iou", "da-stop"), sweep_length=4),
    "category, duplicates, limit 12, optimal": DissectionSettings(
        iou_scope="category", beam_dedupe="none", beam_limit=12, searches=("iou", "optimal"), max_length=3),
}


def unit_kinds_activations(dataset: SyntheticBroden) -> np.ndarray:
    """float32 (images, 11, 7, 7): units in KINDS order."""
    n, f = dataset.n_images, dataset.spec.feat_size
    rng = np.random.default_rng([dataset.spec.seed, 7])
    sparse = synthetic_activations(dataset, planted_formulas(dataset, 4, dataset.spec.seed), noise=0.3,
                                   seed=dataset.spec.seed)
    base = synthetic_activations(dataset, planted_formulas(dataset, 3, dataset.spec.seed + 1), noise=0.1,
                                 seed=dataset.spec.seed + 1)
    broad = np.minimum(1.0, np.array([1.2, 1.1, 1.0])[:, None, None] - base).astype(np.float32)  # saturated at 1
    broad[:, 2] = np.where(rng.random((n, f, f)) < 0.9, 1.0, rng.random((n, f, f)) * 0.9)  # a tie on 90%
    dead = np.zeros((n, 4, f, f), np.float32)
    fires = rng.random((n, f, f)) < 0.002  # a ReLU unit that fires on 0.2% of positions: T = 0
    dead[:, 0][fires] = rng.random(int(fires.sum())).astype(np.float32)
    fires = rng.random((n, f, f)) < 0.004
    dead[:, 1][fires] = 3.0 * rng.random(int(fires.sum())).astype(np.float32)
    dead[:, 3] = -0.25  # constant (unit 2 is constant 0)
    return np.concatenate([sparse, broad, dead], axis=1)


def unit_kinds_correct(dataset: SyntheticBroden) -> np.ndarray:
    """A model's right (1) / wrong (0) / unknown (-1) per image, for the accuracy sets."""
    return np.random.default_rng([dataset.spec.seed, 8]).integers(-1, 2, dataset.n_images).astype(np.int8)


def unit_kinds_problem(root: Path):
    """(BrodenDataset read back from a Broden folder written under `root`, its LabelStore, activations, correct)."""
    from probescope.core.data.broden import BrodenDataset
    from probescope.core.dissection.labels import LabelStore

    synthetic = SyntheticBroden(SPEC)
    folder = write_synthetic_broden(Path(root) / "broden", synthetic)
    dataset = BrodenDataset.open(folder)
    return dataset, LabelStore.build(dataset), unit_kinds_activations(synthetic), unit_kinds_correct(synthetic)


def fingerprint(store, activations: np.ndarray) -> dict[str, int]:
    """CRC-32 of the inputs, so a change in the generators is told apart from a change in the engine."""
    arrays = {"pixel_region": store.pixel_region, "region_labels": store.region_labels,
              "region_pixels": store.region_pixels, "image_labels": store.image_labels.toarray(),
              "activations": activations}
    return {k: zlib.crc32(np.ascontiguousarray(v).view(np.uint8).reshape(-1)) for k, v in arrays.items()}


def answers(store, activations: np.ndarray, correct: np.ndarray, **options) -> dict[str, list[dict]]:
    """Every unit's result (UnitResult.to_json) under each of CONFIGS."""
    from dataclasses import replace

    from probescope.core.dissection.engine import dissect

    out = {}
    for name, settings in CONFIGS.items():
        result = dissect(store, activations, replace(settings, **options), correct=correct)
        out[name] = [result.units[u].to_json() for u in sorted(result.units)]
    return out


def main() -> int:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        _, store, act, correct = unit_kinds_problem(Path(tmp))
        found = answers(store, act, correct)
        share = [u["mask_pixels"] / store.n_pixels for u in found["window"]]
        doc = {"kinds": KINDS, "inputs": fingerprint(store, act), "mask_share": share, "answers": found}
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_text(json.dumps(doc, indent=None, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {GOLDEN} ({GOLDEN.stat().st_size / 1024:.0f} KiB); mask shares "
          + ", ".join(f"{k} {s:.3f}" for k, s in zip(KINDS, doc["mask_share"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
