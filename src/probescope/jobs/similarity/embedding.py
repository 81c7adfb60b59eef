"""The psychological embedding of the judgments: the one fit `probescope embed` and the Similarity workspace's quick
fit and refits call (`fit_embedding`), its convergence measures (ImageNet-HSJ section 5), the workspace's quick
first fit cached on disk (so a second launch shows it at once) and the 2-D view of a fit.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from probescope.core.demo.judgments import ensure_demo_judgments
from probescope.core.errors import InputError
from probescope.core.similarity.agreement import agreement_from_distances
from probescope.core.similarity.correlation import (
    consecutive_correlation,
    expected_similarity,
    spearman,
    upper_pairs,
    within_ensemble_correlation,
)
from probescope.core.similarity.ensemble import Ensemble, FitOptions, FitResult
from probescope.core.similarity.quality import FilterReport
from probescope.core.similarity.readers import Judgments, read_psiz_hdf5
from probescope.core.similarity.settings import DEFAULT_SEED, EmbeddingSettings, Filters
from probescope.core.similarity.sources import JudgmentSource
from probescope.core.similarity.trials import Trials
from probescope.core.tasks import CancelCheck, ProgressCallback
from probescope.jobs.similarity.scores import embedding_distances, non_mirror_stimuli
from probescope.jobs.similarity.trials import TrialSet

# the workspace's first embedding: one small dimensionality, few epochs, an ensemble of 3 (a few seconds for the
# demo); its refit controls run the full dimensionality search with the engine's default options
QUICK_DIMS = 4
QUICK_MEMBERS = 3
QUICK_OPTIONS = FitOptions(max_epochs=60, patience=20)
CACHE_SUBDIR = "similarity_embeddings"
CACHE_VERSION = 1


def fit_embedding(trials: Trials, n_stimuli: int, dims: Sequence[int], n_members: int, *,
                  previous: Ensemble | None = None, seed: int = DEFAULT_SEED, options: FitOptions | None = None,
                  progress: ProgressCallback | None = None, cancel: CancelCheck | None = None,
                  device: str = "cpu") -> FitResult:
    """An ensemble of `n_members` for each dimensionality in `dims`, the one with the lowest held-out loss kept
    (with `previous`, its members warm-start at its dimensionality); autograd on wherever it runs."""
    # (torch: the window's process imports this module for its Jobs, never torch)
    from probescope.core.similarity.embedding import fit_ensemble

    with grad_enabled():
        return fit_ensemble(trials, n_stimuli, dims, n_members=n_members, previous=previous, seed=seed,
                            options=FitOptions() if options is None else options, progress=progress, cancel=cancel,
                            device=device)


@dataclass(frozen=True)
class Convergence:
    """The fit's convergence measures (ImageNet-HSJ section 5)."""

    dims_loss: dict[int, float]  # mean held-out cross-entropy per dimensionality tried
    within: float  # within-ensemble correlation (Pearson of expected similarity)
    coarse_loss: float | None  # cross-entropy on the coarse-grained (randomly assembled) trials
    consecutive: float | None  # correlation with the previous fit
    n_trials: int
    dims: int


def embedding_cache_path(judgments: Judgments, filters: Filters, folder: Path) -> Path:
    """Where the quick first embedding of these judgments is kept: keyed by the file, its size and time, the
    filters and the quick fit's settings, so a changed file or setting never reuses a stale fit."""
    source = Path(judgments.source)
    try:
        stat = source.stat()
        identity = [str(source.resolve()), stat.st_size, stat.st_mtime_ns]
    except OSError:
        identity = [str(source)]
    key = json.dumps([CACHE_VERSION, identity, len(judgments.trials), judgments.n_stimuli,
                      dataclasses.asdict(filters), QUICK_DIMS, QUICK_MEMBERS, dataclasses.asdict(QUICK_OPTIONS)])
    return folder / CACHE_SUBDIR / f"{hashlib.sha1(key.encode()).hexdigest()[:20]}.npz"


def quick_embedding(trialset: TrialSet, judgments: Judgments, cache: Path | None, *,
                    progress: ProgressCallback | None = None,
                    cancel: CancelCheck | None = None) -> tuple[Ensemble, bool]:
    """The first view's embedding: read from the cache, else a quick fit (saved there). Returns (ensemble, cached)."""
    path = embedding_cache_path(judgments, trialset.filters, cache) if cache is not None else None
    if path is not None and path.is_file():
        try:
            ensemble = Ensemble.load(path)
            if ensemble.n_stimuli == judgments.n_stimuli:
                return ensemble, True
        except InputError:
            pass  # a damaged cache entry is refitted and replaced
    result = fit_embedding(trialset.filtered, judgments.n_stimuli, [QUICK_DIMS], QUICK_MEMBERS, options=QUICK_OPTIONS,
                           progress=progress, cancel=cancel)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        result.ensemble.save(path)
    return result.ensemble, False


def refit(trialset: TrialSet, judgments: Judgments, dims: list[int], n_members: int,
          previous: Ensemble | None = None, *, progress: ProgressCallback | None = None,
          cancel: CancelCheck | None = None) -> FitResult:
    """The full fit the refit controls ask for (with `previous`, its members warm-start at its dimensionality)."""
    return fit_embedding(trialset.filtered, judgments.n_stimuli, dims, n_members, previous=previous,
                         options=FitOptions(), progress=progress, cancel=cancel)


@contextlib.contextmanager
def grad_enabled() -> Iterator[None]:
    """Fitting needs autograd, which the compute thread switches off (it runs tasks under inference mode)."""
    import torch  # (torch: the window's process imports this module for its Jobs, never torch)

    with torch.inference_mode(False), torch.enable_grad():
        yield


def coarse_trials(spec: str, judgments: Judgments) -> tuple[Trials | None, str]:
    """The coarse-grained trial set that comes with the judgments: the demo's randomly assembled trials, or a zip
    release's test_seqs trials; (None, '') when there is none."""
    if spec == "demo":
        paths = ensure_demo_judgments()
        return read_psiz_hdf5(paths.coarse, judgments.catalog).trials, "randomly assembled trials"
    if judgments.test is not None and len(judgments.test):
        return judgments.test, "the release's test_seqs trials"
    return None, ""


def convergence(ensemble: Ensemble, dims_loss: dict[int, float], judgments: Judgments, coarse: Trials | None,
                previous: Ensemble | None, n_trials: int) -> Convergence:
    # (torch: the window's process imports this module for its Jobs, never torch)
    from probescope.core.similarity.embedding import ensemble_cross_entropy

    stimuli = non_mirror_stimuli(judgments)
    within = within_ensemble_correlation(ensemble, stimuli=stimuli).value if ensemble.n_members > 1 else float("nan")
    coarse_loss = ensemble_cross_entropy(ensemble, coarse) if coarse is not None else None
    consecutive = None
    if previous is not None:
        consecutive = consecutive_correlation(previous, ensemble, stimuli=stimuli).value
    return Convergence(dict(dims_loss), within, coarse_loss, consecutive, n_trials, ensemble.dims)


def dims_loss_of(ensemble: Ensemble) -> dict[int, float]:
    """The held-out loss per dimensionality that a fit records in its metadata (a cached fit has it too)."""
    return {int(k): float(v) for k, v in ensemble.meta.get("dims_loss", {}).items()}


def projection_2d(ensemble: Ensemble) -> tuple[np.ndarray, str]:
    """(n, 2) positions to plot and how they were made: the member with the lowest held-out loss (members are not
    aligned with each other, so they are never averaged), its two dimensions or its first two principal axes."""
    losses = np.nan_to_num(np.asarray(ensemble.val_loss, dtype=np.float64), nan=np.inf)
    k = int(np.argmin(losses)) if np.isfinite(losses).any() else 0
    z = np.asarray(ensemble.loc[k], dtype=np.float64)
    if z.shape[1] <= 2:
        out = np.zeros((len(z), 2))
        out[:, : z.shape[1]] = z
        return out, f"member {k + 1}, its {z.shape[1]} dimension(s)"
    centred = z - z.mean(0)
    _, s, vt = np.linalg.svd(centred, full_matrices=False)
    share = float((s[:2] ** 2).sum() / max((s**2).sum(), 1e-12))
    return centred @ vt[:2].T, f"member {k + 1}, first two principal axes of {z.shape[1]}-D ({share:.0%} of variance)"


# ------------------------------------------------------------------------------------------------ probescope embed
def embed(source: JudgmentSource, trials: Trials, report: FilterReport, dims: list[int], settings: EmbeddingSettings,
          out: Path, *, previous: Ensemble | None = None, coarse: Trials | None = None, coarse_name: str = "",
          progress: ProgressCallback | None = None, device: str = "cpu") -> tuple[dict, FitResult]:
    """`probescope embed`'s fit of the kept `trials`, saved to `out` with where it came from, and its report: the
    held-out loss per dimensionality, the training triplet accuracy and the convergence measures (within-ensemble,
    coarse-grained loss, consecutive-fit correlation with `previous`; for simulated data, against the truth)."""
    j = source.judgments
    seed = settings.seed
    start = time.perf_counter()
    result = fit_embedding(trials, j.n_stimuli, dims, settings.ensemble, previous=previous, seed=seed,
                           options=FitOptions(max_epochs=settings.max_epochs), progress=progress, device=device)
    seconds = time.perf_counter() - start
    ens = result.ensemble
    meta = dict(ens.meta)
    meta.update({"judgments": str(j.source), "simulated": j.simulated, "dropped": report.dropped,
                 "fit_seconds": seconds})
    ens = Ensemble(ens.loc, ens.scale, ens.prior_scale, ens.val_loss, ens.beta, meta)
    ens.save(out)

    real = non_mirror_stimuli(j)  # no mirrored catch images
    within = within_ensemble_correlation(ens, stimuli=real, seed=seed) if ens.n_members > 1 else None
    psych = agreement_from_distances(trials, embedding_distances(ens, trials, seed))
    summary: dict = {
        "judgments": str(j.source), "simulated": j.simulated, "trials": len(trials), "dropped": report.dropped,
        "dims_loss": {str(k): v for k, v in result.dims_loss.items()}, "dims": ens.dims,
        "member_loss": ens.val_loss.tolist(), "warm_started": list(result.warm_started),
        "training_triplet_accuracy": psych.accuracy, "seconds": seconds, "out": str(out),
    }
    if within is not None:
        summary["within_ensemble_correlation"] = {"pearson": within.value, "pairs": within.n_pairs}
    if coarse is not None and len(coarse):
        # (torch: the window's process imports this module for its Jobs, never torch)
        from probescope.core.similarity.embedding import ensemble_cross_entropy

        summary["coarse_grained_loss"] = ensemble_cross_entropy(ens, coarse, seed=seed, source=coarse_name)
        summary["coarse_trials"] = len(coarse)
        summary["coarse_set"] = coarse_name
    if previous is not None:
        c = consecutive_correlation(previous, ens, stimuli=real, seed=seed)
        summary["consecutive_correlation"] = {"pearson": c.value, "pairs": c.n_pairs}
    if source.truth is not None:  # simulated data: compare with the planted similarity
        a, b, _ = upper_pairs(len(real)) if real is not None else upper_pairs(ens.n_stimuli)
        if real is not None:
            a, b = real[a], real[b]
        fitted = expected_similarity(ens, a, b, seed=seed).mean(0)
        dist = np.linalg.norm(source.truth[a] - source.truth[b], axis=1)
        summary["truth_spearman"] = spearman(fitted, np.exp(-ens.beta * dist))
    return summary, result
