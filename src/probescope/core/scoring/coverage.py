"""Coverage per class: which classes a generator under- or over-produces compared with the real images.

Both sets go through the same classifier; each image counts for its top prediction. A class is 'missing' when
real images are predicted as it and no generated image is, 'extra' when only generated images are, and otherwise
'under' / 'over' when the two shares differ by more than Z_THRESHOLD standard errors of a two-proportion z-test
(pooled share), 'ok' when they do not. This is the mode-dropping view that IS cannot give: IS never sees the real
images, so it cannot tell a missing class from one the real data lacks too. It inherits the classifier's errors:
a class the classifier confuses with another moves between the two.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from probescope.core.errors import InputError

Z_THRESHOLD = 3.0
SORT_KEYS = ("ratio", "z", "real", "generated", "class")


@dataclass(frozen=True)
class ClassCoverage:
    real_counts: np.ndarray  # (n_classes,) real images whose top prediction is each class
    generated_counts: np.ndarray  # (n_classes,) the same for generated images
    class_names: tuple[str, ...] | None = None

    @property
    def n_classes(self) -> int:
        return len(self.real_counts)

    @property
    def real_share(self) -> np.ndarray:
        return self.real_counts / max(1, self.real_counts.sum())

    @property
    def generated_share(self) -> np.ndarray:
        return self.generated_counts / max(1, self.generated_counts.sum())

    @property
    def ratio(self) -> np.ndarray:
        """generated share / real share: < 1 under-produced, > 1 over-produced (inf: extra, nan: in neither)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return self.generated_share / self.real_share

    @property
    def z(self) -> np.ndarray:
        """Two-proportion z-score of generated share minus real share (0 for a class neither set has)."""
        n_gen, n_real = self.generated_counts.sum(), self.real_counts.sum()
        pooled = (self.generated_counts + self.real_counts) / max(1, n_gen + n_real)
        se = np.sqrt(pooled * (1.0 - pooled) * (1.0 / max(1, n_gen) + 1.0 / max(1, n_real)))
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(se > 0, (self.generated_share - self.real_share) / np.where(se > 0, se, 1.0), 0.0)

    @property
    def status(self) -> np.ndarray:
        """'missing', 'extra', 'under', 'over', 'ok' or 'absent' (in neither set) per class."""
        real, gen, z = self.real_counts > 0, self.generated_counts > 0, self.z
        return np.select(
            [real & ~gen, gen & ~real, ~gen & ~real, z < -Z_THRESHOLD, z > Z_THRESHOLD],
            ["missing", "extra", "absent", "under", "over"],
            default="ok",
        )

    @property
    def total_variation(self) -> float:
        """Half the L1 distance between the two class histograms: 0 same shares, 1 disjoint classes."""
        return float(0.5 * np.abs(self.generated_share - self.real_share).sum())

    def class_name(self, k: int) -> str:
        return self.class_names[k] if self.class_names is not None else str(k)

    def order(self, key: str = "ratio", descending: bool = False) -> np.ndarray:
        """Class indices sorted by one of SORT_KEYS (ties by class index; NaN ratios last)."""
        values = {"ratio": self.ratio, "z": self.z, "real": self.real_counts, "generated": self.generated_counts,
                  "class": np.arange(self.n_classes)}.get(key)
        if values is None:
            raise InputError(f"coverage sorts by one of {', '.join(SORT_KEYS)}, not {key!r}")
        values = np.asarray(values, dtype=np.float64)
        primary = -values if descending else values
        return np.lexsort((np.arange(self.n_classes), np.nan_to_num(primary, nan=np.inf), np.isnan(values)))

    def rows(self, key: str = "ratio", descending: bool = False) -> list[dict]:
        """One JSON-ready dict per class, sorted."""
        ratio, z, status = self.ratio, self.z, self.status
        return [
            {"class": int(k), "name": self.class_name(k), "real": int(self.real_counts[k]),
             "generated": int(self.generated_counts[k]), "real_share": float(self.real_share[k]),
             "generated_share": float(self.generated_share[k]),
             "ratio": float(ratio[k]) if np.isfinite(ratio[k]) else None, "z": float(z[k]), "status": str(status[k])}
            for k in self.order(key, descending)
        ]


def class_coverage(real_counts: np.ndarray, generated_counts: np.ndarray,
                   class_names: tuple[str, ...] | None = None) -> ClassCoverage:
    """Coverage from the two sets' top-prediction counts (same classifier, same classes)."""
    real = np.asarray(real_counts, dtype=np.int64)
    gen = np.asarray(generated_counts, dtype=np.int64)
    if real.shape != gen.shape or real.ndim != 1:
        raise InputError(f"class counts of the real and generated sets differ in shape: {real.shape} vs {gen.shape} "
                         "(were they classified by different classifiers?)")
    if (real < 0).any() or (gen < 0).any():
        raise InputError("class counts must not be negative")
    if class_names is not None and len(class_names) != len(real):
        class_names = None
    return ClassCoverage(real, gen, tuple(class_names) if class_names is not None else None)
