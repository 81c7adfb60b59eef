"""The batch manifest (TOML): one dataset, the models and layers to dissect, and the dissection settings.

    [dataset]
    path = "broden"             # Broden-format folder, relative to the manifest's folder
    index = "index.csv"         # optional
    source = "ade20k/"          # optional: keep only index rows whose image path starts with this

    [settings]                  # optional; the `probescope dissect` options, with underscores
    quantile = 0.005
    searches = ["iou", "da-stop"]
    chunk_units = 16            # units per task (changes scheduling only, never results)

    [[models]]
    spec = "resnet18:/data/weights.pth"   # a model spec (see `probescope info`), passed as it is
    layers = ["layer3", "layer4"]
    name = "resnet18"           # optional: its output folder (default from the spec)
    gpus = 1                    # optional: GPUs its extraction task asks Ray for (extracts on cuda)

A model file that runs code when loaded (TorchScript, a whole-model pickle) needs the command line's --trust FILE or
--trust-code: a manifest never grants that trust.

    [[models]]
    name = "precomputed"
    activations = "act.npy"     # activations already extracted: (images, units, h, w), relative to the manifest
    layout = "tokens:1:14x14"   # optional: how they are laid out when not (images, units, h, w) (nhwc, tokens:P:HxW)

A model's layers are read with the layouts the model decides (`probescope info` shows them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomllib

from probescope.core.bounds import UNITS, Bound
from probescope.core.dissection.settings import DissectionSettings
from probescope.core.errors import InputError
from probescope.core.files import readable_file
from probescope.core.models.layout import Layout

_MODEL_KEYS = ("spec", "layers", "name", "gpus", "activations", "layer", "layout")
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")

GPUS = Bound(0.0, 1024.0, float)  # GPUs a Ray task asks for (fractions share one)


@dataclass(frozen=True)
class ModelJob:
    """One model of the manifest: a spec with layers, or a precomputed activations file (one layer)."""

    name: str
    layers: tuple[str, ...]
    spec: str | None = None
    activations: Path | None = None
    gpus: float = 0.0
    layout: Layout | None = None  # of the activations file


@dataclass(frozen=True)
class Manifest:
    path: Path
    dataset: Path
    index: str
    source: str
    settings: DissectionSettings
    chunk_units: int
    models: tuple[ModelJob, ...]

    @property
    def layer_jobs(self) -> list[tuple[ModelJob, str]]:
        """(model, layer) in manifest order: the unit of output (one folder, one dissection.json each)."""
        return [(m, layer) for m in self.models for layer in m.layers]


def folder_name(text: str) -> str:
    """A file-system-safe folder name for a model or layer name ('layer4.1' stays, 'a/b c' -> 'a_b_c')."""
    return _UNSAFE.sub("_", text).strip("._") or "_"


def read_manifest(path: str | Path) -> Manifest:
    """Read and check a manifest; InputError names the file and the first problem."""
    path = readable_file(path)
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read the manifest ({exc})", path) from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"not valid TOML ({exc})", path) from None
    base = path.resolve().parent
    dataset = _table(doc, "dataset", path, required=True)
    _check_keys(dataset, ("path", "index", "source"), "[dataset]", path)
    if not isinstance(dataset.get("path"), str):
        raise InputError("[dataset] needs path = \"<Broden folder>\"", path)
    settings_doc = dict(_table(doc, "settings", path))
    chunk_units = settings_doc.pop("chunk_units", 16)
    try:
        settings = DissectionSettings.from_mapping(settings_doc, "[settings]")
    except InputError as exc:
        raise InputError(str(exc), path) from None
    Bound(1, UNITS.high).check(chunk_units, "[settings] chunk_units", path=path)
    models_doc = doc.get("models")
    if not isinstance(models_doc, list) or not models_doc:
        raise InputError("no [[models]] entries", path)
    models = tuple(_model(m, k, base, path) for k, m in enumerate(models_doc))
    names = [m.name for m in models]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise InputError(f"model name(s) {', '.join(dupes)} used twice: give each [[models]] its own name", path)
    unknown = set(doc) - {"dataset", "settings", "models"}
    if unknown:
        raise InputError(f"unknown table(s) {', '.join(sorted(unknown))}", path)
    return Manifest(path=path, dataset=base / dataset["path"], index=str(dataset.get("index", "index.csv")),
                    source=str(dataset.get("source", "")), settings=settings, chunk_units=chunk_units,
                    models=models)


def _table(doc: dict, key: str, path: Path, required: bool = False) -> dict:
    value = doc.get(key, None if required else {})
    if not isinstance(value, dict):
        raise InputError(f"[{key}] table {'missing' if value is None else 'malformed'}", path)
    return value


def _check_keys(table: dict, allowed: tuple[str, ...], where: str, path: Path) -> None:
    unknown = sorted(set(table) - set(allowed))
    if unknown:
        raise InputError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(allowed)})", path)


def _model(doc: Any, k: int, base: Path, path: Path) -> ModelJob:
    where = f"[[models]] #{k + 1}"
    if not isinstance(doc, dict):
        raise InputError(f"{where} is not a table", path)
    if "trust_pickle" in doc:
        raise InputError(f"{where}: trust_pickle: a manifest cannot trust a model file to run code; name the file "
                         "on the command line instead (probescope batch ... --trust FILE, or --trust-code)", path)
    _check_keys(doc, _MODEL_KEYS, where, path)
    spec, act = doc.get("spec"), doc.get("activations")
    if (spec is None) == (act is None):
        raise InputError(f"{where}: give either spec (with layers) or activations", path)
    gpus = doc.get("gpus", 0)
    GPUS.check(gpus, f"{where}: gpus", path=path)
    if spec is not None:
        layers = doc.get("layers")
        if not isinstance(spec, str) or not isinstance(layers, list) or not layers or not all(
                isinstance(x, str) and x for x in layers):
            raise InputError(f"{where}: spec must be a string and layers a non-empty list of layer names", path)
        if len(set(layers)) != len(layers) or len({folder_name(x) for x in layers}) != len(layers):
            raise InputError(f"{where}: layers repeat (or differ only in characters unsafe in folder names)", path)
        default_name = Path(spec.rsplit(":", 1)[-1]).stem  # 'demo' -> demo, 'resnet18:/w/r18.pth' -> r18
        if "layout" in doc:
            raise InputError(f"{where}: layout is for an activations file; a model's layers are read with the "
                             "layouts the model decides (`probescope info` shows them)", path)
        return ModelJob(name=folder_name(str(doc.get("name", default_name))), layers=tuple(layers), spec=spec,
                        gpus=float(gpus))
    if not isinstance(act, str) or "layers" in doc:
        raise InputError(f"{where}: activations must be a path string (one layer: name it with layer = ...)", path)
    act_path = base / act
    layout = doc.get("layout")
    try:
        parsed = None if layout is None else Layout.parse(str(layout))
    except InputError as exc:
        raise InputError(f"{where}: {exc}", path) from None
    return ModelJob(name=folder_name(str(doc.get("name", act_path.stem))), layers=(str(doc.get("layer", "units")),),
                    activations=act_path, layout=parsed)
