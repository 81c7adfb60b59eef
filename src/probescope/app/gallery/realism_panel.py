"""What the Gallery shows of each sample against the real images: in the selected-sample panel its realism score,
its k nearest reference images (thumbnails, distance, index in the reference) and the calibrated copy test's p-value
and flag (core/scoring/copy_test.py); in the Real data panel the share of possible copies with its interval against
the share expected without copying (alpha), and the data-copying statistic C_T with what it means.

These widgets only show what they are handed (`SampleRealism` computes it in workers)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QImage, QPalette, QPixmap
from PySide6.QtWidgets import (
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QVBoxLayout,
    QWidget,
)

from probescope.core.scoring.copy_test import percent
from probescope.widgets.controls import menu_button
from probescope.widgets.ink import InkLabel, inked

if TYPE_CHECKING:
    from probescope.core.scoring.copy_test import CopyTest

NEIGHBOUR_THUMB = 64  # pixels, each nearest reference image (k = 3 of them fit under the 224-pixel detail image)
CT_COPYING = -3.0  # C_T below this: the paper's reading of a clear data-copying signal (Z about N(0, 1) per cell)


def _text() -> InkLabel:
    label = InkLabel()
    label.setWordWrap(True)
    label.setTextFormat(Qt.TextFormat.RichText)
    return label


@dataclass(frozen=True)
class SampleCopy:
    """One sample's copy test: its nearest reference image among those the test searches, the distance to it, the
    conformal p-value, whether it is flagged (p <= alpha), and the test's alpha and distance threshold."""

    reference: int
    distance: float
    p_value: float
    flagged: bool
    alpha: float
    threshold: float


def realism_reading(realism: float) -> str:
    """One line on a realism score."""
    if realism >= 1.0:
        return "inside the real data's k-NN balls (R ≥ 1): near real images"
    return "outside every kept real k-NN ball (R &lt; 1): unlike the real images"


class NeighboursPanel(QFrame):
    """The selected sample: realism, possible copy, and its nearest reference images left to right."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.summary = _text()
        self.copy_flag = _text()
        self.thumbs = QHBoxLayout()
        self.thumbs.setContentsMargins(0, 0, 0, 0)
        self.thumbs.setSpacing(6)
        self.thumbs.addStretch(1)
        self.images: list[QLabel] = []
        self.captions: list[QLabel] = []
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 6, 0, 0)
        layout.addWidget(self.summary)
        layout.addWidget(self.copy_flag)
        layout.addLayout(self.thumbs)
        self.shown: int = -1  # the sample shown, -1 for none
        self.neighbours: list[int] = []  # its nearest reference images, nearest first
        self.show_missing("")

    def show_missing(self, why: str) -> None:
        """No numbers for this sample; `why` says what they wait for."""
        self.shown, self.neighbours = -1, []
        self.summary.setText(f"<b>Realism and nearest real images</b>: {why}" if why else "")
        self.copy_flag.hide()
        self._set_thumbs(0)

    def show_sample(self, i: int, realism: float, nearest: list[int], distances: list[float], k: int, features: str,
                    copy: SampleCopy | None, no_copy_test: str = "") -> None:
        """Sample i: its realism, its k nearest reference images and its copy test (`copy`; None when there is none,
        `no_copy_test` saying why): a flagged sample names the image it may copy."""
        self.shown, self.neighbours = i, list(nearest)
        value = f"{realism:.3f}" if realism < 1e4 else f"{realism:.3g}"
        if copy is None:
            test = f"<br>Copy test not run: {no_copy_test}" if no_copy_test else ""
        elif copy.flagged:
            test = ""
        else:
            test = (f"<br>Copy test: p = {_p(copy.p_value)} &gt; α = {copy.alpha:g} (distance {copy.distance:.3g} "
                    f"to reference image #{copy.reference}, threshold {copy.threshold:.3g}): not a possible copy")
        self.summary.setText(f"<b>Realism</b> R = <b>{value}</b> — {realism_reading(realism)}{test}<br>"
                             f"<small>Kynkäänniemi et al. 2019, k = {k}, {features}; the {k} nearest reference "
                             "images, nearest first:</small>")
        flagged = copy is not None and copy.flagged
        if flagged:
            self.copy_flag.setText(inked("warning", f"<b>Possible copy</b> of reference image #{copy.reference}") +
                                   f": distance {copy.distance:.3g}, p = {_p(copy.p_value)} (below the α = "
                                   f"{copy.alpha:g} threshold {copy.threshold:.3g}: nearer to it than all but "
                                   f"{percent(copy.alpha)}% of held-out real images are to theirs)")
        self.copy_flag.setVisible(flagged)
        self._set_thumbs(len(nearest))
        for caption, j, d in zip(self.captions, nearest, distances, strict=True):
            caption.setText(f"#{j}<br>d = {d:.3g}")

    def _set_thumbs(self, n: int) -> None:
        while len(self.images) < n:
            image, caption = QLabel(), QLabel()
            image.setFixedSize(NEIGHBOUR_THUMB, NEIGHBOUR_THUMB)
            image.setAlignment(Qt.AlignmentFlag.AlignCenter)
            image.setBackgroundRole(QPalette.ColorRole.AlternateBase)
            image.setAutoFillBackground(True)
            caption.setAlignment(Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop)
            caption.setTextFormat(Qt.TextFormat.RichText)
            slot = QVBoxLayout()
            slot.setSpacing(2)
            slot.addWidget(image, 0, Qt.AlignmentFlag.AlignHCenter)
            slot.addWidget(caption)
            self.thumbs.insertLayout(len(self.images), slot)  # (before the stretch)
            self.images.append(image)
            self.captions.append(caption)
        for k, (image, caption) in enumerate(zip(self.images, self.captions, strict=True)):
            image.setVisible(k < n)
            caption.setVisible(k < n)
            image.clear()

    def set_thumbnails(self, images: dict[int, QImage]) -> None:
        """Thumbnails by reference index, for the neighbours shown now."""
        for slot, j in enumerate(self.neighbours):
            if j in images:
                self.images[slot].setPixmap(QPixmap.fromImage(images[j]).scaled(
                    NEIGHBOUR_THUMB, NEIGHBOUR_THUMB, Qt.AspectRatioMode.KeepAspectRatio,
                    Qt.TransformationMode.SmoothTransformation))


class CopyingPanel(QFrame):
    """The set level: how many samples may be copies, and the data-copying test C_T against held-out images.
    Emits `held_out_chosen(path)` when the user picks held-out real images."""

    held_out_chosen = Signal(str)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.copies = _text()
        self.statistic = _text()
        self.reading = _text()
        self.reading.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.open_button = menu_button("Held-out images…", (("Folder of held-out images…", self._pick_folder),
                                                            ("Image array (.npy/.npz)…", self._pick_file)),
                                       "Real images the generator never trained on (drawn like the reference): "
                                       "they calibrate the copy test and give the data-copying test C_T")
        title = QLabel("<b>Copies of real images</b>")
        row = QHBoxLayout()
        row.addWidget(title, 1)
        row.addWidget(self.open_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 6, 0, 0)
        layout.addLayout(row)
        for w in (self.copies, self.statistic, self.reading):
            layout.addWidget(w)

    def _pick_folder(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Folder of held-out real images")
        if path:
            self.held_out_chosen.emit(path)

    def _pick_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Held-out real images", "", "Image arrays (*.npy *.npz);;All (*)")
        if path:
            self.held_out_chosen.emit(path)

    def show_copies(self, text: str) -> None:
        self.copies.setText(text)

    def show_statistic(self, text: str, reading: str = "") -> None:
        self.statistic.setText(text)
        self.reading.setText(reading)
        self.reading.setVisible(bool(reading))


def copies_text(copy: CopyTest) -> str:
    """The copy test over the samples: how many are flagged, the share's 95% interval against alpha (the share
    expected without copying), what the flag means, where the held-out images came from, and a reading."""
    lo, hi = copy.interval
    held = len(copy.held_out_distances)
    where = f" ({copy.held_out})" if copy.held_out else ""
    expected = f"about {percent(copy.alpha)}% expected at α = {copy.alpha:g} without copying"
    nearer = (f"nearer to a reference image than {percent(1.0 - copy.alpha)}% of {held:,} held-out real images are "
              f"to theirs{where}")
    if copy.flagged_count:
        text = (f"<b>{copy.flagged_count:,}</b> of {copy.samples:,} samples are <b>possible copies</b> "
                f"({percent(copy.flagged_share)}%, 95% CI {percent(lo)}–{percent(hi)}%; {expected}): {nearer} "
                "(badge ‘copy?’ in the grid; filter with ‘possible copies only’).")
    else:
        text = (f"No possible copies among {copy.samples:,} samples (95% CI 0–{percent(hi)}%; {expected}): none is "
                f"{nearer}.")
    if lo > copy.alpha:
        reading = inked("warning", "More flags than honest samples give: the generator may copy reference images "
                        "(compare the flagged samples with their nearest images).")
    else:
        reading = ("No more flags than honest samples give: no sign of copying (each flag is still worth a look at "
                   "its nearest images).")
    if copy.in_reference:
        reading = inked("warning", f"{copy.in_reference:,} of the {held:,} held-out images are also in the reference "
                        "(distance 0): they are not held out, so fewer samples are flagged than should be; choose "
                        "held-out images that are not in the reference.") + " " + reading
    return f"{text}<br>{reading}"


def _p(p: float) -> str:
    return f"{p:.2g}"


def copying_reading(statistic: float) -> str:
    """One line on C_T (Meehan et al. 2020): about N(0, 1) when the samples are as far from the training images as
    fresh real images are."""
    if not math.isfinite(statistic):
        return ""
    if statistic < CT_COPYING:
        verdict = inked("warning", "the samples sit closer to the reference images than held-out real images do: "
                        "the generator copies its training data")
    elif statistic > -CT_COPYING:
        verdict = "the samples sit farther from the reference images than held-out real images do: underfitting"
    else:
        verdict = ("the samples are about as far from the reference images as held-out real images are: no sign "
                   "of copying")
    return f"C_T is about N(0, 1) without copying, ≪ 0 for copying, ≫ 0 for underfitting: {verdict}."
