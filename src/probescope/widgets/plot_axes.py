"""The axis every figure plot uses: tick labels that never run into each other, at any size.

pyqtgraph picks its tick spacing from the axis's length alone and always labels its major ticks, so long labels ran
together ("59103" for units 59 and 103, "2,0001,000" on a narrow 1/N axis) and a short axis stacked its labels on
each other. `FigureAxis` labels one level of ticks and widens their spacing (1, 2, 5 x 10^k) until the labels keep
a gap; `integer` keeps its ticks on whole numbers (counts, unit numbers, fit numbers); `set_labels` names chosen
positions (classes, units, categories) and shows as many as fit, wrapping a long name at its spaces first.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QFont, QFontMetricsF

GAP = 6.0  # pixels at least between two labels side by side
LINE_GAP = 2.0  # pixels at least between two labels one above the other
FILL = 0.5  # of an axis's length that labels of pyqtgraph's finer level may take (its own limits: 0.2 to 0.8)
BOX = QRectF(0, 0, 100, 100)  # what pyqtgraph measures a label in


def next_step(step: float) -> float:
    """The next round step above `step` (1, 2, 5 x 10^k)."""
    power = 10.0 ** math.floor(math.log10(step) + 1e-9)
    for m in (2.0, 5.0, 10.0):
        if m * power > step * (1 + 1e-9):
            return m * power
    return 20.0 * power


def round_step(step: float) -> float:
    """The smallest round step (1, 2, 5 x 10^k) not below `step`."""
    power = 10.0 ** math.floor(math.log10(step) + 1e-9)
    return next(m * power for m in (1.0, 2.0, 5.0, 10.0) if m * power >= step * (1 - 1e-9))


class FigureAxis(pg.AxisItem):
    """An axis whose tick labels keep their distance (see the module docstring)."""

    def __init__(self, orientation: str, integer: bool = False, **options):
        super().__init__(orientation, **options)
        self.integer = integer
        self._labels: list[tuple[float, str]] | None = None
        self._shown: dict[float, str] = {}
        self.setStyle(maxTextLevel=0)  # one level of labels: a second one was drawn by fill ratio, not by room

    # -- measuring ------------------------------------------------------------------------------------------------
    def _metrics(self) -> QFontMetricsF:
        return QFontMetricsF(self.style["tickFont"] or QFont())

    def _extent(self, text: str) -> float:
        """What a label takes along the axis, in pixels, as pyqtgraph lays it out."""
        box = self._metrics().boundingRect(BOX, int(Qt.AlignmentFlag.AlignCenter), text)
        return box.width() if self.orientation in ("top", "bottom") else box.height() * 0.8

    def _room(self, a: str, b: str) -> float:
        """Pixels two neighbouring labels need between their positions."""
        horizontal = self.orientation in ("top", "bottom")
        return (self._extent(a) + self._extent(b)) / 2 + (GAP if horizontal else LINE_GAP)

    def _fits(self, lo: float, hi: float, size: float, step: float, fill: float = 1.0) -> bool:
        """Labels every `step` keep their gaps, and take at most `fill` of the axis's length."""
        first = math.ceil(lo / step - 1e-9) * step
        values = [first + k * step for k in range(min(int((hi - first) / step + 1e-9) + 1, 200))]
        if len(values) < 2:
            return True
        strings = self.tickStrings(values, self.autoSIPrefixScale * self.scale, step)
        pixels = step / (hi - lo) * size
        return all(self._room(a, b) <= pixels for a, b in zip(strings, strings[1:])) and \
            sum(self._extent(t) for t in strings) <= fill * size

    # -- pyqtgraph's hooks ----------------------------------------------------------------------------------------
    def tickSpacing(self, minVal: float, maxVal: float, size: float):  # noqa: N802, N803  (pyqtgraph's names)
        """pyqtgraph's finer level where its labels fit loosely (it labelled that level by how much of the axis its
        text filled, not by whether the labels met), else its major spacing widened until the labels fit; whole
        numbers only when `integer`. The levels below stay as unlabelled ticks."""
        levels = super().tickSpacing(minVal, maxVal, size)
        if not levels or size <= 0:
            return levels
        steps = [s for s, _o in levels[:2]]
        if self.integer:
            steps = [round_step(max(s, 1.0)) for s in steps]
        if len(steps) > 1 and steps[1] < steps[0] and self._fits(minVal, maxVal, size, steps[1], FILL):
            step = steps[1]
        else:
            step = steps[0]
            for _ in range(60):
                if self._fits(minVal, maxVal, size, step):
                    break
                step = next_step(step)
        finer = [(s, 0) for s, _o in levels[1:] if s < step and abs(step / s - round(step / s)) < 1e-6
                 and (not self.integer or s >= 1)]
        return [(step, 0), *finer]

    def tickStrings(self, values, scale, spacing) -> list[str]:  # noqa: N802  (pyqtgraph override)
        if self._labels is not None:
            return [self._shown.get(round(v, 9), "") for v in values]
        if self.integer:
            return [f"{round(v * scale):d}" for v in values]
        return super().tickStrings(values, scale, spacing)

    def tickValues(self, minVal: float, maxVal: float, size: float):  # noqa: N802, N803
        if self._labels is None:
            return super().tickValues(minVal, maxVal, size)
        lo, hi = sorted((minVal, maxVal))
        inside = [(v, t) for v, t in self._labels if lo <= v <= hi]
        if len(inside) < 2 or hi <= lo or size <= 0:
            self._shown = {round(v, 9): t for v, t in inside}
            return [(None, [v for v, _t in inside])]
        per_unit = size / (hi - lo)
        slot = min(b - a for (a, _), (b, _) in zip(inside, inside[1:])) * per_unit
        texts = [t for _v, t in inside]
        if self.orientation in ("top", "bottom") and any(self._room(a, b) > slot for a, b in zip(texts, texts[1:])):
            texts = [t.replace(" ", "\n") for t in texts]  # a long name on lines of its own words, first
        every = 1
        while every < len(inside) and any(self._room(a, b) > slot * every
                                           for a, b in zip(texts[::every], texts[every::every])):
            every += 1
        kept = list(zip([v for v, _t in inside], texts))[::every]
        self._shown = {round(v, 9): t for v, t in kept}
        return [(None, [v for v, _t in kept])]

    def _updateMaxTextSize(self, x: int) -> None:  # noqa: N802  (pyqtgraph's)
        """Room for the labels' whole height when a name takes lines of its own: pyqtgraph counts 0.8 of a label's
        height (right for one line), and a second line ran past the plot's edge."""
        lines = max((t.count("\n") + 1 for t in self._shown.values()), default=1) if self._labels is not None else 1
        super()._updateMaxTextSize(x / 0.8 if lines > 1 and self.orientation in ("top", "bottom") else x)

    # -- named positions ------------------------------------------------------------------------------------------
    def set_labels(self, labels: Sequence[tuple[float, str]] | None) -> None:
        """Name these positions (sorted by position); None goes back to numbers."""
        self._labels = None if labels is None else sorted((float(v), str(t)) for v, t in labels)
        self.picture = None
        self.update()

    def labels(self) -> list[tuple[float, str]]:
        """The named positions (all of them, shown or not)."""
        return list(self._labels or [])
