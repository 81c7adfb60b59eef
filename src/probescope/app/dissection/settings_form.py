"""The Settings panel's fields, made from `DissectionSettings` itself: one field per setting the window lets the user
choose, its range the field's `Bound` (the ends the dataclass refuses, such as a quantile of 0, one display step
inside), its tooltip the field's help (what `probescope dissect --help` says), its choices the dataclass's, and its
start value the window's preset (`WINDOW_SETTINGS`). Only the words are the window's own: each row's label and the
text a field shows at its automatic value.
"""

from __future__ import annotations

from dataclasses import fields, replace

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QCheckBox, QComboBox, QDoubleSpinBox, QFormLayout, QGridLayout, QLabel, QWidget

from probescope.core.dissection.parallel import available_cores
from probescope.core.dissection.settings import CHOICES, SEARCH_MODES, WINDOW_SETTINGS, DissectionSettings
from probescope.core.errors import InputError
from probescope.jobs.dissection.rows import METHOD_NAMES
from probescope.widgets.controls import spin_box

# The row of each setting the panel shows, in the panel's order (the others, device and cache size, the window
# decides): what the beam keeps, then how far the searches go, then how fast.
LABELS = {"quantile": "quantile (top share of activations)", "beam_size": "beam size",
          "beam_limit": "beam limit (candidate atoms)", "beam_dedupe": "beam duplicates", "iou_scope": "IoU over",
          "max_length": "max explanation length", "min_samples": "minimum concept images",
          "sweep_length": "length sweep up to", "searches": "searches", "da_limit": "DA search atoms at most",
          "jobs": "processes for units"}
DECIMALS = 4  # a real setting's digits (the quantile: the papers' 0.005, and 0.0001 steps below it)
ALWAYS = "iou"  # the compositional explanation is always searched


def automatic_text(name: str) -> str | None:
    """What a field shows at its lowest value when that value means 'automatic' (None: a number like the others)."""
    return {"beam_limit": "all concepts",
            "jobs": f"all cores but one ({max(1, available_cores() - 1)})"}.get(name)


class SettingsForm(QWidget):
    """The fields, by setting name (`fields`; the searches are `search_boxes`), starting at `settings` (the window's
    preset unless the workspace says otherwise); `settings()` reads them over the settings shown last (the ones
    without a field stay), `show_settings(s)` writes them; `request_run()` emits `run_requested(settings)` (the
    panel's Run button). The form is where a run's settings come from: nothing downstream writes them back."""

    run_requested = Signal(object)

    def __init__(self, settings: DissectionSettings = WINDOW_SETTINGS, parent: QWidget | None = None):
        super().__init__(parent)
        self._shown = settings
        self.fields: dict[str, QWidget] = {}
        self.search_boxes: dict[str, QCheckBox] = {}
        form = QFormLayout(self)
        form.setContentsMargins(0, 0, 0, 0)
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)  # a narrow panel puts labels above fields
        by_name = {f.name: f for f in fields(DissectionSettings)}
        for f in (by_name[name] for name in LABELS):
            if f.name == "searches":
                form.addRow(QLabel(LABELS[f.name]))
                form.addRow(self._search_grid(f.metadata["help"]))  # (across both columns)
                continue
            self.fields[f.name] = widget = self._field(f)
            widget.setToolTip(f.metadata["help"])
            form.addRow(LABELS[f.name], widget)
        self.show_settings(settings)

    def _field(self, f) -> QWidget:
        if f.name in CHOICES:
            box = QComboBox()
            for value, text in CHOICES[f.name].items():
                box.addItem(text, value)
            box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
            box.setMinimumContentsLength(14)  # (long items are elided in a narrow panel)
            return box
        bound = f.metadata["bound"]
        if bound.kind is float:
            step = 10.0 ** -DECIMALS
            spin = QDoubleSpinBox()
            spin.setDecimals(DECIMALS)
            spin.setSingleStep(10 * step)
            spin.setRange(self._accepted(f.name, bound.low, step), self._accepted(f.name, bound.high, -step))
            return spin
        spin = spin_box(int(bound.low), int(bound.high), getattr(WINDOW_SETTINGS, f.name))
        if automatic_text(f.name):
            spin.setSpecialValueText(automatic_text(f.name))
        return spin

    @staticmethod
    def _accepted(name: str, end: float, step: float) -> float:
        """`end`, or one `step` inside it when the settings refuse it (an open end, as the quantile's)."""
        try:
            replace(WINDOW_SETTINGS, **{name: end})
        except InputError:
            return end + step
        return end

    def _search_grid(self, help_text: str) -> QGridLayout:
        grid = QGridLayout()  # two by two: in a one-row strip a narrow panel cut the names ("com", "da-s")
        for k, mode in enumerate(SEARCH_MODES):
            box = self.search_boxes[mode] = QCheckBox(METHOD_NAMES.get(mode, mode))
            box.setToolTip(help_text)
            grid.addWidget(box, k // 2, k % 2)
        self.search_boxes[ALWAYS].setEnabled(False)
        return grid

    def settings(self) -> DissectionSettings:
        """The settings shown last, with the fields' values."""
        values = {name: w.currentData() if isinstance(w, QComboBox) else w.value() for name, w in self.fields.items()}
        searches = tuple(mode for mode, box in self.search_boxes.items() if box.isChecked())
        return replace(self._shown, **values, searches=searches)

    def request_run(self) -> None:
        self.run_requested.emit(self.settings())

    def show_settings(self, s: DissectionSettings) -> None:
        self._shown = s
        for name, w in self.fields.items():
            if isinstance(w, QComboBox):
                w.setCurrentIndex(max(0, w.findData(getattr(s, name))))
            else:
                w.setValue(getattr(s, name))
        for mode, box in self.search_boxes.items():
            box.setChecked(mode == ALWAYS or mode in s.searches)
