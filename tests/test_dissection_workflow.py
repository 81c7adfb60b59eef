"""The one dissect-a-layer workflow (`jobs.dissection.layer.dissect_layer`): called as a notebook would, it writes the
bytes `probescope dissect` writes; it reports its layer block by block; and the window's dissection is a Job whose
arguments travel (they pickle) and that finds its dataset and label store in the session of the process running it."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from oracles.synthetic_broden import (
    SyntheticBroden,
    SyntheticSpec,
    planted_formulas,
    synthetic_activations,
    write_synthetic_broden,
)
from probescope.core.dissection.settings import WINDOW_SETTINGS, DissectionSettings
from probescope.jobs.dissection.layer import (
    ActivationFile,
    DatasetSpec,
    LayerRequest,
    LayerRun,
    ModelLayer,
    dissect_layer,
    hold_dataset,
    labels_of,
    run,
)
from probescope.jobs.dissection.layer_data import layer_data_job
from probescope.jobs.inputs import ModelInfo, OpenRequest
from probescope.jobs.protocol import Job, Partial, TaskContext
from probescope.jobs.session import Session
from probescope.main import main

pytestmark = pytest.mark.usefixtures("isolated_cache")


@pytest.fixture(scope="module")
def broden(tmp_path_factory):
    root = tmp_path_factory.mktemp("workflow")
    ds = SyntheticBroden(SyntheticSpec(n_images=24, seg_size=16, feat_size=4, n_objects=12, n_parts=4, n_scenes=3))
    write_synthetic_broden(root / "data", ds)
    np.save(root / "act.npy", synthetic_activations(ds, planted_formulas(ds, 5), noise=0.2))
    return root


def test_a_notebook_call_writes_the_bytes_of_the_command_line(broden, tmp_path):
    settings = DissectionSettings(min_samples=2, searches=("iou", "da-stop"), sweep_length=2, jobs=1)
    assert main(["dissect", "--dataset", str(broden / "data"), "--activations", str(broden / "act.npy"),
                 "--out", str(tmp_path / "cli"), "--min-samples", "2", "--search", "iou,da-stop",
                 "--sweep-length", "2", "--jobs", "1"]) == 0
    done = run(dissect_layer(TaskContext(), LayerRequest(DatasetSpec(broden / "data"),
                                                         ActivationFile(broden / "act.npy"), settings,
                                                         out=tmp_path / "notebook")))
    assert isinstance(done, LayerRun) and done.result.complete and len(done.result.units) == 5
    for name in ("dissection.json", "tally.csv"):
        assert (tmp_path / "notebook" / name).read_bytes() == (tmp_path / "cli" / name).read_bytes()


def test_the_layer_arrives_block_by_block_and_resumes(broden, tmp_path, monkeypatch):
    from probescope.core.dissection import saved

    monkeypatch.setattr(saved, "FIRST_BLOCK", 2)  # blocks of 2, then 4 units: partial results before the end
    request = LayerRequest(DatasetSpec(broden / "data"), ActivationFile(broden / "act.npy"),
                           DissectionSettings(min_samples=2, jobs=1), out=tmp_path / "out")
    parts = [item.value for item in dissect_layer(TaskContext(), request) if isinstance(item, Partial)]
    assert parts[0].result is None  # the inputs are ready before any unit is dissected
    assert [len(p.result.units) for p in parts[1:]] == [2, 5]
    lines: list[str] = []
    again = run(dissect_layer(TaskContext(), request, log=lines.append))
    assert again.result.units.keys() == parts[-1].result.units.keys()
    assert lines == ["complete: all 5 units already done, nothing to resume (--restart dissects again)"]


def test_the_session_holds_the_dataset_and_its_labels(broden):
    from probescope.core.data.broden import BrodenDataset

    session = Session()
    ctx = TaskContext(session=session)
    dataset = BrodenDataset.open(broden / "data", "index.csv")
    spec = hold_dataset(session, dataset)
    assert spec == DatasetSpec(broden / "data") and pickle.loads(pickle.dumps(spec)) == spec
    steps = list(labels_of(ctx, spec, dataset))
    assert steps  # the label maps were read, once
    store = session.get("labels", spec, lambda: pytest.fail("read twice"))
    assert run(labels_of(ctx, spec, dataset)) is store


def test_the_windows_dissection_is_a_job_whose_arguments_travel():
    info = ModelInfo(OpenRequest("model", "demo"), "cpu", "demo", None, "layer4", True, "key")
    request = LayerRequest(DatasetSpec(Path("/data/broden")), ModelLayer(info, "layer4", (128, 7, 7)), WINDOW_SETTINGS,
                           first_unit=3, spare_cores=1)
    job = Job(layer_data_job, {"request": request, "model_label": "demo"})
    travelled = pickle.loads(pickle.dumps(job))
    assert travelled.function is layer_data_job and travelled.kwargs == job.kwargs
    assert job.name == "probescope.jobs.dissection.layer_data.layer_data_job"
