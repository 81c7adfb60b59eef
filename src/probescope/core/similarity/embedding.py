"""Psychological embeddings by variational inference, as in ImageNet-HSJ.

Each stimulus i has a diagonal Gaussian posterior N(mu_i, diag(s_i^2)) over its d-dimensional position; the prior is
N(0, sigma^2 I) with sigma learned. Trials are explained by the Luce ranked-choice model over exponential
similarity (beta = 10), each trial's log-likelihood scaled by its weight. The loss minimised is the variational free
energy per training trial: KL(q || prior) / n_train - mean_t w_t log p(y_t | Z), with Z drawn from q
(reparameterised Monte-Carlo samples). An ensemble of 3 members each holds out its own 5% of the trials; the held-out
cross-entropy picks the dimensionality and stops training early.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from probescope.core.errors import InputError
from probescope.core.similarity.ensemble import Ensemble, FitOptions, FitResult
from probescope.core.similarity.luce import log_similarity, observed_log_likelihood
from probescope.core.similarity.settings import BETA, DEFAULT_SEED
from probescope.core.similarity.trials import PAD, Trials
from probescope.core.tasks import CancelCheck, ProgressCallback, check_cancel


# ------------------------------------------------------------------------------------------------- trial tensors
@dataclass(frozen=True)
class TrialTensors:
    """Trials in chosen-first layout as tensors: query (m,), refs (m, R) with padding set to 0, valid, picks, weight."""

    query: torch.Tensor
    refs: torch.Tensor
    valid: torch.Tensor
    n_select: torch.Tensor
    weight: torch.Tensor

    @staticmethod
    def of(trials: Trials, device: str = "cpu") -> TrialTensors:
        ordered = trials.chosen_first()
        valid = ordered != PAD
        return TrialTensors(
            torch.as_tensor(trials.query, device=device),
            torch.as_tensor(np.where(valid, ordered, 0), device=device),
            torch.as_tensor(valid, device=device),
            torch.as_tensor(trials.n_select, device=device),
            torch.as_tensor(trials.weight, dtype=torch.float32, device=device),
        )

    def __len__(self) -> int:
        return int(self.query.shape[0])

    def take(self, index: torch.Tensor) -> TrialTensors:
        return TrialTensors(self.query[index], self.refs[index], self.valid[index], self.n_select[index],
                            self.weight[index])


def trial_log_likelihood(z: torch.Tensor, t: TrialTensors, beta: float = BETA) -> torch.Tensor:
    """z (S, n, d) -> (S, m) log-probability of each trial's observed outcome."""
    return observed_log_likelihood(log_similarity(z[:, t.query], z[:, t.refs], beta), t.valid, t.n_select)


def predictive_cross_entropy(
    loc: torch.Tensor, scale: torch.Tensor, t: TrialTensors, n_samples: int, generator: torch.Generator,
    beta: float = BETA, chunk: int = 8192,
) -> float:
    """-weighted mean over trials of log E_q[p(y | Z)] (MC over posterior samples; loc/scale (..., n, d) pooled)."""
    if len(t) == 0:
        return float("nan")
    loc = loc.reshape(-1, *loc.shape[-2:])
    scale = scale.reshape(-1, *scale.shape[-2:])
    total = 0.0
    with torch.no_grad():
        eps = torch.randn((n_samples, *loc.shape), generator=generator).to(loc.device)
        z = (loc + scale * eps).reshape(-1, *loc.shape[-2:])
        for start in range(0, len(t), chunk):
            part = t.take(torch.arange(start, min(start + chunk, len(t)), device=loc.device))
            ll = trial_log_likelihood(z, part, beta)
            log_pred = torch.logsumexp(ll, dim=0) - math.log(ll.shape[0])
            total += float((part.weight * log_pred).sum())
    return -total / float(t.weight.sum())


# -------------------------------------------------------------------------------------------------------- a member
@dataclass
class MemberState:
    loc: np.ndarray  # (n, d)
    scale: np.ndarray  # (n, d)
    prior_scale: float
    val_loss: float = float("nan")
    epochs: int = 0


def _inverse_softplus(x: torch.Tensor) -> torch.Tensor:
    return x + torch.log(-torch.expm1(-x))


def fit_member(
    train: TrialTensors,
    val: TrialTensors,
    n_stimuli: int,
    dims: int,
    *,
    init: MemberState | None = None,
    seed: int = DEFAULT_SEED,
    options: FitOptions = FitOptions(),
    progress: Callable[[float], None] | None = None,
    cancel: CancelCheck | None = None,
    device: str = "cpu",
) -> MemberState:
    """Minimise the variational free energy of one member; keep the parameters with the best held-out loss."""
    gen = torch.Generator().manual_seed(seed)
    if init is None:
        loc0 = torch.randn((n_stimuli, dims), generator=gen) * options.init_scale
        scale0 = torch.full((n_stimuli, dims), options.init_scale * 0.1)
        sigma0 = options.init_scale
    else:
        loc0 = torch.as_tensor(init.loc, dtype=torch.float32)
        scale0 = torch.as_tensor(init.scale, dtype=torch.float32)
        sigma0 = init.prior_scale
    loc = loc0.to(device).requires_grad_(True)
    rho = _inverse_softplus(scale0.clamp_min(1e-6)).to(device).requires_grad_(True)
    log_sigma = torch.tensor(math.log(sigma0), device=device, requires_grad=True)
    optimizer = torch.optim.Adam([loc, rho, log_sigma], lr=options.learning_rate)

    m = len(train)
    batch = options.batch_size or max(256, math.ceil(m / 8))
    n_train = max(m, 1)
    monitor = val if len(val) else train
    best = (float("inf"), loc0.clone(), scale0.clone(), sigma0, 0)
    since_best = 0
    epoch = 0
    for epoch in range(1, options.max_epochs + 1):
        check_cancel(cancel)
        order = torch.randperm(m, generator=gen).to(device)
        for start in range(0, m, batch):
            part = train.take(order[start : start + batch])
            scale = torch.nn.functional.softplus(rho)
            eps = torch.randn((options.n_samples, n_stimuli, dims), generator=gen).to(device)
            z = loc + scale * eps
            ll = trial_log_likelihood(z, part).mean(0)
            sigma = log_sigma.exp()
            kl = (log_sigma - torch.log(scale) + (scale**2 + loc**2) / (2 * sigma**2) - 0.5).sum()
            loss = kl / n_train - (part.weight * ll).mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        if epoch % options.eval_every == 0 or epoch == options.max_epochs:
            with torch.no_grad():
                scale = torch.nn.functional.softplus(rho)
                ce = predictive_cross_entropy(loc, scale, monitor, options.eval_samples, gen)
            if ce < best[0] - 1e-4:
                best = (ce, loc.detach().cpu().clone(), scale.detach().cpu().clone(),
                        float(log_sigma.detach().exp()), epoch)
                since_best = 0
            else:
                since_best += options.eval_every
                if since_best >= options.patience:
                    break
        if progress is not None:
            progress(epoch / options.max_epochs)
    ce, best_loc, best_scale, best_sigma, _ = best
    return MemberState(best_loc.numpy(), best_scale.numpy(), best_sigma, ce if len(val) else float("nan"), epoch)


# -------------------------------------------------------------------------------------------------------- ensemble
def holdout_masks(m: int, n_members: int, fraction: float, seed: int) -> np.ndarray:
    """(M, m) bool: member k's own held-out trials (a different random `fraction` each, at least 1 when m >= 20)."""
    masks = np.zeros((n_members, m), dtype=bool)
    n_out = max(1 if m >= 20 else 0, int(round(fraction * m)))
    for k in range(n_members):
        masks[k, np.random.default_rng([seed, k]).permutation(m)[:n_out]] = True
    return masks


def _resize(state: MemberState, n: int, seed: int, options: FitOptions) -> MemberState:
    """A previous member's posterior for n stimuli: new stimuli start from fresh random positions."""
    n_old = len(state.loc)
    if n_old >= n:
        return MemberState(state.loc[:n], state.scale[:n], state.prior_scale)
    rng = np.random.default_rng(seed)
    d = state.loc.shape[1]
    loc = np.concatenate([state.loc, rng.normal(0, options.init_scale, (n - n_old, d))]).astype(np.float32)
    scale = np.concatenate([state.scale, np.full((n - n_old, d), options.init_scale * 0.1)]).astype(np.float32)
    return MemberState(loc, scale, state.prior_scale)


def fit_ensemble(
    trials: Trials,
    n_stimuli: int,
    dims: Sequence[int] = range(2, 11),
    *,
    n_members: int = 3,
    previous: Ensemble | None = None,
    seed: int = DEFAULT_SEED,
    options: FitOptions = FitOptions(),
    progress: ProgressCallback | None = None,
    cancel: CancelCheck | None = None,
    device: str = "cpu",
) -> FitResult:
    """Fit an ensemble for each dimensionality in `dims`; keep the one with the lowest mean held-out cross-entropy.

    With `previous` (same dimensionality), its two best members (by cross-entropy on the new held-out trials) resume
    from their weights and the worst restarts fresh; its dimensionality is then the only one tried.
    """
    trials = trials.subset(trials.n_select > 0)  # unanswered trials (e.g. proposals) carry no information
    if len(trials) == 0:
        raise InputError("no answered trials left to fit an embedding to")
    with torch_threads(options.threads if device == "cpu" else 0):
        return _fit_ensemble(trials, n_stimuli, dims, n_members, previous, seed, options, progress, cancel, device)


@contextlib.contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Run a block with n torch CPU threads (0: unchanged). Small batched ops run fastest on one thread, and on a
    shared machine extra threads mostly spin; the setting is process-wide while the block runs."""
    before = torch.get_num_threads()
    if n > 0:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _fit_ensemble(
    trials: Trials, n_stimuli: int, dims: Sequence[int], n_members: int, previous: Ensemble | None, seed: int,
    options: FitOptions, progress: ProgressCallback | None, cancel: CancelCheck | None, device: str,
) -> FitResult:
    dims = [previous.dims] if previous is not None else sorted(set(int(d) for d in dims))
    if not dims or min(dims) < 1:
        raise InputError(f"dimensionalities must be 1 or more, got {dims}")
    tensors = TrialTensors.of(trials, device)
    masks = holdout_masks(len(trials), n_members, options.holdout, seed)
    splits = [(tensors.take(torch.as_tensor(np.nonzero(~mk)[0], device=device)),
               tensors.take(torch.as_tensor(np.nonzero(mk)[0], device=device))) for mk in masks]

    inits: list[MemberState | None] = [None] * n_members
    if previous is not None:
        gen = torch.Generator().manual_seed(seed)
        states = [_resize(MemberState(previous.loc[k], previous.scale[k], float(previous.prior_scale[k])),
                          n_stimuli, seed + k, options) for k in range(previous.n_members)]
        losses = [predictive_cross_entropy(torch.as_tensor(s.loc), torch.as_tensor(s.scale), splits[0][1] if
                                           len(splits[0][1]) else tensors, options.eval_samples, gen)
                  for s in states]
        ranked = [states[k] for k in np.argsort(losses)]
        for k in range(min(n_members - 1, len(ranked))):
            inits[k] = ranked[k]

    total = len(dims) * n_members
    results: dict[int, list[MemberState]] = {}
    for di, d in enumerate(dims):
        members = []
        for k in range(n_members):
            step = di * n_members + k

            def report(fraction: float, step: int = step, d: int = d, k: int = k) -> None:
                if progress is not None:
                    progress((step + fraction) / total, f"{d}-D, member {k + 1}/{n_members}")

            members.append(fit_member(
                splits[k][0], splits[k][1], n_stimuli, d, init=inits[k], seed=seed * 1000 + d * 10 + k,
                options=options, progress=report, cancel=cancel, device=device,
            ))
        results[d] = members
    dims_loss = {d: float(np.nanmean([s.val_loss for s in ms])) if any(np.isfinite(s.val_loss) for s in ms)
                 else float("nan") for d, ms in results.items()}
    best_d = min(dims_loss, key=lambda d: (np.nan_to_num(dims_loss[d], nan=np.inf), d))
    members = results[best_d]
    if progress is not None:
        progress(1.0, f"chose {best_d}-D")
    ensemble = Ensemble(
        np.stack([s.loc for s in members]), np.stack([s.scale for s in members]),
        np.array([s.prior_scale for s in members]), np.array([s.val_loss for s in members]), BETA,
        {"dims_loss": {str(k): v for k, v in dims_loss.items()}, "n_trials": len(trials),
         "epochs": [s.epochs for s in members], "holdout": options.holdout, "seed": seed},
    )
    return FitResult(ensemble, dims_loss, tuple(inits[k] is not None for k in range(n_members)))


def ensemble_cross_entropy(ensemble: Ensemble, trials: Trials, n_samples: int = 16, seed: int = DEFAULT_SEED,
                           source: str | Path | None = None) -> float:
    """Cross-entropy of the ensemble's pooled predictive distribution on `trials` (weighted mean, nats per trial;
    `source` the trials' file, named when they use stimuli the ensemble lacks).

    On a set of randomly assembled trials this is the "coarse-grained loss" convergence measure of ImageNet-HSJ.
    """
    if len(trials) == 0:
        return float("nan")
    top = max(int(trials.query.max()), int(trials.references.max()))
    if top >= ensemble.n_stimuli:
        raise InputError(f"the trials use stimulus {top} but the embedding has {ensemble.n_stimuli} stimuli", source)
    gen = torch.Generator().manual_seed(seed)
    return predictive_cross_entropy(torch.as_tensor(ensemble.loc), torch.as_tensor(ensemble.scale),
                                    TrialTensors.of(trials), n_samples, gen, ensemble.beta)
