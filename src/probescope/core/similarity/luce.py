"""The exponential similarity kernel and the Luce ranked-choice likelihood, vectorised over samples and trials.

Similarity s(z_q, z_r) = exp(-beta * ||z_q - z_r||_2), beta = 10 as in ImageNet-HSJ. A pick is made among the
references not yet picked in proportion to similarity (Luce's ratio of strengths), so
P(a then b) = s_a / sum_R s * s_b / sum_{R minus a} s. Everything is computed in log space: log s = -beta * d.
"""

from __future__ import annotations

import torch

from probescope.core.similarity.settings import BETA
from probescope.core.similarity.trials import outcome_table, prefix_table

_EPS = 1e-12  # keeps the gradient of the Euclidean norm finite when two points coincide
IMPOSSIBLE = -1e30  # log-probability of an impossible outcome in padded layouts (exp gives 0, p * log p gives 0)


def log_similarity(zq: torch.Tensor, zr: torch.Tensor, beta: float = BETA) -> torch.Tensor:
    """log s between a query (..., d) and references (..., R, d) -> (..., R)."""
    diff = zr - zq.unsqueeze(-2)
    return -beta * torch.sqrt((diff * diff).sum(-1) + _EPS)


def observed_log_likelihood(log_s: torch.Tensor, valid: torch.Tensor, n_select: torch.Tensor) -> torch.Tensor:
    """Log-probability of the observed outcome of each trial.

    log_s: (..., m, R) log similarity of each reference in chosen-first layout (picks first, in order);
    valid: (m, R) bool, False for padding; n_select: (m,) number of picks. Returns (..., m).
    """
    masked = log_s.masked_fill(~valid, float("-inf"))
    total = torch.zeros(masked.shape[:-1], dtype=log_s.dtype, device=log_s.device)
    c = int(n_select.max()) if n_select.numel() else 0
    for k in range(c):  # c is the number of picks (2), never the number of trials
        step = masked[..., k] - torch.logsumexp(masked[..., k:], dim=-1)
        total = total + torch.where(k < n_select, step, torch.zeros_like(step))
    return total


class OutcomeModel:
    """Log-probabilities of all r!/(r-c)! outcomes of r-rank-c trials in one log-sum-exp pass.

    Each distinct ordered prefix of picks (1 empty + 8 single picks for 8-rank-2) gets its denominator once; every
    outcome then gathers its numerators and denominators.
    """

    def __init__(self, r: int, c: int, device: torch.device | str = "cpu"):
        excluded, step_prefix = prefix_table(r, c)
        self.r, self.c = r, c
        self.table = torch.as_tensor(outcome_table(r, c), device=device)  # (K, c)
        self.step_prefix = torch.as_tensor(step_prefix, device=device)  # (K, c)
        self.remaining = torch.as_tensor(~excluded.T, dtype=torch.float64, device=device)  # (r, P): left to pick
        # 2 picks: outcome (a, b) sits at a * r + b of the flattened r x r table; a == b is impossible
        self.offdiagonal = self.table[:, 0] * r + self.table[:, -1]
        self.diagonal = torch.diag(torch.full((r,), IMPOSSIBLE)).to(device)

    @property
    def n_outcomes(self) -> int:
        return int(self.table.shape[0])

    def log_probs(self, log_s: torch.Tensor) -> torch.Tensor:
        """log_s (..., m, r) in presentation order -> (..., m, K) log-probability of each outcome (index rule)."""
        if self.c == 2:
            return self.log_probs_padded(log_s).index_select(-1, self.offdiagonal)
        return self.log_probs_padded(log_s)

    def log_denominators(self, log_s: torch.Tensor) -> torch.Tensor:
        """(..., m, P) log of the summed similarity of the references left after each prefix of picks.

        One log-sum-exp pass for all prefixes: shift by the row maximum, exponentiate once (float64, so that a
        dominant reference leaves the others' sum exact enough), sum per prefix by one matrix product, take the log.
        """
        top = log_s.amax(-1, keepdim=True).clamp_min(torch.finfo(log_s.dtype).min)
        e = torch.exp((log_s - top).double())
        return (torch.log(e @ self.remaining) + top.double()).to(log_s.dtype)

    def log_probs_padded(self, log_s: torch.Tensor) -> torch.Tensor:
        """Every outcome's log-probability, for sums over outcomes (entropies) where their layout does not matter.

        For 2 picks this is the r x r table flattened ([a, b] = P(a then b)) with the impossible a == b entries at
        IMPOSSIBLE (probability 0, finite so that p * log p is 0): broadcasting instead of gathering. Otherwise the
        outcomes in index order.
        """
        log_den = self.log_denominators(log_s)
        if self.c == 2:  # prefix 0 is the empty one (all references), prefix 1 + a has reference a picked
            first = log_s - log_den[..., :1] - log_den[..., 1:]  # log P(a first) - log(second-step denominator)
            pair = first.unsqueeze(-1) + log_s.unsqueeze(-2) + self.diagonal.to(log_s.dtype)
            return pair.flatten(-2)
        num = log_s[..., self.table]  # (..., m, K, c)
        den = log_den[..., self.step_prefix]  # (..., m, K, c)
        return (num - den).sum(-1)
