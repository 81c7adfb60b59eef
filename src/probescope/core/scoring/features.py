"""Feature networks: the embedding every distance to real images is measured in (FD, KID, precision/recall,
density/coverage, the Vendi score, realism, the copy test), chosen apart from the classifier that gives IS.

Inception-v3's pool features (FID) misjudge modern generators (Stein et al., NeurIPS 2023, "Exposing flaws of
generative model evaluation metrics"), who recommend DINOv2 ViT-L/14 (FD_DINOv2); Jayasumana et al. (CVPR 2024,
"Rethinking FID") compare CLIP embeddings (CMMD). Specs:

  'classifier'                     the classifier's own features (the default, as before)
  'inception-tf:FILE'              the TF-ported Inception v3's 2048-d pool: FID as published
  'dinov2:vits14|vitb14|vitl14|vitg14[-reg]:FILE'
                                   Meta's DINOv2 backbone (its released checkpoint files): the class token after
                                   the final norm, as Meta's hub model returns it
  'openclip:NAME:FILE'             an OpenCLIP image tower: its image embedding, scaled to unit length
  'model:LAYER:SPEC'               any model probescope loads (SPEC as `--model`) at LAYER, each map averaged over
                                   its positions (a token layer's patch tokens)

DINOv2's preprocessing is torch-fidelity 0.4's (`RESIZES[0]`): TF1 bilinear resize to 224x224 on 0-255 values,
then ImageNet's mean and std, so FD_DINOv2 is comparable with its numbers; 'dgm-eval' is dgm-eval's (PIL bicubic
stretch to 224x224 of the uint8 image). CLIP towers and layer features use the model's own preprocessing. Each
network's `note` says what it computes and how its images were prepared; it travels with every score.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
import torch
from PIL import Image
from torch import nn

from probescope.core.data.activations import run_model
from probescope.core.data.preprocess import IMAGENET
from probescope.core.errors import InputError
from probescope.core.models.layers import layer_layout
from probescope.core.models.loading import load_model
from probescope.core.scoring.classifiers import Classifier, check_images, tf_inception_classifier
from probescope.core.scoring.feature_spec import CLASSIFIER, PRECISIONS, RESIZES, check_spec
from probescope.core.scoring.inception_tf import tf1_resize
from probescope.core.trust import NO_TRUST, Trust

if TYPE_CHECKING:
    from probescope.core.models.layout import Layout
    from probescope.core.models.loading import LoadedModel

DINOV2_INPUT = 224  # torch-fidelity's and dgm-eval's input size for DINOv2


@dataclass
class FeatureNetwork:
    """uint8 RGB images -> (m, d) float32 features: `prepare` on the CPU (prefetch threads), `forward` on the
    network's device, in `precision` (autocast on a GPU)."""

    name: str
    label: str  # what its Fréchet distance is called: FID, FD_DINOv2, FD_CLIP or FD
    forward: Callable[[torch.Tensor], torch.Tensor]
    prepare: Callable[[Sequence[np.ndarray]], torch.Tensor]
    device: str
    note: str  # the features and their preprocessing, said with every score
    key: str  # identity of weights, layer and preprocessing for the reference cache
    unit_norm: bool = False  # unit-length CLIP image embeddings: CMMD's features
    precision: str = "fp32"

    def embed(self, prepared: torch.Tensor) -> np.ndarray:
        """Features of one prepared batch, float32 on the CPU."""
        x = prepared.to(self.device, non_blocking=True)
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(self.precision)
        autocast = contextlib.nullcontext() if dtype is None else torch.autocast(torch.device(self.device).type, dtype)
        with torch.inference_mode(), autocast:
            out = self.forward(x).float().flatten(1)
            if self.unit_norm:
                out = torch.nn.functional.normalize(out, dim=1)
        if not torch.isfinite(out).all():
            raise InputError(f"feature network {self.name} gave non-finite features")
        return out.cpu().numpy()

    def with_precision(self, precision: str) -> FeatureNetwork:
        """The same network computing in `precision` ('auto': bf16 autocast on a GPU, float32 on the CPU)."""
        if precision not in PRECISIONS:
            raise InputError(f"unknown precision {precision!r} (expected one of {', '.join(PRECISIONS)})")
        on_gpu = torch.device(self.device).type == "cuda"
        chosen = ("bf16" if on_gpu else "fp32") if precision == "auto" else precision
        if chosen != "fp32" and not on_gpu:
            raise InputError(f"{chosen} features need a GPU (the feature network runs on {self.device})")
        note = self.note if chosen == "fp32" else f"{self.note}; {chosen} autocast"
        return replace(self, precision=chosen, note=note, key=f"{self.key}|{chosen}" if self.key else "")


def load_feature_network(spec: str, device: str = "cpu", *, resize: str = RESIZES[0], trust: Trust = NO_TRUST,
                         precision: str = "fp32") -> FeatureNetwork:
    """The network `spec` names (see the module docstring), on `device`; `resize` is DINOv2's preprocessing."""
    check_spec(spec)
    if spec == CLASSIFIER:
        raise InputError("'classifier' names the classifier's own features, not a network to load")
    if resize not in RESIZES:
        raise InputError(f"unknown feature resize {resize!r} (expected one of {', '.join(RESIZES)})")
    head, _, rest = spec.partition(":")
    if head == "inception-tf":
        network = _inception(rest, device)
    elif head == "dinov2":
        network = _dinov2(spec, device, resize)
    elif head == "openclip":
        network = _openclip(spec, device)
    else:
        layer, _, model_spec = rest.partition(":")
        if not layer or not model_spec:
            raise InputError(f"feature network {spec!r}: expected model:LAYER:SPEC (e.g. model:layer4:demo)")
        network = _layer(layer, model_spec, device, trust)
    return network.with_precision(precision)


def with_features(classifier: Classifier, network: FeatureNetwork) -> Classifier:
    """`classifier` whose `embed` gives `network`'s features beside its own logits: each batch is prepared for
    both (in the prefetch threads), and the reference cache key names both."""
    prepare = classifier.prepare

    def both(images: Sequence[np.ndarray]) -> Paired:
        images = list(images)
        return Paired(prepare(images), network.prepare(images))

    key = f"{classifier.key}|features={network.key}" if classifier.key and network.key else ""
    return replace(classifier, prepare=both, network=network, feature_note=network.note, key=key)


@dataclass(frozen=True)
class Paired:
    """One batch prepared for the classifier (`logits`) and for the feature network (`features`)."""

    logits: object
    features: torch.Tensor

    def __len__(self) -> int:
        return len(self.features)


def _inception(path: str, device: str) -> FeatureNetwork:
    if not path:
        raise InputError("feature network 'inception-tf' names no weights file: use inception-tf:<weights file>")
    classifier = tf_inception_classifier(path, device)
    module = classifier.module
    return FeatureNetwork("Inception v3 (TF port)", "FID", module.features, classifier.prepare, device,
                          classifier.feature_note, classifier.key)


def _dinov2(spec: str, device: str, resize: str) -> FeatureNetwork:
    model = load_model(spec, device=device, input_size=DINOV2_INPUT)
    module = model.module

    def forward(x: torch.Tensor) -> torch.Tensor:
        return module.forward_features(x)[:, 0]  # the class token after the final norm: Meta's forward()

    prepare = _tf1_prepare if resize == "torch-fidelity" else _pil_bicubic_prepare
    how = ("TF1 bilinear resize to 224x224 (torch-fidelity 0.4's DINOv2 extractor)" if resize == "torch-fidelity"
           else "PIL bicubic stretch to 224x224 (dgm-eval's)")
    note = f"{model.name} class token ({module.num_features}-d), {how}, ImageNet mean/std"
    return FeatureNetwork(model.name, "FD_DINOv2", forward, prepare, device, note,
                          f"dinov2:{model.source_key}:{resize}")


def _normalised(x: torch.Tensor) -> torch.Tensor:
    """0-255 float pixels -> ImageNet-normalised, as torchvision's normalize with the mean and std times 255."""
    mean = torch.tensor(IMAGENET.mean).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET.std).view(1, 3, 1, 1)
    return (x - mean) / std


def _tf1_prepare(images: Sequence[np.ndarray]) -> torch.Tensor:
    check_images(images)
    out = [tf1_resize(torch.from_numpy(np.array(im, np.float32)).permute(2, 0, 1)[None], DINOV2_INPUT)
           for im in images]
    return _normalised(torch.cat(out))


def _pil_bicubic_prepare(images: Sequence[np.ndarray]) -> torch.Tensor:
    check_images(images)
    out = []
    for im in images:
        resized = Image.fromarray(np.ascontiguousarray(im)).resize((DINOV2_INPUT,) * 2, Image.Resampling.BICUBIC)
        out.append(torch.from_numpy(np.asarray(resized, dtype=np.float32)).permute(2, 0, 1)[None])
    return _normalised(torch.cat(out))


def _model_prepare(model: LoadedModel) -> Callable[[Sequence[np.ndarray]], torch.Tensor]:
    preprocess = model.preprocess

    def prepare(images: Sequence[np.ndarray]) -> torch.Tensor:
        check_images(images)
        if preprocess.target is None and len({im.shape for im in images}) > 1:
            raise InputError(f"{model.name} features: images of several sizes in one batch; the feature network "
                             "needs one size (a model with a fixed input size, or images of one size)")
        return preprocess(list(images))

    return prepare


def _openclip(spec: str, device: str) -> FeatureNetwork:
    model = load_model(spec, device=device)
    note = (f"{model.name} image embedding scaled to unit length ({model.metadata.get('embedding_dim') or '?'}-d), "
            f"{model.preprocess.describe()}")
    return FeatureNetwork(model.name, "FD_CLIP", model.module, _model_prepare(model), device, note,
                          f"openclip:{model.source_key}:{model.preprocess.key()}", unit_norm=True)


def _layer(layer: str, spec: str, device: str, trust: Trust) -> FeatureNetwork:
    model = load_model(spec, device=device, trust=trust)
    modules = dict(model.module.named_modules())
    if not model.hookable or layer not in modules:
        raise InputError(f"{model.name} has no layer {layer!r} to take features from (`probescope info` lists them)")
    layout = layer_layout(model, layer)
    forward = _LayerMean(model, modules[layer], layer, layout)
    note = f"{model.name} layer {layer} ({layout.describe()}) averaged over positions, {model.preprocess.describe()}"
    return FeatureNetwork(f"{model.name} {layer}", "FD", forward, _model_prepare(model), device, note,
                          f"model:{model.source_key}:{layer}:{layout}:{model.preprocess.key()}")


@dataclass
class _LayerMean:
    """A layer's output averaged over its positions, read with a forward hook for one pass (under the model's
    lock: one hooked pass at a time)."""

    model: LoadedModel
    module: nn.Module
    layer: str
    layout: Layout

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        seen: list[torch.Tensor] = []
        with self.model.lock:
            handle = self.module.register_forward_hook(lambda _m, _i, out: seen.append(out))
            try:
                run_model(self.model, x)
            finally:
                handle.remove()
        if not seen or not isinstance(seen[0], torch.Tensor):
            raise InputError(f"{self.model.name}: layer {self.layer!r} gave no tensor")
        problem = self.layout.problem(tuple(seen[0].shape[1:]))
        if problem:
            raise InputError(f"{self.model.name}: layer {self.layer!r}: {problem}")
        return self.layout.to_units(seen[0]).mean(dim=(2, 3))


def attach_features(classifier: Classifier, settings: object, trust: Trust = NO_TRUST) -> Classifier:
    """`classifier` with the feature network of `settings` (a ScoreSettings: its features, feature_resize and
    precision) on the classifier's device; unchanged for the classifier's own features."""
    spec = settings.features  # type: ignore[attr-defined]
    if spec == CLASSIFIER:
        return classifier
    network = load_feature_network(spec, classifier.device, resize=settings.feature_resize,  # type: ignore
                                   trust=trust, precision=settings.precision)  # type: ignore[attr-defined]
    return with_features(classifier, network)
