"""Classifiers that turn uint8 RGB images into logits (Inception Score) and features (FID, KID, precision/recall).

A Classifier splits the work in two: `prepare` (decode-side CPU work: resize, normalise; runs in prefetch
threads) and `logits` / `embed` (the network on the chosen device; `embed` returns the features beside the logits
from the same forward pass). Features: the TF port's 2048-d pool (torch-fidelity's '2048'); for any other model
the input of its last linear layer (the demo CNN's 128-d average pool). Specs:
  'inception-tf:<file>'  TF-ported Inception v3, 1008 classes: the classifier of published scores
  'inception-tv:<file>'  torchvision's ImageNet Inception v3: 1000 named classes, NOT comparable with published IS
  'demo' or any other load_model spec: that model's own classes and preprocessing.

Resize: the Inception classifiers take 299x299 inputs and resize every image themselves (the TF port with TF1's
bilinear rule, as torch-fidelity); a model classifier uses its own preprocessing, at native size unless a resize is
asked for (`resize=N`: every image stretched to N x N, antialiased bilinear). At native size, images of several
sizes are classified one size at a time, so the logits never depend on how the images were batched.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from probescope.core.devices import check_device
from probescope.core.errors import InputError
from probescope.core.models.checkpoint import read_torch_file
from probescope.core.models.exported import module_kind
from probescope.core.models.loading import file_identity, load_model
from probescope.core.scoring import inception_tf
from probescope.core.trust import NO_TRUST, Trust

if TYPE_CHECKING:
    from probescope.core.models.loading import LoadedModel
    from probescope.core.scoring.features import FeatureNetwork

INCEPTION_SIZE = 299
TV_WEIGHTS_FILE_NAME = "inception_v3_google-0cc3c7bd.pth"
TV_WEIGHTS_URL = "https://download.pytorch.org/models/" + TV_WEIGHTS_FILE_NAME


@dataclass(frozen=True)
class SizeGroups:
    """A batch of images of several sizes, prepared one size at a time: (positions in the batch, prepared tensor)."""

    groups: tuple[tuple[np.ndarray, torch.Tensor], ...]
    n: int

    def __len__(self) -> int:
        """Images in the batch, as for a prepared tensor."""
        return self.n


Prepared = torch.Tensor | SizeGroups
Embedder = Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]  # prepared batch on device -> (features, logits)


@dataclass
class Classifier:
    name: str
    module: nn.Module  # images prepared by `prepare` -> (m, n_classes) logits
    prepare: Callable[[Sequence[np.ndarray]], Prepared]  # list of uint8 (H, W, 3) -> (m, 3, S, S) batch on CPU
    class_names: tuple[str, ...] | None
    device: str
    comparable: bool  # True only for the TF-ported Inception: numbers comparable with published scores
    note: str
    embedder: Embedder | None = None  # None: this classifier gives no features (e.g. TorchScript, no hooks)
    feature_note: str = ""  # which features `embed` returns, said in every output that uses them
    key: str = ""  # identity of weights + preprocessing + feature layer for caches ('' = never cached)
    network: FeatureNetwork | None = None  # features from this network instead (features.with_features)

    @property
    def gives_features(self) -> bool:
        return self.network is not None or self.embedder is not None

    def logits(self, prepared: Prepared) -> np.ndarray:
        """Run the network; float32 (m, n_classes) logits on the CPU, in the batch's order."""
        if not isinstance(prepared, (torch.Tensor, SizeGroups)):
            prepared = prepared.logits  # a features.Paired batch
        if isinstance(prepared, SizeGroups):
            parts = [(positions, self.logits(x)) for positions, x in prepared.groups]
            out = np.empty((prepared.n, parts[0][1].shape[1]), dtype=np.float32)
            for positions, logits in parts:
                out[positions] = logits
            return out
        out = self._forward(self.module, prepared)
        if isinstance(out, (tuple, list)):  # e.g. models that also return auxiliary outputs
            out = out[0]
        return self._matrix(out, "logits")

    def embed(self, prepared: Prepared) -> tuple[np.ndarray, np.ndarray]:
        """Features and logits of one forward pass, float32 (m, d) and (m, n_classes) on the CPU, in the batch's
        order (images of several sizes run one size at a time); with a feature `network`, its features."""
        if self.network is not None:
            return self.network.embed(prepared.features), self.logits(prepared)
        if isinstance(prepared, SizeGroups):
            parts = [(positions, self.embed(x)) for positions, x in prepared.groups]
            features = np.empty((prepared.n, parts[0][1][0].shape[1]), dtype=np.float32)
            logits = np.empty((prepared.n, parts[0][1][1].shape[1]), dtype=np.float32)
            for positions, (f, lg) in parts:
                features[positions], logits[positions] = f, lg
            return features, logits
        if self.embedder is None:
            raise InputError(
                f"classifier {self.name} gives no features (FID, KID and precision/recall need them): use a model "
                "whose last layer is a linear classifier, or inception-tf:<weights file>"
            )
        features, logits = self._forward(self.embedder, prepared)
        return self._matrix(features.flatten(1), "features"), self._matrix(logits, "logits")

    def _forward(self, forward: Callable[[torch.Tensor], Any], prepared: torch.Tensor) -> Any:
        """`forward` of the batch on the classifier's device; the network's RuntimeError (e.g. images too small for
        its pooling) as one line naming the images' size."""
        try:
            with torch.inference_mode():
                return forward(prepared.to(self.device, non_blocking=True))
        except RuntimeError as exc:
            size = "x".join(map(str, prepared.shape[-2:]))
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise InputError(f"classifier {self.name} cannot run on {size} images ({first[:160]}); choose an input "
                             "size with --resize N") from None

    def classify(self, images: Sequence[np.ndarray]) -> np.ndarray:
        return self.logits(self.prepare(images))

    def _matrix(self, out: object, what: str) -> np.ndarray:
        if not isinstance(out, torch.Tensor) or out.dim() != 2:
            shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            raise InputError(f"classifier {self.name} returned {shape}, not (batch, {what}) {what}")
        return out.float().cpu().numpy()


@dataclass
class _LastLinearInput:
    """(features, logits) of a module in one pass: the features are the input of its last nn.Linear, read with a
    forward pre-hook attached for that pass only (under `lock`: one hooked pass at a time on a shared module)."""

    module: nn.Module
    layer: nn.Linear
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        seen: list[torch.Tensor] = []
        with self.lock:
            handle = self.layer.register_forward_pre_hook(lambda _m, inputs: seen.append(inputs[0]))
            try:
                out = self.module(x)
            finally:
                handle.remove()
        if isinstance(out, (tuple, list)):
            out = out[0]
        if not seen:
            raise InputError("the classifier's last linear layer did not run: no features")
        return seen[-1], out


def last_linear_embedder(module: nn.Module, lock: threading.Lock | None = None) -> tuple[Embedder | None, str]:
    """An embedder reading the input of the module's last nn.Linear, and its description ('' when there is none:
    TorchScript modules run no hooks)."""
    if isinstance(module, torch.jit.ScriptModule):
        return None, ""

    linear = [(name, m) for name, m in module.named_modules() if module_kind(m) == "Linear"]  # exported ones too
    if not linear:
        return None, ""
    name, layer = linear[-1]
    embedder = _LastLinearInput(module, layer, lock or threading.Lock())
    return embedder, f"input of the last linear layer '{name}' ({layer.weight.shape[1]}-d)"


def check_images(images: Sequence[np.ndarray]) -> None:
    for i, im in enumerate(images):
        if im.dtype != np.uint8 or im.ndim != 3 or im.shape[-1] != 3:
            raise InputError(f"image {i} of the batch: expected uint8 RGB (H, W, 3), got {im.dtype} {im.shape}")


def tf_inception_classifier(weights: str | Path, device: str = "cpu") -> Classifier:
    def prepare(images: Sequence[np.ndarray]) -> torch.Tensor:
        check_images(images)
        return inception_tf.prepare_tf_inception(images)

    module = inception_tf.load_inception_tf(weights, device)
    return Classifier(
        name="Inception v3 (TF 2015-12-05 port)",
        module=module,
        prepare=prepare,
        class_names=None,
        device=device,
        comparable=True,
        note="1008-class TF Inception, unbiased logits, TF1 bilinear resize to 299, (x-128)/128 (torch-fidelity)",
        embedder=module.features_and_logits,
        feature_note="Inception v3 (TF port) 2048-d pool features (torch-fidelity's '2048', as published FID/KID)",
        key=f"inception-tf:{file_identity(Path(weights))}",
    )


def tv_inception_classifier(weights: str | Path, device: str = "cpu") -> Classifier:
    """torchvision's inception_v3 with a local ImageNet weights file (no download)."""
    # (torchvision: 1.4 s to import after torch, for this classifier only)
    from torchvision.models import Inception_V3_Weights, inception_v3

    path = Path(weights)
    if not path.is_file():
        raise InputError(
            f"torchvision Inception v3 weights file not found; download {TV_WEIGHTS_FILE_NAME} from {TV_WEIGHTS_URL} "
            "on a machine with internet access and pass its path as inception-tv:<file>",
            path,
        )
    state = read_torch_file(path)
    if not isinstance(state, dict):
        raise InputError(f"expected a state dict of torchvision's inception_v3, found {type(state).__name__}", path)
    has_aux = any(key.startswith("AuxLogits.") for key in state)
    module = inception_v3(weights=None, aux_logits=has_aux, transform_input=True, init_weights=False)
    try:
        module.load_state_dict(state)
    except RuntimeError as exc:
        raise InputError(f"not a torchvision inception_v3 state dict: {str(exc).splitlines()[0]}", path) from None
    module = module.eval().requires_grad_(False).to(device)
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)

    def prepare(images: Sequence[np.ndarray]) -> torch.Tensor:
        check_images(images)
        out = []
        for im in images:
            x = torch.from_numpy(np.require(im, requirements="CW")).permute(2, 0, 1)[None].float() / 255.0
            if x.shape[-2:] != (INCEPTION_SIZE, INCEPTION_SIZE):
                x = F.interpolate(x, size=(INCEPTION_SIZE,) * 2, mode="bilinear", align_corners=False, antialias=True)
            out.append(x)
        return (torch.cat(out) - mean) / std

    embedder, where = last_linear_embedder(module)
    return Classifier(
        name="Inception v3 (torchvision ImageNet)",
        module=module,
        prepare=prepare,
        class_names=tuple(Inception_V3_Weights.IMAGENET1K_V1.meta["categories"]),
        device=device,
        comparable=False,
        note="torchvision ImageNet weights, antialiased bilinear resize to 299: NOT comparable with published IS",
        embedder=embedder,
        feature_note=f"Inception v3 (torchvision ImageNet) {where}: NOT comparable with published FID/KID",
        key=f"inception-tv:{file_identity(path)}",
    )


def model_classifier(spec: str, device: str = "cpu", trust: Trust = NO_TRUST, resize: int | None = None) -> Classifier:
    """Any model probescope can load (load_model spec), with its own preprocessing and class names."""
    return classifier_of_model(load_model(spec, trust=trust, device=device), resize)


def classifier_of_model(model: LoadedModel, resize: int | None = None) -> Classifier:
    """An already-loaded model as a scoring classifier (the GUI's current model, without loading it again); with
    `resize`, every image is stretched to resize x resize before the model's normalisation."""
    preprocess = model.preprocess if resize is None else model.preprocess.with_resize("stretch", resize)

    def prepare(images: Sequence[np.ndarray]) -> Prepared:
        images = list(images)
        shapes = [im.shape for im in images]
        if preprocess.resize != "native" or len(set(shapes)) < 2:
            return preprocess(images)
        groups = []
        for shape in dict.fromkeys(shapes):
            positions = np.array([i for i, s in enumerate(shapes) if s == shape])
            groups.append((positions, preprocess([images[i] for i in positions])))
        return SizeGroups(tuple(groups), len(images))
    embedder, where = last_linear_embedder(model.module, model.lock)
    return Classifier(
        name=model.name,
        module=model.module,
        prepare=prepare,
        class_names=tuple(model.class_names) if model.class_names else None,
        device=str(model.device),
        comparable=False,
        note=f"{model.name} with {preprocess.describe()}: its own classes, not comparable with published IS",
        embedder=embedder,
        feature_note=f"{model.name} {where}: not comparable with published FID/KID" if embedder else "",
        key=f"model:{model.source_key}:{preprocess.key()}",
    )


def load_classifier(spec: str, device: str = "cpu", trust: Trust = NO_TRUST, resize: int | None = None) -> Classifier:
    """Resolve 'inception-tf:<file>', 'inception-tv:<file>', 'demo' or a load_model spec. `resize`: see the module
    docstring (the Inception classifiers take only their own 299); `trust`: for model files that run code."""
    device = check_device(device, "classifier device")
    head, _, rest = spec.partition(":")
    if head in ("inception-tf", "inception-tv") and not rest:
        raise InputError(f"classifier spec {spec!r} names no weights file: use {head}:<weights file>")
    if resize is not None and resize < 1:
        raise InputError(f"--resize must be a positive size in pixels, got {resize}")
    if head in ("inception-tf", "inception-tv") and resize not in (None, INCEPTION_SIZE):
        raise InputError(f"the {head} classifier takes {INCEPTION_SIZE}x{INCEPTION_SIZE} inputs and resizes every "
                         f"image to that itself; --resize {resize} applies to model classifiers only")
    if head == "inception-tf":
        return tf_inception_classifier(rest, device)
    if head == "inception-tv":
        return tv_inception_classifier(rest, device)
    return model_classifier(spec, device, trust, resize)
