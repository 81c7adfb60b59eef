"""The gallery's 'Real data' panel: which real images the samples are compared with, in which network's features
every distance is measured, every score at the current N beside its infinite-N limit, the 1/N fits drawn, and per
class which classes are under- or over-produced.

It only shows what it is handed (`RealDataScores` reads the numbers in a worker)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QVBoxLayout,
    QWidget,
)

from probescope.app.gallery.state import SAMPLES
from probescope.core.scoring.coverage import ClassCoverage
from probescope.core.scoring.extrapolate import InfiniteNFit
from probescope.core.scoring.live_scores import LIVE_KID_REFERENCE, LIVE_KID_SAMPLES, Readout
from probescope.jobs.scoring.reference import DATASET, NONE, ReferenceChoice
from probescope.jobs.scoring.stream import CLASSIFIER, ClassifierInfo
from probescope.widgets.controls import menu_button
from probescope.widgets.dissection.table import UnitTable  # a sortable table keyed by its first cell (here: class)
from probescope.widgets.gallery.inverse_n import InverseNPlot
from probescope.widgets.ink import InkLabel, inked

COVERAGE_COLUMNS = ("#", "class", "real", "generated", "real %", "generated %", "ratio", "z", "status")
METRICS = (  # key in Readout.values, row title ('FID': the features' own name), scale, what the live number is
    ("IS", "IS", 1.0, "one marginal over all N (the split protocol is in Score)"),
    ("FID", "FID", 1.0, "Fréchet distance of the Gaussian fits"),
    ("KID", "KID ×10³", 1e3, f"unbiased MMD², every pair of the first {LIVE_KID_SAMPLES:,} samples and ≤ "
     f"{LIVE_KID_REFERENCE:,} reference images"),
    ("precision", "Precision", 0.0, "generated images inside the real k-NN balls (k = 3)"),
    ("recall", "Recall", 0.0, "real images inside the generated k-NN balls (k = 3)"),
    ("density", "Density", 0.0, "Naeem et al. 2020, k = 5 real neighbours"),
    ("nn_coverage", "Coverage (k-NN)", 0.0, "Naeem et al. 2020, k = 5 real neighbours"),
    ("CMMD", "CMMD", 1.0, "×1000 unbiased MMD², RBF σ = 10, CLIP embeddings"),
)
SLOW_KEYS = {"precision": "precision/recall", "recall": "precision/recall", "density": "density/coverage",
             "nn_coverage": "density/coverage", "CMMD": "CMMD"}  # read when the stream pauses; key in missing
FEATURE_PICKS = (  # the features box's fixed items: (label, data); a data without ':' asks for a weights file
    ("Classifier's own", CLASSIFIER),
    ("DINOv2 (Meta checkpoint)…", "dinov2"),
    ("OpenCLIP image tower…", "openclip"),
    ("Inception v3 (TF port)…", "inception-tf"),
)
DINOV2_ARCHS = tuple(a + r for a in ("vits14", "vitb14", "vitl14", "vitg14") for r in ("", "-reg"))
WEIGHTS_FILTER = "Weights (*.pth *.pt *.safetensors *.bin);;All (*)"
FEATURES_TIP = ("The network whose features every distance to the real images is measured in: FD, KID, "
                "precision/recall, density/coverage, CMMD, realism and the copy test. IS always comes from the "
                "classifier. DINOv2 follows torch-fidelity 0.4 (FD_DINOv2, Stein et al. 2023); an OpenCLIP image "
                "tower gives CMMD (Jayasumana et al. 2024); the TF Inception gives FID as published.")


def _number(value: float | None, scale: float = 1.0) -> str:
    """4 significant digits of value x scale; scale 0: a fraction, 3 decimals."""
    if value is None or not math.isfinite(value):
        return "—"
    if scale == 0.0:
        return f"{value:.3f}"
    return f"{value * scale:.4g}" if abs(value * scale) < 1e4 else f"{value * scale:,.0f}"


def headline(readout: Readout | None, has_reference: bool, label: str = "FID") -> str:
    """The Fréchet distance (named `label`: FID, FD_DINOv2, ...), KID, precision/recall, CMMD and coverage in one
    line, for the Score panel beside IS."""
    if not has_reference or readout is None:
        return ""
    v = readout.values
    parts = [f"{label} <b>{_number(v.get('FID'))}</b>", f"KID <b>{_number(v.get('KID'), 1e3)}</b>×10⁻³"]
    if "precision" in v:
        parts.append(f"P <b>{v['precision']:.3f}</b> R <b>{v['recall']:.3f}</b>")
    if "nn_coverage" in v:
        parts.append(f"coverage <b>{v['nn_coverage']:.3f}</b>")
    if "CMMD" in v:
        parts.append(f"CMMD <b>{_number(v['CMMD'])}</b>")
    return " · ".join(parts)


def short_note(note: str, limit: int = 70) -> str:
    """The first clause of a feature note (what the features are), at most `limit` characters."""
    depth, cut = 0, len(note)
    for i, ch in enumerate(note):  # the first ', ' outside parentheses
        depth += (ch == "(") - (ch == ")")
        if depth == 0 and note.startswith(", ", i):
            cut = i
            break
    first = note[:cut].strip()
    return first if len(first) <= limit else first[: limit - 1].rstrip() + "…"


def dinov2_arch(path: str) -> str | None:
    """The DINOv2 architecture Meta's checkpoint file name says (dinov2_vitb14_reg4_pretrain.pth -> vitb14-reg),
    or None."""
    match = re.search(r"dinov2_(vit[sblg]14)(_reg\d*)?", Path(path).name)
    return None if match is None else match.group(1) + ("-reg" if match.group(2) else "")


def features_title(spec: str) -> str:
    """The features box's text for a chosen spec: its kind, architecture and file name."""
    if spec == CLASSIFIER:
        return FEATURE_PICKS[0][0]
    head, _, rest = spec.partition(":")
    if head in ("dinov2", "openclip"):
        arch, _, path = rest.partition(":")
        return f"{'DINOv2' if head == 'dinov2' else 'OpenCLIP'} {arch} — {Path(path).name}"
    if head == "inception-tf":
        return f"Inception v3 (TF port) — {Path(rest).name}"
    return spec


def caveat(classifier: ClassifierInfo) -> str:
    """Which features the distances use and which classifier gives IS, and that the numbers move with N."""
    own = classifier.choice.features == CLASSIFIER
    features = short_note(classifier.feature_note) if classifier.feature_note else "features"
    text = (f"Distances on {classifier.name}'s own features ({features}), IS by the same classifier" if own
            else f"Distances on {features}; IS by {classifier.name}")
    if own and not classifier.comparable:
        text += ": not comparable with published FID or KID, which use the TF Inception"
    return (text + f". {classifier.feature_label} and IS move with N (biased at small N): compare the N → ∞ values, "
            "or equal N.")


class RealDataPanel(QFrame):
    """Emits `reference_chosen(ReferenceChoice)` when the user picks real data, `features_chosen(spec)` when they
    pick the feature network (the box then follows the state's features: `set_features`)."""

    reference_chosen = Signal(object)
    features_chosen = Signal(str)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.reference_box = QComboBox()
        self.reference_box.addItem("Loaded probing dataset's images", DATASET)
        self.reference_box.addItem("None (IS only)", NONE)
        self.reference_box.setToolTip("The real images FID, KID, precision/recall and coverage compare with")
        self.reference_box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.reference_box.setMinimumContentsLength(12)  # a narrow panel elides the choice; the open list shows it
        self.reference_box.activated.connect(lambda _i: self.reference_chosen.emit(
            ReferenceChoice(self.reference_box.currentData())))
        self.open_button = menu_button("Open…", (
            ("Folder of real images…", self._pick_folder),
            ("Image array (.npy/.npz) or mu/sigma statistics (.npz)…", self._pick_file)))
        self.features_box = QComboBox()
        for label, data in FEATURE_PICKS:
            self.features_box.addItem(label, data)
        self.features_box.setToolTip(FEATURES_TIP)
        self.features_box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.features_box.setMinimumContentsLength(12)
        self.features_box.activated.connect(self._features_activated)
        self.features = CLASSIFIER  # the features in effect (the state's), which a cancelled pick returns to
        self.fd_label, self.fd_note = "FID", METRICS[1][3]  # the Fréchet distance's name and note on these features
        self.status = self._text()
        self.metrics = self._text()
        self.caveat = self._text()
        self.caveat.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.fid_plot, self.is_plot = InverseNPlot("FID"), InverseNPlot("IS")
        self.coverage_label = self._text()
        self.coverage = UnitTable(header_room=0)
        self.coverage.setMinimumHeight(160)
        self.coverage.sortByColumn(COVERAGE_COLUMNS.index("ratio"), Qt.SortOrder.AscendingOrder)  # most missed first
        row = QHBoxLayout()
        row.addWidget(QLabel("Reference"))
        row.addWidget(self.reference_box, 1)
        row.addWidget(self.open_button)
        features_row = QHBoxLayout()
        features_label = QLabel("Features")
        features_label.setToolTip(FEATURES_TIP)
        features_row.addWidget(features_label)
        features_row.addWidget(self.features_box, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 4, 8, 4)
        layout.addLayout(row)
        layout.addLayout(features_row)
        for w in (self.status, self.metrics, self.caveat, self.fid_plot, self.is_plot, self.coverage_label,
                  self.coverage):
            layout.addWidget(w)
        self.show_readout(None, None)

    def follow_source(self, source: str) -> None:
        """A worked example has no images, so no features: the box waits for the opened samples."""
        self.features_box.setEnabled(source == SAMPLES)

    @staticmethod
    def _text() -> QLabel:
        label = InkLabel()
        label.setWordWrap(True)
        return label

    # -- the reference --------------------------------------------------------------------------------------------
    def _pick_folder(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Folder of real images")
        if path:
            self.choose(ReferenceChoice(path))

    def _pick_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Real images or their statistics", "",
                                              "Arrays and statistics (*.npy *.npz);;All (*)")
        if path:
            self.choose(ReferenceChoice(path))

    def choose(self, choice: ReferenceChoice) -> None:
        """Select `choice` in the list (added when new) and announce it."""
        self.set_choice(choice)
        self.reference_chosen.emit(choice)

    def set_choice(self, choice: ReferenceChoice) -> None:
        k = self.reference_box.findData(choice.spec)
        if k < 0:
            self.reference_box.addItem(choice.spec, choice.spec)
            k = self.reference_box.count() - 1
        self.reference_box.setCurrentIndex(k)

    def show_status(self, text: str, warning: bool = False) -> None:
        self.status.setText(inked("warning", text) if warning else text)

    # -- the features ---------------------------------------------------------------------------------------------
    def _features_activated(self, index: int) -> None:
        data = self.features_box.itemData(index)
        spec = data if data == CLASSIFIER or ":" in data else self._ask_features(data)
        if spec is None:  # cancelled: the box shows the features in effect again
            self.set_features(self.features)
            return
        self.choose_features(spec)

    def _ask_features(self, kind: str) -> str | None:
        """The spec of a `kind` network ('dinov2', 'openclip', 'inception-tf') the user picks, or None (cancel)."""
        title = {"dinov2": "DINOv2 checkpoint (Meta's .pth)", "openclip": "OpenCLIP model weights",
                 "inception-tf": "Inception v3 weights (TF port)"}[kind]
        path, _ = QFileDialog.getOpenFileName(self, title, "", WEIGHTS_FILTER)
        if not path:
            return None
        if kind == "inception-tf":
            return f"inception-tf:{path}"
        if kind == "dinov2":
            arch = dinov2_arch(path)
            if arch is None:
                arch, ok = QInputDialog.getItem(self, "DINOv2 architecture",
                                                f"Which backbone are the weights in {Path(path).name}?",
                                                list(DINOV2_ARCHS), 0, False)
                if not ok:
                    return None
            return f"dinov2:{arch}:{path}"
        name, ok = QInputDialog.getText(
            self, "OpenCLIP architecture",
            "open_clip's architecture name, exactly (e.g. ViT-B-32, or ViT-L-14-336 as CMMD uses):", text="ViT-B-32")
        name = name.strip()
        return f"openclip:{name}:{path}" if ok and name else None

    def choose_features(self, spec: str) -> None:
        """Select `spec` in the box (added when new) and announce it; the state says when it is in effect."""
        self._select_features(spec)
        self.features_chosen.emit(spec)

    def set_features(self, spec: str) -> None:
        """The features in effect (the state's): the box shows them."""
        self.features = spec
        self._select_features(spec)

    def drop_features(self, spec: str) -> None:
        """Forget an added choice that failed to load (never one of the fixed items or the features in effect)."""
        k = self.features_box.findData(spec)
        if k >= len(FEATURE_PICKS) and spec != self.features:
            self.features_box.removeItem(k)
        self._select_features(self.features)

    def _select_features(self, spec: str) -> None:
        k = self.features_box.findData(spec)
        if k < 0:
            self.features_box.addItem(features_title(spec), spec)
            k = self.features_box.count() - 1
            self.features_box.setItemData(k, spec, Qt.ItemDataRole.ToolTipRole)
        self.features_box.setCurrentIndex(k)

    def show_classifier(self, classifier: ClassifierInfo) -> None:
        """The classifier scoring now: its features' Fréchet distance name and note, and the caveat."""
        self.fd_label = classifier.feature_label
        note = short_note(classifier.feature_note) if classifier.feature_note else ""
        self.fd_note = f"{METRICS[1][3]}, {note}" if note else METRICS[1][3]
        self.fid_plot.metric_name = classifier.feature_label  # (its title says it at the next fit)
        self.caveat.setText(caveat(classifier))

    # -- the scores -----------------------------------------------------------------------------------------------
    def show_readout(self, fast: Readout | None, slow: Readout | None, has_reference: bool = True) -> None:
        """The table of scores: `fast` (IS, FID, KID at the newest N), `slow` (precision/recall and the N → ∞
        limits, maybe at an earlier N, then said so)."""
        if fast is None:
            self.metrics.setText("No images scored yet." if has_reference else "")
            return
        n = fast.n
        limits = {"IS": slow.is_inf if slow else None, "FID": slow.fid_inf if slow else None}
        rows = []
        for key, title, scale, note in METRICS:
            if key == "FID":
                title, note = self.fd_label, self.fd_note
            source = fast if key in fast.values or key in ("IS", "FID", "KID") else slow
            value = source.values.get(key) if source is not None else None
            if key in SLOW_KEYS and slow is not None and slow.n != n and value is not None:
                note = f"{note}; at N = {slow.n:,}"
            if value is None:
                why = self._why(key, fast, slow, has_reference)
                rows.append(f"<tr><td>{title}</td><td align=right>—</td><td></td><td><small>{why}</small></td></tr>")
                continue
            limit = limits.get(key)
            limit_text = _number(limit.intercept) if limit is not None else ""
            rows.append(f"<tr><td>{title}</td><td align=right><b>{_number(value, scale)}</b></td>"
                        f"<td align=right>{limit_text}</td><td><small>{note}</small></td></tr>")
        self.metrics.setText(f"<table cellspacing=0 cellpadding=3><tr><th></th><th align=right>N = {n:,}</th>"
                             f"<th align=right>N → ∞</th><th></th></tr>{''.join(rows)}</table>")

    @staticmethod
    def _why(key: str, fast: Readout, slow: Readout | None, has_reference: bool) -> str:
        if key != "IS" and not has_reference:
            return "no reference chosen"
        lookup = SLOW_KEYS.get(key, key)
        for readout in (fast, slow):
            if readout is not None and lookup in readout.missing:
                return readout.missing[lookup]
        return "computed when the stream pauses" if key in SLOW_KEYS else "not read yet"

    def show_fits(self, slow: Readout | None, live: dict[str, list[tuple[int, float]]]) -> None:
        """The 1/N fits with the live paths (live[metric] = [(N, value)])."""
        for plot, fit, key in ((self.fid_plot, slow.fid_inf if slow else None, "FID"),
                               (self.is_plot, slow.is_inf if slow else None, "IS")):
            if fit is None:
                why = (slow.missing.get(f"{key}_inf", "") if slow is not None else "") or "waiting for samples"
                plot.clear_fit("needs more samples" if "needs" in why or "samples" in why else why[:60])
                continue
            path = np.array(live.get(key, []), dtype=np.float64).reshape(-1, 2)
            self._draw_fit(plot, fit, path)

    @staticmethod
    def _draw_fit(plot: InverseNPlot, fit: InfiniteNFit, path: np.ndarray) -> None:
        plot.set_fit(fit.sizes, fit.values, fit.intercept, fit.slope, path[:, 0], path[:, 1])
        plot.setToolTip(fit.protocol)

    def show_coverage(self, coverage: ClassCoverage | None, why: str = "") -> None:
        """Per class: real and generated top-prediction counts and shares, their ratio, z and status."""
        if coverage is None:
            self.coverage_label.setText(f"<b>Coverage per class</b>: {why}" if why else "<b>Coverage per class</b>")
            self.coverage.set_rows(COVERAGE_COLUMNS, [])
            return
        status = coverage.status
        flagged = {s: [coverage.class_name(k) for k in np.flatnonzero(status == s)]
                   for s in ("missing", "under", "over", "extra")}
        listed = "; ".join(f"{inked('warning', s)}: {', '.join(names[:5])}"
                           + (" …" if len(names) > 5 else "") for s, names in flagged.items() if names)
        self.coverage_label.setText(
            f"<b>Coverage per class</b> (each image counts for its top class; |z| > 3 flags): total variation "
            f"<b>{coverage.total_variation:.3f}</b>" + (f" — {listed}" if listed else " — no class flagged"))
        rows = [(r["class"], r["name"], r["real"], r["generated"], 100 * r["real_share"], 100 * r["generated_share"],
                 r["ratio"], r["z"], r["status"]) for r in coverage.rows("class")]
        self.coverage.set_rows(COVERAGE_COLUMNS, rows)
