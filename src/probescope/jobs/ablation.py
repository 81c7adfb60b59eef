"""Ablation (Bau et al., PNAS 2020): remove units of a layer and measure, per class, the model's accuracy and the
probability of the true class before and after, on the probing images whose scene labels name a class.

One workflow for `probescope ablate` and the Dissection workspace's Role panel: which units to remove
(`ablation_groups`, from ranges, every unit, or a dissection's explanations), the layer's `LayerAblation` (built once:
it checks the network's tail with a forward pass) and `ablate`, which runs the groups (and, asked, per class the units
whose removal hurts it most). `ablate_job` is the Role panel's Job: the layer's ablation is kept in the session of the
process that runs it, one layer at a time.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from probescope.core.ablation.groups import concept_units, each_unit, hand_picked, specialised_units, top_units
from probescope.core.ablation.results import AblationResult
from probescope.core.dissection.correlation import scene_truth
from probescope.core.dissection.results import DissectionResult
from probescope.core.errors import InputError
from probescope.core.tasks import CancelCheck, ProgressCallback
from probescope.jobs.inputs import ModelInfo, model_of
from probescope.jobs.protocol import Progress, TaskContext


def read_dissection(path: Path, model, layer: str):
    """The DissectionResult at `path` (a dissection.json or its folder), checked to be of this model's layer."""
    path = path / "dissection.json" if path.is_dir() else path
    result = DissectionResult.load(path)
    if result.model.get("layer") not in (None, layer):
        raise InputError(f"dissects layer {result.model['layer']!r}, not {layer!r}", path)
    if result.model.get("source_key") not in (None, model.source_key):
        raise InputError(f"dissects another model ({result.model.get('name', '?')}), not {model.name}", path)
    return result


def ablation_groups(n_units: int, *, units=None, each: bool = False, concepts: Sequence[str] = (),
                    specialised: bool = False, dissection=None, min_iou: float = 0.0) -> list:
    """The UnitGroups to ablate: `units` (IntRanges) together, every unit alone, the specialised units together,
    or one group per concept of the units whose explanation names it (the last two read `dissection`)."""
    if units is not None:
        return [hand_picked(units.values("--units", "unit", high=n_units - 1,
                                         because=f"the layer has {n_units} units"))]
    if each:
        return each_unit(range(n_units))
    if dissection.n_units != n_units:
        raise InputError(f"the dissection has {dissection.n_units} units; the layer has {n_units}")
    if specialised:
        return [specialised_units(dissection)]
    if not concepts:
        raise InputError("--concept: no concept named")
    return [concept_units(dissection, c, min_iou) for c in concepts]


def true_classes(labels, class_names: Sequence[str], label_map: dict | None = None,
                 label_map_source: Path | None = None) -> np.ndarray:
    """Per image the model class its scene label names (-1: none), from `labels` (the dataset or its LabelStore),
    through `label_map` when given; InputError when no image has one (nothing to measure)."""
    # (torch: the window's process imports this module for its Jobs, never torch)
    from probescope.core.ablation.ablate import labelled_images

    truth = scene_truth(labels, class_names, label_map, overrides_source=label_map_source)
    labelled_images(truth)
    return truth


def layer_ablation(model, layer: str, activations: np.ndarray, dataset, truth: np.ndarray,
                   class_names: Sequence[str], *, mode: str = "zero", path: str = "auto", batch_size: int = 64,
                   model_info: dict | None = None, dataset_info: dict | None = None):
    """The LayerAblation of `layer` (a LoadedModel's) over `dataset`, `truth` each image's class (`true_classes`)."""
    # (torch: the window's process imports this module for its Jobs, never torch)
    from probescope.core.ablation.ablate import LayerAblation

    return LayerAblation(model, layer, activations, dataset, truth, list(class_names), mode=mode, path=path,
                         batch_size=batch_size, model_info=model_info, dataset_info=dataset_info)


def ablate(ablation, groups: list, *, top: int = 0, progress: ProgressCallback | None = None,
           cancel: CancelCheck | None = None) -> AblationResult:
    """The AblationResult of `groups`; with `top` K, joined by one group per class: the K units whose removal
    (in `groups`, each alone) hurts it most."""
    result = ablation.run(groups, progress, cancel)
    if top:
        picked = [top_units(result, name, top) for name in result.classes
                  if result.ranking(result.class_row(name), axis="groups")]
        result = result.joined(ablation.run(picked, progress, cancel))
    return result


def ablate_job(ctx: TaskContext, *, model: ModelInfo, key: str, layer: str, activations: np.ndarray, dataset,
               store, mode: str, groups: list) -> Iterator[Progress]:
    """The Role panel's ablation of `groups` at the layer of the result `key` names. The layer's LayerAblation is
    made once per result and mode and kept in the session, one layer at a time (each holds its activations' means
    and a batch buffer)."""
    held = (key, mode)
    if held not in ctx.session.held("ablation"):
        if not model.class_names:
            raise InputError(f"{model.name} names no classes: ablation measures each class's accuracy")
        yield Progress(None, f"preparing the ablation of {layer}")
        ctx.session.drop("ablation")
    ablation = ctx.session.get("ablation", held, lambda: layer_ablation(
        model_of(ctx, model), layer, activations, dataset, true_classes(store, model.class_names),
        model.class_names, mode=mode))
    return ablate(ablation, groups, progress=ctx.progress, cancel=ctx.cancelled)
