"""Rows appended batch by batch, for estimators that must look back at every sample (KID, precision/recall)."""

from __future__ import annotations

import numpy as np


class GrowingRows:
    """A (N, d) array grown geometrically: appending a batch costs amortised O(batch x d).

    Float32 rows stay float32 (half the memory of the usual 2048-d features); other dtypes are kept as float64.
    """

    def __init__(self, expected: int | None = None) -> None:
        self._buffer: np.ndarray | None = None
        self._n = 0
        self._expected = expected  # rows the first buffer holds when the total is known: no growing, no copy

    def __len__(self) -> int:
        return self._n

    def append(self, rows: np.ndarray) -> None:
        rows = np.asarray(rows)
        if self._buffer is None:
            dtype = np.float32 if rows.dtype == np.float32 else np.float64
            self._buffer = np.empty((max(len(rows), self._expected or 256), rows.shape[1]), dtype)
        if self._n + len(rows) > len(self._buffer):
            rows_needed = max(self._n + len(rows), 2 * len(self._buffer))
            grown = np.empty((rows_needed, self._buffer.shape[1]), self._buffer.dtype)
            grown[: self._n] = self._buffer[: self._n]
            self._buffer = grown
        self._buffer[self._n : self._n + len(rows)] = rows
        self._n += len(rows)

    @property
    def values(self) -> np.ndarray:
        """The rows so far (a read-only view, valid until the next append)."""
        if self._buffer is None:
            return np.empty((0, 0))
        view = self._buffer[: self._n]
        view.flags.writeable = False
        return view
