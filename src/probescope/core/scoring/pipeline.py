"""Images -> logits (or features and logits) in batches, with decoding and preprocessing overlapped with inference.

A small thread pool runs the source's batch tasks (decode or generate) and the classifier's `prepare` (resize,
normalise) a few batches ahead, while the calling thread runs the network. NumPy, Pillow and torch release the
GIL in their heavy loops, so the threads overlap for real.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

import numpy as np
import torch

from probescope.core.errors import InputError
from probescope.core.scoring.classifiers import Classifier
from probescope.core.scoring.live import LiveInceptionScore
from probescope.core.scoring.settings import DEFAULT_BATCH_SIZE, DEFAULT_WORKERS
from probescope.core.scoring.sources import SampleSource
from probescope.core.tasks import CancelCheck, ProgressCallback, check_cancel, report

T = TypeVar("T")


def _run_batches(
    source: SampleSource,
    classifier: Classifier,
    run: Callable[[torch.Tensor], T],
    batch_size: int,
    workers: int,
    progress: ProgressCallback | None,
    cancel: CancelCheck | None,
) -> Iterator[tuple[int, T]]:
    """(images in the batch, run(prepared batch)) per batch in source order, decoding `workers` batches ahead."""
    tasks = source.batch_tasks(batch_size)
    done = 0
    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="score-prefetch") as pool:
        pending: deque[Future] = deque()

        def submit_next() -> None:
            task = next(tasks, None)
            if task is not None:
                pending.append(pool.submit(lambda t=task: classifier.prepare(t())))

        try:
            for _ in range(max(1, workers) + 1):
                submit_next()
            while pending:
                check_cancel(cancel)
                prepared = pending.popleft().result()
                submit_next()
                out = run(prepared)
                done += len(prepared)
                total = source.length
                report(progress, done / total if total else 0.0, f"{done}{f'/{total}' if total else ''} images")
                yield len(prepared), out
        finally:
            for future in pending:
                future.cancel()


def classify_batches(
    source: SampleSource,
    classifier: Classifier,
    batch_size: int = DEFAULT_BATCH_SIZE,
    *,
    workers: int = DEFAULT_WORKERS,
    progress: ProgressCallback | None = None,
    cancel: CancelCheck | None = None,
) -> Iterator[np.ndarray]:
    """Float32 logits (m, n_classes) per batch, in source order."""
    for _, logits in _run_batches(source, classifier, classifier.logits, batch_size, workers, progress, cancel):
        yield logits


def embed_batches(
    source: SampleSource,
    classifier: Classifier,
    batch_size: int = DEFAULT_BATCH_SIZE,
    *,
    workers: int = DEFAULT_WORKERS,
    progress: ProgressCallback | None = None,
    cancel: CancelCheck | None = None,
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(features (m, d), logits (m, n_classes)) float32 per batch, in source order, from one forward pass each."""
    for _, pair in _run_batches(source, classifier, classifier.embed, batch_size, workers, progress, cancel):
        yield pair


def classify_source(
    source: SampleSource,
    classifier: Classifier,
    batch_size: int = DEFAULT_BATCH_SIZE,
    *,
    workers: int = DEFAULT_WORKERS,
    progress: ProgressCallback | None = None,
    cancel: CancelCheck | None = None,
    live: LiveInceptionScore | None = None,
) -> np.ndarray:
    """All logits (N, n_classes) float32; each batch is also added to `live` when one is given (GUI streaming)."""
    parts = []
    for logits in classify_batches(source, classifier, batch_size, workers=workers, progress=progress, cancel=cancel):
        parts.append(logits)
        if live is not None:
            live.add_logits(logits)
    if not parts:
        raise InputError(f"{source.name}: no images to score")
    return np.concatenate(parts)


def embed_source(
    source: SampleSource,
    classifier: Classifier,
    batch_size: int = DEFAULT_BATCH_SIZE,
    *,
    workers: int = DEFAULT_WORKERS,
    progress: ProgressCallback | None = None,
    cancel: CancelCheck | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """All features (N, d) and logits (N, n_classes), float32, of one pass over the source."""
    pairs = list(embed_batches(source, classifier, batch_size, workers=workers, progress=progress, cancel=cancel))
    if not pairs:
        raise InputError(f"{source.name}: no images to score")
    return np.concatenate([f for f, _ in pairs]), np.concatenate([lg for _, lg in pairs])
