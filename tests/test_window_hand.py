"""The window under the hand: keys that move instead of extending, a cancel that puts the last result back, tasks
that stay listed, an ablation matrix one can read, wheels that scroll, hover thumbnails that go away, layers that
cannot be dissected said so. One test per behaviour, driven through the real window."""

from __future__ import annotations

import pytest
from windows import WAIT_MS

from probescope.app.sources import OpenRequest

pytestmark = pytest.mark.usefixtures("isolated_cache")


def test_a_layer_without_a_spatial_map_is_refused_in_the_window(qtbot, window, small_world, tmp_path, answer_trust):
    """A TorchScript classifier's only layer, "output", holds logits: the window says Network Dissection needs a
    spatial map instead of showing "14 of 14 units interpretable"."""
    import torch
    from torch import nn

    class Classifier(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.mean(dim=(2, 3))

    torch.jit.script(Classifier()).save(str(tmp_path / "clf.pt"))
    answer_trust(accept=True)
    for request in (OpenRequest("dataset", str(small_world["dataset"])),
                    OpenRequest("model", f"torchscript:{tmp_path / 'clf.pt'}")):
        with qtbot.waitSignal(window.opened, timeout=WAIT_MS):
            window.open(request)
    ws = window.workspaces["dissection"]
    qtbot.waitUntil(lambda: window.notification.isVisible() and not window.pool.active(), timeout=WAIT_MS)
    message = window.notification.message.text()
    assert "layer 'output' has no spatial map" in message and "choose a layer with a spatial map" in message
    assert "no spatial map" in ws.runs.status.text() and not ws.runs.cancel.isEnabled()
    assert ws.units.rowCount() == 0 and ws.data is None and "failed" in ws.header.text()
