"""Load a vision model from a spec string, list its layers with their output shapes.

Specs:
  'demo' or 'demo:<file>'                 the demo world's scene classifier (default weights: assets/demo_model.pt)
  '<arch>:<file>'                         a torchvision architecture with a state dict (class count inferred)
  'places365:<arch>:<file>'               a Places365 checkpoint {epoch, arch, state_dict, best_prec1}, 365 classes
  'torchscript:<file>'                    a TorchScript archive (only its output can be read: no hooks in TorchScript)
  'export:<file>'                         a torch.export program (.pt2): its layers are the modules it was exported from
  'pickle:<file>'                         a whole pickled model
  'timm:<name>:<file>', 'openclip:<name>:<file>', 'dinov2:<vits14|...>[-reg]:<file>'
                                          timm architectures, OpenCLIP visual towers, Meta's DINOv2 backbones
                                          (probescope.core.models.families)
  '<file>'                                auto-detected where unambiguous (TorchScript, a checkpoint that names its
                                          arch, a demo model state dict)
TorchScript archives, torch.export programs and pickles run code from the file: they load only when `trust` allows
their content (see probescope.core.trust); everything else loads with torch.load(weights_only=True).
"""

from __future__ import annotations

import hashlib
import re
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch
from torch import nn

from probescope.core.data.preprocess import CLASSIC, IMAGENET, Preprocess
from probescope.core.demo import model as demo
from probescope.core.errors import InputError
from probescope.core.files import check_file
from probescope.core.models import checkpoint as ckpt
from probescope.core.models import exported
from probescope.core.models.archives import is_exported_program, is_torchscript
from probescope.core.models.class_names import read_class_names
from probescope.core.models.families import FAMILIES, build, last_block, split_family_spec, weights_file
from probescope.core.models.layout import Decision, Layout
from probescope.core.trust import NO_TRUST, Trust

CONTENT_HASH_LIMIT = 16 * 2**20  # files up to this size are identified by content, larger ones by path/size/mtime
TORCHSCRIPT_OUTPUT = "output"  # the only readable layer of a TorchScript model


@dataclass
class LoadedModel:
    """A model ready for inference (eval mode), with what is needed to feed it and to cache its activations."""

    module: nn.Module
    name: str  # display name, e.g. 'resnet18 (places365)'
    arch: str  # torchvision arch, 'demonet', 'torchscript' or 'pickle'
    preprocess: Preprocess
    class_names: list[str] | None
    input_size: tuple[int, int]  # (H, W) for probing layer shapes; extraction uses the images' own size
    source: Path | None  # the weights file
    source_key: str  # identity of the weights, part of activation cache keys
    default_layer: str | None  # the layer to dissect unless the user picks another
    spec: str = ""
    metadata: dict[str, object] = field(default_factory=dict)  # e.g. checkpoint epoch, best_prec1, demo metrics
    layouts: dict[str, Layout] = field(default_factory=dict)  # the user's layout of a layer, where given
    decisions: dict[str, Decision | None] | None = None  # each layer's layout as its modules decide (list_layers)
    # held while hooks are attached: one hooked pass at a time per module (copies made by replace() share it)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def device(self) -> torch.device:
        tensor = next(iter(self.module.parameters()), None)
        if tensor is None:
            tensor = next(iter(self.module.buffers()), None)
        return tensor.device if tensor is not None else torch.device("cpu")

    @property
    def hookable(self) -> bool:
        """TorchScript modules do not run forward hooks: only their output can be read."""
        return not isinstance(self.module, torch.jit.ScriptModule)

    def to(self, device: str | torch.device) -> LoadedModel:
        self.module.to(device)
        return self

    def with_preprocess(self, preprocess: Preprocess) -> LoadedModel:
        return replace(self, preprocess=preprocess)


_DEFAULT_LAYERS = (
    (re.compile(r"^(resnet|resnext|wide_resnet)"), "layer4"),
    (re.compile(r"^(alexnet|vgg|densenet|squeezenet|mobilenet|efficientnet|mnasnet|convnext|swin)"), "features"),
)


def _default_layer(arch: str) -> str | None:
    return next((layer for pattern, layer in _DEFAULT_LAYERS if pattern.match(arch)), None)


def file_identity(path: Path) -> str:
    """Content hash for small files (the demo model), else resolved path + size + mtime."""
    st = path.stat()
    if st.st_size <= CONTENT_HASH_LIMIT:
        return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
    return f"file:{path.resolve()}:{st.st_size}:{st.st_mtime_ns}"


def _split_spec(spec: str) -> tuple[str, str | None, str]:
    """(kind, arch, path). A prefix counts only if it is a known keyword or arch, so 'C:\\x.pt' stays a path."""
    head, sep, rest = spec.partition(":")
    if spec == "demo":
        return "demo", None, ""
    if sep and head in ("demo", "torchscript", "export", "pickle"):
        return head, None, rest
    if sep and head in FAMILIES:
        name, path = split_family_spec(head, rest, spec)
        return head, name, path
    if sep and head == "places365":
        arch, sep2, path = rest.partition(":")
        if not sep2 or not arch or not path:
            raise InputError(f"bad model spec {spec!r}: expected places365:<arch>:<checkpoint file>")
        return "places365", arch, path
    if sep and head in ckpt.torchvision_archs():
        return "torchvision", head, rest
    if sep and re.fullmatch(r"[a-z][a-z0-9_]*", head) and len(head) > 1:
        raise InputError(f"bad model spec {spec!r}: unknown architecture or kind {head!r}")
    return "auto", None, spec


def load_model(
    spec: str,
    *,
    trust: Trust = NO_TRUST,
    device: str | torch.device = "cpu",
    class_names: str | Path | list[str] | None = None,
    preprocess: Preprocess | None = None,
    input_size: int | tuple[int, int] | None = None,
    layouts: dict[str | None, Layout] | None = None,
) -> LoadedModel:
    """Resolve a spec (see the module docstring) to a LoadedModel in eval mode on `device`. `input_size` (a side or
    (rows, columns)) is the size a timm or DINOv2 model is built for, elsewhere the size its layers are probed at;
    `layouts` the user's layout of layers whose layout the model does not say (None: of the default layer)."""
    kind, arch, path_text = _split_spec(spec.strip())
    size = (input_size, input_size) if isinstance(input_size, int) else input_size
    if kind == "demo":
        model = _load_demo(Path(path_text) if path_text else None)
    elif kind in FAMILIES:
        path = weights_file(kind, path_text)
        # (a DINOv2 file's activations and features changed when its position embedding took Meta's rule: the
        # key says which rule, so no cache made with timm's is read as Meta's)
        key = file_identity(path) + ("|meta-positions" if kind == "dinov2" else "")
        model = LoadedModel(**build(kind, arch or "", path, size), class_names=None, source=path, source_key=key)
        size = None  # built for it
    else:
        if not path_text:
            raise InputError(f"bad model spec {spec!r}: no file given")
        path = check_file(path_text)
        if kind == "auto":
            model = _load_auto(path, trust)
        elif kind == "torchscript":
            model = _load_torchscript(path, trust)
        elif kind == "export":
            model = _load_program(path, trust)
        elif kind == "pickle":
            model = _load_pickle(path, trust)
        else:
            state_dict, meta = ckpt.unwrap_checkpoint(ckpt.read_torch_file(path), path)
            model = _torchvision_model(arch or "", state_dict, meta, path, places365=kind == "places365")
    model.spec = spec
    if preprocess is not None:
        model.preprocess = preprocess
    if size is not None:
        model.input_size = size
    model.layouts = {name: layout for layer, layout in (layouts or {}).items()
                     if (name := layer or model.default_layer) is not None}
    if class_names is not None:
        names = class_names if isinstance(class_names, list) else read_class_names(class_names)
        _check_class_count(model, names, class_names)
        model.class_names = names
    model.module.eval()
    return model.to(device)


def _check_class_count(model: LoadedModel, names: list[str], source: object) -> None:
    n_out = model.metadata.get("num_classes")
    if isinstance(n_out, int) and n_out != len(names):
        where = source if isinstance(source, (str, Path)) else None
        raise InputError(f"{len(names)} class names for a model with {n_out} outputs ({model.name})", where)


def _torchvision_model(
    arch: str, state_dict: dict[str, torch.Tensor], meta: dict, path: Path, *, places365: bool
) -> LoadedModel:
    named = meta.get("arch")
    if isinstance(named, str) and named != arch and named in ckpt.torchvision_archs():
        raise InputError(f"checkpoint is for {named}, not {arch}", path)
    num_classes = 365 if places365 else None
    module = ckpt.load_torchvision(arch, state_dict, path, num_classes)
    n_out = num_classes or ckpt.infer_num_classes(arch, state_dict, path)
    size, fixed, interpolation = _torchvision_input(arch, module)
    preprocess = CLASSIC if places365 else IMAGENET
    if fixed:  # ViT and MaxViT refuse any other size: the probing images are resized to theirs
        preprocess = preprocess.with_resize("stretch", size, interpolation=interpolation)
    return LoadedModel(
        module=module,
        name=f"{arch} (places365)" if places365 else arch,
        arch=arch,
        preprocess=preprocess,
        class_names=None,
        input_size=(size, size),
        source=path,
        source_key=file_identity(path),
        default_layer=_default_layer(arch) or last_block(module),
        metadata={**meta, "num_classes": n_out},
    )


_FIXED_INPUT = re.compile(r"^(vit_|maxvit)")  # torchvision's architectures that check their input's size


def _torchvision_input(arch: str, module: nn.Module) -> tuple[int, bool, str]:
    """(input side, whether the architecture accepts only that size, interpolation): the side a ViT or MaxViT was
    built for (`image_size`), else 299 for Inception-v3 and 224; the interpolation its weights' transforms use."""
    # (torchvision: 1.4 s to import after torch, for its architectures only)
    # (torchvision: 1.4 s to import after torch, for its architectures only)
    from torchvision.models import get_model_weights

    try:
        transforms = next(iter(get_model_weights(arch))).transforms
        keywords = dict(getattr(transforms, "keywords", {}))
    except (ValueError, StopIteration, KeyError):
        keywords = {}
    mode = keywords.get("interpolation")
    interpolation = "bicubic" if getattr(mode, "value", mode) == "bicubic" else "bilinear"
    side = getattr(module, "image_size", None)
    if not isinstance(side, int):
        side = 299 if arch == "inception_v3" else 224
    return side, bool(_FIXED_INPUT.match(arch)), interpolation


def _load_demo(path: Path | None) -> LoadedModel:
    path = check_file(path or demo.DEMO_WEIGHTS)
    state_dict, meta = ckpt.unwrap_checkpoint(ckpt.read_torch_file(path), path)
    module = ckpt.fit_state_dict(demo.demo_net_for(state_dict, path), state_dict, demo.DEMO_ARCH, path)
    n_out = int(state_dict["fc.weight"].shape[0])
    return LoadedModel(
        module=module,
        name="demo",
        arch=demo.DEMO_ARCH,
        preprocess=demo.DEMO_PREPROCESS,
        class_names=demo.demo_class_names(n_out, path),
        input_size=(demo.DEMO_INPUT_SIZE, demo.DEMO_INPUT_SIZE),
        source=path,
        source_key=file_identity(path),
        default_layer=demo.DEMO_LAYER,
        metadata={**meta, **demo.demo_metrics(path), "num_classes": n_out},
    )


def _load_torchscript(path: Path, trust: Trust) -> LoadedModel:
    module = ckpt.load_torchscript(path, trust)
    return _opaque(module, "torchscript", path, TORCHSCRIPT_OUTPUT)


def _load_program(path: Path, trust: Trust) -> LoadedModel:
    """A torch.export program: its unflattened modules are its layers; a fixed input size is its probing size, and
    images are stretched to it (the program refuses any other). A program exported for other than 3 channels (the
    RGB images every command feeds) is refused here, naming the file, before any image is read."""
    program = exported.load_program(path, trust)
    model = _opaque(exported.program_module(program, path), "export", path, None)
    shape = exported.input_shape(program)
    channels, height, width = (shape + (None, None, None, None))[1:4]
    if len(shape) != 4 or channels not in (3, None):
        what = f"{channels}-channel images" if len(shape) == 4 else f"an input of shape {shape}"
        raise InputError(f"exported for {what}; probescope feeds RGB images (N, 3, H, W): export the model for "
                         "3 channels", path)
    if height is not None and width is not None:
        model.input_size = (height, width)
        model.preprocess = model.preprocess.with_resize("stretch", height, width)
    return model


def _load_pickle(path: Path, trust: Trust) -> LoadedModel:
    obj = ckpt.read_pickled_model(path, trust)
    if not isinstance(obj, nn.Module):
        raise InputError(f"holds a {type(obj).__name__}, not a whole model (for a state dict use '<arch>:{path}')",
                         path)
    return _opaque(obj, "pickle", path, None)


def _opaque(module: nn.Module, arch: str, path: Path, default_layer: str | None) -> LoadedModel:
    return LoadedModel(
        module=module,
        name=f"{path.name} ({arch})",
        arch=arch,
        preprocess=IMAGENET,
        class_names=None,
        input_size=(224, 224),
        source=path,
        source_key=file_identity(path),
        default_layer=default_layer,
    )


def _load_auto(path: Path, trust: Trust) -> LoadedModel:
    if is_torchscript(path):
        return _load_torchscript(path, trust)
    if is_exported_program(path):
        return _load_program(path, trust)
    try:
        obj = ckpt.read_torch_file(path)
    except ckpt.PickledObjects:
        return _load_pickle(path, trust)  # a whole-model pickle: loads only if trusted
    state_dict, meta = ckpt.unwrap_checkpoint(obj, path)
    arch = meta.get("arch")
    if isinstance(arch, str) and arch in ckpt.torchvision_archs():
        return _torchvision_model(arch, state_dict, meta, path, places365=path.name.endswith("places365.pth.tar"))
    if "layer4.conv.weight" in state_dict and "fc.weight" in state_dict:
        return _load_demo(path)
    raise UnknownArchitecture(
        "cannot tell the architecture of this state dict: write the spec as '<arch>:<file>' "
        "(e.g. resnet18:...) or 'places365:<arch>:<file>'",
        path,
    )


class UnknownArchitecture(InputError):
    """A state dict that names no architecture: the user must say which (on the command line, in the spec; in the
    app, in the Open Model dialog)."""

