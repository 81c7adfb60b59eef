"""The gallery's two side panels: the score (live IS with FID, KID and precision/recall beside it, split protocol,
decomposition, marginal, IS vs N) and the detail of one image (large view, its class distribution, entropy, KL and
share of log IS).

Both only show numbers handed to them; the workspace computes them from `GalleryScores`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QImage, QPalette, QPixmap
from PySide6.QtWidgets import QFrame, QLabel, QPushButton, QSizePolicy, QVBoxLayout, QWidget

from probescope.core.scoring.splits import SplitScore
from probescope.jobs.scoring.samples import Decomposition
from probescope.widgets.plots_bars import ClassBars
from probescope.widgets.plots_curve import CurvePlot

DETAIL_TOP = 10  # classes in the detail panel's bar chart
DETAIL_IMAGE = 224


def _label(text: str = "", *, size: float | None = None, bold: bool = False, wrap: bool = True) -> QLabel:
    label = QLabel(text)
    label.setWordWrap(wrap)
    label.setTextFormat(Qt.TextFormat.RichText)
    if size is not None or bold:
        font = QFont(label.font())
        if size is not None:
            font.setPointSizeF(size)
        font.setBold(bold)
        label.setFont(font)
    return label


def class_name(names: Sequence[str] | None, k: int) -> str:
    return names[k] if names is not None and 0 <= k < len(names) else f"class {k}"


class ScorePanel(QFrame):
    """Live IS in large type with N; the split protocol under it; the decomposition; p(y); IS against N."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.is_label = _label("IS —", size=26, bold=True, wrap=False)
        self.distances_label = _label(size=13)  # FID, KID, precision/recall against the real data
        self.distances_label.hide()
        self.n_label = _label("no images scored yet")
        self.split_label = _label()
        self.classifier_label = _label()
        self.classifier_label.setForegroundRole(QPalette.ColorRole.PlaceholderText)  # follows the theme as it changes
        self.run_label = _label()  # what the scored set is: its source and the knobs it was drawn with
        self.notice = _label()  # a change that waits for the user (knobs for the next run, a new model)
        self.notice.setForegroundRole(QPalette.ColorRole.Link)
        self.notice_button = QPushButton()
        self.notice_button.hide()
        self.decomposition_label = _label()
        self.marginal = ClassBars("Marginal p(y)")
        self.curve = CurvePlot("N (images scored)", "IS", "live IS (one marginal over the first N)")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 4, 8, 4)
        for w in (self.is_label, self.distances_label, self.n_label, self.split_label, self.classifier_label,
                  self.run_label, self.notice, self.notice_button, self.decomposition_label):
            layout.addWidget(w)
        layout.addWidget(self.marginal)
        layout.addWidget(self.curve, 1)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Expanding)

    def show_classifier(self, name: str, note: str) -> None:
        self.classifier_label.setText(f"Classifier: <b>{name}</b> — {note}")

    def show_distances(self, text: str) -> None:
        """FID, KID and precision/recall in one line beside IS (hidden when there is no reference)."""
        self.distances_label.setText(text)
        self.distances_label.setVisible(bool(text))

    def show_run(self, text: str) -> None:
        self.run_label.setText(text)

    def show_offer(self, offer) -> None:
        """The state's offer (a gallery.state.Offer: a run with the knobs, the loaded model), or none."""
        self.show_notice(*((offer.text, offer.action) if offer is not None else ("", "")))

    def show_notice(self, text: str, action: str = "") -> None:
        """A pending change, said in words; `action` labels the button that applies it (none when empty)."""
        self.notice.setText(text)
        self.notice.setVisible(bool(text))
        self.notice_button.setText(action)
        self.notice_button.setVisible(bool(action))

    def show_numbers(self, d: Decomposition | None, live_note: str = "") -> None:
        """The live IS, N and the decomposition: cheap, redrawn with every update."""
        if d is None:
            self.is_label.setText("IS —")
            self.n_label.setText("no images scored yet")
            self.decomposition_label.setText("")
            return
        self.is_label.setText(f"IS {d.is_:.2f}")
        self.n_label.setText(f"<b>N = {d.n:,}</b> — live estimate: one marginal p(y) over all images seen"
                             + (f"; {live_note}" if live_note else ""))
        log_n = math.log(len(d.marginal))
        self.decomposition_label.setText(
            "<table cellspacing=2>"
            f"<tr><td>H(p(y))</td><td align=right><b>{d.marginal_entropy:.3f}</b></td>"
            f"<td>nats (max log n = {log_n:.3f})</td></tr>"
            f"<tr><td>− mean H(p(y|x))</td><td align=right><b>{d.conditional_entropy:.3f}</b></td><td>nats</td></tr>"
            f"<tr><td>= I(X;Y) = mean KL = log IS</td><td align=right><b>{d.mutual_information:.3f}</b></td>"
            "<td>nats</td></tr>"
            f"<tr><td>IS = exp(I(X;Y))</td><td align=right><b>{d.is_:.3f}</b></td><td></td></tr></table>")

    def show_distribution(self, d: Decomposition | None, names: Sequence[str] | None,
                          curve: tuple[np.ndarray, np.ndarray]) -> None:
        """The marginal p(y) with classes never predicted marked, and IS against N."""
        if d is None:
            self.marginal.clear()
            self.curve.set_curve(np.empty(0), np.empty(0))
            return
        never = d.never_predicted
        names_all = [class_name(names, k) for k in range(len(d.marginal))]
        listed = ", ".join(names_all[k] for k in never[:6]) + (" …" if len(never) > 6 else "")
        legend = (f"red: never predicted ({len(never)} of {len(d.marginal)}: {listed})" if len(never)
                  else f"every one of the {len(d.marginal)} classes is some image's top prediction")
        self.marginal.set_bars(names_all, d.marginal, marked=never, legend=legend)
        self.curve.set_curve(*curve)

    def show_split(self, split: SplitScore | None, classifier: str, splits: int, n: int,
                   pending: bool = False) -> None:
        """The split protocol's mean ± std (or why it is not shown yet: too few images, or `pending`, being
        computed), labelled with its protocol; `n` images are scored (a split of fewer, the first, says so)."""
        if split is None:
            why = "being computed" if pending else f"needs N ≥ {splits}"
            self.split_label.setText(f"Split protocol ({splits} splits): {why} (N = {n:,})")
            self.curve.set_band(None)
            return
        size, extra = divmod(split.n, split.splits)
        sizes = f"{size:,}" + (f" or {size + 1:,}" if extra else "")
        of = f"the first N={split.n:,} of {n:,}" if split.n != n else f"N={split.n:,}"
        text = (f"Split protocol: <b>{split.mean:.2f} ± {split.std:.2f}</b> — {of} in {split.splits} splits of "
                f"{sizes}, " + (f"shuffle seed {split.seed}" if split.shuffle else "no shuffle")
                + f", std ddof=0, classifier {classifier}")
        if text == self.split_label.text():  # (redrawn with every update of the live numbers)
            return
        self.split_label.setText(text)
        self.curve.set_band(split.mean, split.std, f"split protocol {split.mean:.2f} ± {split.std:.2f}")


class DetailPanel(QFrame):
    """The selected image: large view, top classes as bars, H(p(y|x)), KL against the marginal, share of log IS."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.image = QLabel()
        self.image.setFixedSize(DETAIL_IMAGE, DETAIL_IMAGE)
        self.image.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.image.setBackgroundRole(QPalette.ColorRole.AlternateBase)
        self.image.setAutoFillBackground(True)
        self.title = _label("Select an image", bold=True)
        self.numbers = _label()
        self.bars = ClassBars(f"p(y|x): top {DETAIL_TOP} classes")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 4, 8, 4)
        layout.addWidget(self.title)
        layout.addWidget(self.image, 0, Qt.AlignmentFlag.AlignHCenter)
        layout.addWidget(self.numbers)
        layout.addWidget(self.bars)
        layout.addStretch(1)
        self.shown = -1

    def set_image(self, image: QImage | None) -> None:
        if image is None:
            self.image.clear()
            self.image.setText("no image\n(probabilities only)")
            return
        self.image.setPixmap(QPixmap.fromImage(image).scaled(
            DETAIL_IMAGE, DETAIL_IMAGE, Qt.AspectRatioMode.KeepAspectRatio, Qt.TransformationMode.SmoothTransformation))

    def show_sample(self, i: int, p: np.ndarray, entropy: float, kl: float, n: int, log_is: float,
                    names: Sequence[str] | None) -> None:
        """Image i: p its p(y|x), kl its KL against the current marginal, log_is = mean KL over the n images."""
        self.shown = i
        top = np.argsort(-p, kind="stable")[: min(DETAIL_TOP, len(p))]
        c = int(top[0])
        self.title.setText(f"Sample #{i}: {class_name(names, c)} (p = {p[c]:.3f})")
        part = kl / n
        share = f"{part / log_is:.2%}" if log_is > 1e-12 else "— (IS = 1)"
        self.numbers.setText(
            "<table cellspacing=2>"
            f"<tr><td>H(p(y|x))</td><td align=right><b>{entropy:.3f}</b></td><td>nats</td></tr>"
            f"<tr><td>KL(p(y|x) ‖ p(y))</td><td align=right><b>{kl:.3f}</b></td><td>nats</td></tr>"
            f"<tr><td>share of log IS</td><td align=right><b>{share}</b></td><td></td></tr></table>"
            f"<small>KL against the current marginal p(y); the image adds KL / N = {part:.2e} nats to "
            f"log IS = {log_is:.3f}</small>")
        self.bars.set_bars([class_name(names, int(k)) for k in top], p[top], classes=top, vmax=1.0)

    def clear(self) -> None:
        self.shown = -1
        self.title.setText("Select an image")
        self.numbers.setText("")
        self.image.clear()
        self.bars.clear()
