"""Reading weights files safely and fitting their state dicts to architectures.

Everything goes through `torch.load(weights_only=True)` except files that run code when loaded (a whole-model
pickle, a TorchScript archive): those load only from bytes whose SHA-256 the user trusts (probescope.core.trust).
Checkpoints come in several dialects, normalised here: plain state dicts, `{epoch, arch, state_dict, best_prec1}`
(Places365), DataParallel `module.` prefixes (AlexNet: `features.module.N.*`), old DenseNet names (`norm.1` for
today's `norm1`), and BatchNorm layers saved before `num_batches_tracked` existed.
"""

from __future__ import annotations

import io
import pickle
import re
import warnings
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from probescope.core.errors import InputError, first_line
from probescope.core.files import check_file, zip_problem
from probescope.core.models.archives import is_exported_program, is_torchscript
from probescope.core.trust import Trust, read_trusted

try:
    from numpy._core.multiarray import scalar as _SCALAR
except ImportError:  # numpy 1
    from numpy.core.multiarray import scalar as _SCALAR

# numpy scalars and dtypes are plain data (old checkpoints store best_prec1 as one); numpy 1 pickles name the
# scalar constructor numpy.core.multiarray.scalar
_NUMPY_DATA = [_SCALAR, (_SCALAR, "numpy.core.multiarray.scalar"), np.dtype] + [
    type(np.dtype(t)) for t in ("f2", "f4", "f8", "i4", "i8", "u1", "bool")
]


MAX_INFLATED = 1 << 30  # a compressed member of a torch archive declared larger than this is refused unread


def load_torchscript(path: Path, trust: Trust, map_location: str = "cpu",
                     what: str = "TorchScript archive") -> torch.nn.Module:
    """Load a TorchScript file whose content the user trusts (it runs its own code), or raise InputError naming it;
    torch 2.x's deprecation warning is silenced (the format is still what users and released models have)."""
    if not is_torchscript(path):
        hint = " (a torch.export program: open it as export:FILE)" if is_exported_program(path) else ""
        raise InputError(f"not a {what} (no zip archive with TorchScript code){hint}", path)
    data = read_trusted(path, trust, what)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            return torch.jit.load(io.BytesIO(data), map_location=map_location)
    except (RuntimeError, ValueError, OSError) as exc:
        raise InputError(f"not a {what} ({first_line(exc)})", path) from None


def read_pickled_model(path: Path, trust: Trust) -> Any:
    """torch.load without weights_only, of a file whose content the user trusts (unpickling runs its code)."""
    data = read_trusted(path, trust, "whole-model pickle")
    try:
        return torch.load(io.BytesIO(data), map_location="cpu", weights_only=False)
    except Exception as exc:  # noqa: BLE001  (torch.load reports garbage as any of a dozen exception types)
        raise InputError(f"not a PyTorch pickle ({first_line(exc)})", path) from None


class PickledObjects(InputError):
    """A well-formed pickle that holds Python objects beyond weights: only a trusted full unpickling reads it."""


def read_torch_file(path: str | Path) -> Any:
    """torch.load(weights_only=True) on CPU: tensors and plain data only, nothing of the file runs. InputError for
    a file torch cannot read that way, in one line of our own (torch's advice spans several)."""
    path = check_file(path)
    if not _torch_magic(path):
        raise InputError("not a PyTorch weights file (neither a torch zip archive nor a pickle)", path)
    problem = zip_problem(path, MAX_INFLATED)  # torch's reader would inflate such a member whole, or fail on it
    if problem:
        raise InputError(f"not a PyTorch weights file (damaged zip archive: {problem})", path)
    try:
        with torch.serialization.safe_globals(_NUMPY_DATA):
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        detail = re.search(r"WeightsUnpickler error:\s*(\S.*)", str(exc))
        if "unsupported global" in str(exc).lower():  # a well-formed pickle naming Python classes or functions
            raise PickledObjects(
                "refusing to load: it holds pickled Python objects, not just weights (a whole-model pickle?), and "
                f"loading those runs code from the file; if you trust its source, open it as 'pickle:{path}' and "
                "trust it (--trust FILE)",
                path,
            ) from None
        reason = f"damaged pickle: {detail.group(1)[:120]}" if detail else first_line(exc)
        raise InputError(f"not a PyTorch weights file ({reason})", path) from None
    except Exception as exc:  # noqa: BLE001  (torch.load reports garbage as any of a dozen exception types)
        raise InputError(f"not a PyTorch weights file ({first_line(exc)})", path) from None


def _torch_magic(path: Path) -> bool:
    """torch.save writes a zip archive (since 1.6) or, in the legacy format, a pickle starting with PROTO (0x80)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror or exc})", path) from None
    return head.startswith(b"PK\x03\x04") or head[:1] == b"\x80"


def unwrap_checkpoint(obj: Any, path: Path) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """(state dict, metadata) from a plain state dict or a `{..., 'state_dict': ...}` checkpoint."""
    meta: dict[str, Any] = {}
    if isinstance(obj, dict):
        for key in ("state_dict", "model_state_dict"):
            if isinstance(obj.get(key), dict):
                meta = {k: v for k, v in obj.items() if k != key and isinstance(v, (str, int, float))}
                obj = obj[key]
                break
    if isinstance(obj, nn.Module):
        raise InputError("is a whole model, not a state dict: open it as 'pickle:FILE' and trust it", path)
    if not isinstance(obj, dict) or not obj or not all(isinstance(v, torch.Tensor) for v in obj.values()):
        what = type(obj).__name__ if not isinstance(obj, dict) else f"dict with keys {list(obj)[:5]}"
        raise InputError(f"not a state dict or checkpoint (found {what})", path)
    return normalize_keys(obj), meta


_DENSENET_OLD = re.compile(r"(denselayer\d+\.(?:norm|relu|conv))\.(\d+)\.")


def normalize_keys(state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Strip DataParallel `module.` segments and rename old DenseNet `norm.1` to `norm1`."""
    out: dict[str, torch.Tensor] = {}
    for key, value in state_dict.items():
        new = ".".join(part for part in key.split(".") if part != "module")
        out[_DENSENET_OLD.sub(r"\1\2.", new)] = value
    return out


def torchvision_archs() -> tuple[str, ...]:
    import torchvision.models as tvm  # (torchvision: 1.4 s to import after torch, for its architectures only)

    return tuple(tvm.list_models(module=tvm))


def build_arch(arch: str, num_classes: int, *, meta: bool) -> nn.Module:
    """torchvision.models.<arch>(weights=None, num_classes=...); on the meta device (no memory, no init) if asked."""
    import torchvision.models as tvm  # (torchvision: 1.4 s to import after torch, for its architectures only)

    if arch not in torchvision_archs():
        raise InputError(f"unknown architecture {arch!r} (torchvision classification models: e.g. resnet18, alexnet)")
    kwargs: dict[str, Any] = {"weights": None, "num_classes": num_classes}
    if arch in ("googlenet", "inception_v3"):
        kwargs["init_weights"] = False
    if meta:
        with torch.device("meta"):
            return tvm.get_model(arch, **kwargs)
    return tvm.get_model(arch, **kwargs)


@cache
def _can_build_on_meta(arch: str) -> bool:
    try:
        build_arch(arch, 1000, meta=True)
        return True
    except (NotImplementedError, RuntimeError):
        return False


def _shapes(arch: str, num_classes: int) -> dict[str, tuple[int, ...]]:
    model = build_arch(arch, num_classes, meta=_can_build_on_meta(arch))
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


@cache
def head_keys(arch: str) -> tuple[tuple[str, int], ...]:
    """(state-dict key, axis) pairs whose size is num_classes: found by building with two class counts."""
    a, b = _shapes(arch, 1000), _shapes(arch, 1001)
    out = []
    for key, shape in a.items():
        if key in b and b[key] != shape:
            out.append((key, next(i for i, (x, y) in enumerate(zip(shape, b[key])) if x != y)))
    return tuple(out)


def infer_num_classes(arch: str, state_dict: dict[str, torch.Tensor], path: Path) -> int:
    """The class count the checkpoint's classifier was trained for."""
    for key, axis in head_keys(arch):
        if key in state_dict and state_dict[key].ndim > axis:
            return int(state_dict[key].shape[axis])
    heads = ", ".join(k for k, _ in head_keys(arch))
    raise InputError(f"keys do not match {arch}: no classifier weights ({heads})", path)


def fit_state_dict(model: nn.Module, state_dict: dict[str, torch.Tensor], arch: str, path: Path) -> nn.Module:
    """Load `state_dict` into `model` (possibly on the meta device) strictly; one-line InputError on mismatch."""
    expected = model.state_dict()
    state_dict = dict(state_dict)
    for key in expected:  # checkpoints saved before BatchNorm counted batches
        if key.endswith(".num_batches_tracked") and key not in state_dict:
            state_dict[key] = torch.zeros((), dtype=torch.long)
    missing = [k for k in expected if k not in state_dict]
    unexpected = [k for k in state_dict if k not in expected]
    wrong = [k for k in expected if k in state_dict and tuple(state_dict[k].shape) != tuple(expected[k].shape)]
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"{len(missing)} missing (e.g. {missing[0]})")
        if unexpected:
            parts.append(f"{len(unexpected)} unexpected (e.g. {unexpected[0]})")
        raise InputError(f"keys do not match {arch}: {', '.join(parts)}", path)
    if wrong:
        k = wrong[0]
        heads = {key for key, _ in head_keys(arch)} if arch in torchvision_archs() else set()
        what = "class count does not match" if k in heads else "shapes do not match"
        raise InputError(
            f"{what} for {arch}: {k} is {tuple(state_dict[k].shape)} in the file, "
            f"{tuple(expected[k].shape)} in the model ({len(wrong)} mismatched tensors)",
            path,
        )
    on_meta = any(t.is_meta for t in expected.values())
    model.load_state_dict(state_dict, strict=True, assign=on_meta)
    return model.eval()


def load_torchvision(
    arch: str, state_dict: dict[str, torch.Tensor], path: Path, num_classes: int | None = None
) -> nn.Module:
    """A torchvision architecture holding the checkpoint's weights; num_classes inferred unless given."""
    if num_classes is None:
        num_classes = infer_num_classes(arch, state_dict, path)
    model = build_arch(arch, num_classes, meta=_can_build_on_meta(arch))
    return fit_state_dict(model, state_dict, arch, path)
