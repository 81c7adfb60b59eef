"""A procedural "generator" over the demo world, with knobs for the two things the Inception Score rewards.

diversity: how many scene classes the sampler draws from (1 = total mode collapse, len(SCENES) = every mode);
fidelity: how recognisable each image is (1 = clean; lower = blur, noise, stray colours and intruding objects).
Scored with the demo model, lowering either knob lowers IS: a user can watch mode collapse or blur set in.

Image k is rendered from its own seed sequence (seed, k), so the samples do not depend on the batch size and
batches can be rendered in parallel.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from probescope.core.demo.world import SCENES, render_sample
from probescope.core.errors import InputError
from probescope.core.scoring.sources import BatchTask, SampleSource


class DemoSampler(SampleSource):
    def __init__(
        self,
        n: int,
        diversity: int = len(SCENES),
        fidelity: float = 1.0,
        seed: int = 0,
        scenes: Sequence[str] | None = None,
    ):
        """Draw `n` images; scenes uniformly from `scenes` or else from the first `diversity` of SCENES."""
        if n < 1:
            raise InputError(f"demo sampler: n must be at least 1, got {n}")
        if scenes is None:
            if not 1 <= diversity <= len(SCENES):
                raise InputError(f"demo sampler: diversity must be 1..{len(SCENES)} scene classes, got {diversity}")
            scenes = SCENES[:diversity]
        unknown = [s for s in scenes if s not in SCENES]
        if unknown or not scenes:
            raise InputError(f"demo sampler: unknown scenes {unknown} (known: {', '.join(SCENES)})")
        if not 0.0 <= fidelity <= 1.0:
            raise InputError(f"demo sampler: fidelity must be in [0, 1], got {fidelity}")
        self.scenes = tuple(scenes)
        self.fidelity = float(fidelity)
        self.seed = seed
        self.length = n
        self.name = f"demo sampler ({len(self.scenes)} scenes, fidelity {self.fidelity:g}, seed {seed})"

    def sample(self, k: int) -> tuple[np.ndarray, str]:
        """Image k (uint8 (H, W, 3)) and the scene it was drawn from."""
        rng = np.random.default_rng([self.seed, k])
        scene = self.scenes[int(rng.integers(len(self.scenes)))]
        return render_sample(rng, scene, self.fidelity).image, scene

    def batch_tasks(self, batch_size: int) -> Iterator[BatchTask]:
        if batch_size < 1:
            raise InputError(f"batch size must be at least 1, got {batch_size}")
        for start in range(0, self.length, batch_size):
            stop = min(start + batch_size, self.length)
            yield lambda a=start, b=stop: [self.sample(k)[0] for k in range(a, b)]
