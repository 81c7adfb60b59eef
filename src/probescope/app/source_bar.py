"""The bar that shows what is loaded (model, layer, dataset, samples, judgments) at all times and switches it.

Each input is a button whose menu lists the recent items of that kind and an "Open…" entry; the layer is a combo
box over the loaded model's layers. The bar only reads `AppState` and emits what the user picked.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QLabel, QMenu, QToolBar, QToolButton, QWidget

from probescope.app.settings import Settings
from probescope.app.state import AppState
from probescope.jobs.inputs import DEMO, KINDS, OpenRequest

TITLES = {"model": "Model", "dataset": "Dataset", "samples": "Samples", "judgments": "Judgments"}


class SourceBar(QToolBar):
    """`open_requested(OpenRequest)` for a recent or demo item; `browse_requested(kind)` for "Open…"."""

    open_requested = Signal(object)
    browse_requested = Signal(str)

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
            if self.state.layer is not None:
                self.layer.setCurrentText(self.state.layer)
            self.layer.blockSignals(False)
        if slot in self.buttons:
            loaded = self.state.get(slot)
            text = loaded.label if loaded is not None else "none"
            self.buttons[slot].setText(f"{TITLES[slot]}: {text}")
            self.buttons[slot].setToolTip(loaded.spec if loaded is not None else f"No {slot} loaded")

    def _menu_filler(self, kind: str, menu: QMenu) -> Callable[[], None]:
        def fill() -> None:
            menu.clear()
            current = self.state.get(kind)
            for item in self.settings.recent(kind):
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
