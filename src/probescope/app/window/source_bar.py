"""The bar that shows what is loaded (model, layer, dataset, samples, judgments) at all times and switches it.

Each input is a button whose menu lists the recent items of that kind and an "Open…" entry; the layer is a combo
box over the loaded model's layers, each with its output and layout, and beside it how the chosen layer is read
(units over a grid; a ViT's patch tokens after its prefix tokens). The bar only reads `AppState` and emits what the
user picked.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QLabel, QMenu, QToolBar, QToolButton, QWidget

from probescope.app.window.saved_settings import Settings
from probescope.app.window.state import AppState
from probescope.core.models.info import LayerInfo
from probescope.jobs.inputs import DEMO, KINDS, OpenRequest

TITLES = {"model": "Model", "dataset": "Dataset", "samples": "Samples", "judgments": "Judgments"}


class SourceBar(QToolBar):
    """`open_requested(OpenRequest)` for a recent or demo item; `browse_requested(kind)` for "Open…"."""

    open_requested = Signal(object)
    browse_requested = Signal(str)
    layout_requested = Signal(str)  # a layer whose layout the model does not say: the user is to give it

    def __init__(self, state: AppState, settings: Settings, parent: QWidget | None = None):
        super().__init__("Loaded", parent)
        self.setObjectName("source-bar")
        self.setMovable(False)
        self.state = state
        self.settings = settings
        self.buttons: dict[str, QToolButton] = {}
        self.layer = QComboBox()
        self.layer.setMinimumContentsLength(10)
        self.layer.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.layer.setToolTip("The layer to dissect")
        self.layout_note = QLabel()
        self.layout_note.setObjectName("layer-layout")
        self.layout_note.linkActivated.connect(lambda _link: self.state.layer and self.layout_requested.emit(
            self.state.layer))
        for kind in KINDS:
            button = QToolButton()
            button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
            menu = QMenu(button)
            menu.aboutToShow.connect(self._menu_filler(kind, menu))
            button.setMenu(menu)
            self.buttons[kind] = button
            self.addWidget(button)
            if kind == "model":
                self.addWidget(QLabel(" layer "))
                self.addWidget(self.layer)
                self.addWidget(self.layout_note)
            self.addSeparator()
        self.layer.currentTextChanged.connect(self._pick_layer)
        state.changed.connect(self.show_slot)
        for slot in (*KINDS, "layer"):
            self.show_slot(slot)

    def set_loading(self, kind: str, label: str) -> None:
        self.buttons[kind].setText(f"{TITLES[kind]}: {label} (loading…)")

    def show_slot(self, slot: str) -> None:
        if slot == "layer" or slot == "model":
            self.layer.blockSignals(True)
            self.layer.clear()
            self.layer.addItems(self.state.layers())
            model = self.state.get("model")
            infos = {info.name: info for info in model.layers} if model is not None else {}
            for index, name in enumerate(self.state.layers()):
                self.layer.setItemData(index, layer_tooltip(infos[name]), Qt.ItemDataRole.ToolTipRole)
            if self.state.layer is not None:
                self.layer.setCurrentText(self.state.layer)
            self.layer.blockSignals(False)
            shown = infos.get(self.state.layer or "")
            reading = layer_reading(shown) if shown is not None else ""
            if shown is not None and shown.units is None and shown.out_shape is not None:
                reading = f"<a href='layout'>{reading}: give it…</a>"  # the model does not say: the user does
            self.layout_note.setText(f" {reading} " if reading else "")
            self.layout_note.setToolTip(layer_tooltip(shown) if shown is not None else "")
        if slot in self.buttons:
            loaded = self.state.get(slot)
            text = loaded.label if loaded is not None else "none"
            self.buttons[slot].setText(f"{TITLES[slot]}: {text}")
            self.buttons[slot].setToolTip(loaded.spec if loaded is not None else f"No {slot} loaded")

    def _menu_filler(self, kind: str, menu: QMenu) -> Callable[[], None]:
        def fill() -> None:
            menu.clear()
            current = self.state.get(kind)
            for item in self.settings.recent.items(kind):
                action = menu.addAction(item.label)
                action.setToolTip(item.spec)
                action.setCheckable(True)
                request = OpenRequest.from_json(item.spec)
                action.setChecked(current is not None and current.spec == request.spec)
                action.triggered.connect(lambda _=False, r=request: self.open_requested.emit(r))
            demo = menu.addAction("Demo world")
            demo.triggered.connect(lambda: self.open_requested.emit(OpenRequest(kind, DEMO)))
            menu.addSeparator()
            menu.addAction("Open…").triggered.connect(lambda: self.browse_requested.emit(kind))
        return fill

    def _pick_layer(self, name: str) -> None:
        if name and name != self.state.layer:
            self.state.set_layer(name)


def layer_reading(info: LayerInfo) -> str:
    """How a layer's output is read, short: '512 units · 7×7', '768 units · 1 + 14×14 tokens', 'layout undecided'."""
    units = info.units
    if units is None:
        return "no units" if info.out_shape is None else "layout undecided"
    grid = f"{units[1]}×{units[2]}"
    layout = info.layout
    kind = getattr(layout, "kind", "")
    if kind == "tokens":
        return f"{units[0]:,} units · {layout.prefix} + {grid} tokens"  # type: ignore[union-attr]
    if kind == "flat":
        return f"{units[0]:,} units · flat"
    return f"{units[0]:,} units · {grid}" + (" · channels last" if kind == "nhwc" else "")


def layer_tooltip(info: LayerInfo) -> str:
    """The layer's module kind, output per image and layout (why it is undecided, and what to pass)."""
    shape = "×".join(map(str, info.out_shape)) if info.out_shape is not None else "no tensor"
    layout = info.layout.describe() if info.layout is not None else "-"
    return f"{info.name}: {info.kind}, output {shape} per image; {layout}"
