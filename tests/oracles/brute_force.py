"""Brute force over every compositional formula: the oracle for the optimal search.

Every left-deep formula of distinct concepts up to length 3 is scored: for each prefix f, its explicit mask meets
every concept's mask at once (|f & c| and |f & c & M| as products of 0/1 masks), which gives f OR c, f AND c and
f AND NOT c by inclusion-exclusion; the best by the beam search's ranking rule (search.rank_key) wins.
"""

from __future__ import annotations

import numpy as np

from oracles.mask_reference import MaskReference
from probescope.core.dissection.formula import AND, AND_NOT, OR, Formula
from probescope.core.dissection.search import rank_key


def best_formula(ref: MaskReference, mask: np.ndarray, max_length: int,
                 categories: dict[int, str] | None = None) -> tuple[Formula, float, int]:
    """(best formula, its IoU, formulas scored) over all formulas of at most max_length (<= 3) distinct concepts;
    `categories` switches to the per-category IoU scope."""
    concepts = list(ref.concepts)
    atoms = np.stack([ref.concept_mask(c) for c in concepts]).astype(np.float64)  # (L, pixels)
    best: tuple = (Formula.atom(concepts[0]), -1.0)
    scored = 0

    def unit_sizes(prefix: Formula) -> np.ndarray:
        if categories is None:
            return np.full(len(concepts), float(mask.sum()))
        return np.array([ref.scope_size(mask, categories, prefix.extend(OR, c)) for c in concepts], float)

    def consider(f: Formula, iou: float) -> None:
        nonlocal best
        if rank_key(f, iou) < rank_key(*best):
            best = (f, iou)

    prefixes = [Formula.atom(c) for c in concepts]
    for f in prefixes:
        unit = float(mask.sum()) if categories is None else ref.scope_size(mask, categories, f)
        consider(f, ref.iou(mask, ref.formula_mask(f), int(unit)))
        scored += 1
    m = mask.astype(np.float64)
    atom_inter, atom_size = atoms @ m, atoms.sum(axis=1)
    for step in range(1, max_length):
        grown = []
        for f in prefixes:
            g = ref.formula_mask(f).astype(np.float64)
            both_inter, both_size = atoms @ (g * m), atoms @ g  # |f & c & M|, |f & c| for every c
            f_inter, f_size = float(g @ m), float(g.sum())
            unit = unit_sizes(f)
            for op, inter, size in ((OR, f_inter + atom_inter - both_inter, f_size + atom_size - both_size),
                                    (AND, both_inter, both_size),
                                    (AND_NOT, f_inter - both_inter, f_size - both_size)):
                union = unit + size - inter
                ious = np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)
                valid = [k for k, c in enumerate(concepts) if c not in f.atoms]
                scored += len(valid)
                if step + 1 < max_length:
                    grown += [f.extend(op, concepts[k]) for k in valid]
                for k in valid:
                    if ious[k] >= best[1]:  # only these can win (ties go by the ranking rule)
                        consider(f.extend(op, concepts[k]), float(ious[k]))
        prefixes = grown
    return best[0], best[1], scored
