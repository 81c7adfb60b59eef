"""torch.export programs (.pt2) wherever a TorchScript file is accepted: a model whose layers are the modules it was
exported from (dissected, listed, read for features by a classifier), and a generator. Loading one runs code from
the file (shown below with a crafted archive), so it loads only when trusted; the hostile cases of the other
readers apply: a damaged archive, other files named .pt2, a broken link, a program exported for a fixed batch."""

from __future__ import annotations

import csv
import json
import logging
import pickle
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from probescope.core.errors import InputError
from probescope.core.models.layers import list_layers
from probescope.core.models.loading import load_model
from probescope.core.trust import NO_TRUST, Trust, UntrustedFile
from probescope.main import main

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning")


def _export(module: torch.nn.Module, example: tuple, path: Path, dynamic: bool = True) -> Path:
    batch = torch.export.Dim("batch")
    shapes = tuple({0: batch} for _ in example) if dynamic else None
    torch.export.save(torch.export.export(module.eval(), example, dynamic_shapes=shapes), path)
    return path


@pytest.fixture(scope="module")
def programs(small_world, tmp_path_factory):
    """The small world's model exported (dynamic batch, fixed at the demo images' size), the same for a fixed batch,
    and a generator."""
    import tqdm

    from probescope.core.demo.model import DEMO_INPUT_SIZE

    tqdm.tqdm.monitor_interval = 0  # torch.export's progress bars would leave tqdm's monitor thread running
    root = tmp_path_factory.mktemp("programs")
    model = load_model(small_world["model"])
    x = torch.zeros(2, 3, DEMO_INPUT_SIZE, DEMO_INPUT_SIZE)
    generator = _Generator()
    z, labels = torch.zeros(2, 5), torch.zeros(2, dtype=torch.long)
    return {
        "model": model,
        "pt2": _export(model.module, (x,), root / "model.pt2"),
        "fixed": _export(model.module, (x[:1],), root / "fixed.pt2", dynamic=False),
        "generator": _export(generator, (z, labels), root / "g.pt2"),
        "generator_module": generator,
    }


class _Generator(torch.nn.Module):
    def forward(self, z: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
        value = torch.tanh(z[:, :1] + label[:, None].float())
        return value[:, :, None, None].expand(z.shape[0], 3, 8, 8).contiguous()


def test_loading_a_program_runs_code_from_it_so_it_waits_for_trust(programs, tmp_path):
    """The finding behind the trust decision: torch.export.load unpickles what the archive's JSON marks as pickled,
    so a crafted .pt2 runs its code when loaded (here: it creates a file). probescope refuses it untrusted, before
    torch sees a byte, and the file is never created."""
    marker = tmp_path / "ran"
    evil = _crafted(programs["pt2"], tmp_path / "evil.pt2", marker)
    with pytest.raises(UntrustedFile, match="torch.export program runs code from the file"):
        load_model(str(evil))
    assert not marker.exists()
    logging.getLogger("torch.export").disabled = True  # torch logs the failure with a traceback
    try:
        with pytest.raises(RuntimeError):
            torch.export.load(evil)
    finally:
        logging.getLogger("torch.export").disabled = False
    assert marker.exists()  # torch alone ran the archive's pickle


class _Touch:
    def __init__(self, path: Path):
        self.path = path

    def __reduce__(self):
        return Path.touch, (self.path,)


def _crafted(source: Path, out: Path, marker: Path) -> Path:
    """`source` with its first weight replaced by a pickle that creates `marker`, flagged use_pickle."""
    with zipfile.ZipFile(source) as src, zipfile.ZipFile(out, "w") as dst:
        config_name = next(n for n in src.namelist() if n.endswith("model_weights_config.json"))
        config = json.loads(src.read(config_name))
        first = next(iter(config["config"].values()))
        first["use_pickle"] = True
        for info in src.infolist():
            data = src.read(info.filename)
            if info.filename == config_name:
                data = json.dumps(config).encode()
            elif info.filename.endswith(f"weights/{first['path_name']}"):
                data = pickle.dumps(_Touch(marker))
            dst.writestr(info, data)
    return out


def test_its_layers_are_the_modules_it_was_exported_from(programs):
    model = load_model(f"export:{programs['pt2']}", trust=Trust.of_files([programs["pt2"]]))
    original = programs["model"]
    layers = {info.name: info for info in list_layers(model)}
    assert list(layers) == [name for name, _ in original.module.named_modules() if name]
    expected = {info.name: info for info in list_layers(original)}
    assert {n: (i.kind, i.out_shape) for n, i in layers.items()} == {n: (i.kind, i.out_shape)
                                                                      for n, i in expected.items()}
    assert model.input_size == original.input_size and model.arch == "export" and model.hookable


def test_the_command_line_dissects_a_program_as_the_model_it_came_from(programs, small_world, tmp_path, capsys):
    """dissect --model FILE.pt2 --layer layer4: the same tally as the original model's (same activations)."""
    common = ["dissect", "--dataset", str(small_world["dataset"]), "--layer", "layer4", "--min-samples", "1",
              "--units", "0-3"]
    assert main([*common, "--model", str(programs["pt2"]), "--out", str(tmp_path / "p")]) == 2
    assert "pass --trust FILE" in capsys.readouterr().err
    assert main([*common, "--model", str(programs["pt2"]), "--trust", str(programs["pt2"]), "--out",
                 str(tmp_path / "p")]) == 0
    assert main([*common, "--model", small_world["model"], "--out", str(tmp_path / "m")]) == 0
    rows = [list(csv.DictReader(open(tmp_path / d / "tally.csv"))) for d in ("p", "m")]
    assert [(r["unit"], r["netdissect_label"]) for r in rows[0]] == [(r["unit"], r["netdissect_label"])
                                                                       for r in rows[1]]
    for a, b in zip(*rows, strict=True):
        assert float(a["netdissect_iou"]) == pytest.approx(float(b["netdissect_iou"]), abs=1e-6)


def test_a_program_is_a_classifier_with_features(programs):
    from probescope.core.scoring.classifiers import model_classifier
    from probescope.core.scoring.pipeline import embed_source
    from probescope.core.scoring.sources import ArraySource

    side = programs["model"].input_size[0]
    images = ArraySource(np.random.default_rng(0).integers(0, 255, (5, side, side, 3), np.uint8))
    program = model_classifier(str(programs["pt2"]), trust=Trust.of_files([programs["pt2"]]))
    assert "input of the last linear layer 'fc'" in program.feature_note
    features, logits = embed_source(images, program, 2)
    want_features, want_logits = embed_source(images, model_classifier(f"demo:{programs['model'].source}"), 2)
    np.testing.assert_allclose(features, want_features, atol=1e-5)
    np.testing.assert_allclose(logits, want_logits, atol=1e-5)


def test_a_program_is_a_generator(programs, tmp_path):
    from probescope.core.scoring.sources import TorchScriptGeneratorSource

    path = programs["generator"]
    with pytest.raises(UntrustedFile):
        TorchScriptGeneratorSource(path, z_dim=5, n=7, num_classes=3)
    source = TorchScriptGeneratorSource(path, z_dim=5, n=7, num_classes=3, seed=4, trust=Trust.of_files([path]))
    scripted = tmp_path / "g.pt"
    torch.jit.script(programs["generator_module"]).save(str(scripted))
    script = TorchScriptGeneratorSource(scripted, z_dim=5, n=7, num_classes=3, seed=4,
                                        trust=Trust.of_files([scripted]))
    got = [im for batch in source.batches(3) for im in batch]
    want = [im for batch in script.batches(3) for im in batch]
    assert len(got) == 7 and all((a == b).all() for a, b in zip(got, want, strict=True))
    assert "torch.export generator" in source.name


def _damaged(source: Path, out: Path) -> Path:
    with zipfile.ZipFile(source) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            data = src.read(info.filename)
            dst.writestr(info, b"{not json" if info.filename.endswith("models/model.json") else data)
    return out


def test_hostile_files_named_pt2_get_one_line(programs, tmp_path, capsys):
    everything = Trust(everything=True)
    damaged = _damaged(programs["pt2"], tmp_path / "damaged.pt2")
    truncated = tmp_path / "truncated.pt2"
    truncated.write_bytes(programs["pt2"].read_bytes()[:4000])
    scripted = tmp_path / "scripted.pt2"
    torch.jit.script(_Generator()).save(str(scripted))
    text = tmp_path / "text.pt2"
    text.write_text("a file named .pt2")
    loop = tmp_path / "loop.pt2"
    loop.symlink_to(loop.name)
    cases = {
        f"export:{damaged}": "damaged torch.export program",
        f"export:{truncated}": "not a torch.export program",
        f"export:{scripted}": "(a TorchScript archive: open it as torchscript:FILE)",
        str(text): "not a PyTorch weights file",
        str(loop): "broken symbolic link (a loop",
        str(programs["fixed"]): "takes batches of exactly 1",
        f"torchscript:{programs['pt2']}": "(a torch.export program: open it as export:FILE)",
    }
    for spec, message in cases.items():
        with pytest.raises(InputError) as caught:
            load_model(spec, trust=everything)
        assert message in str(caught.value) and "\n" not in str(caught.value), (spec, caught.value)
    assert "Traceback" not in capsys.readouterr().err  # torch's logged traceback stays quiet
    assert load_model(str(scripted), trust=everything).arch == "torchscript"  # detected by content, not name
    with pytest.raises(UntrustedFile):
        load_model(str(damaged), trust=NO_TRUST)  # refused before a byte reaches torch


def test_the_window_opens_a_dropped_program_as_a_model(programs):
    from probescope.jobs.inputs import classify_path

    assert classify_path(programs["pt2"]).kind == "model"
