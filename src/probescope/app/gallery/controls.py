"""The gallery's controls, as tool bars the user can move (a narrow window tucks what does not fit behind a bar's »
button): what is scored (source, classifier, start/pause, reset, N), the demo sampler's knobs, and how the grid
shows it (sort, class and value filters, the contact sheet's size, CSV export)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QLabel,
    QPushButton,
    QSlider,
    QToolBar,
)

from probescope.core.demo.sampler import DemoSampler
from probescope.core.demo.world import SCENES
from probescope.core.scoring.examples import DESCRIPTIONS
from probescope.core.scoring.settings import WINDOW
from probescope.jobs.inputs import DEMO_SAMPLES
from probescope.jobs.scoring.samples import FILTER_KEYS, SORT_KEYS
from probescope.widgets.command_palette import matches
from probescope.widgets.controls import spin_box
from probescope.widgets.identifiers import whole_items

CLASSIFIERS = (  # (key, the box's item, its tooltip): items short, so the box leaves the bar room for the sampler's
    ("model", "Loaded model", "The model opened in the window, as the classifier"),
    ("demo", "Demo CNN (14 scenes)", "The demo world's classifier: its own 14 scene classes"),
    ("inception-tf", "Inception v3, TF port…", "Inception v3, TF port (asks for its weights): scores comparable with "
     "published IS"),
    ("inception-tv", "Inception v3, torchvision…", "Inception v3, torchvision (asks for its ImageNet weights): 1000 "
     "named classes, scores not comparable with published IS"),
)
FILTER_LABELS = {"": "no filter", "kl": "KL in", "entropy": "H(p(y|x)) in", "confidence": "confidence in"}
LARGEST_FIRST = ("realism",)  # sort keys read largest first (the most real-looking, and any copy, first)


class GalleryControls:
    """The widgets are attributes and `bars` the tool bars that hold them; the workspace connects their signals."""

    def __init__(self) -> None:
        self.source = QComboBox()
        self.source.addItem("Opened samples", "samples")
        for g in "ABCD":
            self.source.addItem(f"Worked example {g}: {DESCRIPTIONS[g]}", g)
        self.source.setToolTip("The seed note's worked example (3 classes, 3 images) is a teaching preset")
        whole_items(self.source)  # the opened samples' name (a file) is never cut: the bar tucks the rest behind »
        self.open_button = QPushButton("Open…")  # (short: the bar keeps the sampler's knobs in view at 1280 px)
        self.open_button.setToolTip("Open samples: a folder of images, a .npz/.npy, or a TorchScript generator")
        self.classifier_box = QComboBox()
        for k, (key, label, tip) in enumerate(CLASSIFIERS):
            self.classifier_box.addItem(label, key)
            self.classifier_box.setItemData(k, tip, Qt.ItemDataRole.ToolTipRole)
        self.play = QPushButton("Start")
        self.play.setCheckable(True)
        self.reset_button = QPushButton("Reset")
        self.diversity = spin_box(1, len(SCENES), len(SCENES),
                                  "Scene classes the demo sampler draws from (1 = total mode collapse)")
        self.fidelity = QSlider(Qt.Orientation.Horizontal)
        self.fidelity.setRange(0, 100)
        self.fidelity.setValue(100)
        self.fidelity.setFixedWidth(80)  # (with the value beside it: the bar fits 1280 px)
        self.fidelity.setToolTip("How recognisable each drawn image is (blur, noise, intruders below 1)")
        self.fidelity_value = QLabel("1.00")
        self.target = spin_box(10, 1_000_000, DEMO_SAMPLES, "The demo stream stops after this many images")
        self.target.setSingleStep(1000)
        self.sort = QComboBox()
        for key, label in SORT_KEYS.items():
            self.sort.addItem(label, key)
        self.descending = QCheckBox("largest first")
        self.sort.currentIndexChanged.connect(lambda _i: self.descending.setChecked(
            self.sort.currentData() in LARGEST_FIRST or self.descending.isChecked()))
        self.copies_only = QCheckBox("possible copies only")
        self.copies_only.setToolTip(f"Samples the copy test flags (α = {WINDOW.copy_alpha:g}): nearer to a reference "
                                    f"image than all but {WINDOW.copy_alpha:.0%} of held-out real images are to "
                                    "theirs (Real data panel)")
        self.class_filter = QComboBox()
        self.class_filter.addItem("all classes", None)
        self.filter_key = QComboBox()
        for key in ("", *FILTER_KEYS):
            self.filter_key.addItem(FILTER_LABELS[key], key)
        self.filter_low, self.filter_high = QDoubleSpinBox(), QDoubleSpinBox()
        for box, value in ((self.filter_low, 0.0), (self.filter_high, 100.0)):
            box.setRange(0.0, 100.0)
            box.setDecimals(3)
            box.setSingleStep(0.05)
            box.setValue(value)
        self.sheet_count = spin_box(1, 1000, 48, "Contact sheet export: the first this many images shown")
        self.csv_button = QPushButton("Export scores CSV…")
        self.bars: list[QToolBar] = []
        for title, widgets in (("Scoring", (QLabel("Source "), self.source, self.open_button, QLabel(" Classifier "),
                                            self.classifier_box, self.play, self.reset_button, QLabel(" N "),
                                            self.target)),
                               ("Demo sampler", (QLabel("Diversity "), self.diversity, QLabel(" Fidelity "),
                                                 self.fidelity, self.fidelity_value)),
                               ("View", (QLabel("Sort "), self.sort, self.descending, QLabel(" Class "),
                                         self.class_filter, self.copies_only, QLabel(" Filter "), self.filter_key,
                                         self.filter_low,
                                         QLabel(" to "), self.filter_high, QLabel(" Sheet "), self.sheet_count,
                                         self.csv_button))):
            bar = QToolBar(title)
            bar.setObjectName(f"gallery/{title}")
            for w in widgets:
                bar.addWidget(w)
            self.bars.append(bar)
        self.fidelity.valueChanged.connect(lambda v: self.fidelity_value.setText(f"{v / 100:.2f}"))

    def palette_items(self, query: str) -> list[tuple[str, object]]:
        """The command palette's items: the sort orders and the class filter's classes."""
        items = [(f"Sort samples by {self.sort.itemText(k)}", lambda k=k: self.sort.setCurrentIndex(k))
                 for k in range(self.sort.count())]
        items += [(f"Show class {self.class_filter.itemText(k)}", lambda k=k: self.class_filter.setCurrentIndex(k))
                  for k in range(1, self.class_filter.count())]
        return [(title, run) for title, run in items if matches(query, title)]

    def knobs(self) -> tuple[int, float]:
        """The demo sampler's (diversity, fidelity)."""
        return self.diversity.value(), self.fidelity.value() / 100.0

    def show_sampler(self, sampler: DemoSampler) -> None:
        """The knobs and N of an opened demo sampler, without signalling a change."""
        for box, value in ((self.diversity, len(sampler.scenes)), (self.target, sampler.length),
                           (self.fidelity, round(sampler.fidelity * 100))):
            box.blockSignals(True)
            box.setValue(value)
            box.blockSignals(False)
        self.fidelity_value.setText(f"{sampler.fidelity:.2f}")

    def enable(self, demo: bool, stream: bool) -> None:
        for w in (self.diversity, self.fidelity, self.target):
            w.setEnabled(demo)
        for w in (self.play, self.reset_button, self.classifier_box):
            w.setEnabled(stream)

    def view_settings(self) -> dict:
        """How the grid orders and filters (the arguments of GalleryScores.order)."""
        key = self.filter_key.currentData()
        return {
            "key": self.sort.currentData(),
            "descending": self.descending.isChecked(),
            "class_filter": self.class_filter.currentData(),
            "value_filter": (key, self.filter_low.value(), self.filter_high.value()) if key else None,
            "copies_only": self.copies_only.isChecked(),
        }

    def set_class_names(self, names: list[str]) -> None:
        """The class filter's choices (kept as they are when unchanged)."""
        if [self.class_filter.itemText(i) for i in range(1, self.class_filter.count())] == names:
            return
        self.class_filter.blockSignals(True)
        self.class_filter.clear()
        self.class_filter.addItem("all classes", None)
        for k, name in enumerate(names):
            self.class_filter.addItem(name, k)
        self.class_filter.blockSignals(False)
