"""A psychological embedding's ensemble (each member's posterior), its fit's options and result: plain data without
torch at import, so the window holds and saves fits it never computes (the fitting is embedding.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from probescope.core.atomic import atomic_open
from probescope.core.errors import InputError
from probescope.core.files import NUMPY_FILE_ERRORS, zip_problem
from probescope.core.similarity.settings import BETA, MAX_EPOCHS

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class FitOptions:
    """Optimiser settings; the defaults fit 1,000 stimuli / 25,000 trials in well under 5 minutes on a CPU core."""

    max_epochs: int = MAX_EPOCHS
    batch_size: int = 0  # 0: about 8 batches per epoch, at least 256 trials
    learning_rate: float = 0.02
    n_samples: int = 1  # Monte-Carlo samples per training step
    eval_every: int = 5  # epochs between held-out evaluations
    patience: int = 30  # epochs without held-out improvement before stopping
    eval_samples: int = 16  # posterior samples for held-out cross-entropy
    holdout: float = 0.05
    init_scale: float = 0.1
    threads: int = 1  # torch CPU threads while fitting (the batches are small: more threads mostly spin); 0 = as set


@dataclass(frozen=True)
class Ensemble:
    """Members' posteriors: loc and scale (M, n, d), prior_scale (M,), held-out cross-entropy (M,)."""

    loc: np.ndarray
    scale: np.ndarray
    prior_scale: np.ndarray
    val_loss: np.ndarray
    beta: float = BETA
    meta: dict = field(default_factory=dict)

    @property
    def n_members(self) -> int:
        return int(self.loc.shape[0])

    @property
    def n_stimuli(self) -> int:
        return int(self.loc.shape[1])

    @property
    def dims(self) -> int:
        return int(self.loc.shape[2])

    def save(self, path: str | Path) -> None:
        with atomic_open(path, "wb") as fh:
            np.savez(
                fh, loc=self.loc.astype(np.float32), scale=self.scale.astype(np.float32),
                prior_scale=self.prior_scale.astype(np.float64), val_loss=self.val_loss.astype(np.float64),
                beta=np.float64(self.beta), meta=np.array(json.dumps(self.meta)),
            )

    @staticmethod
    def load(path: str | Path) -> Ensemble:
        path = Path(path)
        problem = zip_problem(path)
        if problem:
            raise InputError(f"not a probescope embedding file ({problem})", path)
        try:
            with np.load(path, allow_pickle=False) as data:
                loc, scale = data["loc"], data["scale"]
                ens = Ensemble(loc, scale, data["prior_scale"], data["val_loss"], float(data["beta"]),
                               json.loads(str(data["meta"])))
        except (*NUMPY_FILE_ERRORS, AttributeError) as exc:  # (a single .npy array has no members)
            raise InputError(f"not a probescope embedding file ({exc})", path) from None
        if loc.ndim != 3 or loc.shape != scale.shape or len(ens.prior_scale) != loc.shape[0]:
            raise InputError(f"inconsistent embedding arrays (loc {loc.shape}, scale {scale.shape})", path)
        return ens

    def sample(self, n_samples: int, generator: torch.Generator, device: str = "cpu") -> torch.Tensor:
        import torch  # (torch: the window's process holds ensembles without torch)
        """(M * n_samples, n, d) posterior samples pooled over the members."""
        loc = torch.as_tensor(self.loc, dtype=torch.float32, device=device)
        scale = torch.as_tensor(self.scale, dtype=torch.float32, device=device)
        eps = torch.randn((n_samples, *loc.shape), generator=generator, dtype=torch.float32).to(device)
        return (loc + scale * eps).reshape(-1, *loc.shape[1:])


@dataclass(frozen=True)
class FitResult:
    ensemble: Ensemble
    dims_loss: dict[int, float]  # mean held-out cross-entropy of each dimensionality tried
    warm_started: tuple[bool, ...]  # per member: resumed from the previous fit
