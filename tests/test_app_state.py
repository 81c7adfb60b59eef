"""AppState: what is loaded, the layer follows the model, and views never see a model with a foreign layer."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from probescope.app.window.saved_settings import DEVICE, EXPORT_DEFAULTS, THEME, ExportDefaults, RecentItem, Settings
from probescope.app.window.state import AppState, Loaded, default_layer
from probescope.core.models.info import LayerInfo
from probescope.core.models.layout import Layout
from probescope.jobs.inputs import OpenRequest


def Info(name: str, kind: str, out_shape: tuple) -> LayerInfo:  # noqa: N802  (reads as the record it makes)
    return LayerInfo(name, kind, out_shape, 1, Layout("nchw" if len(out_shape) == 3 else "flat"))


@dataclass
class FakeModel:
    default_layer: str | None


def model(name: str, layers: list[Info], default: str | None = None) -> Loaded:
    return Loaded("model", name, name, FakeModel(default), tuple(layers))


def test_layer_follows_the_model_before_views_hear_of_it(qtbot):
    state = AppState()
    seen = []
    state.changed.connect(lambda slot: seen.append((slot, state.model.default_layer if state.model else None,
                                                    state.layer, tuple(state.layers()))))
    state.set(model("a", [Info("conv", "Conv2d", (8, 4, 4)), Info("layer4", "Seq", (8, 2, 2))], "layer4"))
    state.set(model("b", [Info("features", "Seq", (16, 3, 3)), Info("fc", "Linear", (10,))], "features"))
    for _slot, _default, layer, layers in seen:
        assert layer in layers  # at every signal the layer belongs to the model
    assert [s[0] for s in seen] == ["model", "layer", "model", "layer"]
    state.set_layer("fc")
    assert state.layer == "fc"
    with pytest.raises(ValueError):
        state.set_layer("layer4")


def test_default_layer_rules():
    layers = (Info("a", "Conv2d", (8, 4, 4)), Info("b", "Conv2d", (8, 2, 2)), Info("pool", "Avg", (8, 1, 1)),
              Info("fc", "Linear", (10,)))
    assert default_layer(FakeModel("a"), layers) == "a"  # the model's own choice
    assert default_layer(FakeModel(None), layers) == "b"  # else the last spatial layer, not a 1x1 pool
    assert default_layer(FakeModel(None), (Info("out", "ScriptModule", (10,)),)) == "out"


def test_settings_round_trip_and_isolation(settings_path):
    settings = Settings(settings_path)
    assert settings.path == str(settings_path)
    assert settings.get(THEME) == "system" and settings.get(DEVICE) == "cpu" and settings.recent.items() == []
    for k in range(12):
        settings.recent.add(RecentItem("dataset", OpenRequest("dataset", f"/d{k}").to_json(), f"d{k}"))
    settings.recent.add(RecentItem("dataset", OpenRequest("dataset", "/d5").to_json(), "d5"))  # moves to the top
    settings.set(EXPORT_DEFAULTS, ExportDefaults("svg", None, 3.0, True, "/tmp"))
    settings.set(THEME, "dark")
    with pytest.raises(ValueError):
        settings.set(THEME, "purple")
    settings.sync()
    again = Settings(settings_path)
    labels = [item.label for item in again.recent.items("dataset")]
    assert labels[0] == "d5" and len(labels) == 10 and "d0" not in labels
    assert again.get(EXPORT_DEFAULTS) == ExportDefaults("svg", None, 3.0, True, "/tmp")
    assert again.get(THEME) == "dark"
    assert OpenRequest.from_json(again.recent.items()[0].spec) == OpenRequest("dataset", "/d5")


def test_open_request_round_trip():
    request = OpenRequest("samples", "/g.pt", generator=(128, 500, 10))
    assert OpenRequest.from_json(request.to_json()) == request
    assert OpenRequest("model", "places365:resnet18:/x/r.pth.tar").label == "r.pth.tar"
    with pytest.raises(ValueError):
        OpenRequest("weights", "x")
