"""Unit ablation the obvious way: for every group, a full forward pass of the images with a forward hook that
overwrites the units in the layer's output (in its last call of the pass, the call activation extraction keeps);
then per class, by plain loops over the images, the share of images predicted right and the mean probability of the
true class. Slow by design; the tests and `benchmarks/ablation_bench.py` check core/ablation against it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn


def calls_per_pass(module: nn.Module, layer: str, x: torch.Tensor) -> int:
    """How often `layer` runs in one forward pass."""
    calls = []
    handle = dict(module.named_modules())[layer].register_forward_hook(lambda *_: calls.append(1))
    with torch.no_grad():
        module(x)
    handle.remove()
    return len(calls)


def ablated_logits(module: nn.Module, layer: str, x: torch.Tensor, units: Sequence[int],
                   values: Sequence[float] | None = None) -> torch.Tensor:
    """The model's output on `x` with `units` of `layer` set to `values` (default 0) in the layer's last call."""
    target = dict(module.named_modules())[layer]
    last, seen = calls_per_pass(module, layer, x[:1]), []

    def hook(_mod, _inp, out):
        seen.append(1)
        if len(seen) != last or not len(units):
            return None
        out = out.clone()
        for k, u in enumerate(units):
            out[:, u] = 0.0 if values is None else float(values[k])
        return out

    handle = target.register_forward_hook(hook)
    try:
        with torch.no_grad():
            return module(x).float()
    finally:
        handle.remove()


def per_class(module: nn.Module, layer: str, images: torch.Tensor, truth: Sequence[int], units: Sequence[int],
              values: Sequence[float] | None = None) -> dict[int, tuple[float, float]]:
    """{class: (accuracy, mean probability of the true class)} over the images with truth >= 0, `units` ablated."""
    logits = torch.cat([ablated_logits(module, layer, images[k:k + 32], units, values)
                        for k in range(0, len(images), 32)])
    right: dict[int, list[int]] = {}
    prob: dict[int, list[float]] = {}
    for image_logits, y in zip(logits, truth):
        if y < 0:
            continue
        p = torch.softmax(image_logits.double(), 0)
        right.setdefault(int(y), []).append(int(int(image_logits.argmax()) == y))
        prob.setdefault(int(y), []).append(float(p[y]))
    return {c: (float(np.mean(right[c])), float(np.mean(prob[c]))) for c in sorted(right)}
