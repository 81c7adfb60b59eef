"""Which compute devices this machine has, and whether a device the user named is one of them: decided here only.

Every `--device`, the saved compute device of the app and the dissection settings' device ask `check_device`, so
`quantum:9` or a `cuda:3` on a machine with one GPU is refused (or, for a saved setting, replaced) in one line
before any model is loaded, instead of torch's "Expected one of cpu, cuda, ..." when the first tensor moves.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from probescope.core.child import NoAnswer, child_json
from probescope.core.errors import InputError

KINDS = ("cpu", "cuda", "mps")
_DEVICE = re.compile(r"(cpu|cuda|mps)(?::(\d{1,4}))?")


def available_devices() -> list[str]:
    """The devices this machine can compute on: cpu, each CUDA GPU torch sees, mps on Apple silicon."""
    import torch  # (torch: the window and `probescope --help` import this module, never torch)

    devices = ["cpu"]
    if torch.cuda.is_available():
        devices += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        devices.append("mps")
    return devices


def devices_of_a_child() -> list[str]:
    """`available_devices()` asked of a child interpreter (core.child): the window's process never imports torch,
    yet `probescope gui --device cuda:1` is refused before the window opens when this machine lacks it."""
    code = "import json; from probescope.core.devices import available_devices; print(json.dumps(available_devices()))"
    try:
        return list(child_json(code, timeout=300))
    except NoAnswer:
        return ["cpu"]  # (no interpreter to start: a frozen bundle) torch cannot be asked; cpu is always there


def device_problem(text: object, *, here: bool = True, devices: list[str] | None = None,
                   listed: Callable[[], list[str]] = available_devices) -> str | None:
    """Why `text` is not a device (or, with `here`, not one of `devices`: this machine's, as `listed` gives them,
    unless given, e.g. the compute kernel's), or None when it is."""
    if not isinstance(text, str):
        return f"a device is a name such as cpu or cuda:0, not {type(text).__name__} {text!r}"
    match = _DEVICE.fullmatch(text.strip())
    if match is None:
        return f"unknown device {text!r} (expected cpu, cuda, cuda:N or mps)"
    if not here or match.group(1) == "cpu":
        return None
    where = "this machine" if devices is None else "the compute kernel's machine"
    devices = listed() if devices is None else devices  # (asked only for a device other than cpu)
    kind, index = match.group(1), match.group(2)
    wanted = f"{kind}:{index}" if kind == "cuda" and index is not None else kind
    if kind == "cuda" and index is None and any(d.startswith("cuda:") for d in devices):
        return None
    if wanted not in devices:
        return f"device {text!r} is not on {where} (it has {', '.join(devices)})"
    return None


def check_device(text: str, what: str = "--device", *, here: bool = True) -> str:
    """`text`, stripped, when it names a device (of this machine, with `here`); InputError naming `what`
    otherwise."""
    problem = device_problem(text, here=here)
    if problem is not None:
        raise InputError(f"{what}: {problem}")
    return text.strip()
