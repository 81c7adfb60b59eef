"""Random weights in the layout of the TF Inception v3 weights file, for tests and benchmarks (the real file cannot
ship)."""

from __future__ import annotations

import torch

from probescope.core.scoring.inception_tf import InceptionV3TF


def random_state_dict(seed: int = 0) -> dict[str, torch.Tensor]:
    """A randomly initialised state dict in the weights file's layout, for tests and benchmarks.

    He-scaled convolutions and BatchNorm statistics near identity keep activations O(1) through all 94 layers,
    so the logits are informative numbers rather than underflow.
    """
    generator = torch.Generator().manual_seed(seed)
    state = InceptionV3TF().state_dict()
    out: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        if key.endswith("num_batches_tracked"):
            out[key] = value.clone()
        elif key.endswith("conv.weight"):
            fan_in = value[0].numel()
            out[key] = torch.randn(value.shape, generator=generator) * (2.0 / fan_in) ** 0.5
        elif key.endswith("running_var") or key.endswith("bn.weight"):
            out[key] = 0.5 + torch.rand(value.shape, generator=generator)
        elif key == "fc.weight":
            out[key] = torch.randn(value.shape, generator=generator) * (4.0 / value.shape[1]) ** 0.5
        else:  # BatchNorm bias and running mean, fc bias
            out[key] = 0.1 * torch.randn(value.shape, generator=generator)
    return out
