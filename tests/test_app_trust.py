"""The app's trust decision: a dialog with the file's SHA-256, remembered per hash in the settings, asked again when
the content changes, never implied by a recent item, and the task that stopped at the file runs again once trusted."""

from __future__ import annotations

import json

import pytest

from oracles.payloads import scripted_payload
from probescope.app.window.main_window import MainWindow
from probescope.app.window.saved_settings import RecentItem, Settings, TrustedFile
from probescope.app.window.trust_dialog import TrustDialog
from probescope.core.dissection.results import DissectionResult
from probescope.core.trust import Trust, UntrustedFile, read_trusted, sha256_of
from probescope.jobs.dissection.saved_layers import job_activations
from probescope.jobs.inputs import OpenRequest
from probescope.jobs.protocol import TaskContext

pytestmark = [pytest.mark.usefixtures("isolated_cache"), pytest.mark.filterwarnings("ignore:`torch.jit:FutureWarning")]
WAIT_MS = 60_000


@pytest.fixture
def payload(tmp_path):
    marker = tmp_path / "marker"
    return scripted_payload(tmp_path / "scripted.pt", marker), marker


@pytest.fixture
def window(qtbot, settings_path):
    w = MainWindow(Settings(settings_path), device="cpu")
    qtbot.addWidget(w)
    w.show()
    yield w
    w.close()


def test_settings_remember_hashes(settings_path):
    settings = Settings(settings_path)
    assert settings.trusted.hashes() == frozenset()
    settings.trusted.add(TrustedFile("a" * 64, "/m/x.pt", "TorchScript archive"))
    settings.trusted.add(TrustedFile("b" * 64, "/m/x.pt", "TorchScript archive"))
    again = Settings(settings_path)
    assert again.trusted.hashes() == {"a" * 64, "b" * 64}
    assert again.trusted.at("/m/x.pt").sha256 == "b" * 64  # the latest content trusted at that path
    again.trusted.forget()
    assert Settings(settings_path).trusted.hashes() == frozenset()


def test_recent_items_carry_no_trust():
    old = json.dumps({"kind": "model", "spec": "pickle:/m/whole.pth.tar", "catalog": "", "image_root": "",
                      "trust_pickle": True, "generator": []})
    request = OpenRequest.from_json(old)  # an item saved by an older version, which stored the flag
    assert request == OpenRequest("model", "pickle:/m/whole.pth.tar")
    assert "trust" not in request.to_json()


def test_dialog_shows_the_hash_and_what_trusting_means(qtbot, payload):
    path, _ = payload
    with pytest.raises(UntrustedFile) as refused:
        read_trusted(path, Trust(), "TorchScript archive")
    dialog = TrustDialog(refused.value, changed_from="c" * 64)
    qtbot.addWidget(dialog)
    text = dialog.summary.text()
    assert sha256_of(path) in text and str(path) in text and "changed" in text and "c" * 64 in text
    meaning = " ".join(label.text() for label in dialog.findChildren(type(dialog.summary)))
    assert "runs code" in meaning and "asked again" in meaning
    assert not dialog.trust_button.isDefault()  # Enter cancels


def test_window_asks_and_remembers_per_hash(qtbot, window, payload, settings_path, answer_trust):
    path, marker = payload
    seen = answer_trust(accept=False)
    with qtbot.waitSignal(window.pool.finished, timeout=WAIT_MS):
        window.open(OpenRequest("model", str(path)))
    qtbot.waitUntil(lambda: len(seen) == 1, timeout=WAIT_MS)
    # the answer taken: the window says so (the task stopped at the file is not run again)
    qtbot.waitUntil(lambda: "was not trusted" in window.notification.message.text(), timeout=WAIT_MS)
    assert not marker.exists() and window.state.model is None
    assert sha256_of(path) in seen[0]

    window.close()
    trusting = MainWindow(Settings(settings_path), device="cpu")
    qtbot.addWidget(trusting)
    answer_trust(accept=True)  # the same poller now accepts
    with qtbot.waitSignal(trusting.opened, timeout=WAIT_MS):
        trusting.open(OpenRequest("model", str(path)))
    assert marker.exists() and trusting.state.model is not None
    assert sha256_of(path) in Settings(settings_path).trusted.hashes()
    asked = len(seen)
    with qtbot.waitSignal(trusting.opened, timeout=WAIT_MS):  # the same content: not asked again
        trusting.open(OpenRequest("model", str(path)))
    assert len(seen) == asked

    scripted_payload(path, marker.with_name("marker-2"))  # new content at the same path
    with qtbot.waitSignal(trusting.opened, timeout=WAIT_MS):
        trusting.open(OpenRequest("model", str(path)))
    assert len(seen) == asked + 1 and "changed" in seen[-1]
    trusting.close()


def test_recent_item_reopens_only_with_trust(qtbot, settings_path, payload, answer_trust):
    path, marker = payload
    settings = Settings(settings_path)
    stored = json.dumps({"kind": "model", "spec": f"torchscript:{path}", "trust_pickle": True})
    settings.recent.add(RecentItem("model", stored, path.name))
    window = MainWindow(settings, device="cpu")
    qtbot.addWidget(window)
    seen = answer_trust(accept=False)
    action = next(a for a in window.menus.recent.actions() if path.name in a.text())
    action.trigger()
    qtbot.waitUntil(lambda: len(seen) == 1, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: "was not trusted" in window.notification.message.text(), timeout=WAIT_MS)  # answered
    assert not marker.exists()
    window.close()


def test_a_stopped_task_runs_again_once_trusted(qtbot, window, payload, answer_trust):
    """What the Batch tab relies on: a task stopped at an untrusted file is run again, with the new trust."""
    path, _ = payload
    seen = answer_trust(accept=True)
    results = []

    def task(ctx: TaskContext) -> str:
        return read_trusted(path, ctx.trust, "TorchScript archive")[:2].decode()

    window.pool.submit(task, name="read", on_result=results.append)
    qtbot.waitUntil(lambda: results == ["PK"], timeout=WAIT_MS)
    assert len(seen) == 1


def test_saved_batch_specs_grant_no_trust(payload, small_world):
    path, marker = payload
    result = DissectionResult({}, {}, {"spec": f"torchscript:{path}", "source_key": "x"}, {}, 4)
    steps = job_activations(result, "output", None, None, "cpu", TaskContext())
    with pytest.raises(UntrustedFile):
        list(steps)
    assert not marker.exists()


def test_a_window_that_cannot_ask_reports_the_refusal(qtbot, settings_path, payload):
    """Screenshot runs have nobody to ask: the untrusted file is a failure with the command line's advice."""
    path, marker = payload
    window = MainWindow(Settings(settings_path), device="cpu", ask_trust=False)
    qtbot.addWidget(window)
    with qtbot.waitSignal(window.open_failed, timeout=WAIT_MS) as failed:
        window.open(OpenRequest("model", f"torchscript:{path}"))
    assert "refusing to load" in failed.args[1].message and "--trust FILE" in failed.args[1].message
    assert not marker.exists()
    window.close()
