"""Asking the user how a layer's output is laid out when the model does not say (issue 42: never guess a layout), and
opening the model again reading it so."""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtWidgets import QInputDialog

from probescope.core.errors import InputError
from probescope.core.models.layout import LAYOUT_HELP, Layout


def ask_layout(window, layer: str) -> None:
    """Ask in a dialog over `window` (the MainWindow: its model, notification and `open`); the layer whose layout
    the user gave stays chosen once the model has opened again."""
    loaded = window.state.get("model")
    if loaded is None:
        return
    info = next((i for i in loaded.layers if i.name == layer), None)
    why = info.layout.describe() if info is not None and info.layout is not None else ""
    shape = "×".join(map(str, info.out_shape)) if info is not None and info.out_shape else "?"
    text, ok = QInputDialog.getText(window, "Layout of a layer", f"{layer} gives {shape} per image; {why}.\n"
                                    f"Its layout: {LAYOUT_HELP}")
    if not ok or not text.strip():
        return
    try:
        layout = Layout.parse(text)
    except InputError as exc:
        window.notify(str(exc))
        return
    request = loaded.value.request
    given = tuple((name, value) for name, value in request.layouts if name != layer) + ((layer, str(layout)),)

    def chosen(result) -> None:
        if getattr(result, "kind", None) != "model" or result.spec != request.spec:
            return
        window.opened.disconnect(chosen)
        if f"layer {layer!r}" in window.notification.message.text():  # the refusal the layout answers
            window.notification.dismiss()
        if layer in window.state.layers():
            window.state.set_layer(layer)

    window.opened.connect(chosen)
    window.open(replace(request, layouts=given))
