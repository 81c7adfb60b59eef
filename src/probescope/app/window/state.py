"""What is loaded: the model, its layer, the probing dataset, the generator samples and the similarity judgments.

Workspaces bind to one `AppState` instead of reaching into each other or into the window: they read the loaded
objects and follow `changed(slot)`. Loading itself happens in the worker pool (see `sources.py`); the state only
holds the outcome.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject, Signal

from probescope.jobs.inputs import Loaded

SLOTS: tuple[str, ...] = ("model", "dataset", "samples", "judgments")


class AppState(QObject):
    """The loaded inputs and the selected layer. `changed(slot)` fires with 'model', 'layer', 'dataset', ..."""

    changed = Signal(str)

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._loaded: dict[str, Loaded | None] = dict.fromkeys(SLOTS)
        self._layer: str | None = None
        self.device = "cpu"  # where models are loaded: the window's compute device (`Settings.device` decides)

    def get(self, slot: str) -> Loaded | None:
        return self._loaded[slot]

    def set(self, loaded: Loaded) -> None:
        """Replace what is loaded in `loaded.kind`; a new model also selects its default layer.

        The layer is switched before anyone hears of the new model, so no view ever sees a model with a layer
        it does not have.
        """
        if loaded.kind not in self._loaded:
            raise ValueError(f"unknown slot {loaded.kind!r}")
        self._loaded[loaded.kind] = loaded
        layer_changed = False
        if loaded.kind == "model":
            layer = default_layer(loaded.value, loaded.layers)
            layer_changed, self._layer = layer != self._layer, layer
        self.changed.emit(loaded.kind)
        if layer_changed:
            self.changed.emit("layer")

    def value(self, slot: str) -> Any:
        loaded = self._loaded[slot]
        return None if loaded is None else loaded.value

    @property
    def model(self) -> Any:
        return self.value("model")

    @property
    def dataset(self) -> Any:
        return self.value("dataset")

    @property
    def samples(self) -> Any:
        return self.value("samples")

    @property
    def judgments(self) -> Any:
        return self.value("judgments")

    @property
    def layer(self) -> str | None:
        return self._layer

    def layers(self) -> list[str]:
        """Names of the loaded model's layers (empty when no model is loaded)."""
        loaded = self._loaded["model"]
        return [] if loaded is None else [info.name for info in loaded.layers]

    def set_layer(self, name: str | None) -> None:
        if name == self._layer:
            return
        if name is not None and name not in self.layers():
            raise ValueError(f"the model has no layer {name!r}")
        self._layer = name
        self.changed.emit("layer")


def default_layer(model: Any, layers: tuple) -> str | None:
    """The model's own default (layer4, features, a ViT's last block), else the last layer whose output its layout
    reads as a map of several positions."""
    names = [info.name for info in layers]
    preferred = getattr(model, "default_layer", None)
    if preferred in names:
        return preferred
    spatial = [info.name for info in layers if info.spatial]
    if spatial:
        return spatial[-1]
    return layers[-1].name if layers else None
