"""Similarity engine benchmark: embedding fit at the ImageNet-HSJ v0.1 scale and information-gain scoring.

Fits an ensemble on simulated judgments (planted clustered embedding, 8-rank-2 trials answered by the Luce model)
and reports time per member, held-out triplet accuracy and cross-entropy (with the planted embedding's own as the
ceiling), and the Spearman correlation of the fitted with the planted similarity. Then scores candidate trials for
expected information gain and prints candidates per second against a naive per-trial loop measured in the same run.

    python benchmarks/similarity_bench.py            # 1,000 stimuli, 25,000 trials, 100,000 candidates
    python benchmarks/similarity_bench.py --quick    # 300 stimuli, 6,000 trials, 10,000 candidates
Targets: a member fits in under 5 minutes on CPU; Spearman with the truth >= 0.9.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

import numpy as np
import torch

from probescope.core.similarity.active import information_gain
from probescope.core.similarity.agreement import agreement_from_distances, reference_distances
from probescope.core.similarity.correlation import expected_similarity, spearman, upper_pairs
from probescope.core.similarity.embedding import FitOptions, fit_ensemble, holdout_masks
from probescope.core.similarity.simulate import random_references

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the test oracles live with the tests
from oracles.simulated_trials import clustered_points, simulate_trials  # noqa: E402


def naive_information_gain(samples: np.ndarray, query: np.ndarray, refs: np.ndarray, beta: float) -> np.ndarray:
    """One trial at a time, outcomes enumerated in Python: the implementation the vectorised one replaces."""
    out = []
    for q, r in zip(query, refs):
        s = np.exp(-beta * np.linalg.norm(samples[:, r] - samples[:, q][:, None], axis=-1))  # (S, 8)
        probs = np.array([s[:, a] / s.sum(1) * s[:, b] / (s.sum(1) - s[:, a])
                          for a, b in itertools.permutations(range(r.shape[0]), 2)]).T  # (S, 56)
        mean = probs.mean(0)
        out.append(-(mean * np.log(mean)).sum() + (probs * np.log(probs)).sum(1).mean())
    return np.array(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--dims", type=int, default=6, help="planted and fitted dimensionality")
    parser.add_argument("--members", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch threads while fitting (default 1)")
    parser.add_argument("--samples", type=int, default=32, help="posterior samples per member for information gain")
    args = parser.parse_args()
    n, m, n_cand = (300, 6000, 10_000) if args.quick else (1000, 25_000, 100_000)

    rng = np.random.default_rng(0)
    truth = clustered_points(n, args.dims, 20, rng)
    trials = simulate_trials(truth, m, rng)
    print(f"simulated: {n} stimuli, {m} trials (8-rank-2), planted {args.dims}-D; torch threads {args.threads}")

    start = time.perf_counter()
    result = fit_ensemble(trials, n, [args.dims], n_members=args.members, seed=0,
                          options=FitOptions(threads=args.threads))
    seconds = time.perf_counter() - start
    ens = result.ensemble
    print(f"fit: {seconds:.1f} s for {args.members} members = {seconds / args.members:.1f} s per member "
          f"(epochs {ens.meta['epochs']}; target < 300 s)")

    masks = holdout_masks(m, args.members, 0.05, 0)
    for k in range(args.members):
        held = trials.subset(masks[k])
        fitted = agreement_from_distances(held, reference_distances(
            held, lambda a, b, k=k: -expected_similarity(ens, a, b, members=[k])[0]))
        ceiling = agreement_from_distances(held, reference_distances(
            held, lambda a, b: np.linalg.norm(truth[a] - truth[b], axis=1)))
        print(f"member {k + 1}: held-out ({len(held)} trials) triplet accuracy {fitted.accuracy:.4f} "
              f"(planted embedding {ceiling.accuracy:.4f}), cross-entropy {ens.val_loss[k]:.4f} nats")

    i, j, sampled = upper_pairs(n)
    fitted_sim = expected_similarity(ens, i, j).mean(0)
    rho = spearman(fitted_sim, np.exp(-10 * np.linalg.norm(truth[i] - truth[j], axis=1)))
    print(f"Spearman fitted vs planted similarity: {rho:.4f} over {len(i)} pairs (target >= 0.9)")

    query = rng.integers(0, n, n_cand)
    refs = random_references(rng, query, np.arange(n), 8)
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    gains = information_gain(ens, query, refs, n_samples=args.samples)
    fast = n_cand / (time.perf_counter() - start)
    samples = ens.sample(args.samples, torch.Generator().manual_seed(0)).numpy()
    k = 200
    start = time.perf_counter()
    naive = naive_information_gain(samples.astype(np.float64), query[:k], refs[:k], ens.beta)
    slow = k / (time.perf_counter() - start)
    check = information_gain(ens, query[:k], refs[:k], n_samples=args.samples)
    print(f"information gain: {fast:.0f} candidates/s ({n_cand} scored, {args.members * args.samples} pooled "
          f"samples); naive per-trial loop {slow:.0f}/s; ratio {fast / slow:.1f}x; "
          f"max |difference| {np.abs(check - naive).max():.2e}; mean gain {gains.mean():.4f} nats")


if __name__ == "__main__":
    main()
