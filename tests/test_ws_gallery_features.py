"""Gallery: the feature network every distance is measured in is chosen in the Real data panel, apart from the
classifier that gives IS. Choosing DINOv2 loads the classifier again with it and rescores: the table names the
distance FD_DINOv2 with the engine's number, density and coverage fill in when the stream stops, CMMD says it needs
CLIP features; a file that does not load leaves the features in effect; the classifier's own features give FID
again. The pick dialogs: Meta's file names say DINOv2's architecture, cancel changes nothing."""

from __future__ import annotations

import pytest
import torch
from PySide6.QtWidgets import QFileDialog, QInputDialog
from windows import loaded_model

from oracles.dinov2_reference import random_state
from probescope.app.gallery.real_data_panel import (
    RealDataPanel,
    _number,
    dinov2_arch,
    features_title,
    headline,
    short_note,
)
from probescope.app.gallery.workspace import GalleryWorkspace
from probescope.core.demo.sampler import DemoSampler
from probescope.core.scoring.live_scores import Readout
from probescope.jobs.inputs import Loaded
from probescope.jobs.scoring.stream import CLASSIFIER

WAIT_MS = 120_000
N = 16  # demo samples: the ViT runs on the CPU (~10 images a second), with the 30 real images


@pytest.fixture(scope="module")
def dinov2_weights(tmp_path_factory):
    path = tmp_path_factory.mktemp("dinov2") / "dinov2_vits14_pretrain.pth"
    torch.save(random_state(0), path)
    return path


def wait_for_final_readout(qtbot, ws, features: str) -> None:
    """Scored with `features` to the end, every reading at N back."""
    def done() -> bool:
        real = ws.real
        return (ws.gallery.features == features and ws.classifier is not None
                and ws.classifier.choice.features == features and ws.scores.n == N and not ws.streaming
                and real.fast is not None and real.fast.n == N and real.slow is not None and real.slow.n == N)

    qtbot.waitUntil(done, timeout=WAIT_MS)


def row(table: str, title: str) -> str:
    """The table's row titled `title` (its cells as HTML)."""
    start = table.index(f"<tr><td>{title}</td>")
    return table[start : table.index("</tr>", start)]


def test_dinov2_features_measure_every_distance_and_the_classifiers_come_back(
        qtbot, make_workspace, demo_model, real_dataset, dinov2_weights, isolated_cache):
    ws, pool, state = make_workspace(GalleryWorkspace, (1500, 950))
    state.set(Loaded("dataset", "real", "real", real_dataset))
    state.set(loaded_model(pool, demo_model))
    state.set(Loaded("samples", "demo", "demo", DemoSampler(N)))
    wait_for_final_readout(qtbot, ws, CLASSIFIER)
    assert "<td>FID</td>" in ws.real_panel.metrics.text()
    own_dim = ws.real.live.features.shape[1]

    spec = f"dinov2:vits14:{dinov2_weights}"
    ws.real_panel.choose_features(spec)
    wait_for_final_readout(qtbot, ws, spec)
    panel, live, slow = ws.real_panel, ws.real.live, ws.real.slow
    assert live.features.shape[1] == 384 != own_dim  # ViT-S/14's class token, not the classifier's features
    assert ws.classifier.choice.spec == "model" and ws.classifier.feature_label == "FD_DINOv2"
    assert panel.features_box.currentData() == spec and "dinov2_vits14_pretrain.pth" in panel.features_box.currentText()
    table = panel.metrics.text()
    fd = row(table, "FD_DINOv2")
    assert f"<b>{_number(live.fid())}</b>" in fd and "DINOv2" in fd and "<td>FID</td>" not in table
    assert f"<b>{slow.values['density']:.3f}</b>" in row(table, "Density")
    assert f"<b>{slow.values['nn_coverage']:.3f}</b>" in row(table, "Coverage (k-NN)")
    assert "choose an OpenCLIP network" in row(table, "CMMD")
    distances = ws.score_panel.distances_label.text()
    assert f"FD_DINOv2 <b>{_number(live.fid())}</b>" in distances and "coverage <b>" in distances
    assert "DINOv2" in panel.caveat.text() and "IS by" in panel.caveat.text()
    assert "FD_DINOv2" in panel.fid_plot.plotItem.titleLabel.text

    # weights that do not load: reported as a failed load; the features in effect stay
    failed = []
    pool.failed.connect(lambda _handle, error: failed.append(error))
    items = panel.features_box.count()
    panel.choose_features(f"dinov2:vits14:{dinov2_weights.parent / 'missing.pth'}")
    qtbot.waitUntil(lambda: bool(failed), timeout=WAIT_MS)
    assert ws.gallery.features == spec and panel.features_box.currentData() == spec
    assert panel.features_box.count() == items and ws.scores.n == N and ws.real.live is live

    ws.real_panel.choose_features(CLASSIFIER)
    wait_for_final_readout(qtbot, ws, CLASSIFIER)
    table = ws.real_panel.metrics.text()
    assert f"<b>{_number(ws.real.live.fid())}</b>" in row(table, "FID") and "FD_DINOv2" not in table
    assert ws.real.live.features.shape[1] == own_dim
    assert ws.score_panel.distances_label.text().startswith("FID <b>")
    assert ws.real_panel.features_box.currentData() == CLASSIFIER


def test_a_new_classifier_keeps_the_chosen_features(qtbot, make_workspace, demo_model):
    """Without samples nothing loads: the state takes the features, and the classifier loaded next has them."""
    ws, pool, state = make_workspace(GalleryWorkspace, (1500, 950))
    spec = "dinov2:vits14:/nowhere/dinov2_vits14_pretrain.pth"
    submitted = []
    original_submit = pool.submit

    def recording_submit(task, **kwargs):
        submitted.append(getattr(task, "kwargs", {}).get("choice"))
        return original_submit(task, **kwargs)

    pool.submit = recording_submit
    ws.real_panel.choose_features(spec)
    assert ws.gallery.features == spec and ws.real_panel.features_box.currentData() == spec
    state.set(loaded_model(pool, demo_model))
    ws.set_classifier_spec("demo")
    choices = [c for c in submitted if c is not None]
    assert choices and choices[-1].spec == "demo" and choices[-1].features == spec


def test_the_pick_dialogs(qtbot, monkeypatch):
    panel = RealDataPanel()
    qtbot.addWidget(panel)
    chosen = []
    panel.features_chosen.connect(chosen.append)
    box = panel.features_box

    def pick(data: str) -> None:
        k = box.findData(data)
        box.setCurrentIndex(k)
        box.activated.emit(k)

    monkeypatch.setattr(QFileDialog, "getOpenFileName", staticmethod(lambda *a, **k: ("", "")))
    pick("dinov2")
    assert chosen == [] and box.currentData() == CLASSIFIER  # cancelled: as it was

    weights = "/w/dinov2_vitb14_reg4_pretrain.pth"
    monkeypatch.setattr(QFileDialog, "getOpenFileName", staticmethod(lambda *a, **k: (weights, "")))
    pick("dinov2")
    assert chosen[-1] == f"dinov2:vitb14-reg:{weights}" and box.currentData() == chosen[-1]

    monkeypatch.setattr(QFileDialog, "getOpenFileName", staticmethod(lambda *a, **k: ("/w/backbone.pth", "")))
    monkeypatch.setattr(QInputDialog, "getItem", staticmethod(lambda *a, **k: ("vitl14", True)))
    pick("dinov2")
    assert chosen[-1] == "dinov2:vitl14:/w/backbone.pth"
    monkeypatch.setattr(QInputDialog, "getText", staticmethod(lambda *a, **k: ("ViT-L-14-336", True)))
    pick("openclip")
    assert chosen[-1] == "openclip:ViT-L-14-336:/w/backbone.pth"
    monkeypatch.setattr(QInputDialog, "getText", staticmethod(lambda *a, **k: ("", False)))
    panel.set_features(chosen[-1])  # (the state took it)
    pick("openclip")
    assert len(chosen) == 3 and box.currentData() == "openclip:ViT-L-14-336:/w/backbone.pth"
    pick("inception-tf")
    assert chosen[-1] == "inception-tf:/w/backbone.pth"


def test_the_features_text():
    assert dinov2_arch("/a/dinov2_vits14_pretrain.pth") == "vits14"
    assert dinov2_arch("dinov2_vitg14_reg4_pretrain.pth") == "vitg14-reg" and dinov2_arch("model.pth") is None
    assert features_title("dinov2:vitb14:/a/b/w.pth") == "DINOv2 vitb14 — w.pth"
    assert features_title(CLASSIFIER) == "Classifier's own"
    assert short_note("DINOv2 ViT-S/14 class token (384-d, a, b), TF1 bilinear resize") == \
        "DINOv2 ViT-S/14 class token (384-d, a, b)"
    readout = Readout(40, {"FID": 12.345678, "KID": 0.002, "precision": 0.5, "recall": 0.25, "nn_coverage": 0.75,
                           "CMMD": 1.23456})
    line = headline(readout, True, "FD_CLIP")
    assert line.startswith("FD_CLIP <b>12.35</b>") and "coverage <b>0.750</b>" in line and "CMMD <b>1.235</b>" in line
