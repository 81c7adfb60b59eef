"""torch.export ExportedPrograms (`.pt2`, written by `torch.export.save`): the format torch 2.x offers in place of
TorchScript, accepted wherever a TorchScript file is (models, classifiers, generators).

Loading one runs code from the file, so it loads only from bytes the user trusts (probescope.core.trust), as a
TorchScript archive does. torch's own documentation of `torch.export.load` says it "uses pickle under the hood ...
Never load data from an untrusted source", and its source (torch 2.14, `torch/export/pt2_archive/_package.py`,
`torch/_export/serde/serialize.py`) shows how: weights and constants the archive's JSON marks `use_pickle` go
through `torch.load(weights_only=False)`, opaque constants through `pickle.loads`, custom (torchbind) objects
through `torch._C._pickle_load_obj`, the sample inputs fall back to `weights_only=False`, and symbolic shapes are
parsed with `sympy.sympify`, which evaluates its text. Once loaded, the graph may call any `torch.*` function the
file names. See docs/data.md, "What runs code".

Unlike TorchScript, a program keeps its module hierarchy: `torch.export.unflatten` gives back one submodule per
original module (`layer4`, `layer4.conv`, `fc`), each an nn.Module whose forward hooks run, so its layers can be
dissected, ablated and read for features. Each submodule remembers the class it was exported from
(`exported_kind`: 'Conv2d', 'Linear') for listings and for finding the last linear layer.

An exported program checks its input shapes: probescope feeds batches of any size, so the batch dimension must
have been exported as dynamic (`dynamic_shapes=({0: torch.export.Dim("batch")},)`); a program exported for a fixed
batch is refused with that advice. A fixed height and width is the program's input size.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import torch
from torch import nn

from probescope.core.errors import InputError, first_line
from probescope.core.models.archives import is_exported_program, is_torchscript
from probescope.core.models.checkpoint import load_torchscript
from probescope.core.trust import Trust, read_trusted

KIND = "torch.export program"


@contextmanager
def _quiet_export_logs():
    """torch.export.load logs a deserialisation failure with its traceback before raising: the failure is reported
    here in one line instead."""
    logger = logging.getLogger("torch.export")
    disabled = logger.disabled
    logger.disabled = True
    try:
        yield
    finally:
        logger.disabled = disabled


def load_program(path: Path, trust: Trust, what: str = KIND) -> torch.export.ExportedProgram:
    """The ExportedProgram of a file whose content the user trusts (loading it runs code from it), or InputError
    naming the file: untrusted, another kind of file named .pt2, a damaged archive."""
    if not is_exported_program(path):
        hint = " (a TorchScript archive: open it as torchscript:FILE)" if is_torchscript(path) else ""
        raise InputError(f"not a {what} (no torch.export archive){hint}", path)
    data = read_trusted(path, trust, what)
    try:
        with _quiet_export_logs():
            program = torch.export.load(io.BytesIO(data))
    except Exception as exc:  # noqa: BLE001  (a damaged archive fails in any of a dozen ways inside torch)
        raise InputError(f"damaged {what} ({first_line(exc)})", path) from None
    if not isinstance(program, torch.export.ExportedProgram):
        raise InputError(f"holds a {type(program).__name__}, not a {what}", path)
    return program


def input_shape(program: torch.export.ExportedProgram) -> tuple[int | None, ...]:
    """The shape of the program's first input, None for each dynamic dimension."""
    names = set(program.graph_signature.user_inputs)
    for node in program.graph.nodes:
        if node.op == "placeholder" and node.name in names:
            value = node.meta.get("val")
            shape = getattr(value, "shape", ())
            return tuple(d if isinstance(d, int) else None for d in shape)
    return ()


def program_module(program: torch.export.ExportedProgram, path: Path, what: str = KIND) -> nn.Module:
    """The program as a module with its original hierarchy (hooks run on every submodule); InputError when its
    batch dimension was exported as fixed, since probescope feeds batches of any size."""
    shape = input_shape(program)
    if shape and shape[0] is not None:
        raise InputError(f"this {what} takes batches of exactly {shape[0]} (its batch dimension was exported as "
                         "fixed); export it with a dynamic one: torch.export.export(model, (x,), "
                         "dynamic_shapes=({0: torch.export.Dim('batch')},))", path)
    try:
        module = torch.export.unflatten(program)
    except Exception as exc:  # noqa: BLE001  (torch's unflattening reports its limits as any exception)
        raise InputError(f"cannot rebuild the module hierarchy of this {what} ({first_line(exc)})", path) from None
    kinds = _exported_kinds(program)
    for name, sub in module.named_modules():
        if name in kinds:
            sub.exported_kind = kinds[name]
    return module.eval()


def _exported_kinds(program: torch.export.ExportedProgram) -> dict[str, str]:
    """Module path -> the class name it was exported from ('Linear'), from the graph's nn_module_stack."""
    kinds: dict[str, str] = {}
    for node in program.graph.nodes:
        for fqn, type_name in (node.meta.get("nn_module_stack") or {}).values():
            if fqn:
                kinds.setdefault(fqn, str(type_name).rsplit(".", 1)[-1])
    return kinds


def module_kind(module: nn.Module) -> str:
    """The class a (sub)module was written as: its own, or the one an exported program recorded."""
    return getattr(module, "exported_kind", type(module).__name__)


def load_runnable(path: Path, trust: Trust, device: str = "cpu", what: str = "generator",
                  check: Callable[[torch.export.ExportedProgram], None] | None = None) -> nn.Module:
    """A TorchScript archive or an ExportedProgram, told apart by content, as a module on `device` (a generator
    G(z[, class]) is either); both run code from the file, so both load only when `trust` allows its content.
    `check` sees a program before it is made a module (its own input signature: what it was exported for)."""
    if is_exported_program(path):
        program = load_program(path, trust, f"{KIND} ({what})")
        if check is not None:
            check(program)
        return program_module(program, path).to(device)
    return load_torchscript(path, trust, device, f"TorchScript {what}")
