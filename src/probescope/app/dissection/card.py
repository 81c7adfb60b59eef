"""The Unit card panel: a paper-ready figure of the selected unit (its top images with their overlays, every
explanation with its length, IoU and DA, its role when ablated) under its export buttons (the dialog and the paper
presets)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtGui import QImage
from PySide6.QtWidgets import QGridLayout, QPushButton, QVBoxLayout, QWidget

from probescope.app.figures.export import PAPER_PRESETS, Preset
from probescope.app.window.panel_area import scrolled
from probescope.core.dissection.results import Explanation
from probescope.jobs.dissection import rows as r
from probescope.jobs.dissection.layer_data import LayerData
from probescope.widgets.dissection.card import CardLine, UnitCard

CARD_IMAGES = 12


def card_panel(card: UnitCard, export: Callable[[Preset | None], None]) -> QWidget:
    """`card` under its buttons: Export… (export(None): the dialog) and one per paper preset."""
    buttons = QGridLayout()  # two columns: in one row a narrow panel squeezed the presets' names
    for k, (text, preset) in enumerate((("Export…", None), *((p.name, p) for p in PAPER_PRESETS))):
        button = QPushButton(text)
        button.clicked.connect(lambda _=False, p=preset: export(p))
        buttons.addWidget(button, k // 2, k % 2)
    buttons.setColumnStretch(2, 1)
    panel = QWidget()
    layout = QVBoxLayout(panel)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.addLayout(buttons)
    layout.addWidget(scrolled(card), 1)
    return panel


def fill_card(card: UnitCard, d: LayerData, unit: int, explanation: Callable[[str], Explanation | None],
              caption: str, role: str, images: Sequence[QImage], formula_label: str,
              drawing: QImage | None = None) -> None:
    """The card of `unit`: `explanation(method)` per method, the grid's `caption` and images, the Role line, and
    the unit's `drawing` (feature visualisation) as the last image when there is one."""
    u = d.result.units[unit]
    lines = [CardLine(r.METHOD_NAMES[m], e.label, e.length, e.iou, e.da)
             for m in r.METHODS if (e := explanation(m)) is not None]
    card.set_card(f"Unit {unit} · {d.layer}",
                  f"{d.model_label}; threshold {u.threshold:.3g} (top {d.settings.quantile:g}); "
                  f"fires on {u.fired_images} images; {caption}" + (f"; {role}" if role else "")
                  + ("; the last image is what the unit would draw (activation maximisation: what can drive it, "
                     "not what drives it on real data)" if drawing is not None else ""),
                  list(images[:CARD_IMAGES - 1]) + [drawing] if drawing is not None else list(images[:CARD_IMAGES]),
                  lines,
                  f"heat map: activation · yellow outline: unit mask at T · cyan: {formula_label or 'explanation'}")
