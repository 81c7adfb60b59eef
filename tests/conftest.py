"""Shared test setup: Qt runs offscreen, torch is imported before Qt, and no test may leave a thread running."""

from __future__ import annotations

import os
import threading
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402
import torch  # noqa: E402,F401  (torch before Qt, as the app does)

if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
    # Each xdist worker takes its share of the cores for torch's threads, as the app's compute thread does
    # (runner.compute_threads), and so do the processes it starts (a command line, a script; the kernel sets its own):
    # two workers with torch's default of a thread per core oversubscribe a 2-core machine, and OpenMP's waiting
    # threads spin on the core the other worker needs (test_architectures.py and test_ablation.py side by side: 207 s
    # at two threads a worker, 62 s at one).
    _share = max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))
    os.environ.setdefault("OMP_NUM_THREADS", str(_share))
    torch.set_num_threads(_share)


# The test files that take longest (10 s and more on two cores), about longest first, the Ray ones (a cluster's
# processes on the side) apart: handed out first, so that the two xdist workers end together. pyproject's
# --no-loadscope-reorder keeps this order; xdist's own puts the files with the most tests first, which handed the
# single-test files of 25 s out last. The other files follow in their own order.
LONGEST_FIRST = (
    "test_kernel.py", "test_architectures.py", "test_dissection_parallel.py", "test_batch_ray.py",
    "test_app_figures.py", "test_scoring_feature_networks.py", "test_docs_api.py", "test_kernel_ray.py",
    "test_featurevis.py", "test_app_gui_command.py", "test_ws_dissection.py", "test_window_menus.py",
    "test_app_window.py", "test_window_layout.py", "test_window_defects.py", "test_ws_similarity.py",
    "test_cluster_addresses.py", "test_ws_gallery.py", "test_window_hand.py", "test_ws_gallery_features.py",
    "test_ws_dissection_batch.py", "test_window_stale_state.py",
)


def pytest_collection_modifyitems(items):
    rank = {name: k for k, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # (stable: each file's tests keep their order)


# The files that start a Ray head and connect to it with Ray Client run one after the other on one xdist worker. Each
# head's client proxy picks the port of a client's own server from the same list (23000 upward, checked free, bound
# later), so clients of two heads connecting at once can both take one port; one of them then meets the other head's
# server and waits 30 s for a channel that never comes (seen: 44.8 s for a 2.5 s test; reproduced every time with
# two heads on different tokens connected to at once).
RAY_CLIENT_FILES = ("test_kernel_ray.py", "test_cluster_addresses.py")


def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class RayClientFilesTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            return "Ray Client heads" if scope.rsplit("/", 1)[-1] in RAY_CLIENT_FILES else scope

    return RayClientFilesTogether(config, log)


@pytest.fixture(autouse=True)
def _no_threads_left_behind(request):
    """Fail a test that leaves worker threads (or any other thread it started) alive."""
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 5.0
    while True:
        left = [t for t in threading.enumerate() if t not in before and t.is_alive()]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    if left:
        pytest.fail(f"{request.node.nodeid} left threads running: {[t.name for t in left]}")


@pytest.fixture
def settings_path(tmp_path):
    """An isolated settings file: tests never read or write the user's settings."""
    return tmp_path / "settings.ini"


@pytest.fixture(scope="session")
def small_world(tmp_path_factory):
    """Small real inputs of every kind, made once: an untrained demo-architecture model, a 12-image Broden
    dataset, 10 samples in a .npz, and 8-rank-2 judgments over 12 rendered stimuli (psiz HDF5 + catalog)."""
    import numpy as np
    from PIL import Image

    from oracles.simulated_trials import simulate_trials
    from probescope.core.demo import world
    from probescope.core.demo.dataset import write_demo_dataset
    from probescope.core.demo.model import DemoNet
    from probescope.core.similarity.catalog import Catalog, write_catalog_hdf5
    from probescope.core.similarity.writers import write_psiz_hdf5

    root = tmp_path_factory.mktemp("world")
    torch.manual_seed(0)
    torch.save(DemoNet(len(world.SCENES), (4, 8, 8, 8)).state_dict(), root / "model.pt")
    write_demo_dataset(root / "dataset", n_images=12)
    samples = np.stack([s.image for s in world.render_batch(1, 10)])
    np.savez(root / "samples.npz", images=samples)
    stimuli = world.render_batch(2, 12)
    (root / "images").mkdir()
    paths = []
    for k, s in enumerate(stimuli):
        paths.append(f"{s.scene}/{k:03d}.png")
        (root / "images" / s.scene).mkdir(exist_ok=True)
        Image.fromarray(s.image).save(root / "images" / paths[-1])
    catalog = Catalog(tuple(paths), np.full(len(paths), -1), root / "images", tuple(s.scene for s in stimuli))
    write_catalog_hdf5(root / "catalog.hdf5", catalog)
    rng = np.random.default_rng(0)
    trials = simulate_trials(rng.normal(size=(12, 2)), 20, rng)
    write_psiz_hdf5(root / "obs.hdf5", trials)
    return {
        "root": root,
        "model": f"demo:{root / 'model.pt'}",
        "dataset": root / "dataset",
        "samples": root / "samples.npz",
        "judgments": root / "obs.hdf5",
        "catalog": root / "catalog.hdf5",
        "image_root": root / "images",
    }


@pytest.fixture
def isolated_cache(tmp_path_factory, monkeypatch):
    """The probescope cache (demo data, activations) in a folder shared by this test session, never the user's."""
    folder = tmp_path_factory.getbasetemp() / "probescope-cache"
    folder.mkdir(exist_ok=True)
    monkeypatch.setenv("PROBESCOPE_CACHE", str(folder))
    return folder


@pytest.fixture
def make_workspace(qtbot):
    """make(cls, size) -> (workspace, pool, state): a shown workspace of `cls` bound to a fresh AppState, with its own
    WorkerPool (shut down after the test)."""
    from probescope.app.compute.workers import WorkerPool
    from probescope.app.window.state import AppState

    pools = []

    def make(cls, size=(1600, 950)):
        pool, state = WorkerPool(), AppState()
        pools.append(pool)
        ws = cls(pool)
        qtbot.addWidget(ws)
        ws.resize(*size)
        ws.show()
        ws.load_state(state)
        return ws, pool, state

    yield make
    for pool in pools:
        pool.shutdown()


@pytest.fixture
def open_input(qtbot):
    """open_input(pool, state, request): load an OpenRequest in the pool into the state, as the window does, and wait
    until the state has it."""
    from probescope.jobs.inputs import open_task

    def open_(pool, state, request) -> None:
        with qtbot.waitSignal(state.changed, timeout=120_000):
            pool.submit(open_task(request), name="open", on_result=state.set)

    return open_


@pytest.fixture
def answer_trust(qtbot):
    """answer_trust(accept) -> seen: from then on every TrustDialog that opens is answered (Trust and Open, or
    Cancel; a later call changes the answer); `seen` collects each dialog's summary text, for checks."""
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from probescope.app.window.trust_dialog import TrustDialog

    seen: list[str] = []
    answer = {"accept": True}
    timer = QTimer()

    def poll() -> None:
        for widget in QApplication.topLevelWidgets():
            if isinstance(widget, TrustDialog) and widget.isVisible():
                seen.append(widget.summary.text())
                widget.accept() if answer["accept"] else widget.reject()

    timer.timeout.connect(poll)

    def start(accept: bool = True) -> list[str]:
        answer["accept"] = accept
        timer.start(20)
        return seen

    yield start
    timer.stop()


@pytest.fixture
def window(qtbot, settings_path):
    """A shown main window with its own settings file (closed after the test)."""
    from windows import make_window

    w = make_window(qtbot, settings_path)
    yield w
    w.close()


@pytest.fixture(scope="session")
def demo_world_features():
    """The demo classifier's 128-d pool features of 240 demo-world images (real) and 240 demo-sampler images at
    diversity 7, fidelity 0.6 (generated), with their logits: real features for the FID/KID/PRC comparisons."""
    import numpy as np

    from probescope.core.demo import world
    from probescope.core.demo.sampler import DemoSampler
    from probescope.core.scoring.classifiers import load_classifier
    from probescope.core.scoring.pipeline import embed_source
    from probescope.core.scoring.sources import ArraySource

    classifier = load_classifier("demo")
    real = ArraySource(np.stack([s.image for s in world.render_batch(11, 240)]))
    generated = DemoSampler(240, diversity=7, fidelity=0.6, seed=5)
    real_features, real_logits = embed_source(real, classifier, 60, workers=1)
    gen_features, gen_logits = embed_source(generated, classifier, 60, workers=1)
    return {"real": real_features, "generated": gen_features, "real_logits": real_logits,
            "generated_logits": gen_logits}


@pytest.fixture(scope="module")
def demo_model():
    """The demo classifier-model (a LoadedModel), loaded once per test module."""
    from probescope.core.models.loading import load_model

    return load_model("demo")


@pytest.fixture(scope="module")
def real_dataset(tmp_path_factory):
    """A 30-image demo probing dataset: the gallery's real images."""
    from probescope.core.data.broden import BrodenDataset
    from probescope.core.demo.dataset import write_demo_dataset

    root = tmp_path_factory.mktemp("real") / "dataset"
    write_demo_dataset(root, n_images=30)
    return BrodenDataset.open(root)
